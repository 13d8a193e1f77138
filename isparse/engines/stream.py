"""The round stream's wire: one persistent TCP (or TLS) connection between the master and a host, its messages, and
the handshake by which the master proves it is the master before the host reads a byte of a message.

Standard library only (the Dask engine, ``isparse.engines.dask``, places the hosts and hands the two ends their
addresses, TLS contexts and secret over Dask's own channel).

A message is an object pickled (protocol 5) with its arrays' buffers as frames of their own: a 16 B prelude
``<QQ`` (frame count k, bytes after the frame lengths), k ``<Q`` frame lengths, then the frames, each padded to a
multiple of 8 bytes (so that NumPy arrays read from them are aligned). A reader takes a message only up to its
``limit`` in bytes (what the other end's method can send), checked from the prelude before any buffer is made.

The handshake (``hello``). The host makes a fresh 32-byte secret for each stream it opens and gives it to the master
in the reply of Dask's ``open_stream`` call (over TLS where the cluster uses TLS). On a connection (after the TLS
handshake, where there is one) the host sends ``MAGIC`` and a 32-byte random challenge; the peer answers
HMAC-SHA256(secret, challenge + b"master"); the host compares it in constant time and answers
HMAC-SHA256(secret, challenge + b"host"), which the master checks in turn. Nothing the peer sends is deserialized
before that: a connection that does not prove the secret within :data:`HANDSHAKE_SECONDS` (a stranger, garbage, a
prelude claiming any size, a failed TLS handshake) is logged at the host and closed, and the host keeps listening
for the master until the stream's set-up time runs out. The secret itself never crosses the stream.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import pickle
import socket
import struct
import threading
import time

#: the prelude of a message: frame count k, bytes after the frame lengths
PRELUDE = struct.Struct("<QQ")
#: messages up to this size are joined into one buffer before sending (one send call); larger ones go frame by frame
JOIN_BYTES = 1 << 18
#: bytes asked for by a message's first read: the prelude, the frame lengths and a small message's body in one call
FIRST_READ = 1 << 16
#: the host's first bytes on a new connection (before its challenge): names the protocol and its version
MAGIC = b"ISPRS\x00\x01\x00"
#: bytes of a stream's secret, of a challenge and of an HMAC-SHA256 answer
SECRET_BYTES = CHALLENGE_BYTES = ANSWER_BYTES = 32
#: seconds a connection has to complete the (TLS and) stream handshake before the host closes it
HANDSHAKE_SECONDS = 10.0
#: connections whose handshake may be pending at once at a host; a new one past this closes the oldest pending one
#: (logged), so that connections held open cannot keep a newer one, the master's, out
MAX_PENDING = 64


class FrameTooLarge(ConnectionError):
    """A message's prelude announced more bytes than the reader's limit, or frame lengths that do not add up."""


class NotTheMaster(ConnectionError):
    """A peer did not prove the stream's secret (or a host did not prove it to the master)."""


def new_secret() -> bytes:
    """A fresh stream secret (:data:`SECRET_BYTES` random bytes)."""
    return os.urandom(SECRET_BYTES)


def _answer(secret: bytes, challenge: bytes, role: bytes) -> bytes:
    return hmac.new(secret, challenge + role, hashlib.sha256).digest()


def frames(obj) -> tuple[list, int]:
    """The parts of ``obj``'s message and its size in bytes: ``obj`` pickled (protocol 5) with its arrays' buffers
    out of band, so that they are sent without a copy."""
    buffers = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    parts_of = [memoryview(head), *(b.raw() for b in buffers)]
    lengths = [f.nbytes for f in parts_of]
    pads = [-n % 8 for n in lengths]
    parts = [PRELUDE.pack(len(parts_of), sum(lengths) + sum(pads)), struct.pack(f"<{len(parts_of)}Q", *lengths)]
    for f, pad in zip(parts_of, pads):
        parts.append(f)
        if pad:
            parts.append(bytes(pad))
    return parts, sum(lengths) + sum(pads) + PRELUDE.size + 8 * len(parts_of)


def read_frames(body, lengths) -> object:
    """The object of a message's body (a writable buffer) cut into its frames."""
    view, cut, at = memoryview(body), [], 0
    for n in lengths:
        cut.append(view[at:at + n])
        at += n + (-n % 8)
    return pickle.loads(cut[0], buffers=cut[1:])


