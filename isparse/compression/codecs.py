"""Value codecs of the uplink: how each sent value is coded on the wire (``messages.codec``; docs/algorithms.md §7).

A codec Q maps a worker's message v (its q values on the sampled blocks U) to codes, packed into bytes; the
master decodes them to float64. Composed with the sampling (Q drawn independently of U), an unbiased codec with
E||Q(v) - v||^2 <= omega ||v||^2 gives (docs/algorithms.md §7)

    E Q(v_U) = tau v,   E||Q(v_U)||^2 <= (1 + omega) tau ||v||^2,   E||Q(v_U) - tau v||^2 <= tau(1 - tau + omega)||v||^2,

which is what the bounds with omega (``isparse.theory``) use.

=========== =========== ============================================ ======================================
codec       kind        constant                                     bits on the wire per message of q values
=========== =========== ============================================ ======================================
float64     exact       omega 0                                      64 q
float32     contractive alpha 1 - delta^2, delta = 2^-24 (rounding)   32 q
bfloat16    contractive alpha 1 - delta^2, delta ~ 2^-8 (rounding)    16 q
natural     unbiased    omega 1/8                                    9 q (sign + 8-bit exponent, window by the problem)
natural7    unbiased    omega 1/8                                    8 q (sign + 7-bit exponent, window by the problem)
dither      unbiased    omega min(q/s^2, sqrt(q)/s) (1 + 2^-20)      32 + (1 + ceil(log2(s + 1))) q
=========== =========== ============================================ ======================================

Each is a :class:`~isparse.compression.registry.Codec` (a :class:`~isparse.compression.compressors.Compressor` that
codes every value) registered by its ``name``; dither's ``levels`` is its own option (:class:`DitherOptions`,
``messages.levels``). float32 and bfloat16 round deterministically with ||Q(v) - v|| <= delta ||v||: contractive
with alpha = 1 - delta^2, biased (no omega; the theorems with omega do not cover them).

``natural`` is natural compression (Horvath, Ho, Horvath, Sahu, Canini, Richtarik, arXiv:1905.10988): each value
is rounded to one of the two powers of two around it, the upper one with probability (abs(v) - 2^e)/2^e, so that the
mean is v. Its 8-bit exponent covers a window of 254 powers of two, 2^e_min .. 2^e_max: a value v with abs(v) below 2^e_min is
rounded to 0 or 2^e_min with the probabilities that keep it unbiased, and a value that rounds up past 2^e_max (a
diverged run) decodes to inf. The window is placed by the problem (``Natural.scaled``): from about 2^-190 to 2^64 x the
largest local gradient entry at x^0 (unscaled, float32's 2^-126 .. 2^127). ``natural7`` is the same rounding in
one byte, a 7-bit exponent over 126 powers of two from about 2^-102 to 2^24 x that entry (``Natural7``).
``dither`` is random dithering with s levels and one norm per message (QSGD: Alistarh, Grubic, Li, Tomioka,
Vojnovic, arXiv:1610.02132): v_j -> N sign(v_j) xi_j / s with xi_j in {l, l + 1}, l = floor(s abs(v_j) / N), the upper
one with probability s abs(v_j) / N - l; N is ||v|| rounded up to a float32 (4 bytes), so every draw is unbiased, and
omega carries the factor (N / ||v||)^2 <= 1 + 2^-20.

The random draws of a codec are counter-based like the sampler's (``isparse.compression.sampling``, stream ``CODEC``): worker
i's draws at iteration t are a function of (seed, i, t) alone, so the engines agree bit for bit and resume and
replay need no stored state. Encode and decode are vectorized over the host's batch of workers: the codes of a
batch are packed into one byte buffer, one bit plane per code bit (a whole byte for the 8 low bits of a 9-bit code).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..params import Interval, param
from .registry import CODECS, Codec, MessagesSpec, codec_class
from .sampling import CODEC

#: the default of ``messages.levels`` (s of ``dither``): 15 levels use 4 bits, 5 with the sign
DEFAULT_LEVELS = 15


class Float64(Codec):
    """The values themselves (8 B each)."""

    name, kind = "float64", "exact"

    def encode(self, values, counts, u):
        """The float64 values themselves."""
        return values

    def decode(self, payload, counts):
        return payload


class Float32(Codec):
    """Round to the nearest float32 (4 B each): deterministic, biased, relative error <= 2^-24 per value (values
    above float32's range become inf, which the divergence check reports)."""

    name, kind, value_bits = "float32", "contractive", 32

    def relative_error(self):
        """delta = 2^-24."""
        return 2.0 ** -24

    def alpha(self, q):
        """alpha = 1 - delta^2, whatever ``q`` (deterministic rounding: contractive)."""
        return 1.0 - self.relative_error() ** 2

    def encode(self, values, counts, u):
        """The values rounded to the nearest float32 (above float32's range: inf, which the divergence check
        reports)."""
        with np.errstate(over="ignore"):
            return values.astype(np.float32)

    def decode(self, payload, counts):
        return payload.astype(np.float64)


class BFloat16(Codec):
    """bfloat16: the 16 high bits of the float32, rounded to nearest even (2 B each): deterministic, biased,
    relative error <= 2^-8 per value. What it costs in accuracy is the neighbourhood it leaves (measured in
    docs/benchmarks.md)."""

    name, kind, value_bits = "bfloat16", "contractive", 16

    def relative_error(self):
        """delta = 2^-8 (1 + 2^-16): nearest-even rounding to 8 significant bits after float32's own rounding."""
        return 2.0 ** -8 * (1.0 + 2.0 ** -16)   # nearest-even on 8 significant bits, after float32's own rounding

    def alpha(self, q):
        return 1.0 - self.relative_error() ** 2

    def encode(self, values, counts, u):
        """The 16 high bits of each value's float32, rounded to nearest even (uint16; a NaN is the quiet NaN
        0x7FC0)."""
        with np.errstate(over="ignore"):
            b = values.astype(np.float32).view(np.uint32)
        rounded = b + (np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1)))   # round to nearest, ties to even
        nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        out = (rounded >> np.uint32(16)).astype(np.uint16)
        out[nan] = 0x7FC0
        return out

    def decode(self, payload, counts):
        return (payload.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)


