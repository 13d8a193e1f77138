"""What the Dask engine's messages weigh beyond their analytic bytes: the calibrated per-message overheads of each
round path and the traffic model built on them (``DaskPool.traffic``), and the largest message each end of a round
stream reads.

The constants are measured, not derived: ``tests/test_dask_recovery.py``, ``tests/test_codecs.py`` and
``tests/test_downlink.py`` check the model against the bytes a run sends, and ``benchmarks/dask_overhead.py`` (item 2)
re-measures the frames; re-calibrate them here when distributed, NumPy or the message classes change.
"""

from __future__ import annotations

#: Measured overhead of a host's serialized reply over its batch's analytic bytes (distributed 2026.8, numpy 2,
#: pickle 5): about 452 B per reply of float64 values (Dask's 175 B header of the reply's bytes, the pickled tuple
#: and Messages with its arrays' headers and its class's module path, isparse.compression.messages; ~26 B more when
#: the block ids travel), 55 B more with a lossy codec (the packed payload's bit planes and the codec's class and
#: options: 46-62 B measured), plus 8 B per hosted worker (its index and value count, int32
#: each); within 6% for 4 to 40 workers of 1 to 16 values, less for larger messages. See
#: ``tests/test_dask_recovery.py``, ``tests/test_codecs.py`` and docs/clusters.md.
REPLY_OVERHEAD_BYTES = 452
CODED_REPLY_EXTRA_BYTES = 55
WORKER_OVERHEAD_BYTES = 8
#: Measured overhead of one round's downlink message over its analytic bytes (``len(serialize_bytes(message))``,
#: distributed 2026.8, numpy 2, d = 123 to 10^5): 226-228 B for the dense x (Dask's header and the array's), 302-305 B
#: for a compressed downlink's DownlinkMessage (the named tuple's class path, t, the payload array), 66 B more when a
#: top-k support travels (its int32 array's header; the ids themselves are in the analytic bytes).
DENSE_MESSAGE_OVERHEAD_BYTES = 226
CODED_MESSAGE_OVERHEAD_BYTES = 304
SUPPORT_MESSAGE_EXTRA_BYTES = 66
#: The same on the stream path (the message's frames as the round's request would carry it alone, prelude and padding
#: included; d = 30 to 10^5): 152-160 B dense, 216-221 B coded, 64-68 B more with a top-k support.
STREAM_DENSE_MESSAGE_OVERHEAD_BYTES = 156
STREAM_CODED_MESSAGE_OVERHEAD_BYTES = 218
STREAM_SUPPORT_MESSAGE_EXTRA_BYTES = 66
#: The same model on the stream path (``rounds="stream"``), where a reply's size is the bytes the client read for it
#: from the host's stream: 304 B per reply of float64 values (the message's 16 B prelude, 8 B per frame length, the
#: pickled tuple and Messages with its arrays' headers and its class's module path, each frame padded to 8 B), 48-76 B
#: more with a lossy codec (measured: 48 B for float32 and bfloat16, 64-76 B for natural, natural7 and dither), plus
#: ``WORKER_OVERHEAD_BYTES`` per hosted worker; 148 B less per reply than Dask's actor reply (its header and the
#: reply's own ``bytes`` wrapping). Measured on 4 to 40 workers of 2 to 16 values, with and without block ids.
STREAM_REPLY_OVERHEAD_BYTES = 304
STREAM_CODED_REPLY_EXTRA_BYTES = 64
#: bytes of the pickled headers a stream message may carry beyond its arrays' values (the largest measured was under
#: 1 KB; docs/clusters.md)
STREAM_HEADER_BYTES = 1 << 16


def request_limit(d: int) -> int:
    """The largest round request a host reads, in bytes: x or a downlink message, with room for d float64 values and
    d int64 ids (x is d values; a message at most d values and d int32 ids), and :data:`STREAM_HEADER_BYTES` (x* is
    not in a round: the hosts keep it, ``Engine.reference``)."""
    return 16 * int(d) + STREAM_HEADER_BYTES


