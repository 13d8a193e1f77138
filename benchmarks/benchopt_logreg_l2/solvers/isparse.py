"""isparse's methods as a benchopt solver: independent sparsification (arXiv:1901.09437) and its peers, with the
uplink bytes, rounds and the theorem's bound as columns.

Works in this repository's benchmark (benchmarks/benchopt_logreg_l2) and, unchanged, in benchopt's community
``benchmark_logreg_l2``: both hand a solver ``X, y, lmbd`` with the objective sum_j log(1 + exp(-y_j x_j^T beta)) +
(lmbd/2)||beta||^2, which is N x isparse's F with lam = lmbd / N (isparse.problems.glm: a mean). The extra columns
(uplink_bytes, rounds, bound, dist_sq) are returned only to an objective whose ``evaluate_result`` takes them (this
repository's); the community objective gets ``beta`` alone.

Parameters (benchopt's ``parameters``; each a key of isparse's run spec, docs/config.md):

- ``algorithm`` and ``tau`` (joint): isega, isaga, isgd, ibcd, diana, ef21 at tau = 1/n, and gd, sgd, saga at
  tau = 1 (the uncompressed baselines; another tau is skipped with the reason); any other name of
  ``isparse.METHODS`` and tau (a number in [1/m, 1] or "1/n") from the command line, e.g.
  ``-s "isparse[algorithm=isega,tau=0.25]"``;
- ``n_workers`` (workers.n, at most N), ``block_size`` (blocks.size, at most d), ``engine`` (inprocess, or dask: a LocalCluster of 2 processes on 127.0.0.1 started on first use),
  ``codec`` (messages.codec), ``step_rule`` (step.rule).

Sampling is benchopt's ``callback``: one run per curve; the callback is called at t = 0 and after every iteration
of isparse's master loop (``RunOptions.on_iteration``), so the curve's points are iterations of one run.
"""

import inspect
import math

import numpy as np
from benchopt import BaseSolver

#: the uncompressed baselines: tau = 1 only
FULL = ("gd", "sgd", "saga", "asgd")
_CLUSTER = {}


def _dask_client():
    """One LocalCluster for the process (2 workers, 1 thread each, 127.0.0.1, no dashboard), closed at exit."""
    if "client" not in _CLUSTER:
        import atexit

        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None,
                               processes=True)
        _CLUSTER["client"] = client = Client(cluster)
        atexit.register(lambda: (client.close(), cluster.close()))
    return _CLUSTER["client"]


class Solver(BaseSolver):
    name = "isparse"
    sampling_strategy = "callback"
    requirements = ["pip::isparse"]
    #: the IS methods and the peers at tau = 1/n, the uncompressed baselines at tau = 1
    parameters = {"algorithm, tau": [(a, "1/n") for a in ("isega", "isaga", "isgd", "ibcd", "diana", "ef21")]
                  + [(a, 1.0) for a in FULL if a != "asgd"],
                  "n_workers": [10], "block_size": [1], "engine": ["inprocess"], "codec": ["float64"],
                  "step_rule": ["theory"]}
    parameter_template = "{algorithm}[n={n_workers},tau={tau},b={block_size},{codec},{engine}]"

    def skip(self, X, y, lmbd, **_):
        N, d = X.shape
        if self.n_workers > N:
            return True, f"n_workers={self.n_workers} is larger than the number of samples N = {N}"
        if self.block_size > d:
            return True, f"block_size={self.block_size} is larger than d = {d}"
        if self.algorithm in FULL and str(self.tau) not in ("1", "1.0"):
            return True, f"algorithm={self.algorithm} is an uncompressed baseline: it runs at tau = 1 (got {self.tau})"
        return False, None

    def set_objective(self, X, y, lmbd, **_):
        import scipy.sparse as sp

        from isparse import Dataset, RunSpec, build
        from isparse.data import validate_arrays

        A = sp.csr_matrix(X, dtype=float)
        validate_arrays(A, "benchopt X")
        data = Dataset(A=A, b=np.asarray(y, dtype=float), name="benchopt", source="benchopt")
        lam = float(lmbd) / A.shape[0]   # the community's sum convention -> isparse's mean
        spec = RunSpec.from_dict({"algorithm": {"name": self.algorithm}, "workers.n": int(self.n_workers),
                                  "tau": self.tau, "blocks.size": int(self.block_size), "problem.lam": lam,
                                  "messages.codec": self.codec, "step.rule": self.step_rule})
        self.setup = build(spec, data=data)   # splits the rows, solves for x* (untimed: before the run)
        self.columns = self._objective_takes_columns()
        self.loop, self.pool = None, None

    def _objective_takes_columns(self) -> bool:
        objective = getattr(self, "_objective", None)
        if objective is None:
            return False
        params = inspect.signature(objective.evaluate_result).parameters
        return "uplink_bytes" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())

    def pre_run_hook(self, stop_val):
        """A fresh pool for each run (untimed): every curve starts from x^0 with fresh worker states."""
        from isparse import InProcessPool

        if self.pool is not None and hasattr(self.pool, "close"):
            self.pool.close()
        if self.engine == "dask":
            from isparse.engines.dask import DaskPool

            self.pool = DaskPool(_dask_client(), *self.setup.pool_args())
        else:
            self.pool = InProcessPool(*self.setup.pool_args())
        self.loop = None

    def run(self, callback):
        from isparse import DivergenceError

        def on_iteration(loop):
            self.loop = loop
            return callback()

        try:
            self.setup.run(self.pool, max_iter=2 ** 62, tol=0.0, log_every=2 ** 62, on_iteration=on_iteration)
        except DivergenceError:   # the curve ends at the last finite iterate
            pass

    def get_result(self):
        loop = self.loop
        x = np.array(loop.current() if loop is not None else self.setup.x0, dtype=float)
        if not self.columns:
            return dict(beta=x)
        x_star = self.setup.reference.x_star
        return dict(beta=x, uplink_bytes=loop.uplink_bytes if loop is not None else 0.0,
                    rounds=loop.t if loop is not None else 0,
                    bound=loop.bound_now() if loop is not None else math.nan,
                    dist_sq=float(np.sum((x - x_star) ** 2)))