def _pack(codes: np.ndarray, width: int) -> np.ndarray:
    """Pack unsigned codes of ``width`` bits: the 8 low bits as bytes when width >= 8, each other bit as a plane of
    ``np.packbits`` (one bit per code, padded to a byte), the planes from the lowest bit up."""
    low = 8 if width >= 8 else 0
    shifts = np.arange(low, width, dtype=np.int64)
    planes = np.packbits(((codes[None, :] >> shifts[:, None]) & 1).astype(np.uint8), axis=1).ravel()
    return np.concatenate([(codes & 0xFF).astype(np.uint8), planes]) if low else planes


def _unpack(buf: np.ndarray, count: int, width: int) -> np.ndarray:
    """The codes :func:`_pack` packed (int64)."""
    low = 8 if width >= 8 else 0
    plane = -(-count // 8)
    bits = np.unpackbits(buf[count if low else 0:].reshape(width - low, plane), axis=1, count=count)
    out = (bits.astype(np.int64) << np.arange(low, width, dtype=np.int64)[:, None]).sum(axis=0)
    return out | buf[:count].astype(np.int64) if low else out


class Natural(Codec):
    """Natural compression: an unbiased random rounding to a power of two, 9 bits per value (omega = 1/8).

    The codes 1 .. 2^e - 2 of the ``exponent_bits`` = e bit field are the powers 2^e_min .. 2^e_max, code 0 is zero
    and the top code inf. Unscaled, the window is float32's exponents, 2^-126 .. 2^127; a run's codec is
    :meth:`scaled` by ``isparse.runsetup.build`` so that the window's top is 2^HEADROOM x the largest local gradient
    entry at x^0 (2^64 for natural: its 254 powers then reach about 2^-190 of that entry, so no data scale puts the values
    near the bottom, where the rounding to {0, 2^e_min} would exceed omega).

    Parameters
    ----------
    e_max : int
        The largest exponent of the window.
    """

    name, kind, stream = "natural", "unbiased", CODEC
    exponent_bits = 8
    #: e_max - (the exponent of max_i ||grad f_i(x^0)||_inf) after :meth:`scaled`
    HEADROOM = 64
    needs_scale = True

    def __init__(self, e_max: int = 127):
        top = (1 << self.exponent_bits) - 1                           # the code of inf
        e_max = min(max(int(e_max), -1022 + top - 2), 1023)           # the window inside float64's normal range
        self.e_max = int(e_max)
        self.e_min = self.e_max - (top - 2)
        self.value_bits = 1 + self.exponent_bits
        self._top = top
        self._bias = 1023 + self.e_min - 1                            # float64's exponent field of code c: c + bias
        self._fields = np.concatenate([[0], np.arange(1 + self._bias, top + self._bias) << 52,
                                       [0x7FF << 52]]).astype(np.uint64)   # the float64 bits of each code

    def omega(self, q):
        """omega = (1 + 2^-20)/8, whatever ``q``.

        Notes
        -----
        For abs(v) = 2^e (1 + f), f in [0, 1), E(Q(v) - v)^2 = 4^e f (1 - f) <= v^2/8 (at f = 1/3). Below 2^e_min the
        rounding to {0, 2^e_min} adds at most q 4^e_min / 4 per message, which the factor 1 + 2^-20 covers unless every
        value of the message is below 2^(e_min + 12).
        """
        return 0.125 * (1.0 + 2.0 ** -20)

    def encode(self, values, counts, u):
        """Round each value at random to one of the two powers of two around it, unbiased (``u``: one uniform in
        [0, 1) per value), and pack the codes: for ``natural`` the 8-bit exponent codes (one byte per value), then the
        signs
        packed 8 per byte; for ``natural7`` one byte per value, the sign in the top bit."""
        bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
        ef = (bits >> np.uint64(52)).astype(np.int64) & 0x7FF        # |v| = 2^(ef - 1023) (1 + f), f = mantissa / 2^52
        up = u * 2.0 ** 52 < (bits & np.uint64(2 ** 52 - 1))         # to the upper power with probability f
        code = np.minimum(ef + up - self._bias, self._top)           # above 2^e_max (and inf, nan): the inf code
        tiny = ef < self._bias + 1                                   # |v| < 2^e_min (zero too): unbiased to {0, 2^e_min}
        if tiny.any():
            code[tiny] = u[tiny] < np.abs(values[tiny]) * 2.0 ** -self.e_min
        sign = (bits >> np.uint64(63)).astype(np.uint8)
        if self.exponent_bits == 7:                                  # sign and exponent in one byte
            return code.astype(np.uint8) | (sign << np.uint8(7))
        return np.concatenate([code.astype(np.uint8), np.packbits(sign)])   # the 8 low bits as bytes, the sign plane

    def scaled(self, scale: float) -> "Natural":
        """The codec of the same class with e_max = HEADROOM + floor(log2 scale), so that 2^e_max is 2^(HEADROOM - 1)
        to 2^HEADROOM x ``scale``, the largest absolute value expected at the start (max_i ||grad f_i(x^0)||_inf; 1 if
        it is
        0 or not finite)."""
        scale = scale if np.isfinite(scale) and scale > 0 else 1.0
        return type(self)(int(np.frexp(scale)[1]) - 1 + self.HEADROOM)

    def state(self):
        """``{'e_max': e_max}``."""
        return {"e_max": self.e_max}

    def overflow_hint(self):
        """A value at the top of the window decodes to inf (natural7's window is HEADROOM - 24 = 40 powers of
        two lower than natural's)."""
        lower = Natural.HEADROOM - self.HEADROOM
        return (f"a sent value reached the top of messages.codec={self.label}'s exponent window (2^{self.e_max})"
                + (f"; {Natural.name}'s reaches 2^{lower} higher" if lower else ""))

    def decode(self, payload, counts):
        """A signed power of two, zero, or inf for the top code."""
        n = int(np.sum(counts))
        if self.exponent_bits == 7:
            code = payload[:n] & np.uint8(0x7F)
            sign = (payload[:n] >> np.uint8(7)).astype(np.uint64) << np.uint64(63)
        else:
            code = payload[:n]
            sign = np.unpackbits(payload[n:], count=n).astype(np.uint64) << np.uint64(63)
        return (self._fields[code] | sign).view(np.float64)


class Natural7(Natural):
    """Natural compression in one byte per value: a sign and a 7-bit exponent over a window of 126 powers of two
    (omega = 1/8, unbiased, like ``natural``).

    Scaled (:meth:`Natural.scaled`), the window is 2^(e_max - 125) .. 2^e_max with e_max = 24 + floor(log2 s), s the
    largest local gradient entry at x^0, max_i ||grad f_i(x^0)||_inf: below it a value is rounded to 0 or
    2^(e_max - 125) with the probabilities that keep it unbiased, and a value of 2^e_max or more (2^23 to 2^24 x s)
    may round up past the window and decode to inf, so the run stops as diverged (the error says so). Messages shrink
    as a method converges, so the window's low end (2^-101 to 2^-102 of s) is the side that matters, and it is far
    below any tolerance a run can reach in float64.
    """

    name = "natural7"
    exponent_bits = 7
    HEADROOM = 24

    def __init__(self, e_max: int = HEADROOM):
        super().__init__(e_max)


@dataclass
class DitherOptions(MessagesSpec):
    """The keys of ``messages.codec=dither``."""

    levels: int = param(DEFAULT_LEVELS, Interval(int, 1, 255), "s, the levels of codec=dither "
                                                               "(1 + ceil(log2(s + 1)) bits per value)")


#: dither's norm on the wire, one 32-bit word per message: 12 exponent bits (E + _NORM_BIAS) over the 20 fraction bits
#: of M in [2^20, 2^21): the norm M 2^(E - 21) of every finite message (E from -1074 - 21 to 1042 + 1), rounded up
_NORM_FRACTION, _NORM_BIAS = 20, 1100
#: the word of a message whose norm is not finite (a NaN or an inf in it): its values decode to NaN
_NORM_NAN = np.uint32(0xFFFFFFFF)


class Dither(Codec):
    """Random dithering with s levels and one 32-bit norm per message (QSGD).

    The norm travels as a float of its own (12 exponent bits, 21 significant bits), rounded up: it holds the norm of
    every finite message, so omega holds for every finite message (a float32 norm would lose its significant bits
    below 1.2e-38 and overflow above 3.4e38).

    Parameters
    ----------
    levels : int
        s, in [1, 255] (``messages.levels``).
    """

    name, kind, stream, header_bits = "dither", "unbiased", CODEC, 32
    options = DitherOptions
    short_option = ("levels", "s")

    def __init__(self, levels: int = DEFAULT_LEVELS):
        self.levels = int(levels)
        self.level_bits = max(1, math.ceil(math.log2(self.levels + 1)))
        self.value_bits = 1 + self.level_bits

    def omega(self, q):
        """omega = min(q/s^2, sqrt(q)/s) (1 + 2^-18) for a message of ``q`` values (0 when q = 0).

        QSGD's bound (Alistarh et al., arXiv:1610.02132, Lemma 3.1) for the norm N = ||v||; the factor covers the
        norm sent, N <= ||v|| (1 + 2^-20)(1 + 2^-21) (rounded up to 21 significant bits, after a float64 sum of q
        squares), whose square the variance (N/s)^2 p(1 - p) per value carries.
        """
        s = self.levels
        return min(q / s ** 2, math.sqrt(q) / s) * (1.0 + 2.0 ** -18) if q > 0 else 0.0

    @staticmethod
    def norms(values, counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each message's norm as sent: (words, M, E), shapes (k,): the uint32 words of the wire, and the norm
        N = M 2^(E - 21) they hold, M in [2^20, 2^21) (float64) and E (int64) (N = 0: M = 0; not finite: M = NaN).

        N >= ||v||: the message is scaled by 2^-e exactly (2^e just above its largest abs(v_j)), its norm is taken in
        float64 (no overflow or underflow: the scaled values are below 1, the largest at least 1/2), raised by
        (q + 2) 2^-52 for the sum's and the square root's rounding, and rounded up to 21 significant bits.
        """
        counts = np.asarray(counts)
        k = len(counts)
        a = np.abs(np.asarray(values, dtype=np.float64))
        top, sends = np.zeros(k), counts > 0
        if a.size:
            top[sends] = np.maximum.reduceat(a, (np.cumsum(counts) - counts)[sends])
        finite = np.isfinite(top)
        _, e = np.frexp(np.where(finite, top, 1.0))     # top = f 2^e, f in [1/2, 1)
        scaled = np.ldexp(a, -np.repeat(e, counts))      # exact: a power of two
        with np.errstate(invalid="ignore", over="ignore"):
            norm = np.sqrt(np.bincount(np.repeat(np.arange(k), counts), weights=scaled * scaled, minlength=k))
        norm *= 1.0 + (counts + 2) * 2.0 ** -52
        f, e2 = np.frexp(norm)                           # norm = f 2^e2, f in [1/2, 1)
        M = np.ceil(np.ldexp(f, _NORM_FRACTION + 1))     # in [2^20, 2^21]
        E = (e + e2).astype(np.int64)
        carry = M == 2.0 ** (_NORM_FRACTION + 1)
        M[carry], E[carry] = 2.0 ** _NORM_FRACTION, E[carry] + 1
        zero, bad = top == 0, ~finite
        fields = np.where(zero | bad, 0, E + _NORM_BIAS)
        words = ((fields << _NORM_FRACTION) | np.where(zero | bad, 0, M - 2 ** _NORM_FRACTION).astype(np.int64))
        words = words.astype(np.uint32)
        words[bad] = _NORM_NAN
        M[zero], M[bad], E[zero | bad] = 0.0, np.nan, 0
        return words, M, E

    @staticmethod
    def _unword(words) -> tuple[np.ndarray, np.ndarray]:
        """(M, E) of norm words (:meth:`norms`): N = M 2^(E - 21)."""
        words = words.astype(np.int64)
        field = words >> _NORM_FRACTION
        M = ((words & ((1 << _NORM_FRACTION) - 1)) + (1 << _NORM_FRACTION)).astype(np.float64)
        M[words == 0] = 0.0
        M[words == int(_NORM_NAN)] = np.nan
        return M, np.where(words == 0, 0, field - _NORM_BIAS)

    def encode(self, values, counts, u):
        """Dither each message to s levels of its norm (``u``: one uniform in [0, 1) per value): the norm word of
        each message that has values (4 B each, :meth:`norms`), then the codes (level and sign, 1 + ceil(log2(s + 1))
        bits
        each) packed as bit planes."""
        counts = np.asarray(counts)
        words, M, E = self.norms(values, counts)
        shift = np.repeat(_NORM_FRACTION + 1 - E, counts)    # |v| 2^(21 - E) / M = |v| / N, without forming N
        Mv = np.repeat(M, counts)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            r = np.minimum(np.where(Mv > 0, self.levels * np.ldexp(np.abs(values), shift) / Mv, 0.0), self.levels)
            lvl = np.floor(r)
            lvl += u < r - lvl
        lvl[np.isnan(lvl)] = self.levels                    # a NaN in the message (the divergence check reports it)
        codes = lvl.astype(np.int64) | (np.signbit(values).astype(np.int64) << self.level_bits)
        return np.concatenate([words[counts > 0].view(np.uint8), _pack(codes, self.value_bits)])

    def decode(self, payload, counts):
        """N sign(v_j) xi_j / s per value, N its message's norm (a message of no values has no norm on the wire)."""
        counts = np.asarray(counts)
        sends = counts > 0                                  # a worker that sends nothing has no norm on the wire
        k, n = int(np.count_nonzero(sends)), int(counts.sum())
        words = np.zeros(counts.size, dtype=np.uint32)
        words[sends] = payload[:4 * k].view(np.uint32)
        M, E = self._unword(words)
        codes = _unpack(payload[4 * k:], n, self.value_bits)
        with np.errstate(over="ignore", invalid="ignore"):
            out = np.ldexp(np.repeat(M, counts) * (codes & ((1 << self.level_bits) - 1)) / self.levels,
                           np.repeat(E - _NORM_FRACTION - 1, counts))
        return np.where(codes >> self.level_bits, -out, out)


FLOAT64 = Float64()


def codec(name: str = "float64", *, module: str | None = None, **options) -> Codec:
    """The codec ``messages.codec=name`` with its own options (``codec("dither", levels=7)``), checked as the config is.

    ``module`` (``messages.module``) is imported first, so that a codec it defines registers.

    Raises
    ------
    ConfigError
        An unknown name (listing the known ones), a key the codec does not have, or a value out of its range.
    """
    return MessagesSpec.from_dict({"codec": name, "module": module, **options}, "messages").make_codec()


__all__ = ["CODECS", "DEFAULT_LEVELS", "FLOAT64", "BFloat16", "Codec", "Dither", "DitherOptions", "Float32",
           "Float64", "MessagesSpec", "Natural", "Natural7", "codec", "codec_class"]
