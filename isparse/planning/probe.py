"""The probe fit: what a round costs as a function of its uplink bytes, measured on a few real rounds, and the
theory's iterations to eps; a plan row is their product (``isparse.planning``'s docstring)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..compression.choices import codec_label

#: bytes per value and per block id in a message (isparse.compression.messages)
VALUE_BYTES, BLOCK_ID_BYTES = 8, 4


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
    start_s : float
        Seconds the warm-up rounds took beyond as many timed ones (a run's start: ``RoundTerms.start_s``).
    """

    tau: float
    uplink_bytes: float
    round_s: float
    compute_s: float
    rounds: int
    dense: bool = False
    start_s: float = 0.0


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
        ``predicted_round_s`` and ``predicted_time_s`` are its ``round_s`` and ``total_s``, and
        ``predicted_uplink_bytes`` is its ``iterations`` (calibrated) x ``uplink_bytes_per_round``; None otherwise.
    iterations_source : str
        ``bound``: ``predicted_iterations`` is the bound's count; ``measured``: the theory gives none (DIANA, a step
        above the bound's), and it is the rounds one in-process run of the row took to the target
        (``bound_theorem`` then says why the theory gives no count).
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
    iterations_source: str = "bound"

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
    from ..theory.bound import NoBound

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


def plan_row(setup, tol: float, cost: RoundCost, blocks_size: int, offset_s: float = 0.0,
             measure=None) -> PlanRow | SkippedRow:
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
    measure : callable, optional
        ``measure(setup)`` -> (rounds, converged) of a run of ``setup`` to the target: called where the theory gives
        no count, and a converged run's rounds are the row's iterations (``iterations_source="measured"``).

    Returns
    -------
    PlanRow or SkippedRow
        ``predicted_iterations`` is ``setup.bound.iterations_to(tol x r_0)``, what ``isparse-run`` logs as
        ``predicted_iterations`` (with the bound's omega for an unbiased codec), or the measured rounds; a NaN or
        infinite count that was not measured to the target gives a :class:`SkippedRow` with the reason.
    """
    method, d = setup.method, setup.problem.d
    r0 = float(np.sum((setup.x0 - setup.reference.x_star) ** 2))
    target = tol * r0
    predicted = setup.bound.iterations_to(target)
    common = dict(tau=float(method.tau), tau_m=int(method.tau_m), m=int(method.blocks.m), blocks_size=int(blocks_size),
                  codec=codec_label(method.codec))
    why = why_no_count(setup.bound, target, predicted)
    source, theorem = "bound", setup.bound.theorem
    if why is not None and measure is not None:
        rounds, converged = measure(setup)
        if not converged:
            return SkippedRow(**common, reason=f"{why}; and a run of it did not reach the target in {rounds} rounds "
                                               f"(max_iter)")
        predicted, source, theorem, why = float(rounds), "measured", why, None
    if why is not None:
        return SkippedRow(**common, reason=why)
    per_round = uplink_bytes_per_round(method.n, d, method.blocks.m, method.tau_m, method.sends_ids, method.codec)
    round_s = max(cost.round_s(per_round, dense=method.tau_m == method.blocks.m) + offset_s, 0.0)
    return PlanRow(**common, codec_offset_s=float(offset_s), predicted_iterations=float(predicted), predicted_round_s=round_s,
                   predicted_time_s=float(predicted) * round_s, predicted_uplink_bytes=float(predicted) * per_round,
                   uplink_bytes_per_round=per_round, bound_theorem=theorem,
                   bound_source=setup.bound.source, iterations_source=source)


def recommend(rows: list[PlanRow]) -> PlanRow | None:
    """The row with the smallest predicted time to eps (ties: the fewer uplink bytes); None without rows."""
    if not rows:
        return None
    return min(rows, key=lambda r: (r.predicted_time_s, r.predicted_uplink_bytes))


def within_error(rows: list[PlanRow], best: PlanRow | None, rel: float) -> list[PlanRow]:
    """The rows the model cannot tell from ``best``: those whose predicted time's band of +-``rel`` (the model's
    relative rms error, e.g. the round-cost fit's ``residual_rel``) overlaps best's, i.e. predicted time <=
    best's x (1 + rel) / (1 - rel); every row when ``rel`` >= 1. Sorted by predicted time; best left out."""
    if best is None or not rel > 0:
        return []
    limit = math.inf if rel >= 1 else best.predicted_time_s * (1 + rel) / (1 - rel)
    return sorted((r for r in rows if r is not best and r.predicted_time_s <= limit), key=lambda r: r.predicted_time_s)


# -- the time model of a link (plan.link.*) ------------------------------------------------------------------------


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
