"""Blocks and the independent tau*m-nice sampling: sizes, unbiasedness (measured), tau rules."""

import math

import numpy as np
import pytest

from isparse import BlockPartition, ConfigError, resolve_tau, sample_blocks, worker_streams


def test_blocks_cover_coordinates_with_short_last_block():
    bp = BlockPartition(d=10, size=3)
    assert bp.m == 4
    assert bp.coords(np.array([0, 3])).tolist() == [0, 1, 2, 9]
    assert bp.coords(np.arange(4)).tolist() == list(range(10))
    with pytest.raises(ConfigError, match=r"'blocks.size' parameter must be in \[1, d = 10\]; got 11"):
        BlockPartition(d=10, size=11)
    with pytest.raises(ConfigError, match="'blocks.size'"):
        BlockPartition(d=10, size=0)


@pytest.mark.parametrize("m, n, expected", [(30, 4, (8 / 30, 8)), (112, 10, (12 / 112, 12)), (5, 100, (0.2, 1)),
                                            (7, 1, (1.0, 7))])
def test_tau_auto_is_smallest_fraction_at_least_one_over_n(m, n, expected):
    tau, tau_m = resolve_tau("auto", m, n)
    assert tau_m == expected[1] and math.isclose(tau, expected[0])
    assert tau >= min(1.0, 1 / n) - 1e-12 and (tau_m - 1) / m < 1 / n


def test_tau_errors_name_the_range():
    with pytest.raises(ConfigError, match=r"'tau' parameter must be in \[1/m = 0.1, 1\]; got 0"):
        resolve_tau(0, 10, 2)
    with pytest.raises(ConfigError, match=r"'tau' parameter must be in \[1/m = 0.1, 1\]; got 1.5"):
        resolve_tau(1.5, 10, 2)
    with pytest.raises(ConfigError, match="Nearest allowed: 2/10 = 0.2 or 3/10 = 0.3"):
        resolve_tau(0.25, 10, 2)
    assert resolve_tau(0.3, 10, 2) == (0.3, 3)


def test_each_worker_sends_exactly_tau_m_distinct_blocks():
    rngs = worker_streams(0, 5)
    for _ in range(200):
        for rng in rngs:
            U = sample_blocks(rng, 13, 4)
            assert U.size == 4 and np.unique(U).size == 4 and U.min() >= 0 and U.max() < 13


def test_independent_sparsification_is_unbiased():
    """(1/(n tau)) sum_i (v_i)_{U_i} averages to (1/n) sum_i v_i (within 4 standard errors)."""
    n, d, size = 4, 11, 2
    bp = BlockPartition(d, size)                  # m = 6, last block of size 1
    tau, tau_m = resolve_tau("auto", bp.m, n)     # tau m = 2
    rng = np.random.default_rng(42)
    v = rng.normal(size=(n, d))
    target = v.mean(0)
    streams = worker_streams(7, n)
    T = 40000
    est = np.zeros((T, d))
    for t in range(T):
        for i in range(n):
            c = bp.coords(sample_blocks(streams[i], bp.m, tau_m))
            est[t, c] += v[i, c]
    est /= n * tau
    mean, se = est.mean(0), est.std(0, ddof=1) / np.sqrt(T)
    assert np.all(np.abs(mean - target) <= 4 * se)
    # the variance matches the block facts: Var = (1/(n tau)^2) sum_i tau(1-tau) v_i^2 per coordinate
    var_theory = (tau * (1 - tau) * (v ** 2).sum(0)) / (n * tau) ** 2
    np.testing.assert_allclose(est.var(0, ddof=1), var_theory, rtol=0.05)


def test_streams_are_reproducible_and_distinct():
    a = [sample_blocks(r, 50, 5).tolist() for r in worker_streams(3, 3)]
    b = [sample_blocks(r, 50, 5).tolist() for r in worker_streams(3, 3)]
    assert a == b and a[0] != a[1]
    assert sample_blocks(np.random.default_rng(0), 6, 6).tolist() == list(range(6))
