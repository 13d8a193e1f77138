"""Time to ε: the first logged iterate of a run at ε, and the wall time, rounds and bytes it took.

The criterion, on the measure ``on`` of the records (:attr:`~isparse.engines.loop.RunResult.records`):

- ``subopt`` (the default): F(x^t) - F* <= eps (F(x^0) - F*);
- ``dist_sq``: ||x^t - x*||^2 <= eps r_0, r_0 = ||x^0 - x*||^2;

each relative to its value in the record of t = 0. Only logged iterates count: records are made every
``log_every`` iterations (``tracking.log_every``), at the last one and where ``tol`` stops the run, so the first
iterate at ε is found to within ``log_every`` iterations; the rounds, time and bytes are those up to that record.

The time is that of the rounds: :func:`to_eps` returns ``time_s`` = (wall_s - time_monitor_s) of the first record at
ε minus the same of the record of t = 0. ``wall_s`` starts with the master loop (after the cluster start, the data
and the reference solve) and ``time_monitor_s`` is what the monitors took (the objective and the other logged
quantities of every record, the observer that logs them to MLflow, Theorem 7's gradient average), so the monitors,
whose cost follows ``log_every`` and which a deployed system does not run, are not in it. Each round's exchange
(the engine's send, compute and receive), the master step and the byte counting are; so are the checkpoints.

A resumed run (``RunOptions.resume``) continues the counters of its checkpoint: the rounds up to the checkpoint are
timed by the interrupted run, those after by the resumed one; the interrupted run's rounds after its last checkpoint
(computed again), its stop and the restart are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError

#: the measures a criterion may be on (keys of the records)
MEASURES = ("subopt", "dist_sq")
#: the default eps: F - F* <= 1e-6 (F(x^0) - F*) (issue 32's map, and the L-BFGS peer's criterion)
EPS = 1e-6


@dataclass(frozen=True)
class ToEps:
    """What a run took to reach ε (:func:`to_eps`).

    Attributes
    ----------
    eps : float
        ε, relative to the measure at t = 0.
    on : str
        The measure: ``subopt`` or ``dist_sq``.
    threshold : float
        eps x the measure at t = 0.
    rounds : int
        The iteration of the first logged record at ε (``rounds_to_eps``).
    time_s : float
        Seconds of the rounds up to it (``time_to_eps_s``; the module docstring says what is in it).
    uplink_bytes : float
        Cumulative uplink bytes at that record (``uplink_bytes_to_eps``).
    downlink_bytes : float
        Cumulative downlink bytes at that record (``downlink_bytes_to_eps``).
    """

    eps: float
    on: str
    threshold: float
    rounds: int
    time_s: float
    uplink_bytes: float
    downlink_bytes: float

    def metrics(self) -> dict:
        """The run metrics: ``time_to_eps_s``, ``rounds_to_eps``, ``uplink_bytes_to_eps``, ``downlink_bytes_to_eps``."""
        return {"time_to_eps_s": self.time_s, "rounds_to_eps": self.rounds,
                "uplink_bytes_to_eps": self.uplink_bytes, "downlink_bytes_to_eps": self.downlink_bytes}


def rounds_time(record: dict) -> float:
    """The seconds of the rounds up to a record: ``wall_s - time_monitor_s`` (``wall_s`` alone for a record made
    before the loop counted its monitors)."""
    return float(record["wall_s"]) - float(record.get("time_monitor_s", 0.0))


def criterion_text(eps: float, on: str) -> str:
    """The criterion in words, e.g. ``F - F* <= 1e-06 (F(x0) - F*)``."""
    return f"F - F* <= {eps:g} (F(x0) - F*)" if on == "subopt" else f"||x - x*||^2 <= {eps:g} r0"


def to_eps(records: list[dict], eps: float = EPS, on: str = "subopt") -> ToEps | None:
    """The first logged record at ε and what the run took to get there; None if no logged record reaches it.

    ``records`` start at t = 0 (a resumed run's too: the checkpoint carries them); ``eps`` and ``on`` are the
    module docstring's criterion. A NaN or infinite value never reaches ε.

    Raises
    ------
    ConfigError
        (``eps``, ``eps_on``) eps not a finite number > 0, or ``on`` not a measure.
    ValueError
        ``records`` is empty or its first record is not of t = 0.
    """
    if on not in MEASURES:
        raise ConfigError("eps_on", f"The 'eps_on' parameter must be one of {', '.join(MEASURES)}; got {on!r}.")
    if not (isinstance(eps, (int, float)) and eps > 0 and math.isfinite(eps)):
        raise ConfigError("eps", f"The 'eps' parameter must be a number > 0; got {eps!r}.")
    if not records or records[0]["step"] != 0:
        raise ValueError("to_eps needs the run's records from t = 0")
    first = records[0]
    threshold = eps * float(first[on])
    for rec in records:
        value = float(rec[on])
        if math.isfinite(value) and value <= threshold:
            return ToEps(eps=float(eps), on=on, threshold=threshold, rounds=int(rec["step"]),
                         time_s=rounds_time(rec) - rounds_time(first), uplink_bytes=rec["uplink_bytes"],
                         downlink_bytes=rec["downlink_bytes"])
    return None
