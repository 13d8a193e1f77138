"""Counter-based random draws: every draw is a function of (seed, stream, logical worker i, iteration t) alone.

The blocks U_i^t that worker i sends at iteration t (a tau*m-nice sampling: exactly tau*m of the m
blocks, uniformly among all such sets, independently across workers and iterations; arXiv:1901.09437,
section 2; docs/algorithms.md §1) are drawn from numpy's Philox4x64 counter-based generator,
keyed by the run's seed, with the 256-bit counter set to (position, t, attempt, stream). Worker i
owns the positions [i Q, (i + 1) Q) of that counter for iteration t, so

- the draws of worker i do not depend on where it runs, on how many hosts there are, or on which
  other workers share its host: a host draws for a contiguous run of workers with one counter set;
- resuming, and replaying a recovered worker, need no stored stream state: only (seed, i, t);
- the master recomputes every worker's block ids itself, so messages carry values only.

Streams (the last counter word) separate the purposes: block ids, the example indices of
stochastic methods, IBGD's Bernoulli coins, the streams all workers share (shared-data ISAGA's
example indices, shared-block BCD's blocks), and a random codec's draws (``isparse.compression.codecs``: one uniform per
value of worker i's message, independent of its block ids).
"""

from __future__ import annotations

import numpy as np

#: the counter's last word: one independent stream per purpose
BLOCKS, EXAMPLES, COINS, SHARED_EXAMPLES, SHARED_BLOCKS, CODEC = 0, 1, 2, 3, 4, 5
#: the master's downlink draws (EF21-P, ``isparse.compression.downlink``) use the same streams shifted by this much
#: (:meth:`Sampler.downlink`): independent of every worker's uplink draws
DOWNLINK_STREAMS = 8
#: below this fraction size/m a subset is drawn by rejecting repeats of 2*size uniform indices, above it by
#: the size smallest of m uniform keys: both cost O(size) per worker and iteration
_KEYS_ABOVE = 1.0 / 16.0
#: the most uniform keys one call of ``Sampler.subsets``' keys path draws at once (whole workers' sets: at least one)
_KEYS_PER_CALL = 1 << 20
_SCALE53 = 2.0 ** -53


