"""What the engines do with a method beyond its four steps: a host's one sum for its workers' messages
(``messages.aggregate=host``), a copy with another seed, and a master that forgets its last round's sets.
"""

from __future__ import annotations

import copy

import numpy as np

from ..compression.messages import HostSums, Messages
from ..compression.sampling import Sampler
from ..methods.contract import union


def sums_on_host(method, batch) -> bool:
    """Whether a host may send one sum for its ``batch``: the master needs only the sum (``traits.master_sums``),
    the run is synchronous, no block ids travel and the values are float64 (a sum of coded values is not a coded
    value: a host with a lossy codec sends its workers' coded messages)."""
    return (method.traits.master_sums and not method.traits.asynchronous and isinstance(batch, Messages)
            and batch.blocks is None and batch.codec.exact)


def host_sums(method, batch: Messages, groups: list) -> HostSums:
    """The sums the hosts send for their workers' messages of one round: each on the union of its workers'
    coordinates, ascending (what ``Box.aggregate`` scatters back).

    ``groups`` are consecutive runs of ``batch.workers``, one per host. Each sum adds the workers' values
    coordinate by coordinate in worker order (the order of the master's scatter-add), so a host of one worker sends
    its message's values unchanged.
    """
    d = method.blocks.d
    c = method._coords_of(batch)
    ends = np.cumsum(batch.counts.astype(np.int64))
    sums, start, w = [], 0, 0
    for g in groups:
        w += len(g)
        stop = int(ends[w - 1]) if w else 0
        cg, vg = c[start:stop], batch.values[start:stop]
        sums.append(np.bincount(cg, weights=vg, minlength=d)[union(cg, d)])
        start = stop
    return HostSums(list(groups), sums, batch.t)


def with_seed(method, seed: int):
    """A shallow copy of ``method`` with another seed and its own sampler (a new set of random draws)."""
    other = copy.copy(method)
    other.seed, other.sampler, other._memo = int(seed), Sampler(int(seed)), None
    return other


def forget_round(method) -> None:
    """Drop the method's remembered sampled sets and their coordinates of the last round (three arrays of tau m n
    entries: 24 MiB at d = 2^20, n = 4, tau = 1/4), so a master that redraws them next round does not hold both
    rounds' at once. The Dask engine calls it between rounds; the in-process engine keeps them (its workers and
    master share one round's sets, and dropping them cost its runs 5-9 %)."""
    method._memo = method._coords_memo = None


__all__ = ["forget_round", "host_sums", "sums_on_host", "with_seed"]
