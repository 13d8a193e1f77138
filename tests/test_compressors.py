"""Compressors as pieces (issue 30): a codec from outside (one module + one config file) on both engines, the
identity chain, the composed omega against (1 + omega)/tau - 1 and against Monte Carlo with the real sampler and
codecs, and the registry filled from the classes."""

import itertools
import math
import pickle
from dataclasses import dataclass

import numpy as np
import pytest

from isparse import ConfigError, load_dataset
from isparse.errors import DeclarationError
from isparse.compression import (CODECS, FLOAT64, Codec, IndependentBlocks, MessagesSpec, Sampler, chain, codec,
                                 codec_class)
from isparse.params import Interval, param
from isparse.planning import CodecChoice, resolve_codecs
from outside import on_both_engines, refused_in_one_line, run_outside, write_outside
from specs import make


# -- a codec from outside: one module and one config file ------------------------------------------------------
MODULE = '''"""Scaled sign: gain x ||v||_1 / q x sign(v_j) for a message v of q values; 1 bit per value and one float32 scale
per message. A contractive value codec defined outside isparse (tests/test_compressors.py)."""
from dataclasses import dataclass

import numpy as np

from isparse.compression import Codec, MessagesSpec
from isparse.params import Interval, param


@dataclass
class ScaledSignOptions(MessagesSpec):
    gain: float = param(1.0, Interval(float, 0.0, 1.0, low_open=True), "c, the factor on ||v||_1 / q")


class ScaledSign(Codec):
    name, kind, value_bits, header_bits = "scaled_sign", "contractive", 1, 32
    options = ScaledSignOptions

    def __init__(self, gain=1.0):
        self.gain = float(gain)

    def alpha(self, q):
        # ||C(v) - v||^2 = ||v||^2 - c(2 - c) ||v||_1^2 / q <= (1 - c(2 - c)/q) ||v||^2 (the scale's float32 rounding:
        # the factor 1 - 2^-20)
        return self.gain * (2.0 - self.gain) / q * (1.0 - 2.0 ** -20)

    def encode(self, values, counts, u):
        counts = np.asarray(counts)
        k = counts.size
        l1 = np.bincount(np.repeat(np.arange(k), counts), weights=np.abs(values), minlength=k)
        scale = (self.gain * l1 / np.maximum(counts, 1)).astype(np.float32)
        return np.concatenate([scale[counts > 0].view(np.uint8), np.packbits(np.signbit(values))])

    def decode(self, payload, counts):
        counts = np.asarray(counts)
        sends = counts > 0
        k, n = int(sends.sum()), int(counts.sum())
        scale = np.zeros(counts.size)
        scale[sends] = payload[:4 * k].view(np.float32)
        out = np.repeat(scale, counts)
        return np.where(np.unpackbits(payload[4 * k:], count=n).astype(bool), -out, out)
'''

CONFIG = """# scaled sign (tests/test_compressors.py): the module that defines it, and its option's default
codec: scaled_sign
module: scaled_sign
gain: 0.5
"""


@pytest.fixture
def outside_codec(tmp_path):
    """The codec's module (in <tmp>/pkg) and its config file (in <tmp>/conf/messages), nothing else."""
    return write_outside(tmp_path, "scaled_sign", MODULE, "messages", CONFIG)


def _run(tmp_path, env, out, *overrides):
    return run_outside(tmp_path, env, out, "+messages=scaled_sign", *overrides)


@pytest.mark.slow
def test_a_codec_from_one_module_and_one_config_file_runs_on_both_engines(outside_codec):
    tmp_path, env = outside_codec
    runs = on_both_engines(_run, tmp_path, env, "messages.gain=0.25")
    (x_in, run_in), (_, run_dask) = runs["inprocess"], runs["dask"]
    assert np.abs(x_in).max() > 0 and run_in.data.metrics["summary/iterations"] == 60
    p = run_in.data.params
    assert (p["messages.codec"], p["messages.module"], p["messages.gain"]) == ("scaled_sign", "scaled_sign", "0.25")
    assert p["codec"] == "scaled_sign(gain=0.25)" and p["bits_per_value"] == "1"
    # breast cancer, d = 30, n = 4, b = 1, tau*m = ceil(30/4) = 8: 8 sign bits + a 4 B scale per message, 60 rounds
    assert (p["d"], p["n"], p["tau_m"]) == ("30", "4", "8")
    assert run_in.data.metrics["uplink_bytes"] == run_dask.data.metrics["uplink_bytes"] == 60 * 4 * (8 / 8 + 4)
    assert sorted(q.name for q in (tmp_path / "pkg").iterdir() if q.name != "__pycache__") == ["scaled_sign.py"]