class Sampler:
    """Draws keyed by (seed, stream, worker, iteration), vectorized over the workers of a host
    (arXiv:1901.09437, section 2: each worker's independent tau*m-nice sampling; docs/algorithms.md §1).

    Every method takes ``stream`` (one of the module's stream constants), ``ids`` (the logical workers, shape (k,))
    and ``t`` (the iteration), and returns one row per worker: row k holds worker ``ids[k]``'s draws, the same numbers
    whatever the other ids are.

    Parameters
    ----------
    seed : int
        The run's seed (>= 0). The Philox key is ``SeedSequence(seed).generate_state(2, uint64)``.

    Examples
    --------
    >>> s = Sampler(0)
    >>> U = s.subsets(BLOCKS, np.arange(4), t=7, m=30, size=8)   # U[k]: the 8 sorted block ids of worker k
    >>> U.shape
    (4, 8)
    """

    def __init__(self, seed: int, base: int = 0):
        self.seed, self.base = int(seed), int(base)
        self._key = np.random.SeedSequence(self.seed).generate_state(2, np.uint64)
        self._bg = np.random.Philox(key=self._key)
        self._zero4 = np.zeros(4, np.uint64)

    def __reduce__(self):   # the key is derived: pickle the seed only
        return (Sampler, (self.seed, self.base))

    def __eq__(self, other):
        return isinstance(other, Sampler) and (other.seed, other.base) == (self.seed, self.base)

    def __hash__(self):
        return hash(("Sampler", self.seed, self.base))

    def downlink(self) -> "Sampler":
        """The sampler of the master's downlink draws: the same seed, every stream shifted by ``DOWNLINK_STREAMS``,
        so its draws are independent of this sampler's and a function of (seed, t) alone."""
        return Sampler(self.seed, self.base + DOWNLINK_STREAMS)

    # -- raw draws ------------------------------------------------------------------------------
    def _raw(self, stream: int, start: int, t: int, attempt: int, count: int) -> np.ndarray:
        """``count`` uint64 words from counter (start, t, attempt, stream) on."""
        counter = np.array([start, t, attempt, stream + self.base], np.uint64)
        self._bg.state = {"bit_generator": "Philox", "state": {"counter": counter, "key": self._key},
                          "buffer": self._zero4, "buffer_pos": 4, "has_uint32": 0, "uinteger": 0}
        return self._bg.random_raw(count)

    def uniforms(self, stream: int, ids, t: int, count: int, attempt: int = 0) -> np.ndarray:
        """``count`` uniform doubles in [0, 1) per worker, 53 random bits each, shape (k, count); ``attempt`` is
        the counter's third word (a fresh region for a redraw)."""
        ids = np.asarray(ids, dtype=np.int64)
        q = -(-int(count) // 4)                      # counter values per worker (4 words each)
        if self._contiguous(ids):
            out = self._raw(stream, int(ids[0]) * q, t, attempt, ids.size * 4 * q).reshape(ids.size, 4 * q)
        else:                                        # one counter set per contiguous run of ids
            out = np.empty((ids.size, 4 * q), np.uint64)
            breaks = np.flatnonzero(np.diff(ids) != 1) + 1
            for lo, hi in zip([0, *breaks.tolist()], [*breaks.tolist(), ids.size]):
                out[lo:hi] = self._raw(stream, int(ids[lo]) * q, t, attempt, (hi - lo) * 4 * q).reshape(hi - lo, 4 * q)
        bits = out[:, :count] >> np.uint64(11)
        del out                                      # the raw words, freed before the doubles are made
        u = bits.astype(np.float64)
        del bits
        u *= _SCALE53
        return u

    def _contiguous(self, ids: np.ndarray) -> bool:
        """Whether ids are i0, i0 + 1, ...; the answer for the last ids seen is remembered (a host passes the same
        ids every iteration)."""
        key = ids.tobytes()
        last = self.__dict__.get("_last_ids")
        if last is not None and last[0] == key:
            return last[1]
        out = bool(ids.size and ids[-1] - ids[0] == ids.size - 1 and (ids.size < 3 or np.all(np.diff(ids) == 1)))
        self._last_ids = (key, out)
        return out

    # -- samplings ------------------------------------------------------------------------------
    def subsets(self, stream: int, ids, t: int, m, size: int, *, ordered: bool = False) -> np.ndarray:
        """A ``size``-nice sampling of range(m) per worker: ``size`` distinct values, every such set equally likely,
        int64 of shape (k, size), sorted (``ordered``: in draw order, an ordered sample). ``m`` may be an array, one
        ground set
        size per worker.

        Raises
        ------
        ValueError
            ``size`` is larger than the smallest ``m``.

        Notes
        -----
        ``size == m``: every value, no draw. ``size > m/16``: the ``size`` smallest of m uniform keys.
        Otherwise the first ``size`` distinct values of 2*size uniform draws from range(m) (a
        sequential draw without replacement, exact by exchangeability); a worker whose draws hold
        fewer distinct values starts again on a fresh counter region with twice the draws, which
        keeps every set equally likely (the event is symmetric in the values).
        """
        ids = np.asarray(ids, dtype=np.int64)
        size = int(size)
        scalar = np.ndim(m) == 0
        mm = np.full(ids.shape, m, np.int64) if scalar else np.asarray(m, dtype=np.int64)
        if size > int(mm.min(initial=size)):
            raise ValueError(f"cannot draw {size} distinct values out of {int(mm.min())}")
        if scalar and size == int(m) and not ordered:
            return np.broadcast_to(np.arange(size), (ids.size, size)).copy()
        if scalar and size > _KEYS_ABOVE * int(m):
            # the keys of a few workers at a time (at most _KEYS_PER_CALL of them): the transient is O(m), not O(k m)
            # (the master draws every worker's set: 96 MiB at k = 4, m = 2^20 in one call); each worker's keys are
            # its own counter region, so the sets are the same however the workers are grouped
            out = np.empty((ids.size, size), np.int64)
            step = max(1, _KEYS_PER_CALL // int(m))
            for lo in range(0, ids.size, step):
                keys = self.uniforms(stream, ids[lo:lo + step], t, int(m))
                part = np.argpartition(keys, size - 1, axis=1)[:, :size]
                if ordered:                          # in the order of the keys: a uniform ordered sample
                    out[lo:lo + step] = np.take_along_axis(part, np.argsort(np.take_along_axis(keys, part, 1), axis=1), 1)
                else:
                    out[lo:lo + step] = np.sort(part, axis=1)
            return out
        if size == 1:                                # one value: the first draw (the rejection path's result)
            u = self.uniforms(stream, ids, t, 2)[:, :1]
            return np.floor(u * mm[:, None]).astype(np.int64)
        out = np.empty((ids.size, size), np.int64)
        todo, attempt, draws = np.arange(ids.size), 0, 2 * size
        while todo.size:
            cand = np.floor(self.uniforms(stream, ids[todo], t, draws, attempt) * mm[todo, None]).astype(np.int64)
            got, ok = _first_distinct(cand, size)
            out[todo[ok]] = got
            todo, attempt, draws = todo[~ok], attempt + 1, 2 * draws
        return out if ordered else np.sort(out, axis=1)

    def coins(self, stream: int, ids, t: int, p: float) -> np.ndarray:
        """Independent Bernoulli(p) coins, one per worker, bool of shape (k,)."""
        return self.uniforms(stream, ids, t, 1)[:, 0] < p


#: up to this many draws per row, :func:`_first_distinct` compares draws pairwise instead of sorting
_PAIRWISE_MAX = 16
_EARLIER = {}


def _earlier(R: int) -> np.ndarray:
    """(R, R) bool, [j, i] = i < j."""
    e = _EARLIER.get(R)
    if e is None:
        e = _EARLIER[R] = np.tri(R, R, -1, dtype=bool)
    return e


def _first_distinct(cand: np.ndarray, size: int):
    """(first ``size`` distinct values of each row in order, rows that had that many); shapes (ok rows, size), (k,)."""
    k, R = cand.shape
    if size == 2:                                    # the first value, and the first later draw that differs
        rest = cand[:, 1:] != cand[:, :1]
        j = rest.argmax(axis=1)
        r = np.arange(k)
        ok = rest[r, j]
        got = np.empty((k, 2), cand.dtype)
        got[:, 0], got[:, 1] = cand[:, 0], cand[r, j + 1]
        return (got if ok.all() else got[ok]), ok
    if R <= _PAIRWISE_MAX:                           # few draws: compare every draw with the earlier ones
        keep = ~np.any((cand[:, :, None] == cand[:, None, :]) & _earlier(R), axis=2)
        rank = np.cumsum(keep, axis=1)
        ok = rank[:, -1] >= size
        if ok.all():
            return cand[keep & (rank <= size)].reshape(-1, size), ok
        sel = keep[ok] & (rank[ok] <= size)
        return cand[ok][sel].reshape(-1, size), ok
    order = np.argsort(cand, axis=1, kind="stable")
    s = np.take_along_axis(cand, order, axis=1)
    new = np.ones((k, R), bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]              # the first (earliest) of equal values is kept
    keep = np.empty_like(new)
    np.put_along_axis(keep, order, new, axis=1)
    rank = np.cumsum(keep, axis=1)
    ok = rank[:, -1] >= size
    sel = keep[ok] & (rank[ok] <= size)
    return cand[ok][sel].reshape(-1, size), ok