def _recv_exactly(sock, n: int, deadline: float) -> bytes:
    """``n`` bytes from ``sock`` before ``deadline`` (``time.monotonic()``): one limit for all the reads, so a peer
    that sends a byte at a time gains nothing. ``ConnectionResetError`` when it closes first, ``TimeoutError`` past
    the deadline."""
    buf = bytearray(n)
    got = 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{got} of {n} handshake bytes within the handshake's time")
        sock.settimeout(left)
        try:
            k = sock.recv_into(memoryview(buf)[got:])
        except TimeoutError:
            raise TimeoutError(f"{got} of {n} handshake bytes within the handshake's time") from None
        if k == 0:
            raise ConnectionResetError(f"closed after {got} of {n} handshake bytes")
        got += k
    return bytes(buf)


def receive_message(sock, limit: int, before=None):
    """Read one message from ``sock`` (blocking): (its body, a writable buffer; its frame lengths; its size in
    bytes), or None when the peer closed the stream before the message began (:func:`read_frames` gives its object).

    The first read asks for up to :data:`FIRST_READ` bytes, so a small message takes one call; the stream carries
    one message at a time in each direction (a request, then its reply), so nothing of a next message is read.
    ``before()``, if given, is called before each read (the master sets its socket's timeout there).

    Raises
    ------
    FrameTooLarge
        The prelude announces more than ``limit`` bytes (checked before any buffer of that size is made), or frame
        lengths that do not add up to the body.
    ConnectionResetError
        The peer closed the stream inside a message.
    OSError
        From the socket (``TimeoutError`` past its timeout).
    """
    buf, got, size = bytearray(min(FIRST_READ, max(limit, PRELUDE.size))), 0, None
    while size is None or got < size:
        if size is None and got >= PRELUDE.size:
            k, body = PRELUDE.unpack_from(buf)
            size = PRELUDE.size + 8 * k + body
            if size > limit:
                raise FrameTooLarge(f"a message of {size} B was announced; at most {limit} B can come on this stream")
            if size > len(buf):
                grown = bytearray(size)
                grown[:got] = memoryview(buf)[:got]
                buf = grown
            continue
        if before is not None:
            before()
        n = sock.recv_into(memoryview(buf)[got:size])
        if n == 0:
            if got == 0:
                return None
            raise ConnectionResetError("the round stream was closed inside a message")
        got += n
    if got > size:
        raise ConnectionResetError(f"the round stream sent {got - size} B after a message (one at a time expected)")
    k, body = PRELUDE.unpack_from(buf)
    lengths = struct.unpack_from(f"<{k}Q", buf, PRELUDE.size)
    if k == 0 or sum(n + (-n % 8) for n in lengths) != body:
        raise FrameTooLarge(f"the message's {k} frame lengths do not add up to its {body} B body")
    return memoryview(buf)[PRELUDE.size + 8 * k:size], lengths, size


def send_parts(sock, parts, size: int) -> None:
    """Write one message's parts (``size`` bytes in all) to ``sock``: joined into one send call up to
    :data:`JOIN_BYTES`, frame by frame (no copy) above."""
    if size <= JOIN_BYTES:
        sock.sendall(b"".join(parts))
    else:
        for part in parts:
            sock.sendall(part)


