"""The link-time model: a round's time on given links (latency, the bytes up and down of each host, its compute),
for the planner's predictions on links it does not run on (``plan.link``) and the crossover map's."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..engines.to_eps import rounds_time
from .probe import VALUE_BYTES, _message_bytes, bound_iterations, scaled_iterations, uplink_bytes_per_round


#: seconds per round a network round trip adds to the in-process floor when the probes ran in this process
#: (engine=inprocess): the bare Dask actor round trip of docs/benchmarks.md item 2 (3.2-3.6 ms, measured 2026-12-02
#: with ``python -m benchmarks --only 2``), rounded to 3.5 ms
ROUND_TRIP_S = 3.5e-3
#: the same over the hosts' direct streams (``cluster.rounds=stream``, the default): the stream path's round trip
#: beyond the compute in docs/benchmarks.md item 2 (0.555-0.565 ms at n = 8 and 100, measured 2026-12-07 with
#: ``python -m benchmarks --only 2``), rounded to 0.57 ms
STREAM_ROUND_TRIP_S = 0.57e-3


def round_trip_for(rounds: str) -> float:
    """Seconds a round over the network adds to the in-process floor, by how the rounds travel (``cluster.rounds``):
    :data:`STREAM_ROUND_TRIP_S` for ``stream``, :data:`ROUND_TRIP_S` for ``actor``.

    Raises
    ------
    ValueError
        ``rounds`` neither ``stream`` nor ``actor``.
    """
    trips = {"stream": STREAM_ROUND_TRIP_S, "actor": ROUND_TRIP_S}
    if rounds not in trips:
        raise ValueError(f"rounds must be one of {tuple(trips)}; got {rounds!r}")
    return trips[rounds]
#: ``messages.aggregate``: what a host carrying several logical workers sends
AGGREGATES = ("worker", "host")


def workers_per_host(n: int, hosts: int) -> list[int]:
    """How many of the n logical workers each of the ``hosts`` hosts carries, as the Dask engine splits them
    (``numpy.array_split`` of the worker ids: the first n mod H hosts carry one more); hosts beyond n carry none.

    Parameters
    ----------
    n : int
        Logical workers (``workers.n``), >= 1.
    hosts : int
        H, the hosts (Dask worker processes), >= 1.

    Returns
    -------
    list of int, length ``hosts``, summing to n

    Raises
    ------
    ValueError
        n or hosts below 1.
    """
    if n < 1 or hosts < 1:
        raise ValueError(f"workers_per_host needs n >= 1 and hosts >= 1; got n={n}, hosts={hosts}")
    q, r = divmod(int(n), int(hosts))
    return [q + 1] * r + [q] * (int(hosts) - r)


def expected_union_blocks(m: int, tau_m: int, k: int) -> float:
    """The expected number of distinct blocks in the union of k independent tau*m-nice samplings of m blocks.

    Each block is in one worker's sampling with probability tau = tau_m / m, independently across workers
    (``isparse.compression.sampling``: each worker draws its own set), so it is missed by all k with probability
    (1 - tau)^k and the union holds m (1 - (1 - tau)^k) blocks on average; tau = 1 gives m, k = 1 gives tau m.

    Parameters
    ----------
    m : int
        Blocks.
    tau_m : int
        Blocks each worker sends, in [0, m].
    k : int
        Workers whose masks are united (>= 0; 0 gives 0).

    Returns
    -------
    float
    """
    if k <= 0 or tau_m <= 0:
        return 0.0
    if tau_m >= m:
        return float(m)
    return float(m * (1.0 - (1.0 - tau_m / m) ** int(k)))


def host_uplink_bytes(d: int, m: int, tau_m: int, k: int, aggregate: str = "worker", send_ids: bool = False,
                      codec=None) -> float:
    """Expected uplink bytes one host sends per round, carrying k logical workers.

    - ``aggregate="worker"``: k messages of tau d values each (as :func:`uplink_bytes_per_round` with n = k);
    - ``aggregate="host"``: one message, the sum of its workers' messages, on the union of their masks:
      d (1 - (1 - tau)^k) values on average (:func:`expected_union_blocks` x d / m: each block, whatever its size,
      is in the union with the same probability), exactly d at tau = 1.

    Parameters
    ----------
    d : int
        Dimension.
    m : int
        Blocks.
    tau_m : int
        Blocks each worker sends.
    k : int
        Logical workers on the host (0: nothing is sent).
    aggregate : {"worker", "host"}
        ``messages.aggregate``.
    send_ids : bool
        The block ids travel too, 4 B each (never at tau = 1).
    codec : Codec, optional
        The value codec (None: float64, 8 B per value); its bits are per message (dither's norm once).

    Returns
    -------
    float
        Bytes per round.

    Raises
    ------
    ValueError
        ``aggregate`` not one of :data:`AGGREGATES`.
    """
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}; got {aggregate!r}")
    if k <= 0:
        return 0.0
    if aggregate == "worker" or k == 1:
        return uplink_bytes_per_round(k, d, m, tau_m, send_ids, codec)
    blocks = expected_union_blocks(m, tau_m, k)
    ids = blocks if (send_ids and tau_m < m) else 0.0
    return _message_bytes(d * blocks / m, ids, codec)


@dataclass(frozen=True)
class LinkTime:
    """The predicted time to eps of one configuration on a link (:func:`predict_time`); seconds per round unless
    said otherwise.

    Attributes
    ----------
    latency_s : float
        The round's floor: what a round costs with empty messages (round trip, master step, bookkeeping).
    up_s : float
        The slowest host's uplink: its bytes x 8 / its up rate.
    down_s : float
        The slowest host's downlink: x, d x 8 B, x 8 / its down rate.
    compute_s : float
        The slowest host's worker compute.
    round_s : float
        max(latency_s + up_s + down_s + compute_s, rate_s).
    iterations : float
        Rounds to eps.
    total_s : float
        start_s + iterations x round_s: the predicted time to eps.
    up_bytes_per_host, down_bytes_per_host : float
        Bytes per round on the busiest host's uplink and downlink.
    uplink_bytes_per_round : float
        Bytes per round on all the uplinks together.
    hosts : int
        H.
    workers_per_host : int
        The most logical workers a host carries, ceil(n / H).
    aggregate : str
        ``worker`` or ``host``.
    rate_s : float
        The links' steady-state floor: the most a host's bytes in one direction take at its rate, with no burst
        (a shaped link carries at most rate x round_s a round, whatever its bucket).
    start_s : float
        Seconds a run's first rounds take beyond as many steady ones (once per run, not per round).
    """

    latency_s: float
    up_s: float
    down_s: float
    compute_s: float
    round_s: float
    iterations: float
    total_s: float
    up_bytes_per_host: float
    down_bytes_per_host: float
    uplink_bytes_per_round: float
    hosts: int
    workers_per_host: int
    aggregate: str
    rate_s: float = 0.0
    start_s: float = 0.0

    def as_dict(self) -> dict:
        """The prediction as a plain dict of its fields."""
        return asdict(self)


def _per_host(rate, hosts: int, name: str) -> list[float]:
    rates = list(rate) if isinstance(rate, (list, tuple, np.ndarray)) else [rate] * hosts
    if len(rates) != hosts:
        raise ValueError(f"{name}: {len(rates)} rates for {hosts} hosts")
    rates = [float(r) for r in rates]
    if not all(r > 0 and math.isfinite(r) for r in rates):
        raise ValueError(f"{name}: every rate must be a finite number of bits per second above 0; got {rate!r}")
    return rates


def predict_time(*, d: int, m: int, tau_m: int, n: int, hosts: int, up_bps, down_bps, iterations: float,
                 latency_s: float, compute_s: float, aggregate: str = "worker", send_ids: bool = False, codec=None,
                 down_value_bytes: int = VALUE_BYTES, up_burst_bytes: float = 0.0,
                 down_burst_bytes: float = 0.0, down_message_bytes: float | None = None,
                 start_s: float = 0.0) -> LinkTime:
    """Predicted time to eps on hosts behind links of given rates: latency + up + down + compute per round, times
    the rounds to eps, plus the run's start.

    The model, per round (hosts work in parallel, so each direction costs what its slowest host's link takes)::

        sum_s   = latency_s
                + max over hosts h of ((uplink bytes of h - up_burst_bytes)+ x 8 / up_bps[h])           (up_s)
                + max over hosts h of ((d x down_value_bytes - down_burst_bytes)+ x 8 / down_bps[h])    (down_s)
                + compute_s
        rate_s  = max over hosts h of (uplink bytes of h x 8 / up_bps[h], d x down_value_bytes x 8 / down_bps[h])
        round_s = max(sum_s, rate_s)
        total_s = start_s + iterations x round_s

(x goes dense to every host; (b)+ = max(b, 0).) A link is a token bucket (rate, burst), the standard description
of a shaped link (a tc ``tbf``'s ``rate`` and ``burst``): after an idle gap the first ``burst`` bytes of a message
cross at line speed, the rest at the rate. The bucket refills at the rate while the link is idle, so in a run of
rounds of period T a message gets min(burst, what refilled since the last one): where the rest of the round is
longer than burst / rate the whole burst (``sum_s``), and where it is shorter the link is busy at its rate for the
whole round (``rate_s``; the steady state of a periodic token bucket is exactly the larger of the two).
``start_s`` is paid once: a run's first rounds (the workers' first step, the stream's set-up) take longer than the
steady ones (``RoundTerms.start_s`` measures it).

    where host h carries k_h of the n logical workers (:func:`workers_per_host`) and sends
    :func:`host_uplink_bytes` (k_h messages of tau d values, or with ``aggregate="host"`` one message on the union
    of their masks, d (1 - (1 - tau)^k_h) values on average). A host carrying no worker sends and receives
    nothing. The byte counts are expectations over the blocks drawn; a round's transfer is taken as its bytes at
    the link's rate (no packet overhead, no slow start, no overlap of the directions).

    Parameters
    ----------
    d : int
        Dimension.
    m : int
        Blocks (d / blocks.size, rounded up).
    tau_m : int
        Blocks each worker sends, in [1, m].
    n : int
        Logical workers (``workers.n``).
    hosts : int
        H, the hosts (machines, Dask worker processes).
    up_bps, down_bps : float or sequence of float
        Each host's uplink (host -> master) and downlink (master -> host) rate in bits per second: one for all or
        one per host (``pipeline.cluster.shaping.rate_bits`` reads a tc rate such as ``10mbit`` as 1e7).
    iterations : float
        Rounds to eps (e.g. the bound's :meth:`iterations_to` scaled by a measured run, :func:`scaled_iterations`).
    latency_s : float
        The round's floor in seconds (a measured round at empty messages minus its compute, or
        :data:`ROUND_TRIP_S`).
    compute_s : float
        Seconds per round of the busiest host's worker compute (its k = ceil(n / H) workers' steps).
    aggregate : {"worker", "host"}
        ``messages.aggregate``.
    send_ids : bool
        ``messages.send_ids``.
    codec : Codec, optional
        The uplink's value codec (None: float64); the downlink is dense float64 (``down_value_bytes``).
    down_value_bytes : int
        Bytes per value of x on the downlink.
    down_message_bytes : float, optional
        Bytes of one round's downlink message to a host instead of d x ``down_value_bytes`` (a compressed downlink,
        ``messages.downlink``: ``Downlink.bytes_per_copy``).
    up_burst_bytes, down_burst_bytes : float
        Each link's token-bucket depth in bytes, up and down (0: a plain rate; ``cluster=emulated``'s is
        ``pipeline.cluster.shaping.bucket_bytes`` of the rate: 5 ms of traffic, at least 8 kB).
    start_s : float
        Seconds the run's first rounds take beyond steady ones (``RoundTerms.start_s``; 0: none).

    Returns
    -------
    LinkTime
        The terms and the total.

    Raises
    ------
    ValueError
        A rate list whose length is not ``hosts``, a rate that is not a positive finite number, n or hosts
        below 1, tau_m outside [1, m], a negative latency, compute or burst, or an unknown ``aggregate``.

    Notes
    -----
    Issue 32 item 6 (the planner's time model for a link, ``isparse-plan ... plan.link.up=... plan.link.down=...``);
    the bytes that cross each link are those of issue 32 item 2 (a host sends one sum with host aggregation).

    Examples
    --------
    >>> t = predict_time(d=1000, m=1000, tau_m=100, n=4, hosts=2, up_bps=1e6, down_bps=1e7, iterations=100,
    ...                  latency_s=0.001, compute_s=0.002)
    >>> t.up_bytes_per_host, round(t.up_s, 6), round(t.down_s, 6)      # 2 messages of 100 values x 8 B
    (1600.0, 0.0128, 0.0064)
    >>> round(t.total_s, 6)
    2.22
    """
    if not 1 <= tau_m <= m:
        raise ValueError(f"tau_m must be in [1, m] = [1, {m}]; got {tau_m}")
    if latency_s < 0 or compute_s < 0 or not start_s >= 0:
        raise ValueError(f"latency_s, compute_s and start_s must be >= 0; got {latency_s}, {compute_s}, {start_s}")
    if not (up_burst_bytes >= 0 and down_burst_bytes >= 0):
        raise ValueError(f"up_burst_bytes and down_burst_bytes must be >= 0; got {up_burst_bytes}, {down_burst_bytes}")
    loads = workers_per_host(n, hosts)
    ups, downs = _per_host(up_bps, hosts, "up_bps"), _per_host(down_bps, hosts, "down_bps")
    up_bytes = [host_uplink_bytes(d, m, tau_m, k, aggregate, send_ids, codec) for k in loads]
    per_message = float(d * down_value_bytes) if down_message_bytes is None else float(down_message_bytes)
    down_bytes = [per_message if k > 0 else 0.0 for k in loads]
    up_s = max(max(b - up_burst_bytes, 0.0) * 8.0 / r for b, r in zip(up_bytes, ups))
    down_s = max(max(b - down_burst_bytes, 0.0) * 8.0 / r for b, r in zip(down_bytes, downs))
    rate_s = max(max(b * 8.0 / r for b, r in zip(up_bytes, ups)), max(b * 8.0 / r for b, r in zip(down_bytes, downs)))
    round_s = max(float(latency_s) + up_s + down_s + float(compute_s), rate_s)
    return LinkTime(latency_s=float(latency_s), up_s=up_s, down_s=down_s, compute_s=float(compute_s),
                    round_s=round_s, iterations=float(iterations),
                    total_s=float(start_s) + float(iterations) * round_s,
                    up_bytes_per_host=max(up_bytes), down_bytes_per_host=max(down_bytes),
                    uplink_bytes_per_round=float(sum(up_bytes)), hosts=int(hosts), workers_per_host=max(loads),
                    aggregate=aggregate, rate_s=rate_s, start_s=float(start_s))


def predict_setup_time(setup, *, hosts: int, up_bps, down_bps, latency_s: float, compute_s: float,
                       iterations: float | None = None, tol: float | None = None,
                       reference: tuple | None = None, aggregate: str = "worker", up_burst_bytes: float = 0.0,
                       down_burst_bytes: float = 0.0, start_s: float = 0.0) -> LinkTime:
    """:func:`predict_time` of a built configuration (data, problem, method, tau, codec): its d, m, tau m, n,
    ``messages.send_ids`` and codec are read from ``setup``; the rounds to eps are ``iterations`` if given, else
    its bound's count to ``tol x r_0``, scaled by a measured run ``reference`` if given.

    Parameters
    ----------
    setup : RunSetup
        :func:`isparse.build` of the configuration (``isparse.build(RunSpec.from_dict({...}))``).
    hosts : int
        H.
    up_bps, down_bps : float or sequence of float
        Link rates in bits per second (one or one per host).
    latency_s : float
        The round's floor, seconds (measured: a round at tiny messages minus its compute; e.g.
        ``measure_round_terms(setup).latency_s``).
    compute_s : float
        The busiest host's worker compute per round, seconds (e.g. ``measure_round_terms(setup).compute_s(n, hosts)``).
    iterations : float, optional
        Rounds to eps (a measured count, or any model's); overrides ``tol`` and ``reference``.
    tol : float, optional
        The bound's target tol x r_0 (required without ``iterations``).
    reference : (float, float), optional
        (reference_bound, reference_measured) of :func:`scaled_iterations`: the bound's count and the measured
        rounds to the same eps at a configuration run for real; None: the bound's count as is (2-3x conservative).
    aggregate : {"worker", "host"}
        ``messages.aggregate``.
    up_burst_bytes, down_burst_bytes : float
        The links' token-bucket depths (:func:`predict_time`).
    start_s : float
        The run's start beyond steady rounds (e.g. ``measure_round_terms(setup).start_s``).

    Returns
    -------
    LinkTime

    Raises
    ------
    ValueError
        Neither ``iterations`` nor ``tol``, a bound without a finite count, or :func:`predict_time`'s.
    """
    if iterations is None:
        if tol is None:
            raise ValueError("predict_setup_time needs iterations or tol")
        iterations = bound_iterations(setup, tol)
        if not math.isfinite(iterations):
            raise ValueError(f"the bound gives no iteration count to tol x r_0 = {tol:g} x r_0 "
                             f"({setup.bound.theorem})")
        if reference is not None:
            iterations = scaled_iterations(iterations, *reference)
    method = setup.method
    return predict_time(d=int(setup.problem.d), m=int(method.blocks.m), tau_m=int(method.tau_m), n=int(method.n),
                        hosts=hosts, up_bps=up_bps, down_bps=down_bps, iterations=iterations, latency_s=latency_s,
                        compute_s=compute_s, aggregate=aggregate, send_ids=bool(method.sends_ids),
                        codec=method.codec, up_burst_bytes=up_burst_bytes, down_burst_bytes=down_burst_bytes,
                        down_message_bytes=down_message_bytes(method), start_s=start_s)


def down_message_bytes(method) -> float | None:
    """Bytes of one round's downlink message to a host with the method's compressed downlink (None: dense x)."""
    down = getattr(method, "downlink", None)
    return None if down is None else down.bytes_per_copy


def start_excess_s(t0: float, t_warm: float, warmup: int, round_s: float) -> float:
    """A run's start: the seconds of its first ``warmup`` rounds (from ``t0`` to ``t_warm``) beyond as many steady
    rounds of ``round_s`` (never below 0): the ``start_s`` of :func:`predict_time`."""
    return max(float(t_warm) - float(t0) - int(warmup) * float(round_s), 0.0)


@dataclass(frozen=True)
class RoundTerms:
    """The floor and the compute of a round, measured in this process or on a cluster (:func:`measure_round_terms`).

    Attributes
    ----------
    latency_s : float
        Seconds per round beyond the workers' compute (master step, bookkeeping, and on a cluster the round trip
        and the transfers at the cluster's own speed; no monitors) + the round trip added (``round_trip_s``): the
        ``latency_s`` of :func:`predict_time`.
    compute_per_worker_s : float
        Seconds per round of one logical worker's step (in-process: the compute of all n workers / n; on a
        cluster: the slowest host's compute / the workers it carries).
    rounds : int
        Rounds timed.
    start_s : float
        Seconds the run's first ``log_every`` rounds (the warm-up) took beyond as many timed ones: what a run pays
        once to start (the workers' first step, the exchange's set-up), the ``start_s`` of :func:`predict_time`.
    """

    latency_s: float
    compute_per_worker_s: float
    rounds: int
    start_s: float = 0.0

    def compute_s(self, n: int, hosts: int) -> float:
        """The busiest host's compute per round: ``compute_per_worker_s`` x ceil(n / hosts) (the ``compute_s`` of
        :func:`predict_time`)."""
        return self.compute_per_worker_s * max(workers_per_host(n, hosts))


def measure_round_terms(setup, rounds: int = 20, log_every: int = 10, round_trip_s: float = ROUND_TRIP_S,
                        pool=None) -> RoundTerms:
    """Measure a configuration's round floor and per-worker compute with a short run, in-process or on a cluster.

    The run: ``log_every`` warm-up rounds, then ``rounds`` (rounded up to a multiple of ``log_every``) timed, tol = 0,
    on ``pool`` (default: a fresh :class:`~isparse.engines.InProcessPool`). From its records
    (``isparse.engines.loop.RunResult``): the seconds of the timed rounds without the monitors
    (``wall_s - time_monitor_s``) minus the workers' compute (``time_compute_s``) is the floor, to which
    ``round_trip_s`` (a network round trip an in-process run does not make; pass 0 with a cluster's pool) is added.
    One worker's compute is the compute divided by n in-process, and on a :class:`~isparse.engines.DaskPool` (whose
    ``time_compute_s`` is the slowest host's) divided by the workers of the busiest host. On a cluster whose links
    are those to predict for, the floor also holds their transfer time: measure it with the links unshaped (as
    ``benchmarks/crossover.py`` does on ``cluster=emulated``). The start is the warm-up rounds' seconds (from the
    record of t = 0, without the monitors) less ``log_every`` timed rounds'.

    Parameters
    ----------
    setup : RunSetup
        :func:`isparse.build`'s result.
    rounds : int
        Rounds timed (>= 1).
    log_every : int
        Rounds between records (>= 1), also the warm-up.
    round_trip_s : float
        Added to the floor (default :data:`ROUND_TRIP_S`, a bare Dask actor round trip; 0 for the in-process floor).
    pool : InProcessPool or DaskPool, optional
        Where the run is made (``setup.pool_args()``'s method); None: a fresh in-process pool.

    Returns
    -------
    RoundTerms
    """
    le = max(int(log_every), 1)
    timed = le * math.ceil(max(int(rounds), 1) / le)
    recs = {r["step"]: r for r in setup.run(pool, max_iter=le + timed, tol=0.0, log_every=le).records}
    z, a, b = recs[0], recs[le], recs[le + timed]
    compute = (b.get("time_compute_s", 0.0) - a.get("time_compute_s", 0.0)) / timed
    rounds_s = (rounds_time(b) - rounds_time(a)) / timed
    start_s = start_excess_s(rounds_time(z), rounds_time(a), le, rounds_s)
    # time_compute_s is the slowest host's (in-process: one host, "inprocess", carrying all n)
    hosts = list(pool.placement.values()) if pool is not None else ["inprocess"] * int(setup.method.n)
    per = compute / max(hosts.count(h) for h in set(hosts))
    return RoundTerms(latency_s=max(rounds_s - compute, 0.0) + float(round_trip_s), compute_per_worker_s=per,
                      rounds=timed, start_s=start_s)
