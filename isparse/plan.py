"""The planner's model: what a round costs as a function of its bytes, and the theory's iterations to eps.

``isparse-plan`` (pipeline/plan.py) measures a few real rounds of the configured method on the actual engine at
two or three values of tau (message sizes), fits

    seconds per round = a + s x (uplink bytes per round)      for tau < 1,                   (1)
    seconds per round = the tau = 1 probe's, as measured       for tau = 1

(:func:`fit_round_cost`: ``a`` = latency + the downlink of x + compute and master work that do not grow with the
message, ``s`` = 1 / effective bandwidth, with the compute that grows with tau folded into ``s``; tau = 1 is
another code path: no block is drawn, by the workers nor by the master that recomputes their ids, see
``isparse.compression.sampling``, so it gets its own measured round instead of a point on the line), and combines it
with the iteration count to eps that the run's theorem predicts for each tau of a grid (and each block size):

    predicted time to eps = predicted iterations x predicted seconds per round,
    predicted uplink to eps = predicted iterations x uplink bytes per round.

The theorems' iteration counts are 2-3x conservative but their dependence on tau is accurate (conf/experiment/
tau_sweep.yaml: measured and predicted log-log slopes agree to +-0.01). The recommendation, the argmin over the
grid of the predicted time, depends only on the ratios of the predicted iterations between rows: a common
conservative factor c multiplies every row's time and leaves the argmin where it is. The absolute seconds are
upper estimates by that same factor.

Sources: the iteration counts are the bounds' :meth:`iterations_to` (``isparse.theory``; Theorem 3 for ISEGA,
Theorem 1 for IBCD, ..., arXiv:1901.09437), to ``tol x r_0`` exactly as ``isparse-run`` logs ``predicted_iterations``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .compression.tau import GRAMMAR, Tau
from .compression.choices import CodecChoice, codec_label, resolve_codecs  # noqa: F401  (the grid of codecs: re-exported)
from .errors import ConfigError

#: bytes per value and per block id in a message (isparse.compression.messages)
VALUE_BYTES, BLOCK_ID_BYTES = 8, 4


def resolve_tau_grid(taus, m: int, n: int, key: str = "plan.taus") -> list[int]:
    """The grid's tau as numbers of blocks tau*m, sorted and without repeats.

    Parameters
    ----------
    taus : list or None
        Each entry is read as a run's ``tau`` (:class:`isparse.compression.tau.Tau`: the same grammar and the same
        rounding, so every row is a tau ``isparse-run`` accepts): ``auto`` (= ``1/n``), ``"<c>/n"`` (rounded up,
        tau*m = ceil(c m / n), 0 < c <= n), ``"<k>/m"`` (k blocks), or a number in [1/m, 1] with tau*m an integer.
        None: the default grid tau*m in {1, 2, 4, 8, ...} up to m, plus ceil(m/n) (tau = 1/n rounded up) and m
        (tau = 1).
    m : int
        Blocks.
    n : int
        Workers.
    key : str
        The key errors name.

    Returns
    -------
    list of int, each in [1, m]

    Raises
    ------
    ConfigError
        (``key``) an empty grid, or an entry :meth:`Tau.parse` or :meth:`Tau.resolve` refuses.
    """
    if taus is None:
        grid = {1, m, Tau.parse("auto").resolve(m, n)[1]}
        k = 2
        while k < m:
            grid.add(k)
            k *= 2
        return sorted(grid)
    taus = list(taus) if isinstance(taus, (list, tuple)) else [taus]
    if not taus:
        raise ConfigError(key, f"The '{key}' parameter must be a non-empty list of tau values ({GRAMMAR}), or null "
                               f"for the default grid; got [].")
    return sorted({Tau.parse(tau, key).resolve(m, n)[1] for tau in taus})


def resolve_block_sizes(sizes, d: int, default: int, key: str = "plan.block_sizes") -> list[int]:
    """The grid's block sizes: ``sizes`` (integers in [1, d]), or None for the config's own size only.

    Raises
    ------
    ConfigError
        (``key``) an empty list, or a size that is not an integer in [1, d].
    """
    if sizes is None:
        return [int(default)]
    sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
    if not sizes:
        raise ConfigError(key, f"The '{key}' parameter must be a non-empty list of integers in [1, d] = [1, {d}], "
                               f"or null for blocks.size alone; got [].")
    for b in sizes:
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= d:
            raise ConfigError(key, f"The '{key}' parameter's entries must be integers in [1, d] = [1, {d}]; got {b!r}.")
    return sorted(set(int(b) for b in sizes))


def uplink_bytes_per_round(n: int, d: int, m: int, tau_m: int, send_ids: bool, codec=None) -> float:
    """Expected uplink bytes of one round, all n workers.

    n x (the codec's bits of a message of tau d values / 8 (8 B per value for float64) + tau m ids x 4 B if sent).

    Parameters
    ----------
    n : int
        Number of workers.
    d : int
        Dimension.
    m : int
        Number of blocks.
    tau_m : int
        Blocks each worker sends.
    send_ids : bool
        ``messages.send_ids``: the block ids travel too (not when tau_m = m).
    codec : Codec, optional
        The value codec (None: float64, 8 B per value).

    Returns
    -------
    float
        Bytes per round.

    Notes
    -----
    The expectation over the blocks drawn (a last block shorter than b is drawn with probability tau): a message
    holds tau d values on average, and the codec's ``bits`` is taken between the two whole counts around it
    (linearly: exact for a codec whose bits are affine in the count, as every built-in one); with tau_m = m every
    block is sent and no id travels (``isparse.compression.messages.Messages.bytes_per_worker``).
    """
    ids = tau_m if (send_ids and tau_m < m) else 0
    return float(n * _message_bytes(tau_m * d / m, ids, codec))


@dataclass(frozen=True)
class Probe:
    """One measured probe: a short real run at one tau.

    Attributes
    ----------
    tau : float
    uplink_bytes : float
        Uplink bytes per round (all workers), measured.
    round_s : float
        Wall seconds per round of the run's loop (exchange, master step, monitoring at the run's log_every).
    compute_s : float
        Seconds per round of the worker steps (the slowest host's, as the engine reports them).
    rounds : int
        Rounds timed (after the warm-up).
    dense : bool
        tau = 1 (every block sent: no draw).
    """

    tau: float
    uplink_bytes: float
    round_s: float
    compute_s: float
    rounds: int
    dense: bool = False


@dataclass(frozen=True)
class RoundCost:
    """Fit (1) of the module docstring: seconds per round = latency_s + uplink bytes x seconds_per_byte.

    Attributes
    ----------
    latency_s : float
        Intercept a (s): what a round costs with an empty message.
    seconds_per_byte : float
        Slope s (s/B); 0 when the probes cannot tell (one message size, or a slope below 0, see ``note``).
    residual_rel : float
        Root mean square of (measured - fitted) / measured over the probes of the line (tau < 1; 0 with two).
    probes : list of Probe
    note : str
    dense_round_s : float or None
        The measured seconds per round at tau = 1 (its own code path), used for tau = 1; None: not probed (then
        tau = 1 is a point on the line).
    """

    latency_s: float
    seconds_per_byte: float
    residual_rel: float
    probes: list = field(default_factory=list)
    note: str = ""
    dense_round_s: float | None = None

    @property
    def bandwidth_Bps(self) -> float:
        """Effective bandwidth 1/s in B/s (inf for a zero slope)."""
        return math.inf if self.seconds_per_byte <= 0 else 1.0 / self.seconds_per_byte

    def round_s(self, uplink_bytes: float, dense: bool = False) -> float:
        """Predicted seconds of a round sending ``uplink_bytes`` (all workers); ``dense``: at tau = 1."""
        if dense and self.dense_round_s is not None:
            return self.dense_round_s
        return self.latency_s + self.seconds_per_byte * uplink_bytes

    def as_dict(self) -> dict:
        """Plain values for JSON (``bandwidth_Bps`` None for a zero slope: strict JSON has no infinity)."""
        return {"latency_s": self.latency_s, "seconds_per_byte": self.seconds_per_byte,
                "bandwidth_Bps": self.bandwidth_Bps if math.isfinite(self.bandwidth_Bps) else None,
                "dense_round_s": self.dense_round_s, "residual_rel": self.residual_rel, "note": self.note,
                "probes": [asdict(p) for p in self.probes]}


def fit_round_cost(probes: list[Probe]) -> RoundCost:
    """Least-squares fit of seconds per round = a + s x bytes over the tau < 1 probes (numpy.polyfit); the tau = 1
    probes' mean round is ``dense_round_s`` (all probes are on the line when none has tau < 1).

    One distinct message size gives s = 0 and a = the mean; a slope below 0 (the message cost below the timing
    noise) is refit as s = 0, a = the mean, and says so in ``note``.

    Raises
    ------
    ValueError
        No probe.
    """
    if not probes:
        raise ValueError("fit_round_cost needs at least one probe")
    sparse = [p for p in probes if not p.dense]
    dense = [p.round_s for p in probes if p.dense]
    line = sparse or list(probes)
    x = np.array([p.uplink_bytes for p in line], dtype=float)
    y = np.array([p.round_s for p in line], dtype=float)
    note = ""
    if np.unique(x).size < 2:
        a, s = float(y.mean()), 0.0
        note = "one message size probed: the round cost is taken as constant"
    else:
        s, a = (float(v) for v in np.polyfit(x, y, 1))
        if s < 0:
            a, s = float(y.mean()), 0.0
            note = "the fitted slope was below 0 (the message cost is below the timing noise): constant round cost"
        elif a < 0:
            a = 0.0
            s = float(np.dot(x, y) / np.dot(x, x))
            note = "the fitted intercept was below 0: refit through the origin"
    fitted = a + s * x
    residual = float(np.sqrt(np.mean(((y - fitted) / y) ** 2)))
    return RoundCost(latency_s=a, seconds_per_byte=s, residual_rel=residual, probes=list(probes), note=note,
                     dense_round_s=float(np.mean(dense)) if dense and sparse else None)


@dataclass(frozen=True)
class PlanRow:
    """One configuration of the grid and what the model predicts for it.

    Attributes
    ----------
    tau, tau_m, m, blocks_size : float, int, int, int
        The configuration: tau, blocks sent per worker, number of blocks, block size b.
    predicted_iterations : float
        The theorem's bound's iterations to the target.
    predicted_round_s, predicted_time_s : float
        Seconds per round (the fitted line, plus the codec's offset) and in all.
    predicted_uplink_bytes, uplink_bytes_per_round : float
        Uplink bytes (all workers) in all and per round.
    bound_theorem, bound_source : str
        The bound used and where it comes from.
    codec : str
        The value codec's label.
    codec_offset_s : float
        Seconds per round the codec adds beyond the line.
    link : dict or None
        With ``plan.link.*``: the :class:`LinkTime` of the row (:func:`predict_time`'s terms), and then
        ``predicted_round_s`` and ``predicted_time_s`` are its ``round_s`` and ``total_s``; None otherwise.
    """

    tau: float
    tau_m: int
    m: int
    blocks_size: int
    predicted_iterations: float
    predicted_round_s: float
    predicted_time_s: float
    predicted_uplink_bytes: float
    uplink_bytes_per_round: float
    bound_theorem: str
    bound_source: str
    codec: str = "float64"
    codec_offset_s: float = 0.0
    link: dict | None = None

    def as_dict(self) -> dict:
        """The row as a plain dict of its fields."""
        return asdict(self)


@dataclass(frozen=True)
class SkippedRow:
    """A configuration of the grid the theory gives no iteration count for, and why."""

    tau: float
    tau_m: int
    m: int
    blocks_size: int
    reason: str
    codec: str = "float64"

    def as_dict(self) -> dict:
        """The row as a plain dict of its fields."""
        return asdict(self)


def why_no_count(bound, target: float, predicted: float) -> str | None:
    """None if ``predicted`` (the bound's iterations to ``target``) is a finite count, else why there is none."""
    from .theory.bound import NoBound

    if math.isfinite(predicted):
        return None
    if isinstance(bound, NoBound):
        return f"no bound: {bound.theorem}"
    if not bound.applicable:
        limit = bound.gamma_max if bound.gamma_max is not None else bound.gamma_theory
        return f"bound inapplicable: gamma = {bound.gamma:.4g} is above the gamma <= {limit:.4g} of {bound.theorem}"
    if bound.neighbourhood >= target:
        return (f"the bound's neighbourhood {bound.neighbourhood:.3e} is above tol x r_0 = {target:.3e}: "
                f"no iteration count to eps ({bound.theorem})")
    return f"the bound does not contract (rate {bound.rate:.6g}): no iteration count to eps ({bound.theorem})"


def codec_offset(cost: RoundCost, probe: Probe) -> float:
    """What a round with this codec costs beyond the line of ``cost`` at its bytes (s): encoding on the workers,
    decoding on the master; ``probe`` is a round of the codec at tau < 1 (its bytes already on the line)."""
    return float(probe.round_s - cost.round_s(probe.uplink_bytes, dense=probe.dense))


def plan_row(setup, tol: float, cost: RoundCost, blocks_size: int, offset_s: float = 0.0) -> PlanRow | SkippedRow:
    """The prediction for one built configuration ``setup``.

    Parameters
    ----------
    setup : RunSetup
        The configuration, built (:func:`isparse.runsetup.build`).
    tol : float
        The target: ||x - x*||^2 <= tol r_0.
    cost : RoundCost
        The fitted seconds-per-round line (:func:`fit_round_cost`).
    blocks_size : int
        The block size b, for the row.
    offset_s : float
        The codec's :func:`codec_offset` in seconds, added to the round predicted from the line (0 for the codec
        the line was measured with).

    Returns
    -------
    PlanRow or SkippedRow
        ``predicted_iterations`` is ``setup.bound.iterations_to(tol x r_0)``, what ``isparse-run`` logs as
        ``predicted_iterations`` (with the bound's omega for an unbiased codec); a NaN or infinite count gives a
        :class:`SkippedRow` with the reason.
    """
    method, d = setup.method, setup.problem.d
    r0 = float(np.sum((setup.x0 - setup.reference.x_star) ** 2))
    target = tol * r0
    predicted = setup.bound.iterations_to(target)
    common = dict(tau=float(method.tau), tau_m=int(method.tau_m), m=int(method.blocks.m), blocks_size=int(blocks_size),
                  codec=codec_label(method.codec))
    why = why_no_count(setup.bound, target, predicted)
    if why is not None:
        return SkippedRow(**common, reason=why)
    per_round = uplink_bytes_per_round(method.n, d, method.blocks.m, method.tau_m, method.sends_ids, method.codec)
    round_s = max(cost.round_s(per_round, dense=method.tau_m == method.blocks.m) + offset_s, 0.0)
    return PlanRow(**common, codec_offset_s=float(offset_s), predicted_iterations=float(predicted), predicted_round_s=round_s,
                   predicted_time_s=float(predicted) * round_s, predicted_uplink_bytes=float(predicted) * per_round,
                   uplink_bytes_per_round=per_round, bound_theorem=setup.bound.theorem,
                   bound_source=setup.bound.source)


def recommend(rows: list[PlanRow]) -> PlanRow | None:
    """The row with the smallest predicted time to eps (ties: the fewer uplink bytes); None without rows."""
    if not rows:
        return None
    return min(rows, key=lambda r: (r.predicted_time_s, r.predicted_uplink_bytes))


# -- the time model of a link (plan.link.*) ------------------------------------------------------------------------
#: seconds per round a network round trip adds to the in-process floor when the probes ran in this process
#: (engine=inprocess): the bare Dask actor round trip of docs/benchmarks.md item 2 (3.2-3.6 ms, measured 2026-12-02
#: with ``python -m benchmarks --only 2``), rounded to 3.5 ms
ROUND_TRIP_S = 3.5e-3
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


def _message_bytes(values: float, ids: float, codec=None) -> float:
    """Bytes of one message of ``values`` values on average (the codec's bits between the two whole counts
    around it, linearly) and ``ids`` block ids of 4 B."""
    if codec is None:
        value_bytes = values * VALUE_BYTES
    else:
        lo = math.floor(values)
        bits = codec.bits(np.array([lo, lo + 1], np.int64)).astype(np.float64)
        value_bytes = (bits[0] + (values - lo) * (bits[1] - bits[0])) / 8.0
    return float(value_bytes + ids * BLOCK_ID_BYTES)


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
        latency_s + up_s + down_s + compute_s.
    iterations : float
        Rounds to eps.
    total_s : float
        iterations x round_s: the predicted time to eps.
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
                 down_burst_bytes: float = 0.0, down_message_bytes: float | None = None) -> LinkTime:
    """Predicted time to eps on hosts behind links of given rates: latency + up + down + compute per round, times
    the rounds to eps.

    The model, per round (hosts work in parallel, so each direction costs what its slowest host's link takes)::

        round_s = latency_s
                + max over hosts h of ((uplink bytes of h - up_burst_bytes)+ x 8 / up_bps[h])           (up_s)
                + max over hosts h of ((d x down_value_bytes - down_burst_bytes)+ x 8 / down_bps[h])    (down_s)
                + compute_s
        total_s = iterations x round_s

(x goes dense to every host; (b)+ = max(b, 0).) A link is a token bucket (rate, burst), the standard description
of a shaped link (a tc ``tbf``'s ``rate`` and ``burst``): after an idle gap the first ``burst`` bytes of a message
cross at line speed, the rest at the rate. The bucket refills between rounds (a round's other terms are longer than
burst / rate wherever the burst matters), so each round's message in each direction gets the whole burst.

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
        one per host (``pipeline.cluster.emulated.rate_bits`` reads a tc rate such as ``10mbit`` as 1e7).
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
        ``pipeline.cluster.emulated.bucket_bytes`` of the rate: 5 ms of traffic, at least 8 kB).

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
    if latency_s < 0 or compute_s < 0:
        raise ValueError(f"latency_s and compute_s must be >= 0; got {latency_s}, {compute_s}")
    if not (up_burst_bytes >= 0 and down_burst_bytes >= 0):
        raise ValueError(f"up_burst_bytes and down_burst_bytes must be >= 0; got {up_burst_bytes}, {down_burst_bytes}")
    loads = workers_per_host(n, hosts)
    ups, downs = _per_host(up_bps, hosts, "up_bps"), _per_host(down_bps, hosts, "down_bps")
    up_bytes = [host_uplink_bytes(d, m, tau_m, k, aggregate, send_ids, codec) for k in loads]
    per_message = float(d * down_value_bytes) if down_message_bytes is None else float(down_message_bytes)
    down_bytes = [per_message if k > 0 else 0.0 for k in loads]
    up_s = max(max(b - up_burst_bytes, 0.0) * 8.0 / r for b, r in zip(up_bytes, ups))
    down_s = max(max(b - down_burst_bytes, 0.0) * 8.0 / r for b, r in zip(down_bytes, downs))
    round_s = float(latency_s) + up_s + down_s + float(compute_s)
    return LinkTime(latency_s=float(latency_s), up_s=up_s, down_s=down_s, compute_s=float(compute_s),
                    round_s=round_s, iterations=float(iterations), total_s=float(iterations) * round_s,
                    up_bytes_per_host=max(up_bytes), down_bytes_per_host=max(down_bytes),
                    uplink_bytes_per_round=float(sum(up_bytes)), hosts=int(hosts), workers_per_host=max(loads),
                    aggregate=aggregate)


def scaled_iterations(bound_iterations: float, reference_bound: float, reference_measured: float) -> float:
    """The bound's count at a configuration scaled by a measured run: ``bound_iterations x reference_measured /
    reference_bound``.

    The theorems' counts are 2-3x conservative but their dependence on tau and omega is accurate (the module
    docstring), so one measured run to eps (``reference_measured`` rounds, at a configuration whose bound gives
    ``reference_bound``) fixes the common factor.

    Parameters
    ----------
    bound_iterations : float
        The bound's iterations to eps at the configuration predicted.
    reference_bound : float
        The bound's iterations to the same eps at the measured configuration (> 0, finite).
    reference_measured : float
        The rounds the measured run took to eps (> 0).

    Returns
    -------
    float

    Raises
    ------
    ValueError
        ``reference_bound`` not a positive finite number, or ``reference_measured`` not positive.
    """
    if not (math.isfinite(reference_bound) and reference_bound > 0) or not reference_measured > 0:
        raise ValueError(f"scaled_iterations needs a positive finite reference bound and a positive measured count; "
                         f"got {reference_bound}, {reference_measured}")
    return float(bound_iterations) * float(reference_measured) / float(reference_bound)


def bound_iterations(setup, tol: float) -> float:
    """The bound's iterations to ``tol x r_0`` of a built configuration (``setup.bound.iterations_to``; what
    ``isparse-run`` logs as ``predicted_iterations``; NaN or inf where the theory gives no count, :func:`why_no_count`).

    Parameters
    ----------
    setup : RunSetup
        :func:`isparse.runsetup.build`'s result.
    tol : float
        The target: ||x - x*||^2 <= tol r_0.

    Returns
    -------
    float
    """
    r0 = float(np.sum((setup.x0 - setup.reference.x_star) ** 2))
    return float(setup.bound.iterations_to(tol * r0))


def predict_setup_time(setup, *, hosts: int, up_bps, down_bps, latency_s: float, compute_s: float,
                       iterations: float | None = None, tol: float | None = None,
                       reference: tuple | None = None, aggregate: str = "worker", up_burst_bytes: float = 0.0,
                       down_burst_bytes: float = 0.0) -> LinkTime:
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
                        down_message_bytes=down_message_bytes(method))


def down_message_bytes(method) -> float | None:
    """Bytes of one round's downlink message to a host with the method's compressed downlink (None: dense x)."""
    down = getattr(method, "downlink", None)
    return None if down is None else down.bytes_per_copy


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
    """

    latency_s: float
    compute_per_worker_s: float
    rounds: int

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
    ``benchmarks/crossover.py`` does on ``cluster=emulated``).

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
    a, b = recs[le], recs[le + timed]
    compute = (b.get("time_compute_s", 0.0) - a.get("time_compute_s", 0.0)) / timed
    rounds_s = ((b["wall_s"] - b.get("time_monitor_s", 0.0)) - (a["wall_s"] - a.get("time_monitor_s", 0.0))) / timed
    # time_compute_s is the slowest host's (in-process: one host, "inprocess", carrying all n)
    hosts = list(pool.placement.values()) if pool is not None else ["inprocess"] * int(setup.method.n)
    per = compute / max(hosts.count(h) for h in set(hosts))
    return RoundTerms(latency_s=max(rounds_s - compute, 0.0) + float(round_trip_s), compute_per_worker_s=per,
                      rounds=timed)