@pytest.mark.parametrize("override, message", [
    ("messages.gain=2", "The 'messages.gain' parameter must be in (0, 1]; got 2."),
    pytest.param("+messages.gian=0.1", "The 'messages.gian' parameter is not a key of messages.codec=scaled_sign (it "
                                       "would be ignored); known: send_ids, aggregate, codec, module, downlink, gain.",
                 marks=pytest.mark.slow),
    pytest.param("messages.levels=7", "The 'messages.levels' parameter is not a key of messages.codec=scaled_sign (it "
                                      "would be ignored); known: send_ids, aggregate, codec, module, downlink, gain.",
                 marks=pytest.mark.slow),
    pytest.param("messages.module=no_such_module", "The 'messages.module' parameter must name an importable Python "
                                                   "module", marks=pytest.mark.slow),
])
def test_its_bad_option_is_one_line_and_status_2(outside_codec, override, message):
    tmp_path, env = outside_codec
    proc = _run(tmp_path, env, tmp_path / "out", "engine=inprocess", override)
    refused_in_one_line(proc, message, tmp_path / "out")


DECLARED = "isparse-run: error: The 'messages.module' parameter names a module whose codec is declared wrong; " \
           "importing 'scaled_sign': "


@pytest.mark.parametrize("old, new, message", [
    ('"scaled_sign", "contractive", 1, 32', '"scaled_sign", "contracting", 1, 32',
     DECLARED + "scaled_sign.ScaledSign.kind must be one of exact, unbiased, contractive, biased; got 'contracting'"),
    pytest.param('"scaled_sign", "contractive", 1, 32', '"scaled_sign", "unbiased", 1, 32',
     DECLARED + "scaled_sign.ScaledSign declares kind 'unbiased' and must define omega(q), its constant "
                "(E||Q(v) - v||^2 <= omega ||v||^2)", marks=pytest.mark.slow),
    pytest.param("param(1.0, Interval(float, 0.0, 1.0", "param(1.5, Interval(float, 0.0, 1.0",
     DECLARED + "scaled_sign.ScaledSign.options: the default 1.5 of ScaledSignOptions.gain is refused by its own "
                "constraint (The 'messages.gain' parameter must be in (0, 1]; got 1.5.)", marks=pytest.mark.slow),
    pytest.param("@dataclass\nclass ScaledSignOptions", "class ScaledSignOptions",
     DECLARED + "scaled_sign.ScaledSign.options: ScaledSignOptions must be decorated with @dataclass (its gain "
                "would not be keys)", marks=pytest.mark.slow),
    pytest.param('"scaled_sign", "contractive", 1, 32', '"natural", "contractive", 1, 32',
     DECLARED + "two codecs are named 'natural': isparse.compression.codecs.Natural and scaled_sign.ScaledSign",
     marks=pytest.mark.slow),
    pytest.param('name, kind, value_bits, header_bits = "scaled_sign", "contractive", 1, 32',
     'kind, value_bits, header_bits = "contractive", 1, 32',
     "isparse-run: error: The 'messages.module' parameter names a module that registers no codec (a Codec subclass "
     "that sets name); 'scaled_sign' defines none, so messages.codec='scaled_sign' is unknown.",
     marks=pytest.mark.slow),
])
def test_a_codec_declared_wrong_is_refused_by_its_class_statement_in_one_line(outside_codec, old, new, message):
    """What a contributor gets wrong in a codec's declaration (a kind misspelt, the constant its kind promises
    missing, a default its own constraint refuses, options without @dataclass, a name taken, no name) is one line
    naming the class and the attribute, before any work (one case in the default run, the others slow: each is a
    process of its own)."""
    tmp_path, env = outside_codec
    module = tmp_path / "pkg" / "scaled_sign.py"
    assert old in MODULE
    module.write_text(MODULE.replace(old, new))
    proc = _run(tmp_path, env, tmp_path / "out", "engine=inprocess")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [message], proc.stderr
    assert not (tmp_path / "out" / "mlflow.db").exists()


# -- chain ------------------------------------------------------------------------------------------------------
def _draws(c, v, k, t, seed=11):
    """k messages of v (workers 0..k-1) through c at iteration t: encode then decode, shape (k, v.size)."""
    counts = np.full(k, v.size, np.int32)
    values = np.tile(v, k)
    u = c.draw(Sampler(seed), np.arange(k), t, counts, v.size)
    return c.decode(c.encode(values, counts, u), counts).reshape(k, v.size)


