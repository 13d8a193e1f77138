"""A random unbiased codec for the tests, as docs/extending.md writes one: each value becomes 0 or ±s, s = max |v_j|
of its message (rounded up to float32), P(±s) = |v_j|/s; omega = sqrt(q) - 1 (times the rounding's factor)."""

import numpy as np

from isparse.compression import Codec
from isparse.compression.sampling import CODEC


class Ternary(Codec):
    name, kind, stream, value_bits, header_bits = "ternary_test", "unbiased", CODEC, 2, 32

    def omega(self, q):
        return q ** 0.5 * (1.0 + 2.0 ** -23) - 1.0

    def encode(self, values, counts, u):
        counts = np.asarray(counts)
        k = counts.size
        owner = np.repeat(np.arange(k), counts)
        top = np.zeros(k)
        np.maximum.at(top, owner, np.abs(values))
        scale = np.nextafter(top.astype(np.float32), np.float32(np.inf))
        keep = u < np.abs(values) / np.repeat(scale.astype(float), counts)
        return np.concatenate([scale[counts > 0].view(np.uint8), np.packbits(keep), np.packbits(np.signbit(values))])

    def decode(self, payload, counts):
        counts = np.asarray(counts)
        sends = counts > 0
        k, n = int(sends.sum()), int(counts.sum())
        scale = np.zeros(counts.size)
        scale[sends] = payload[:4 * k].view(np.float32)
        bits = np.unpackbits(payload[4 * k:])
        keep, negative = bits[:n].astype(bool), bits[-(-n // 8) * 8:][:n].astype(bool)
        out = np.where(keep, np.repeat(scale, counts), 0.0)
        return np.where(negative, -out, out)
