"""Compressors as pieces: what each piece declares, the block sampling as a piece, and ``chain`` (docs/algorithms.md §7).

A :class:`Compressor` C maps a batch of k messages (``values``, worker-major, of ``counts`` values each) to a payload
and back. Its random draws are made outside it (:meth:`Compressor.draw`, counter-based, keyed by (seed, worker,
iteration); ``isparse.compression.sampling``) and passed in, so ``encode(values, counts, u)`` and
``decode(payload, counts)`` are pure functions. Each piece declares, as data, its class and constant:

============ ================================================ =====================================
kind         constant                                         memory_rate(q)
============ ================================================ =====================================
exact        C(v) = v (omega 0, alpha 1)                      1
unbiased     E C(v) = v, E||C(v) - v||^2 <= omega(q) ||v||^2  1/(1 + omega(q))
contractive  E||C(v) - v||^2 <= (1 - alpha(q)) ||v||^2        1
biased       none                                             1
============ ================================================ =====================================

for a message v of q values. ``memory_rate`` is the share of a decoded value a memory (ISEGA's h, DIANA's shifts)
moves by: 1/(1 + omega) keeps an unbiased piece's memory contracting (DIANA's shift rate).

:class:`IndependentBlocks` is the paper's sampling as a piece: each worker keeps an independent tau*m-nice set U of
its message's m blocks (stream ``BLOCKS``) and the receiver scales by 1/tau, so C(v) = (1/tau) v_U (zero off U):
E C(v) = v and E||C(v) - v||^2 = sum_j [tau (1/tau - 1)^2 + (1 - tau)] v_j^2 = (1/tau - 1) ||v||^2, every
coordinate being kept with probability tau: omega = 1/tau - 1 = m/(tau m) - 1, and exact at tau = 1.

:func:`chain` composes pieces (optax's ``chain``): ``chain(IndependentBlocks(tau_m, m), codec)`` is the uplink
C(v) = (1/tau) Q(v_U). Every piece but the last is a :class:`Selection` (it passes on a part of its message, which
the next piece codes); the last codes what reaches it. The chain's constants come from the composition rule
(:class:`Chain`), not from the methods.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .sampling import BLOCKS

#: the classes a piece declares (``Compressor.kind``)
KINDS = ("exact", "unbiased", "contractive", "biased")


class Compressor:
    """A piece: pure ``encode``/``decode`` of a batch of messages, its class and constant, its wire size.

    The arguments shared by the methods (``values``, ``counts``, ``q``, ``u``, ``sampler``, ``ids``, ``t``) are those of
    a batch of messages (docs/glossary.md).

    Attributes
    ----------
    kind : {"exact", "unbiased", "contractive", "biased"}
        The class the piece declares (module docstring).
    stream : int or None
        The ``isparse.compression.sampling`` stream its draws come from; None for a deterministic piece.
    """

    kind = "biased"
    stream: int | None = None

    @property
    def random(self) -> bool:
        """Encoding takes random draws (:meth:`draw`)."""
        return self.stream is not None

    @property
    def exact(self) -> bool:
        """C(v) = v."""
        return self.kind == "exact"

    @property
    def unbiased(self) -> bool:
        """E C(v) = v for every v (an exact piece too)."""
        return self.kind in ("exact", "unbiased")

    def omega(self, q: int) -> float | None:
        """omega of E||C(v) - v||^2 <= omega ||v||^2 for a message of ``q`` values: 0 for an exact piece,
        None unless the piece is unbiased."""
        return 0.0 if self.exact else None

    def alpha(self, q: int) -> float | None:
        """alpha of E||C(v) - v||^2 <= (1 - alpha) ||v||^2 for a message of ``q`` values: 1 for an exact
        piece, None unless the piece is contractive."""
        return 1.0 if self.exact else None

    def memory_rate(self, q: int) -> float:
        """The share of a decoded value a memory moves by: 1/(1 + omega(q)) for a lossy unbiased piece, else 1."""
        if self.kind == "unbiased":
            return 1.0 / (1.0 + self.omega(q))
        return 1.0

    def out_size(self, q):
        """The most values the piece passes on from a message of q values (int or int array): q for a value codec."""
        return q

    def bits(self, counts: np.ndarray) -> np.ndarray:
        """Bits on the wire of each message, int64 of the shape of ``counts`` (this default, 0, is a selection's)."""
        return np.zeros(np.shape(counts), np.int64)

    def draw(self, sampler, ids, t: int, counts: np.ndarray, q: int):
        """The piece's draws for the messages of workers ``ids`` at iteration ``t``: what :meth:`encode`
        takes as ``u``, or None for a deterministic piece.

        ``q``, the most values a message can have, fixes each worker's share of the counter, so a worker's draws do not
        depend on the other messages of its batch."""
        return None

    def encode(self, values: np.ndarray, counts: np.ndarray, u):
        """The payload of a batch of messages (what travels; :meth:`decode` takes it back)."""
        raise NotImplementedError

    def decode(self, payload, counts: np.ndarray) -> np.ndarray:
        """The float64 values, shape (counts.sum(),), of a batch from its payload."""
        raise NotImplementedError

    def overflow_hint(self) -> str | None:
        """What to add to a divergence error when the piece can turn a large value into inf (None: nothing)."""
        return None


class Selected(NamedTuple):
    """What a :class:`Selection` passes on: the support it kept, the kept values and their counts per message."""

    support: np.ndarray
    values: np.ndarray | None
    counts: np.ndarray


class Selection(Compressor):
    """A piece that keeps a part of each message: its payload is a :class:`Selected`, whose values the next piece of a
    chain codes. It costs no bits itself (the receiver recomputes the support from the draws)."""

    def out_counts(self, counts: np.ndarray, support) -> np.ndarray:
        """The kept values of each message, shape (k,)."""
        raise NotImplementedError


class IndependentBlocks(Selection):
    """The independent tau*m-nice block sampling (arXiv:1901.09437, section 2) with the 1/tau scaling: unbiased,
    omega = m/tau_m - 1.

    Parameters
    ----------
    tau_m : int
        Blocks kept per message, 1 <= tau_m <= m.
    size : int
        Values per block b (the last block of a message of q values may be shorter: m = ceil(q / b)).
    """

    stream = BLOCKS

    def __init__(self, tau_m: int, m: int, size: int = 1):
        self.tau_m, self.m, self.size = int(tau_m), int(m), int(size)
        if not (1 <= self.tau_m <= self.m and self.size >= 1):
            raise ValueError(f"IndependentBlocks needs 1 <= tau_m <= m and size >= 1; got tau_m = {tau_m}, m = {m}, "
                             f"size = {size}")

    def __repr__(self):
        return f"IndependentBlocks(tau_m={self.tau_m}, m={self.m}, size={self.size})"

    def __eq__(self, other):
        return type(other) is type(self) and (other.tau_m, other.m, other.size) == (self.tau_m, self.m, self.size)

    def __hash__(self):
        return hash((type(self).__name__, self.tau_m, self.m, self.size))

    @property
    def tau(self) -> float:
        """tau = tau_m / m."""
        return self.tau_m / self.m

    @property
    def kind(self) -> str:
        """``'exact'`` when tau_m = m (every block is kept), else ``'unbiased'``."""
        return "exact" if self.tau_m == self.m else "unbiased"

    def omega(self, q):
        """omega = m/tau_m - 1, whatever ``q``: each coordinate is kept with probability tau and scaled by 1/tau
        (arXiv:1901.09437, section 2; docs/algorithms.md §7)."""
        return self.m / self.tau_m - 1.0

    def out_size(self, q):
        """min(q, tau_m b), elementwise for an array ``q``."""
        return np.minimum(q, self.tau_m * self.size) if np.ndim(q) else min(int(q), self.tau_m * self.size)

    def draw(self, sampler, ids, t, counts, q):
        """U of each worker: its tau_m sorted block ids (int64, shape (k, tau_m)), a tau*m-nice sampling of the
        m blocks from ``Sampler.subsets`` of stream ``BLOCKS`` (arXiv:1901.09437, section 2; docs/algorithms.md §1)."""
        return sampler.subsets(BLOCKS, ids, t, self.m, self.tau_m)

    def _coords(self, counts, U):
        """(positions in the batch of the kept values, in block order, worker after worker; kept values per worker)."""
        counts = np.asarray(counts, dtype=np.int64)
        q = int(counts[0]) if counts.size else 0
        if np.any(counts != q) or math.ceil(q / self.size) != self.m:
            raise ValueError(f"IndependentBlocks(m={self.m}, size={self.size}) codes messages of one length q with "
                             f"ceil(q / size) = m; got counts {np.unique(counts).tolist()}")
        U = np.asarray(U, dtype=np.int64)
        idx = (U[:, :, None] * self.size + np.arange(self.size)).reshape(U.shape[0], -1)
        keep = idx < q
        pos = (idx + q * np.arange(U.shape[0])[:, None])[keep]
        return pos, keep.sum(axis=1)

    def out_counts(self, counts, support):
        """The number of values kept of each message; a short last block keeps fewer.

        Raises
        ------
        ValueError
            The messages are not all of one length q with ceil(q / b) = m.
        """
        return self._coords(counts, support)[1]

    def encode(self, values, counts, u):
        """Keep the blocks ``u`` of each message: a :class:`Selected` (the kept values worker after worker, in
        block order).

        Raises
        ------
        ValueError
            The messages are not all of one length q with ceil(q / b) = m.
        """
        pos, kept = self._coords(counts, u)
        return Selected(np.asarray(u), np.asarray(values, dtype=np.float64)[pos], kept)

    def decode(self, payload, counts):
        """The kept values times m/tau_m in their places, zero elsewhere."""
        pos, _ = self._coords(counts, payload.support)
        out = np.zeros(int(np.sum(counts)))
        out[pos] = payload.values * (self.m / self.tau_m)
        return out


class Chain(Compressor):
    """The composition of pieces: ``pieces[0]`` acts first; every piece but the last is a :class:`Selection`.

    The composition rule (the pieces' draws independent; q_k the most values reaching piece k, q_0 = q):

    - all pieces exact: exact (the identity);
    - all exact or unbiased: unbiased with 1 + omega = prod_k (1 + omega_k(q_k)). Derivation: for two independent
      unbiased pieces, E C2(C1(v)) = E C1(v) = v, and E||C2(C1 v)||^2 <= (1 + omega_2) E||C1 v||^2 <=
      (1 + omega_2)(1 + omega_1)||v||^2, so E||C2(C1 v) - v||^2 = E||C2(C1 v)||^2 - ||v||^2 <=
      ((1 + omega_1)(1 + omega_2) - 1)||v||^2; induction gives the product. For chain(IndependentBlocks(tau_m, m),
      Q): omega = (1 + omega_Q(tau_m b))/tau - 1 (DIANA's omega_D). A value codec's omega at the values it codes,
      q_k, holds for the blocks kept, since it holds for every message of up to q_k values;
    - exact and contractive pieces, every contractive piece before the last a subset selection (``subset``: it passes
      on v_S, the kept values unscaled; :class:`RandomK`, :class:`TopK`): contractive with alpha = prod_k alpha_k(q_k).
      Derivation: for S the kept set and C2 the rest of the chain, acting on v_S only, the error
      C2(v_S) - v = (C2(v_S) - v_S) - v_{S^c} has its two parts on disjoint supports, so
      E||C2(v_S) - v||^2 = E||C2(v_S) - v_S||^2 + ||v||^2 - E||v_S||^2 <= ||v||^2 - alpha_2 E||v_S||^2
      <= (1 - alpha_1 alpha_2)||v||^2, since E||v_S||^2 = ||v||^2 - E||v_S - v||^2 >= alpha_1 ||v||^2 for a subset
      selection; induction gives the product (one contractive piece among exact ones: its alpha);
    - otherwise: biased (no constant is derived for a contractive piece composed with an unbiased one that is not the
      identity, nor for a biased piece).

    Parameters
    ----------
    *pieces : Compressor
        At least one; a chain among them is flattened.

    Raises
    ------
    ValueError
        No piece.
    TypeError
        A piece before the last that is not a :class:`Selection`.
    """

    def __init__(self, *pieces: Compressor):
        flat = []
        for p in pieces:
            flat.extend(p.pieces if isinstance(p, Chain) else [p])
        if not flat:
            raise ValueError("a chain needs at least one piece")
        for p in flat[:-1]:
            if not isinstance(p, Selection):
                raise TypeError(f"every piece of a chain but the last must be a Selection (it passes on a part of its "
                                f"message); got {p!r} before {flat[-1]!r}")
        self.pieces = tuple(flat)

    def __repr__(self):
        return f"chain({', '.join(map(repr, self.pieces))})"

    def __eq__(self, other):
        return isinstance(other, Chain) and other.pieces == self.pieces

    def __hash__(self):
        return hash(self.pieces)

    @property
    def codec(self) -> Compressor | None:
        """The value codec: the last piece (None when the chain ends with a selection: its values travel as they
        are)."""
        return None if isinstance(self.pieces[-1], Selection) else self.pieces[-1]

    @property
    def tau(self) -> float:
        """The product of the selections' tau (1 without one)."""
        return math.prod(getattr(p, "tau", 1.0) for p in self.pieces)

    @property
    def stream(self):
        """The sampling stream of the first random piece (None when every piece is deterministic)."""
        return next((p.stream for p in self.pieces if p.stream is not None), None)

    @property
    def kind(self) -> str:
        """The chain's class by the composition rule: exact, unbiased, contractive or biased (see the class)."""
        kinds = [p.kind for p in self.pieces]
        if all(k == "exact" for k in kinds):
            return "exact"
        if all(k in ("exact", "unbiased") for k in kinds):
            return "unbiased"
        if all(k in ("exact", "contractive") for k in kinds) and all(
                getattr(p, "subset", False) for p in self.pieces[:-1] if p.kind == "contractive"):
            return "contractive"
        return "biased"

    def sizes(self, q) -> list:
        """q_k, the most values reaching each piece from a message of ``q`` values (q_0 = q): an int per piece,
        or an int array for an array ``q``."""
        out = []
        for p in self.pieces:
            out.append(q)
            q = p.out_size(q)
        return out

    def omega(self, q):
        """prod_k (1 + omega_k(q_k)) - 1 (see the class)."""
        kind = self.kind
        if kind not in ("exact", "unbiased"):
            return None
        if kind == "exact":
            return 0.0
        return math.prod(1.0 + p.omega(qk) for p, qk in zip(self.pieces, self.sizes(q))) - 1.0

    def alpha(self, q):
        """prod_k alpha_k(q_k) (see the class)."""
        kind = self.kind
        if kind == "exact":
            return 1.0
        if kind != "contractive":
            return None
        return math.prod(p.alpha(qk) for p, qk in zip(self.pieces, self.sizes(q)))

    def out_size(self, q):
        return self.pieces[-1].out_size(self.sizes(q)[-1])

    def bits(self, counts):
        """The wire bits of each message at the most values each piece passes on.

        A selection that keeps a shorter last block sends fewer: ``Messages.bytes_per_worker`` counts the batch as
        sent."""
        return sum(p.bits(c) for p, c in zip(self.pieces, self.sizes(np.asarray(counts, dtype=np.int64))))

    def draw(self, sampler, ids, t, counts, q):
        """Each piece's draws, a tuple in order: piece k draws for the values piece k - 1 kept."""
        out = []
        for p, qk in zip(self.pieces, self.sizes(q)):
            u = p.draw(sampler, ids, t, counts, qk)
            out.append(u)
            if isinstance(p, Selection):
                counts = p.out_counts(counts, u)
        return tuple(out)

    def encode(self, values, counts, u):
        """``(kept, payload)``: the selections' :class:`Selected` (supports and counts, values dropped) and the
        last piece's payload of the values that reached it."""
        kept = []
        for p, uk in zip(self.pieces[:-1], u[:-1]):
            sel = p.encode(values, counts, uk)
            kept.append(sel._replace(values=None))
            values, counts = sel.values, sel.counts
        return tuple(kept), self.pieces[-1].encode(values, counts, u[-1])

    def decode(self, payload, counts):
        """The last piece's payload decoded, then each selection undone."""
        kept, last = payload
        inner = [counts, *(s.counts for s in kept)]
        out = self.pieces[-1].decode(last, inner[-1])
        for p, sel, c in zip(reversed(self.pieces[:-1]), reversed(kept), reversed(inner[:-1])):
            out = p.decode(sel._replace(values=out), c)
        return out

    def overflow_hint(self):
        """The first piece's overflow hint."""
        return next((h for h in (p.overflow_hint() for p in self.pieces) if h), None)


class RandomK(Selection):
    """Shared-seed random-k: keeps the same k of the q coordinates of every message of a batch, unscaled (zero off
    them). Contractive with alpha = k/q: E||v_S - v||^2 = (1 - k/q)||v||^2 for S uniform among the k-subsets.

    The k coordinates are a function of (seed, t) alone (stream ``BLOCKS`` of the sampler it is given, every
    message drawing as message 0), so a receiver that knows the seed redraws them: only the values travel
    (``support_travels`` False, 0 bits of its own). The downlink's random-k (EF21-P, docs/algorithms.md §9).

    Parameters
    ----------
    k : int
        Coordinates kept, 1 <= k <= q.
    """

    stream = BLOCKS
    kind = "contractive"
    subset = True
    support_travels = False

    def __init__(self, k: int, q: int):
        self.k, self.q = int(k), int(q)
        if not 1 <= self.k <= self.q:
            raise ValueError(f"RandomK needs 1 <= k <= q; got k = {k}, q = {q}")

    def __repr__(self):
        return f"RandomK(k={self.k}, q={self.q})"

    def __eq__(self, other):
        return type(other) is type(self) and (other.k, other.q) == (self.k, self.q)

    def __hash__(self):
        return hash((type(self).__name__, self.k, self.q))

    def alpha(self, q):
        """alpha = k/q: the kept share of ||v||^2 in expectation."""
        return min(self.k, int(q)) / int(q)

    def out_size(self, q):
        return np.minimum(q, self.k) if np.ndim(q) else min(int(q), self.k)

    def out_counts(self, counts, support):
        return np.full(len(counts), self.k, np.int64)

    def draw(self, sampler, ids, t, counts, q):
        """S: the k sorted coordinates every message keeps at iteration t, repeated per message."""
        S = sampler.subsets(BLOCKS, np.zeros(1, np.int64), t, self.q, self.k)
        return np.repeat(S, len(ids), axis=0)

    def _pos(self, counts, support):
        counts = np.asarray(counts, dtype=np.int64)
        if np.any(counts != self.q):
            raise ValueError(f"{self!r} codes messages of q = {self.q} values; got counts {np.unique(counts).tolist()}")
        support = np.asarray(support, dtype=np.int64)
        return (support + self.q * np.arange(support.shape[0])[:, None]).ravel()

    def encode(self, values, counts, u):
        return Selected(np.asarray(u), np.asarray(values, dtype=np.float64)[self._pos(counts, u)],
                        self.out_counts(counts, u))

    def decode(self, payload, counts):
        out = np.zeros(int(np.sum(counts)))
        out[self._pos(counts, payload.support)] = payload.values
        return out


def top_k(scores, k: int):
    """The columns of the k largest ``scores`` of each row (shape (rows, k), ascending; ties to the lower column):
    Top-K's selection, of coordinates by magnitude here and of blocks by norm in EF21."""
    return np.sort(np.argsort(-scores, axis=1, kind="stable")[:, :k], axis=1)


class TopK(RandomK):
    """Top-k: keeps the k coordinates of largest magnitude of each message, unscaled; contractive with alpha = k/q
    (the k largest hold at least k/q of ||v||^2). Deterministic: the coordinates travel (4 B each)."""

    stream = None
    support_travels = True

    def __repr__(self):
        return f"TopK(k={self.k}, q={self.q})"

    def bits(self, counts):
        """32 bits per kept coordinate (its index, int32)."""
        return 32 * np.minimum(np.asarray(counts, dtype=np.int64), self.k)

    def draw(self, sampler, ids, t, counts, q):
        return None

    def encode(self, values, counts, u):
        """Ties to the lower index; the support is int32."""
        counts = np.asarray(counts, dtype=np.int64)
        V = np.asarray(values, dtype=np.float64).reshape(counts.size, self.q)
        S = top_k(np.abs(V), self.k).astype(np.int32)
        return Selected(S, np.take_along_axis(V, S, axis=1).ravel(), self.out_counts(counts, S))


class Contractive(Compressor):
    """An unbiased piece scaled to be contractive: C(v) = Q(v)/(1 + omega), alpha = 1/(1 + omega).

    Derivation: E||Q(v)||^2 <= (1 + omega)||v||^2 and E Q(v) = v give E||Q(v)/(1 + omega) - v||^2 =
    E||Q(v)||^2/(1 + omega)^2 - 2||v||^2/(1 + omega) + ||v||^2 <= (1 - 1/(1 + omega))||v||^2. What EF21-P's
    downlink takes from an unbiased codec (Gruntkowska, Tyurin, Richtarik, arXiv:2209.15218; natural: 8/9).

    Parameters
    ----------
    piece : Compressor
        An unbiased piece (a value codec such as natural or natural7); its draws, payload and wire bits are kept.

    Raises
    ------
    ValueError
        ``piece`` is not unbiased with an omega.
    """

    kind = "contractive"

    def __init__(self, piece: Compressor):
        if piece.kind != "unbiased":
            raise ValueError(f"Contractive scales an unbiased piece; got {piece!r} of kind {piece.kind!r}")
        self.piece = piece
        self.stream = piece.stream

    def __repr__(self):
        return f"Contractive({self.piece!r})"

    def __eq__(self, other):
        return type(other) is type(self) and other.piece == self.piece

    def __hash__(self):
        return hash((type(self).__name__, self.piece))

    @property
    def label(self) -> str:
        """The piece's label (``natural7``)."""
        return getattr(self.piece, "label", repr(self.piece))

    def alpha(self, q):
        """alpha = 1/(1 + omega(q)) of the piece."""
        return 1.0 / (1.0 + self.piece.omega(q))

    def out_size(self, q):
        return self.piece.out_size(q)

    def bits(self, counts):
        return self.piece.bits(counts)

    def draw(self, sampler, ids, t, counts, q):
        return self.piece.draw(sampler, ids, t, counts, q)

    def encode(self, values, counts, u):
        return self.piece.encode(values, counts, u)

    def decode(self, payload, counts):
        """The piece's decoded values times 1/(1 + omega(q)), q the most values of a message."""
        q = int(np.max(counts)) if np.size(counts) else 0
        return self.piece.decode(payload, counts) * (1.0 / (1.0 + self.piece.omega(q)))

    def overflow_hint(self):
        return self.piece.overflow_hint()


def chain(*pieces: Compressor) -> Chain:
    """``Chain(*pieces)``: the composition of ``pieces``, the first acting first (its rule and errors:
    :class:`Chain`), e.g. ``chain(IndependentBlocks(tau_m, m), codec)``, the uplink C(v) = (1/tau) Q(v_U) of every
    method."""
    return Chain(*pieces)


__all__ = ["KINDS", "Chain", "Compressor", "Contractive", "IndependentBlocks", "RandomK", "Selected", "Selection", "TopK", "top_k",
           "chain"]