def test_chain_of_all_blocks_and_float64_is_the_identity():
    v = np.random.default_rng(0).standard_normal(20) * 10.0 ** np.arange(-10, 10)
    v[3], v[4] = -0.0, np.inf
    for size, m in ((1, 20), (3, 7)):   # 7 blocks of 3, the last of 2
        c = chain(IndependentBlocks(m, m, size), FLOAT64)
        assert (c.kind, c.omega(20), c.alpha(20), c.tau, c.memory_rate(20)) == ("exact", 0.0, 1.0, 1.0, 1.0)
        assert c.codec is FLOAT64 and c.pieces == (IndependentBlocks(m, m, size), FLOAT64)
        out = _draws(c, v, 3, 5)
        assert np.array_equal(out.view(np.uint64), np.tile(v, (3, 1)).view(np.uint64))   # bit for bit, -0.0 too


def test_the_uplink_chain_draws_and_codes_what_a_method_sends():
    """chain(IndependentBlocks(tau_m, m, b), codec) on the workers' dense vectors: its U is the method's sample and its
    decoded values are the method's coded batch on U scaled by 1/tau (breast cancer, d = 30, b = 2, m = 15, n = 5,
    tau*m = 3, natural)."""
    s = make(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=5, block_size=2, seed=3,
             codec="natural")
    meth = s.method
    d, m, b, tau_m = meth.blocks.d, meth.blocks.m, meth.blocks.size, meth.tau_m
    assert (d, m, b, tau_m) == (30, 15, 2, 3)
    up = chain(IndependentBlocks(tau_m, m, b), meth.codec)
    ids, t = np.arange(5), 7
    V = np.random.default_rng(2).standard_normal((5, d))
    counts = np.full(5, d)
    u = up.draw(meth.sampler, ids, t, counts, d)
    U = meth._sample(ids, t)
    np.testing.assert_array_equal(u[0], U)
    pc, pw = meth._coords(U)
    batch = meth._encode(ids, t, np.bincount(pw, minlength=5).astype(np.int32), V[pw, pc])
    expected = np.zeros((5, d))
    expected[pw, pc] = batch.values * (m / tau_m)
    np.testing.assert_array_equal(up.decode(up.encode(V.ravel(), counts, u), counts).reshape(5, d), expected)
    assert up.omega(d) == pytest.approx((1 + meth.codec.omega(tau_m * b)) * m / tau_m - 1, rel=1e-15)


def _omega_dither(s, q):
    return min(q / s ** 2, math.sqrt(q) / s) * (1 + 2.0 ** -18)


@pytest.mark.parametrize("tau_m", [1, 2, 5, 10, 20])
def test_the_composed_omega_is_one_plus_omega_over_tau_minus_one(tau_m):
    m = 20
    tau = tau_m / m
    for q_codec, w in ((codec("natural"), 0.125 * (1 + 2.0 ** -20)), (codec("dither", levels=3), _omega_dither(3, tau_m)),
                       (codec("dither"), _omega_dither(15, tau_m))):
        c = chain(IndependentBlocks(tau_m, m), q_codec)
        assert c.kind == "unbiased" and c.tau == tau and c.codec is q_codec
        assert c.omega(m) == pytest.approx((1 + w) / tau - 1, rel=1e-14)
        assert c.memory_rate(m) == pytest.approx(tau / (1 + w), rel=1e-14)
    # block size b: the codec's omega at the tau*m*b values it codes (d = 40, b = 2)
    c = chain(IndependentBlocks(tau_m, m, 2), codec("dither", levels=3))
    assert c.omega(40) == pytest.approx((1 + _omega_dither(3, 2 * tau_m)) / tau - 1, rel=1e-14)
    assert IndependentBlocks(tau_m, m).omega(m) == pytest.approx(1 / tau - 1, rel=1e-15)


def test_a_biased_or_contractive_piece_in_a_chain():
    blocks, f32 = IndependentBlocks(5, 20), codec("float32")
    assert (f32.kind, f32.omega(20), f32.alpha(20), f32.memory_rate(20)) == ("contractive", None, 1 - 2.0 ** -48, 1.0)
    assert chain(IndependentBlocks(20, 20), f32).kind == "contractive"        # exact then contractive
    assert chain(IndependentBlocks(20, 20), f32).alpha(20) == 1 - 2.0 ** -48
    c = chain(blocks, f32)
    assert (c.kind, c.omega(20), c.alpha(20), c.memory_rate(20)) == ("biased", None, None, 1.0)
    with pytest.raises(TypeError, match="must be a Selection"):
        chain(f32, blocks)


