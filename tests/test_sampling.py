"""Blocks, tau rules, and the counter-based sampler: tau*m-nice marginals, independence across workers,
unbiasedness of independent sparsification (all measured), and draws that depend on (seed, i, t) alone."""

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats

from isparse import BlockPartition, ConfigError, Sampler, resolve_tau
from isparse.compression.sampling import BLOCKS, EXAMPLES


def test_blocks_cover_coordinates_with_short_last_block():
    bp = BlockPartition(d=10, size=3)
    assert bp.m == 4
    assert bp.coords(np.array([0, 3])).tolist() == [0, 1, 2, 9]
    assert bp.coords(np.arange(4)).tolist() == list(range(10))
    coords, owner = bp.coords_batch(np.array([[0, 3], [1, 2]]))
    assert coords.tolist() == [0, 1, 2, 9, 3, 4, 5, 6, 7, 8] and owner.tolist() == [0] * 4 + [1] * 6
    with pytest.raises(ConfigError, match=r"'size' parameter must be in \[1, d = 10\]; got 11"):   # its own argument
        BlockPartition(d=10, size=11)
    with pytest.raises(ConfigError, match="'size'"):
        BlockPartition(d=10, size=0)


@pytest.mark.parametrize("m, n, expected", [(30, 4, (8 / 30, 8)), (112, 10, (12 / 112, 12)), (5, 100, (0.2, 1)),
                                            (7, 1, (1.0, 7))])
def test_tau_auto_is_smallest_fraction_at_least_one_over_n(m, n, expected):
    tau, tau_m = resolve_tau("auto", m, n)
    assert tau_m == expected[1] and math.isclose(tau, expected[0])
    assert tau >= min(1.0, 1 / n) - 1e-12 and (tau_m - 1) / m < 1 / n


def test_tau_errors_name_the_range():
    with pytest.raises(ConfigError, match=r"'tau' parameter must be in \[1/m = 0.1, 1\]; got 0.05"):
        resolve_tau(0.05, 10, 2)
    with pytest.raises(ConfigError, match=r"'tau' parameter must be in \(0, 1\]; got 1.5"):   # m unknown yet
        resolve_tau(1.5, 10, 2)
    with pytest.raises(ConfigError, match="Nearest allowed: 2/10 = 0.2 or 3/10 = 0.3"):
        resolve_tau(0.25, 10, 2)
    assert resolve_tau(0.3, 10, 2) == (0.3, 3)


@pytest.mark.parametrize("m, size", [(13, 4), (200, 3), (50, 50), (7, 1)])   # keys, rejection, all, one
def test_each_worker_draws_exactly_size_distinct_blocks(m, size):
    s = Sampler(0)
    for t in range(200):
        U = s.subsets(BLOCKS, np.arange(5), t, m, size)
        assert U.shape == (5, size)
        assert all(np.unique(row).size == size and row.min() >= 0 and row.max() < m for row in U)
        assert np.all(np.diff(U, axis=1) > 0)   # sorted


def test_draws_depend_only_on_seed_worker_and_iteration():
    """The blocks worker i gets at t do not depend on which other workers are drawn with it (its host)."""
    s = Sampler(3)
    all_ = s.subsets(BLOCKS, np.arange(10), 17, 50, 5)
    assert np.array_equal(s.subsets(BLOCKS, [4, 5, 6], 17, 50, 5), all_[4:7])
    assert np.array_equal(s.subsets(BLOCKS, [9, 2], 17, 50, 5), all_[[9, 2]])
    assert np.array_equal(Sampler(3).subsets(BLOCKS, [7], 17, 50, 5)[0], all_[7])
    assert not np.array_equal(s.subsets(BLOCKS, [7], 18, 50, 5)[0], all_[7])          # another iteration
    assert not np.array_equal(Sampler(4).subsets(BLOCKS, [7], 17, 50, 5)[0], all_[7])  # another seed
    assert not np.array_equal(s.subsets(EXAMPLES, [7], 17, 50, 5)[0], all_[7])         # another stream


@pytest.mark.parametrize("ordered", [False, True])
def test_keys_path_draws_a_few_workers_at_a_time_with_the_same_sets(monkeypatch, ordered):
    """The keys path (size > m/16) draws at most ``_KEYS_PER_CALL`` keys at once (whole workers): the master's
    transient is O(m), not O(k m), and every worker's set is the one it gets drawn alone or with all the others."""
    from isparse.compression import sampling

    s = Sampler(5)
    together = s.subsets(BLOCKS, np.arange(7), 3, 64, 20, ordered=ordered)
    alone = np.concatenate([s.subsets(BLOCKS, [i], 3, 64, 20, ordered=ordered) for i in range(7)])
    for per_call in (1, 64, 3 * 64, 1 << 20):   # one worker a call (at least one), one, three, all
        monkeypatch.setattr(sampling, "_KEYS_PER_CALL", per_call)
        got = Sampler(5).subsets(BLOCKS, np.arange(7), 3, 64, 20, ordered=ordered)
        assert np.array_equal(got, together) and np.array_equal(got, alone)


