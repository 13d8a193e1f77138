"""The method contract, table-driven: every algorithm id through both engines, what each needs checked before work,
and the message format (values only vs ids sent) giving the same iterates."""

import numpy as np
import pytest

from isparse import ConfigError, InProcessPool, METHODS, load_dataset
from specs import make
from isparse.engines.dask import DaskPool
from isparse.problems import QuadraticProblem
from isparse.problems.quadratic import QuadraticShard

#: algorithm id -> problem it runs on here (the accelerated methods need a computable strong-growth constant)
ON_QUADRATIC = {"iasgd", "asgd"}


@pytest.fixture(scope="module")
def breast_cancer():
    return load_dataset("breast_cancer")


@pytest.fixture(scope="module")
def quadratic():
    return QuadraticProblem(d=12, o=6, n=5, seed=1)


def _setup(algorithm, breast_cancer, quadratic, **kw):
    if algorithm in ON_QUADRATIC:
        return make(algorithm=algorithm, problem=quadratic, n=5, block_size=2, seed=4, **kw)
    return make(algorithm=algorithm, data=breast_cancer, lam=0.1, n=5, block_size=2, seed=4, **kw)


def test_the_table_covers_every_algorithm():
    """Every registered method is an option of the algorithm group (its options dataclass in Hydra's ConfigStore)."""
    from hydra.core.config_store import ConfigStore

    assert set(METHODS) == {name.removesuffix(".yaml") for name in ConfigStore.instance().list("algorithm")}
    assert len(METHODS) == 15


@pytest.mark.parametrize("algorithm", sorted(METHODS))
def test_every_method_runs_on_both_engines_with_the_same_iterates(dask_client, breast_cancer, quadratic, algorithm):
    s = _setup(algorithm, breast_cancer, quadratic)
    T = 40
    local = s.run(InProcessPool(*s.pool_args()), max_iter=T, tol=1e-300, keep_iterates=True, log_every=10)
    assert local.iterations == T and np.all(np.isfinite(local.x))
    assert np.abs(local.iterates[-1] - local.iterates[0]).max() > 1e-6          # the run moved
    remote = s.run(DaskPool(dask_client, *s.pool_args()), max_iter=T, tol=1e-300, keep_iterates=True, log_every=10)
    if s.method.traits.asynchronous:   # truly concurrent on Dask: the arrival order is the cluster's, not a seeded model's
        assert remote.iterations == T and np.all(np.isfinite(remote.x))
        return
    # to the bit: a worker's draws and sums do not depend on which host runs it or who shares that host
    np.testing.assert_array_equal(np.array(remote.iterates), np.array(local.iterates))
    assert [r["uplink_bytes"] for r in remote.records] == [r["uplink_bytes"] for r in local.records]


@pytest.mark.parametrize("algorithm", sorted(a for a, cls in METHODS.items()
                                             if cls.traits.derivable_ids and not cls.traits.full and a != "ibgd"))
def test_values_only_messages_give_the_iterates_of_id_carrying_ones(breast_cancer, quadratic, algorithm):
    """The master recomputes the block ids from (seed, i, t): dropping them from the messages changes nothing but
    the bytes (4 B per id less)."""
    a = _setup(algorithm, breast_cancer, quadratic)
    b = _setup(algorithm, breast_cancer, quadratic, send_ids=True)
    ra = a.run(max_iter=30, tol=1e-300, keep_iterates=True, log_every=30)
    rb = b.run(max_iter=30, tol=1e-300, keep_iterates=True, log_every=30)
    np.testing.assert_array_equal(np.array(ra.iterates), np.array(rb.iterates))
    messages = 30 if a.method.traits.asynchronous else 30 * a.method.n      # an asynchronous iteration is one message
    ids = messages * a.method.tau_m * 4
    assert rb.records[-1]["uplink_bytes"] - ra.records[-1]["uplink_bytes"] == ids
    assert ra.records[-1]["uplink_bytes"] == messages * a.method.tau_m * a.method.blocks.size * 8


def test_ef21_always_sends_its_top_k_ids(breast_cancer, quadratic):
    s = _setup("ef21", breast_cancer, quadratic)
    assert s.method.sends_ids
    res = s.run(max_iter=10, tol=1e-300, log_every=10)
    assert res.records[-1]["uplink_bytes"] == 10 * 5 * s.method.tau_m * (2 * 8 + 4)


class _GradientsOnly(QuadraticShard):
    """A shard whose stacked data give whole local gradients only (no per-example or per-coordinate gradients)."""

    capabilities = ("grads",)


class _GradientsOnlyProblem(QuadraticProblem):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.shards = [_GradientsOnly(s.M) for s in self.shards]


@pytest.mark.parametrize("algorithm, missing", [("isaga", "example_grads_at"), ("isgd", "minibatch_grads_at"),
                                                ("isega", "grads_at"), ("ibcd", "grads_at")])