def _dither_error(v, U, s):
    """E||Q(v_U) - v_U||^2 of dither with s levels given U, from its definition: each |v_j| is rounded to the two
    levels around it, N l/s and N (l + 1)/s, with N = ||v_U|| (1 + (q + 2) 2^-52) rounded up to 21 significant bits
    (the norm on the wire): (N/s)^2 p (1 - p), p the fractional part of s |v_j| / N. U: (subsets, tau*m) block ids."""
    vu = v[U]
    N = _wire_norm(np.sqrt(np.sum(vu ** 2, axis=1)), vu.shape[1])
    r = s * np.abs(vu) / N[:, None]
    p = r - np.floor(r)
    return np.sum((N[:, None] / s) ** 2 * p * (1 - p), axis=1)


def _wire_norm(norm, q):
    """dither's norm as sent, from its definition: norm (1 + (q + 2) 2^-52) rounded up to 21 significant bits."""
    f, e = np.frexp(np.asarray(norm, dtype=float) * (1 + (q + 2) * 2.0 ** -52))
    return np.ldexp(np.ceil(np.ldexp(f, 21)), e - 21)


@pytest.mark.parametrize("name, tau_m", [("natural", 2), ("natural", 5), ("natural", 10),
                                          ("dither", 2), ("dither", 5), ("dither", 10)])
