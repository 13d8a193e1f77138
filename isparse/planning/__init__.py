"""The planner's model: what a round costs as a function of its bytes, and the theory's iterations to eps.

``isparse-plan`` (pipeline/plan.py; this package is its model: ``grids``, ``probe`` for the probe fit and the
theory's counts, ``links`` for the link-time model) measures a few real rounds of the configured method on the actual engine at
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

from ..compression.choices import CodecChoice, codec_label, resolve_codecs
from .grids import resolve_block_sizes, resolve_tau_grid
from .links import (AGGREGATES, ROUND_TRIP_S, STREAM_ROUND_TRIP_S, LinkTime, RoundTerms, down_message_bytes,
                    expected_union_blocks, host_uplink_bytes, measure_round_terms, predict_setup_time, predict_time,
                    round_trip_for, start_excess_s, workers_per_host)
from .probe import (BLOCK_ID_BYTES, VALUE_BYTES, PlanRow, Probe, RoundCost, SkippedRow, bound_iterations, codec_offset,
                    fit_round_cost, plan_row, recommend, scaled_iterations, uplink_bytes_per_round, why_no_count,
                    within_error)

__all__ = ["AGGREGATES", "BLOCK_ID_BYTES", "ROUND_TRIP_S", "STREAM_ROUND_TRIP_S", "VALUE_BYTES", "CodecChoice",
           "LinkTime", "PlanRow", "Probe",
           "RoundCost", "RoundTerms", "SkippedRow", "bound_iterations", "codec_label", "codec_offset",
           "down_message_bytes", "expected_union_blocks", "fit_round_cost", "host_uplink_bytes",
           "measure_round_terms", "plan_row", "predict_setup_time", "predict_time", "recommend", "round_trip_for", "start_excess_s",
           "resolve_block_sizes",
           "resolve_codecs", "resolve_tau_grid", "scaled_iterations", "uplink_bytes_per_round", "why_no_count",
           "within_error", "workers_per_host"]