def test_a_problem_lacking_what_a_method_needs_is_refused_before_work(algorithm, missing):
    p = _GradientsOnlyProblem(d=8, o=4, n=3, seed=0)
    with pytest.raises(ConfigError, match=f"_GradientsOnlyProblem is not compatible with algorithm={algorithm}: it "
                                          f"must provide {missing} \\(it provides exact_reference, grads, "
                                          f"strong_growth\\)"):
        make(algorithm=algorithm, problem=p, n=3, block_size=1)
    make(algorithm="ibgd", problem=p, n=3, block_size=1).run(max_iter=5, tol=1e-300)   # needs only grads


def test_shared_data_method_needs_a_data_set(quadratic):
    with pytest.raises(ConfigError, match="'data' parameter must be a data set for algorithm=isaga_shared"):
        make(algorithm="isaga_shared", problem=quadratic, n=5, block_size=1)


@pytest.mark.parametrize("algorithm", ["isega", "isaga", "isaga_shared", "ef21"])
def test_checkpoints_are_values_that_later_steps_leave_alone(breast_cancer, quadratic, algorithm):
    """A checkpoint holds the states themselves (no deep copy); the steps after it must not write into them,
    and resuming from it gives the uninterrupted run's iterates to the bit."""
    import copy

    s = _setup(algorithm, breast_cancer, quadratic)
    taken = []
    full = s.run(max_iter=60, tol=1e-300, keep_iterates=True, log_every=60, checkpoint_every=20,
                 on_checkpoint=lambda ck: taken.append((ck, copy.deepcopy(ck))))
    assert len(taken) == 3
    for ck, frozen in taken:
        for got, want in zip([ck.master, *[w.state for w in ck.workers]], [frozen.master, *[w.state for w in frozen.workers]]):
            for a, b in zip(got or (), want or ()):
                np.testing.assert_array_equal(a, b)
    resumed = s.run(max_iter=60, tol=1e-300, keep_iterates=True, log_every=60, resume=taken[0][0])
    np.testing.assert_array_equal(resumed.iterates[-1], full.iterates[-1])
    # the cumulative counters go on from the checkpoint's instead of starting again at 0
    assert resumed.records[-1]["wall_s"] >= taken[0][0].counters["wall_s"] > 0
    # the resumed run's records start at t = 0 (its convergence figure is drawn from them): the uninterrupted run's
    # steps, with the same values where they do not measure time
    assert [r["step"] for r in resumed.records] == [r["step"] for r in full.records] == [0, 60]
    assert resumed.records[0]["dist_sq"] == full.records[0]["dist_sq"]


@pytest.mark.parametrize("algorithm", ["isega", "isaga"])
def test_a_dask_checkpoint_resumes_in_process_with_the_same_iterates(dask_client, breast_cancer, quadratic, algorithm):
    """Checkpoints do not depend on the placement: the hosts' snapshots are regrouped by logical worker."""
    s = _setup(algorithm, breast_cancer, quadratic)
    taken = []
    s.run(DaskPool(dask_client, *s.pool_args()), max_iter=20, tol=1e-300, checkpoint_every=20,
          on_checkpoint=taken.append)
    assert len(taken[0].workers) == 2                     # two Dask workers, two host snapshots
    local = s.run(max_iter=50, tol=1e-300, keep_iterates=True, log_every=50)
    resumed = s.run(max_iter=50, tol=1e-300, keep_iterates=True, log_every=50, resume=taken[0])
    np.testing.assert_allclose(resumed.iterates[-1], local.iterates[-1], rtol=0, atol=1e-12)
    assert resumed.records[-1]["uplink_bytes"] == local.records[-1]["uplink_bytes"]


def test_a_state_that_cannot_fit_in_memory_is_refused_before_work():
    """ISAGA's tables at d = 10^7: refused with the size before the reference solve (no data read past the check)."""
    import scipy.sparse as sp

    from isparse import Dataset

    N, d = 20_000, 10**7
    rng = np.random.default_rng(0)
    A = sp.csr_matrix((np.ones(N), (np.arange(N), rng.integers(0, d, N))), shape=(N, d))
    data = Dataset(A=A, b=np.where(rng.random(N) < 0.5, -1.0, 1.0), name="wide", source="test")
    with pytest.raises(ConfigError, match=r"algorithm=isaga needs about 1.49e\+03 GiB for its state \(the SAGA tables"):
        make(algorithm="isaga", data=data, lam=1e-3, n=4, block_size=1)
    with pytest.raises(ConfigError, match=r"algorithm=isaga_shared needs about 2.98e\+03 GiB"):
        make(algorithm="isaga_shared", data=data, lam=1e-3, n=4, block_size=1)


def test_the_box_a_method_author_subclasses_shows_fourteen_names():
    """What a method author writes and calls, and nothing the engines alone use (issue: at most 15 public names)."""
    from isparse.methods import Method

    assert sorted(n for n in dir(Method) if not n.startswith("_")) == [
        "aggregate", "averaged_step", "local_grads", "master_init", "master_step", "memory_rate", "name", "options",
        "sampled", "send", "theory", "traits", "worker_init", "worker_step"]