def reply_limit(d: int, k: int) -> int:
    """The largest round reply the master reads from a host of ``k`` logical workers, in bytes: each worker's message
    at most d values of up to 16 bytes and d int64 ids, 1 KiB of its own headers, and :data:`STREAM_HEADER_BYTES`."""
    return int(k) * (24 * int(d) + 1024) + STREAM_HEADER_BYTES


def expected_traffic(measured: dict, rounds_via: str, exact_codec: bool, downlink=None) -> dict:
    """The measured uplink against the analytic one, over the rounds whose replies were sized (``DaskPool.measured``),
    and what the overhead model expects.

    Returns
    -------
    dict
        ``uplink_bytes_serialized`` and ``uplink_bytes_analytic`` (bytes, over the measured rounds),
        ``uplink_serialized_ratio`` (their ratio), ``uplink_overhead_per_reply`` (bytes of (serialized -
        analytic) per host reply), ``replies``, ``workers``, ``rounds`` (measured), and
        ``uplink_bytes_expected`` = analytic + (``REPLY_OVERHEAD_BYTES``, + ``CODED_REPLY_EXTRA_BYTES`` with a
        lossy codec) x replies + ``WORKER_OVERHEAD_BYTES`` x workers (the documented overhead model; on the
        stream path ``STREAM_REPLY_OVERHEAD_BYTES`` and ``STREAM_CODED_REPLY_EXTRA_BYTES``, the serialized
        size being what the host's comm wrote for the reply); the same for one host's copy of each measured
        round's downlink message: ``downlink_bytes_serialized``, ``downlink_bytes_analytic``,
        ``downlink_messages``, ``downlink_serialized_ratio`` and ``downlink_bytes_expected`` = analytic +
        (``DENSE_MESSAGE_OVERHEAD_BYTES``, or ``CODED_MESSAGE_OVERHEAD_BYTES`` + ``SUPPORT_MESSAGE_EXTRA_BYTES``
        per travelling support; the ``STREAM_`` ones on the stream path, where the size is the request's frames
        for the message alone) x messages.
    """
    m = measured
    if rounds_via == "stream":
        per_reply = STREAM_REPLY_OVERHEAD_BYTES + (0 if exact_codec else STREAM_CODED_REPLY_EXTRA_BYTES)
    else:
        per_reply = REPLY_OVERHEAD_BYTES + (0 if exact_codec else CODED_REPLY_EXTRA_BYTES)
    expected = m["analytic"] + per_reply * m["replies"] + WORKER_OVERHEAD_BYTES * m["workers"]
    down = downlink
    if rounds_via == "stream":
        dense, coded, extra = (STREAM_DENSE_MESSAGE_OVERHEAD_BYTES, STREAM_CODED_MESSAGE_OVERHEAD_BYTES,
                               STREAM_SUPPORT_MESSAGE_EXTRA_BYTES)
    else:
        dense, coded, extra = DENSE_MESSAGE_OVERHEAD_BYTES, CODED_MESSAGE_OVERHEAD_BYTES, SUPPORT_MESSAGE_EXTRA_BYTES
    per_message = dense if down is None else coded + extra * sum(p.support_travels for p in down.selections)
    return {"downlink_bytes_serialized": m["down_serialized"], "downlink_bytes_analytic": m["down_analytic"],
            "downlink_messages": m["down_messages"],
            "downlink_bytes_expected": m["down_analytic"] + per_message * m["down_messages"],
            "downlink_serialized_ratio": m["down_serialized"] / max(1.0, m["down_analytic"]),
            "uplink_bytes_serialized": m["serialized"], "uplink_bytes_analytic": m["analytic"],
            "uplink_bytes_expected": expected, "workers": m["workers"], "rounds": m["rounds"],
            "uplink_serialized_ratio": m["serialized"] / max(1, m["analytic"]),
            "uplink_overhead_per_reply": (m["serialized"] - m["analytic"]) / max(1, m["replies"]),
            "replies": m["replies"]}
