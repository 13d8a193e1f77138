"""The round stream reads nothing of a connection as a message before the peer proved the stream's secret (issue 44):
strangers who reach a host's stream before the master (a pickle that would create a file, garbage, a prelude claiming
1 TiB, a connection that sends nothing) run nothing, are logged at the host and closed one by one; the master then
connects and the run's iterates are an unattacked run's, to the bit. The wire's own checks alone: a frame over the
reader's limit, a wrong secret, the set-up time running out."""

import logging
import os
import socket
import struct
import time

import numpy as np
import pytest

from isparse import InProcessPool, load_dataset
from isparse.engines import stream
from isparse.engines.dask import DaskPool
from specs import make


class _CreatesAFile:
    """Unpickled, it opens ``path`` for writing (creating the file): what a stranger's pickle could make a host do."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


def _send_and_wait_close(address: tuple, payload: bytes, seconds: float = 15.0) -> bool:
    """Connect, send ``payload`` without reading the host's hello, and wait for the host to close: True if it did."""
    with socket.create_connection(address, timeout=seconds) as sock:
        try:
            sock.sendall(payload)
        except OSError:
            return True
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                if not sock.recv(1 << 16):
                    return True
            except (ConnectionResetError, BrokenPipeError):
                return True
            except TimeoutError:
                break
    return False


def _attacks(marker) -> dict:
    parts, _ = stream.frames((_CreatesAFile(marker),))
    return {"pickle": b"".join(bytes(p) for p in parts),
            "garbage": os.urandom(4096),
            "1 TiB prelude": stream.PRELUDE.pack(1, 1 << 40) + struct.pack("<Q", 1 << 40) + bytes(40)}


class AttackedPool(DaskPool):
    """A Dask pool whose hosts are attacked between listening and the master's connection: each attack first, then
    a stranger that connects and stays silent while the master connects."""

    marker = None
    closed_by_host: list = []

    def _connect_streams(self, hosts, listened):
        from distributed.comm.addressing import get_address_host_port

        silent = []
        for address, _ in listened:
            where = get_address_host_port(address)
            for name, payload in _attacks(self.marker).items():
                self.closed_by_host.append((name, _send_and_wait_close(where, payload)))
            silent.append(socket.create_connection(where, timeout=5))   # holds a handshake slot, sends nothing
        try:
            super()._connect_streams(hosts, listened)
        finally:
            for s in silent:
                s.close()


def test_strangers_before_the_master_run_nothing_and_the_run_is_unchanged(dask_client, tmp_path):
    s = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=2, seed=3)
    local = s.run(InProcessPool(*s.pool_args()), max_iter=60, tol=1e-300, keep_iterates=True, log_every=20)
    marker = tmp_path / "created-by-a-stranger"
    AttackedPool.marker, AttackedPool.closed_by_host = marker, []
    start = time.time()
    pool = AttackedPool(dask_client, *s.pool_args())
    try:
        res = s.run(pool, max_iter=60, tol=1e-300, keep_iterates=True, log_every=20)
    finally:
        pool.close()
    np.testing.assert_array_equal(np.array(res.iterates), np.array(local.iterates))   # to the bit
    assert not marker.exists()                                                        # nothing ran
    assert AttackedPool.closed_by_host and all(closed for _, closed in AttackedPool.closed_by_host), \
        AttackedPool.closed_by_host
    logs = dask_client.get_worker_logs()
    for address in {h.address for h in pool._hosts} or set(logs):
        refused = [m for level, m in logs[address] if "refused a connection" in m and level == "WARNING"]
        # three attacks and the silent one (closed when the master's stream was made, or by its handshake timeout)
        assert len(refused) >= 3, logs[address]
    assert time.time() - start < 60


def test_a_frame_over_the_limit_is_refused_before_a_buffer_is_made():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(stream.PRELUDE.pack(1, 1 << 40) + struct.pack("<Q", 1 << 40))
        with pytest.raises(stream.FrameTooLarge, match="at most 4096 B"):
            stream.receive_message(b, limit=4096)
        parts, size = stream.frames((np.arange(10.0),))
        stream.send_parts(a, parts, size)
        body, lengths, got = stream.receive_message(b, limit=size)   # exactly at the limit: read
        np.testing.assert_array_equal(stream.read_frames(body, lengths)[0], np.arange(10.0))
        # frame lengths that do not add up to the body
        a.sendall(stream.PRELUDE.pack(2, 16) + struct.pack("<2Q", 8, 16) + bytes(16))
        with pytest.raises(stream.FrameTooLarge, match="do not add up"):
            stream.receive_message(b, limit=4096)


