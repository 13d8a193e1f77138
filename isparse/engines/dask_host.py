"""The Dask engine's host: a :class:`~isparse.engines.host.WorkerHost` as a Dask actor, with its end of the round
stream (``isparse.engines.stream``)."""

from __future__ import annotations

import logging
import pickle

from .host import WorkerHost
from .stream import RoundServer, frames, new_secret, read_frames, sendable

#: Exceptions of an actor call that mean "the Dask worker is gone or does not answer".
LOST = (OSError, TimeoutError)
#: distributed's RuntimeError when a call is made on an actor whose worker the scheduler already removed
ACTOR_LOST = "Worker holding Actor was lost"
#: where a host logs what its round stream refused and its errors: a child of Dask's worker logger, so that the worker's
#: own log (``Client.get_worker_logs()``, the dashboard) holds it
STREAM_LOG = logging.getLogger("distributed.worker.isparse")

class DaskHost(WorkerHost):
    """A :class:`~isparse.engines.host.WorkerHost` as a Dask actor. Its round is an ``async def`` method, so it runs
    on the Dask worker's event loop instead of being handed to the actor thread and back (measured 0.3-0.4 ms
    less per round on a 2-process LocalCluster; docs/benchmarks.md, item 2); a round blocks that loop for its
    compute, which is all the Dask worker does meanwhile.

    The round's reply is one ``bytes`` object, the pickled (protocol 5) tuple of :meth:`WorkerHost.round`
    (:func:`unpack_reply` reads it): Dask serializes a tuple element by element, which cost about twice the time
    per reply (measured 0.36 ms against 0.17 ms to serialize and deserialize a host's reply at n = 100). With
    ``measure``, the reported size is ``len(distributed.protocol.serialize_bytes(reply))``, the bytes Dask sends
    for the reply (Dask's header and the pickled batch; sized before the size itself is put in, a few bytes less).

    On the stream path (``DaskPool(rounds="stream")``) the master calls :meth:`open_stream` once; the rounds then
    arrive on that connection, served by a thread of the host's own (:class:`~isparse.engines.stream.RoundServer`), where
    :meth:`WorkerHost.round` runs.
    """

    _round_server = None

    async def open_stream(self, limit: int, setup_seconds: float) -> tuple[str, bytes]:
        """Listen for the master's round stream on this Dask worker's own host (its address's host, port 0: a free one),
        with a fresh secret the master must prove (``isparse.engines.stream``'s handshake) before any of its bytes is
        read as a message.

        The listener and the stream are served by a thread of their own (:class:`~isparse.engines.stream.RoundServer`),
        with TLS when the worker's address is ``tls://`` (or ``wss://``), with the worker's own TLS context
        (``security.get_listen_args("worker")``: its certificate, the cluster's CA, client certificates required). It
        serves the one connection that proves the secret, and stops listening then or after ``setup_seconds``; each
        request on it (at most ``limit`` bytes) runs :meth:`WorkerHost.round` in that thread (:meth:`_answer`).
        Refused connections and the stream's errors are logged on the worker's log (:data:`STREAM_LOG`). A stream
        opened before is closed first.

        Returns
        -------
        address : str
            ``tcp://HOST:PORT`` or, with TLS, ``tls://HOST:PORT``.
        secret : bytes
            The stream's secret; it reaches the master in this call's reply, over Dask's channel.

        Raises
        ------
        RuntimeError
            The worker's address is ``tls://`` but its security has no TLS context.
        """
        from distributed import get_worker
        from distributed.comm.addressing import get_address_host, parse_address, unparse_host_port

        worker = get_worker()
        scheme = parse_address(worker.address)[0]
        host = "127.0.0.1" if scheme == "inproc" else get_address_host(worker.address)
        ssl_context = None
        if scheme in ("tls", "wss"):
            ssl_context = worker.security.get_listen_args("worker")["ssl_context"]
            if ssl_context is None:
                raise RuntimeError(f"the Dask worker {worker.address} has no TLS context for its round stream")
        if self._round_server is not None:
            self._round_server.close()
        secret = new_secret()
        self._round_server = RoundServer(self._answer, host, secret, limit, setup_seconds, ssl_context, STREAM_LOG)
        address = f"{'tls' if ssl_context is not None else 'tcp'}://{unparse_host_port(host, self._round_server.port)}"
        return address, secret

    def _answer(self, body, lengths) -> tuple[list, int]:
        """The reply to a round request (its body and frame lengths), as :func:`_frames` gives it (parts, size):
        ``(True, WorkerHost.round(self, *args))`` (``args`` passed on as the master gave them), or
        ``(False, the error)`` (raised by the master)."""
        try:
            return frames((True, WorkerHost.round(self, *read_frames(body, lengths))))
        except Exception as exc:
            return frames((False, sendable(exc)))

    async def close_stream(self) -> bool:
        """Stop listening and close the round stream, if any (its thread ends); whether anything was still open."""
        server, self._round_server = self._round_server, None
        return server is not None and server.close()

    async def stream_state(self) -> dict:
        """Whether the host still listens and still has a round stream (for checks): ``listening``, ``connected``."""
        server = self._round_server
        return {"listening": server is not None and server.listening,
                "connected": server is not None and server.connected}

    async def round(self, x, monitor=False, measure=False):
        """:meth:`WorkerHost.round` as one pickled reply (read it with :func:`unpack_reply`); ``measure`` sizes the
        bytes Dask sends for the reply (the class docstring)."""
        batch, compute, _, memory = WorkerHost.round(self, x, monitor)
        reply = pickle.dumps((batch, compute, None, memory), protocol=5)
        if measure:
            from distributed.protocol import serialize_bytes

            reply = pickle.dumps((batch, compute, len(serialize_bytes(reply)), memory), protocol=5)
        return reply


def unpack_reply(reply: bytes) -> tuple:
    """(batch, compute seconds, reply size in bytes or None, memory or None) of a :meth:`DaskHost.round` reply."""
    return pickle.loads(reply)
