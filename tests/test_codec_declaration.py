"""A codec's declaration is checked where it is made (issue 45, item 5): an unbiased codec that says nowhere where its
draws come from is refused by its class statement, with the line to add (before, the run died mid-iteration with a
TypeError); a random codec that declares ``stream = CODEC`` is unbiased by Monte Carlo, within its omega, and gives
the same iterates on both engines."""

import numpy as np
import pytest

from isparse import InProcessPool, RunSpec, build
from isparse.compression import Codec
from isparse.compression.sampling import BLOCKS, Sampler
from isparse.engines.dask import DaskPool
from isparse.compression.registry import CODECS
from isparse.errors import DeclarationError


@pytest.fixture(scope="module")
def Ternary():
    """The test's random codec, registered while this module's tests run (the registry is the session's)."""
    from ternary_codec import Ternary

    CODECS[Ternary.name] = Ternary
    yield Ternary
    CODECS.pop(Ternary.name, None)


def test_an_unbiased_codec_without_a_stream_is_refused_where_it_is_defined():
    with pytest.raises(DeclarationError) as info:
        class Forgetful(Codec):
            name, kind, value_bits = "forgetful_test", "unbiased", 2

            def omega(self, q):
                return 1.0
    text = str(info.value)
    assert "\n" not in text and "add 'stream = CODEC'" in text and "Forgetful" in text


def test_a_codec_on_a_block_samplers_stream_is_refused():
    with pytest.raises(DeclarationError, match=r"stream must be isparse.compression.sampling.CODEC"):
        class Borrowing(Codec):
            name, kind, stream, value_bits = "borrowing_test", "unbiased", BLOCKS, 2

            def omega(self, q):
                return 1.0


def test_the_random_codec_is_unbiased_within_its_omega(Ternary):
    rng = np.random.default_rng(0)
    q, draws = 16, 20000
    v = rng.standard_normal(q)
    codec, sampler = Ternary(), Sampler(7)
    ids = np.arange(draws)
    counts = np.full(draws, q)
    u = codec.draw(sampler, ids, 0, counts, q)
    out = codec.decode(codec.encode(np.tile(v, draws), counts, u), counts).reshape(draws, q)
    mean, se = out.mean(axis=0), out.std(axis=0, ddof=1) / np.sqrt(draws)
    assert np.all(np.abs(mean - v) <= 4.5 * se + 1e-6 * np.abs(v))    # E Q(v) = v (the largest |v_j| is kept almost surely)
    err = np.sum((out - v) ** 2, axis=1)
    assert err.mean() - 3 * err.std(ddof=1) / np.sqrt(draws) <= codec.omega(q) * v @ v   # E||Q(v) - v||^2 <= omega ||v||^2


def test_the_random_codec_gives_the_same_iterates_on_both_engines(dask_client, Ternary):
    spec = RunSpec.from_dict({"algorithm": "isega", "data": "breast_cancer", "workers.n": 4, "problem.lam": 0.1,
                              "messages.codec": "ternary_test"})
    setup = build(spec)
    local = setup.run(InProcessPool(*setup.pool_args()), max_iter=40, tol=0, keep_iterates=True, log_every=20)
    pool = DaskPool(dask_client, *setup.pool_args())
    try:
        remote = setup.run(pool, max_iter=40, tol=0, keep_iterates=True, log_every=20)
    finally:
        pool.close()
    np.testing.assert_array_equal(np.array(remote.iterates), np.array(local.iterates))
    assert np.abs(np.array(local.iterates[-1]) - setup.x0).max() > 0   # it moved