@pytest.mark.parametrize("m, size", [(6, 2), (40, 2)])   # the keys path and the rejection path
def test_marginals_are_tau_m_nice(m, size):
    """Every size-subset is equally likely (chi-square over all C(m, size) sets), and each block has
    marginal probability size/m."""
    s = Sampler(11)
    T, k = 4000, 8
    U = np.concatenate([s.subsets(BLOCKS, np.arange(k), t, m, size) for t in range(T)])
    if math.comb(m, size) <= 200:
        index = {c: j for j, c in enumerate(combinations(range(m), size))}
        counts = np.bincount([index[tuple(r)] for r in U], minlength=len(index))
        assert stats.chisquare(counts).pvalue > 1e-3
    freq = np.bincount(U.ravel(), minlength=m) / U.shape[0]
    se = math.sqrt((size / m) * (1 - size / m) / U.shape[0])
    assert np.all(np.abs(freq - size / m) <= 5 * se)


def test_workers_sample_independently():
    """The indicator of block 0 in U_i and in U_j (i != j) at the same t are uncorrelated; Fisher's test on the
    2x2 table of the pair does not reject independence; and a worker's draws at t and t + 1 are uncorrelated too."""
    s = Sampler(5)
    T, m, size = 20000, 10, 3
    U = np.stack([s.subsets(BLOCKS, np.arange(3), t, m, size) for t in range(T)])   # (T, 3, size)
    has0 = (U == 0).any(axis=2)                                                     # (T, 3)
    for a, b in [(0, 1), (1, 2), (0, 2)]:
        table = [[np.sum(has0[:, a] & has0[:, b]), np.sum(has0[:, a] & ~has0[:, b])],
                 [np.sum(~has0[:, a] & has0[:, b]), np.sum(~has0[:, a] & ~has0[:, b])]]
        assert stats.fisher_exact(table).pvalue > 1e-3
    r = np.corrcoef(has0[:-1, 0], has0[1:, 0])[0, 1]
    assert abs(r) < 5 / math.sqrt(T)


def test_independent_sparsification_is_unbiased():
    """(1/(n tau)) sum_i (v_i)_{U_i} averages to (1/n) sum_i v_i (within 4 standard errors), with the variance of
    the block facts: Var = (1/(n tau)^2) sum_i tau (1 - tau) v_i^2 per coordinate."""
    n, d, size = 4, 11, 2
    bp = BlockPartition(d, size)                  # m = 6, last block of size 1
    tau, tau_m = resolve_tau("auto", bp.m, n)     # tau m = 2
    rng = np.random.default_rng(42)
    v = rng.normal(size=(n, d))
    target = v.mean(0)
    s = Sampler(7)
    T = 40000
    est = np.zeros((T, d))
    for t in range(T):
        coords, owner = bp.coords_batch(s.subsets(BLOCKS, np.arange(n), t, bp.m, tau_m))
        np.add.at(est[t], coords, v[owner, coords])
    est /= n * tau
    mean, se = est.mean(0), est.std(0, ddof=1) / np.sqrt(T)
    assert np.all(np.abs(mean - target) <= 4 * se)
    var_theory = (tau * (1 - tau) * (v ** 2).sum(0)) / (n * tau) ** 2
    np.testing.assert_allclose(est.var(0, ddof=1), var_theory, rtol=0.05)


def test_per_worker_ground_sets_and_ordered_draws():
    """Minibatches: per-worker ground sets (l_i examples); ordered draws (shared-data ISAGA's n distinct examples)
    are uniform over positions too."""
    s = Sampler(2)
    l = np.array([3, 50, 7])
    for t in range(100):
        B = s.subsets(EXAMPLES, np.arange(3), t, l, 3)
        assert np.all(B < l[:, None]) and all(np.unique(r).size == 3 for r in B)
    first = np.array([s.subsets(EXAMPLES, [0], t, 5, 5, ordered=True)[0, 0] for t in range(5000)])
    assert stats.chisquare(np.bincount(first, minlength=5)).pvalue > 1e-3
    assert np.array_equal(s.subsets(BLOCKS, [0], 0, 6, 6)[0], np.arange(6))   # all blocks: no draw


def _first_distinct_by_sorting(cand, size):
    """The first ``size`` distinct values of each row, by a stable sort (the general path), for comparison."""
    k, R = cand.shape
    order = np.argsort(cand, axis=1, kind="stable")
    s = np.take_along_axis(cand, order, axis=1)
    new = np.ones((k, R), bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    keep = np.empty_like(new)
    np.put_along_axis(keep, order, new, axis=1)
    rank = np.cumsum(keep, axis=1)
    ok = rank[:, -1] >= size
    return cand[ok][keep[ok] & (rank[ok] <= size)].reshape(-1, size), ok


@pytest.mark.parametrize("size", [2, 3, 5, 8])
def test_fast_paths_of_first_distinct_match_the_sorting_one(size):
    """size 2 and small draws (pairwise comparisons) take shortcuts: the same values and the same failed rows as
    sorting, also where values repeat often (small ground sets make some rows fail)."""
    from isparse.compression.sampling import _first_distinct

    rng = np.random.default_rng(size)
    for m in (size, size + 1, 3 * size):
        cand = rng.integers(0, m, (400, 2 * size))
        got, ok = _first_distinct(cand, size)
        want, want_ok = _first_distinct_by_sorting(cand, size)
        assert np.array_equal(ok, want_ok) and np.array_equal(got, want)
        if m == size:
            assert not ok.all()       # the failing rows were exercised