class _Log(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _echo(body, lengths):
    return stream.frames(stream.read_frames(body, lengths))


def test_a_wrong_secret_is_refused_and_the_right_one_still_gets_through():
    log = logging.getLogger("isparse.test.stream")
    handler = _Log()
    log.addHandler(handler)
    secret = stream.new_secret()
    server = stream.RoundServer(_echo, "127.0.0.1", secret, limit=1 << 20, setup_seconds=30, log=log)
    try:
        with pytest.raises((stream.NotTheMaster, ConnectionError)):
            stream.Stream("127.0.0.1", server.port, stream.new_secret(), 1 << 20, 1.0)
        assert server.listening and not server.connected
        master = stream.Stream("127.0.0.1", server.port, secret, 1 << 20, 5.0)
        deadline = time.monotonic() + 5
        master.send(*stream.frames(("x", np.ones(3))), deadline)
        got, _ = master.receive(deadline)
        assert got[0] == "x" and got[1].tolist() == [1.0, 1.0, 1.0]
        time.sleep(0.3)
        assert not server.listening and server.connected
        # a request over the host's limit closes the stream, logged at the host (the host reads its header and
        # closes: the master's send may already see the reset, under load, or else its receive)
        big = np.zeros((1 << 20) // 8 + 1)
        with pytest.raises(ConnectionError):
            master.send(*stream.frames((big,)), deadline)
            master.receive(time.monotonic() + 5)
        master.close()
    finally:
        server.close()
        log.removeHandler(handler)
    assert any("did not prove the stream's secret" in line for line in handler.lines), handler.lines
    assert any("FrameTooLarge" in line for line in handler.lines), handler.lines


def test_the_host_stops_listening_when_no_master_comes():
    log = logging.getLogger("isparse.test.stream.timeout")
    handler = _Log()
    log.addHandler(handler)
    server = stream.RoundServer(_echo, "127.0.0.1", stream.new_secret(), limit=1024, setup_seconds=0.5, log=log)
    try:
        deadline = time.monotonic() + 5
        while server.listening and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not server.listening
    finally:
        server.close()
        log.removeHandler(handler)
    assert any("no master connected" in line for line in handler.lines)


def test_silent_strangers_past_the_cap_do_not_keep_the_master_out():
    """More silent connections than handshakes may be pending: each new one ends the oldest, so the master, connecting
    last, still gets in (trying again within its timeout if its own connection was the one ended)."""
    log = logging.getLogger("isparse.test.stream.silent")
    handler = _Log()
    log.addHandler(handler)
    secret = stream.new_secret()
    server = stream.RoundServer(_echo, "127.0.0.1", secret, limit=1 << 16, setup_seconds=30, log=log)
    silent = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(stream.MAX_PENDING + 8)]
    try:
        time.sleep(0.5)
        master = stream.Stream("127.0.0.1", server.port, secret, 1 << 16, 10.0)
        master.send(*stream.frames((1,)), time.monotonic() + 5)
        assert master.receive(time.monotonic() + 5)[0] == (1,)
        master.close()
    finally:
        for s in silent:
            s.close()
        server.close()
    assert sum("was the oldest" in line for line in handler.lines) >= 8, handler.lines


def test_a_stranger_dripping_bytes_is_cut_at_the_handshakes_time(monkeypatch):
    """The handshake's time is one limit for all its reads: a byte every 0.3 s does not hold a slot past it."""
    monkeypatch.setattr(stream, "HANDSHAKE_SECONDS", 1.0)
    log = logging.getLogger("isparse.test.stream.drip")
    handler = _Log()
    log.addHandler(handler)
    server = stream.RoundServer(_echo, "127.0.0.1", stream.new_secret(), limit=1024, setup_seconds=30, log=log)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            start, closed = time.monotonic(), False
            while time.monotonic() - start < 5:
                try:
                    sock.sendall(b"x")
                    time.sleep(0.3)
                except OSError:
                    closed = True
                    break
            elapsed = time.monotonic() - start
        assert closed and elapsed < 3.0, elapsed
        time.sleep(0.3)
        assert not server._pending
    finally:
        server.close()
        log.removeHandler(handler)
    assert any("handshake" in line for line in handler.lines), handler.lines