def sendable(exc: BaseException) -> BaseException:
    """``exc`` if it pickles, else a RuntimeError with its text (a host's error travels back to the master)."""
    try:
        pickle.dumps(exc)
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class RoundServer:
    """The host's end of its round stream: a listening socket and a thread of its own in the host's process.

    The thread listens until one connection proves the stream's secret (the module docstring's handshake; each
    connection's handshake runs in a short-lived thread of its own, so a stranger that connects and waits delays no
    one), or until ``setup_seconds`` have passed; then it stops listening and serves that connection: reads a request
    (at most ``limit`` bytes), answers it (``answer(body, lengths) -> (parts, size)``) and writes the reply, with
    blocking sockets, until the master closes the stream or :meth:`close` is called. Every refused connection and
    every error of the serving thread is logged on ``log`` (the host's log). The round so runs outside the host's
    event loop; measured on the 2-core machine, a bare 2-host round trip of ~1 KB messages took 0.32 ms from a thread
    in each Dask worker against 0.55 ms from an asyncio server on the worker's event loop (docs/benchmarks.md item 2).

    Parameters
    ----------
    answer : callable
        The reply to a request's body and frame lengths, as :func:`frames` gives it (parts, size).
    bind : str
        The interface to listen on (the host's own).
    secret : bytes
        The stream's secret (:func:`new_secret`), given to the master over another, trusted channel.
    limit : int
        The largest request in bytes (what the master's method can send); a larger one closes the stream.
    setup_seconds : float
        How long to wait for the master's connection.
    ssl_context : ssl.SSLContext, optional
        The server side's TLS context; each accepted connection is wrapped with it before the handshake.
    log : logging.Logger, optional
        Where refusals and errors go.
    """

    #: seconds between checks of :meth:`close` while waiting for connections
    POLL = 0.2

    def __init__(self, answer, bind: str, secret: bytes, limit: int, setup_seconds: float, ssl_context=None,
                 log: logging.Logger | None = None):
        self.answer, self.secret, self.limit, self.ssl_context = answer, secret, int(limit), ssl_context
        self.log = log or logging.getLogger(__name__)
        family = socket.AF_INET6 if ":" in bind else socket.AF_INET
        self.listener = socket.create_server((bind, 0), family=family)
        self.listener.settimeout(self.POLL)
        self.port = self.listener.getsockname()[1]
        self.deadline = time.monotonic() + float(setup_seconds)
        self.conn, self.closed, self.refused = None, False, 0
        self._lock, self._master = threading.Lock(), threading.Event()
        #: the pending handshakes, oldest first: thread -> (its connection, its deadline, why it was ended or None)
        self._pending: dict = {}
        self.thread = threading.Thread(target=self._serve, name="isparse-round-stream", daemon=True)
        self.thread.start()

    @property
    def listening(self) -> bool:
        return self.listener is not None

    @property
    def connected(self) -> bool:
        return self.conn is not None

    def _stop_listening(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            listener.close()

    def _refuse(self, conn, peer, why: str) -> None:
        self.refused += 1
        self.log.warning("isparse round stream on port %s: refused a connection from %s: %s (nothing it sent was "
                         "read as a message; still waiting for the master)", self.port, peer, why)
        try:
            conn.close()
        except OSError:
            pass

    def _handshake(self, conn, peer, deadline: float) -> None:
        """The host's side of the handshake on one accepted connection, before ``deadline``; the first to prove the
        secret becomes the stream (``self.conn``)."""
        try:
            conn.settimeout(max(1e-3, deadline - time.monotonic()))
            if self.ssl_context is not None:
                conn = self.ssl_context.wrap_socket(conn, server_side=True)
            challenge = os.urandom(CHALLENGE_BYTES)
            conn.sendall(MAGIC + challenge)
            got = _recv_exactly(conn, ANSWER_BYTES, deadline)
            if not hmac.compare_digest(got, _answer(self.secret, challenge, b"master")):
                raise NotTheMaster("it did not prove the stream's secret")
            with self._lock:
                if self.closed or self._master.is_set():
                    raise NotTheMaster("the stream already has its master")
                conn.sendall(_answer(self.secret, challenge, b"host"))
                conn.settimeout(None)
                self.conn = conn
                self._master.set()
                self._stop_listening()   # wakes the accepting thread, which then serves this connection
        except Exception as exc:  # noqa: BLE001 - every way a stranger fails is logged and its connection closed
            why = self._pending.get(threading.current_thread(), (None, None, None))[2]
            self._refuse(conn, peer, why or f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._pending.pop(threading.current_thread(), None)

    def _cut(self, thread, why: str) -> None:
        """End a pending handshake (its thread then logs ``why`` and returns): under ``self._lock``."""
        conn, deadline, _ = self._pending[thread]
        self._pending[thread] = (conn, deadline, why)
        try:
            conn.shutdown(socket.SHUT_RDWR)   # wakes the thread's blocking read or TLS handshake
        except OSError:
            pass

    def _wait_for_master(self):
        """Accept connections, each handshaken in a thread of its own, until the master's proves the secret; None when
        the set-up time runs out or :meth:`close` is called. Every poll ends the handshakes past their own
        :data:`HANDSHAKE_SECONDS`; a connection past :data:`MAX_PENDING` pending ones ends the oldest."""
        while not self.closed and not self._master.is_set():
            now = time.monotonic()
            with self._lock:
                for t, (_, deadline, why) in list(self._pending.items()):
                    if now > deadline and why is None:
                        self._cut(t, f"no handshake within {HANDSHAKE_SECONDS:g} s")
            if now > self.deadline:
                self.log.warning("isparse round stream on port %s: no master connected within its set-up time "
                                 "(%d connection(s) refused); stopped listening", self.port, self.refused)
                return None
            try:
                conn, peer = self.listener.accept()
            except TimeoutError:
                continue
            except (OSError, AttributeError):   # closed meanwhile: by close(), or for the master's connection
                return self.conn
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            deadline = min(time.monotonic() + HANDSHAKE_SECONDS, self.deadline)
            t = threading.Thread(target=self._handshake, args=(conn, peer, deadline), daemon=True,
                                 name="isparse-round-stream-handshake")
            with self._lock:
                waiting = [u for u, (_, _, why) in self._pending.items() if why is None]
                if len(waiting) >= MAX_PENDING:   # the oldest pending handshake makes room for this one
                    self._cut(waiting[0], f"{MAX_PENDING} handshakes were pending and this one was the oldest")
                self._pending[t] = (conn, deadline, None)
            t.start()
        return self.conn

    def _serve(self) -> None:
        try:
            conn = self._wait_for_master()
        except Exception:  # noqa: BLE001 - logged: the master then sees its stream fail
            self.log.exception("isparse round stream on port %s: waiting for the master failed", self.port)
            conn = None
        finally:
            self._stop_listening()
        if conn is None or self.closed:
            return
        try:
            while True:
                request = receive_message(conn, self.limit)
                if request is None:
                    break
                send_parts(conn, *self.answer(*request[:2]))
        except Exception as exc:  # noqa: BLE001 - logged here; the master recovers if it still runs
            if not self.closed:
                self.log.warning("isparse round stream on port %s: the stream ended on %s: %s", self.port,
                                 type(exc).__name__, exc)
        finally:
            self.conn = None
            try:
                conn.close()
            except OSError:
                pass

    def close(self) -> bool:
        """Stop listening and end the stream (the thread then returns). Returns whether anything was still open."""
        was_open = self.listening or self.connected
        self.closed = True
        self._stop_listening()
        conn = self.conn
        if conn is not None:
            try:   # wakes the thread's blocking read; it closes the socket
                socket.socket.shutdown(conn, socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(timeout=5.0)
        return was_open


class Stream:
    """The master's end of a host's round stream: a blocking socket (TLS-wrapped on a TLS cluster) that proved the
    stream's secret to the host and checked the host's proof in turn.

    Parameters
    ----------
    host, port : str, int
        Where the host listens.
    secret : bytes
        The stream's secret, from the host's ``open_stream`` reply.
    limit : int
        The largest reply in bytes (what the host's logical workers can send).
    timeout : float
        Seconds for the connection and its handshake, tried again within them while the host ends it (as it ends
        the oldest of too many pending handshakes).
    ssl_context : ssl.SSLContext, optional
        The client side's TLS context (None: plain TCP).

    Raises
    ------
    NotTheMaster
        The host did not answer the handshake as the host that made ``secret`` would.
    OSError
        The host could not be reached (``TimeoutError`` past ``timeout``).
    """

    def __init__(self, host: str, port: int, secret: bytes, limit: int, timeout: float, ssl_context=None):
        self.address, self.limit = f"{host}:{port}", int(limit)
        deadline = time.monotonic() + float(timeout)
        while True:   # a connection the host ended (its pending handshakes were full): once more, until the deadline
            try:
                self.sock = self._handshake(host, port, secret, deadline, ssl_context)
                break
            except (ConnectionResetError, BrokenPipeError, NotTheMaster):
                if time.monotonic() + 0.05 > deadline:
                    raise
                time.sleep(0.05)
        self.tls = ssl_context is not None

    def _handshake(self, host, port, secret, deadline, ssl_context):
        sock = socket.create_connection((host, port), timeout=max(1e-3, deadline - time.monotonic()))
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock)
            hello = _recv_exactly(sock, len(MAGIC) + CHALLENGE_BYTES, deadline)
            if hello[:len(MAGIC)] != MAGIC:
                raise NotTheMaster(f"{self.address} does not speak the isparse round stream")
            challenge = hello[len(MAGIC):]
            sock.sendall(_answer(secret, challenge, b"master"))
            if not hmac.compare_digest(_recv_exactly(sock, ANSWER_BYTES, deadline), _answer(secret, challenge, b"host")):
                raise NotTheMaster(f"{self.address} did not prove the stream's secret")
        except BaseException:
            sock.close()
            raise
        return sock

    def send(self, parts, size: int, deadline: float) -> None:
        """Write one message (its parts, ``size`` bytes in all) before ``deadline`` (``time.monotonic()``)."""
        self.sock.settimeout(max(1e-3, deadline - time.monotonic()))
        send_parts(self.sock, parts, size)

    def receive(self, deadline: float) -> tuple[object, int]:
        """Read one message before ``deadline``: (its object, its size in bytes as read)."""
        def before():
            self.sock.settimeout(max(1e-3, deadline - time.monotonic()))
        message = receive_message(self.sock, self.limit, before)
        if message is None:
            raise ConnectionResetError(f"the round stream {self.address} was closed by its host")
        body, lengths, size = message
        return read_frames(body, lengths), size

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