def test_the_composed_omega_by_monte_carlo(name, tau_m):
    """K = 20000 independent draws (200 workers x 100 iterations) of C(v) = (1/tau) Q(v_U) with the real sampler
    (stream BLOCKS) and codec (stream CODEC), d = m = 20: every coordinate's mean within 5 standard errors of v, and
    the measured E||C(v) - v||^2 / ||v||^2 within 5 standard errors of its expectation, computed here from the
    codec's definition, and not above the composed omega. For natural, v_j = +-(4/3) 2^e_j is its worst case
    (E(Q - v)^2 = v^2/8): the expectation is (1 + 1/8)/tau - 1, the composed omega up to its 1 + 2^-20 factor; for
    dither (s = 3) the expectation averages the rounding error over every one of the C(20, tau*m) sets U."""
    m, K, k = 20, 20000, 200
    rng = np.random.default_rng(4)
    tau = tau_m / m
    if name == "natural":
        v = rng.choice([-1, 1], m) * (4 / 3) * 2.0 ** rng.integers(-3, 4, m)
        q = codec("natural")
    else:
        v = rng.standard_normal(m)
        q = codec("dither", levels=3)
    c = chain(IndependentBlocks(tau_m, m), q)
    C = np.concatenate([_draws(c, v, k, t) for t in range(K // k)])
    vv = float(v @ v)
    if name == "natural":
        expected = (1 + 0.125) / tau - 1
    else:
        U = np.array(list(itertools.combinations(range(m), tau_m)))
        expected = (1 / tau - 1) + _dither_error(v, U, 3).mean() / (tau ** 2 * vv)   # E||C||^2 - ||v||^2
    se = C.std(axis=0, ddof=1) / math.sqrt(K)
    assert np.all(np.abs(C.mean(axis=0) - v) <= 5 * se), np.max(np.abs(C.mean(axis=0) - v) / se)
    err = np.sum((C - v) ** 2, axis=1) / vv
    err_se = err.std(ddof=1) / math.sqrt(K)
    assert abs(err.mean() - expected) <= 5 * err_se, (err.mean(), expected, err_se)
    assert expected <= c.omega(m) and err.mean() - 5 * err_se <= c.omega(m)
    if name == "natural":   # the worst case attains the composed omega
        assert abs(err.mean() - c.omega(m)) <= 5 * err_se


# -- the registry -----------------------------------------------------------------------------------------------
@pytest.fixture
def registry():
    """Leaves :data:`CODECS` as it was (a codec class defined by a test registers for good otherwise)."""
    before = dict(CODECS)
    yield CODECS
    CODECS.clear()
    CODECS.update(before)


def test_a_codec_subclass_registers_and_two_with_one_name_raise(registry):
    @dataclass
    class HalfOptions(MessagesSpec):
        width: int = param(16, Interval(int, 1, 64), "its bits per value")

    class Half(Codec):
        """float16 rounding, its bits per value an option (a test codec)."""

        name, kind = "test_half", "biased"
        options = HalfOptions
        short_option = ("width", "w")

        def __init__(self, width=16):
            self.width = self.value_bits = int(width)

        def encode(self, values, counts, u):
            return values.astype(np.float16)

        def decode(self, payload, counts):
            return payload.astype(np.float64)

    assert CODECS["test_half"] is Half and list(CODECS)[-1] == "test_half"
    assert codec_class("test_half") is Half
    made = MessagesSpec.from_dict({"codec": "test_half", "width": 12}, "messages").make_codec()
    assert type(made) is Half and made.value_bits == 12 and made.label == "test_half(w=12)"
    assert made.bits(np.array([3, 0])).tolist() == [36, 0]
    with pytest.raises(ConfigError, match=r"^The 'messages.width' parameter is not a key of messages.codec=natural"):
        MessagesSpec.from_dict({"codec": "natural", "width": 12}, "messages")
    with pytest.raises(ConfigError, match=r"^The 'messages.codec' parameter must be one of float64, float32, "
                                          r"bfloat16, natural, natural7, dither, test_half; got 'nope'\.$"):
        MessagesSpec.from_dict({"codec": "nope"}, "messages")
    # the planner's grammar comes from the class: <name>:<its one numeric option>
    assert resolve_codecs(["test_half:8", "dither:7", "natural"], CodecChoice("float64")) == [
        CodecChoice("test_half", (("width", 8),)), CodecChoice("dither", (("levels", 7),)), CodecChoice("natural")]
    assert [c.label for c in resolve_codecs(["test_half:8", "dither"], CodecChoice("float64"))] == [
        "test_half:8", "dither:15"]
    with pytest.raises(ConfigError, match=r"entries must be one of .*dither:<s> with s in \[1, 255\] or "
                                          r"test_half:<w> with w in \[1, 64\]; got 'test_half:65'\.$"):
        resolve_codecs(["test_half:65"], CodecChoice("float64"))
    with pytest.raises(DeclarationError, match="two codecs are named 'test_half'"):
        class Other(Codec):
            name = "test_half"
    assert CODECS["test_half"] is Half


def test_a_codec_pickles_by_its_class_and_options():
    """Not by a name lookup: the pickle names the class (module and qualified name), and a codec whose window the
    problem placed keeps it."""
    for c in (codec("dither", levels=7), codec("natural7").scaled(0.3), codec("float32")):
        wire = pickle.dumps(c, protocol=5)
        assert type(c).__qualname__.encode() in wire and b"isparse.compression.codecs" in wire
        back = pickle.loads(wire)
        assert type(back) is type(c) and back == c and back.state() == c.state() and back.label == c.label
    assert pickle.loads(pickle.dumps(codec("natural7").scaled(0.3))).e_max == 22


@pytest.mark.parametrize("name, levels", [("natural", None), ("dither", 7), ("float64", None)])
def test_the_methods_take_their_constants_from_the_uplink_chain(name, levels):
    """ISEGA's memory rate, DIANA's shift rate alpha = 1/(omega_D + 1) and the logged omega come from the run's
    chain(IndependentBlocks, codec), and equal the formulas written out here: 1/(1 + omega_Q) and
    tau/(1 + omega_Q) (Mishchenko et al., arXiv:1901.10009, with omega_D = (1 + omega_Q)/tau - 1)."""
    extra = {"levels": levels} if levels else {}
    isega = make("isega", n=4, codec=name, **extra).method
    diana = make("diana", n=4, codec=name, **extra).method
    q = isega.values_per_message
    omega_q = {"natural": 0.125 * (1 + 2.0 ** -20), "float64": 0.0,
               "dither": min(q / 7 ** 2, math.sqrt(q) / 7) * (1 + 2.0 ** -18)}[name]
    assert isega.uplink.pieces[0].tau == isega.tau == 8 / 30          # breast_cancer: d = m = 30, tau*m = ceil(30/4)
    assert isega.uplink.codec.omega(q) == pytest.approx(omega_q, rel=1e-15)
    assert isega.uplink.omega(isega.blocks.d) == pytest.approx((1 + omega_q) / isega.tau - 1, rel=1e-14)
    assert isega.memory_rate == pytest.approx(1 / (1 + omega_q), rel=1e-15)
    assert diana.alpha == pytest.approx(isega.tau / (1 + omega_q), rel=1e-14)
