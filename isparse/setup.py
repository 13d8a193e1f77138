"""From plain parameters to the objects of one run: problem, x*, method, stepsize and bound.

This is the one place where a run's derived quantities (m, tau, tau*m, L, mu, gamma, r_0, F*)
are computed, so that the Hydra pipeline, the tests and a notebook all get the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import BlockPartition, resolve_tau, tau_per_n
from .data import Dataset, split_rows
from .errors import ConfigError, check_choice, check_range
from .methods import METHODS
from .problems import GLMProblem, Reference, reference_solve
from .regularizers import make_regularizer


def check_static(*, algorithm: str, n, block_size, tau, step_multiplier, max_iter, tol, log_every=1, seed=None,
                 step_rule: str = "theory") -> None:
    """Checks that need no data: run them before loading anything.

    Raises
    ------
    ConfigError
        Naming the key, the value and the allowed range.
    """
    check_choice("algorithm", algorithm, METHODS)
    check_range("workers.n", n, 1, None, integer=True)
    check_range("blocks.size", block_size, 1, None, integer=True)
    if tau_per_n(tau) is None and tau != "auto":   # tau_per_n raises for a malformed '<c>/n'
        try:
            tau_f = float(tau)
        except (TypeError, ValueError):
            tau_f = tau
        check_range("tau", tau_f, 0.0, 1.0, low_open=True)
    check_range("step.multiplier", step_multiplier, 0.0, None, low_open=True)
    check_choice("step.rule", step_rule, ["theory", "paper"])
    check_range("max_iter", max_iter, 1, None, integer=True)
    check_range("tol", tol, 0.0, None)   # 0: run all of max_iter
    check_range("tracking.log_every", log_every, 1, None, integer=True)
    if seed is not None:
        check_range("seed", seed, 0, None, integer=True)


@dataclass
class RunSetup:
    """Everything a run needs, derived once.

    Attributes
    ----------
    problem : GLMProblem or QuadraticProblem
    reference : Reference
        x*, F*, grad f_i(x*).
    method : Method
        With the run's seed.
    bound : LinearBound, SublinearBound or NoBound
        The theorem's bound for the stepsize used.
    x0 : ndarray of shape (d,)
    seed : int
        Seed of every random draw of the workers (``isparse.sampling``).
    shards : list
        What each worker holds: the problem's shards, or the whole data set for shared-data methods.
    rows : list of ndarray, optional
        The data rows behind each shard (None for problems not built from a data set).
    """

    problem: object
    reference: Reference
    method: object
    bound: object
    x0: np.ndarray
    seed: int
    shards: list
    rows: list | None = None

    def pool_args(self, seed: int | None = None) -> tuple:
        """(method, shards, x0): the arguments of ``InProcessPool`` and ``DaskPool(client, ...)``; ``seed`` gives the
        method another seed (another set of random draws)."""
        method = self.method if seed is None or int(seed) == self.method.seed else self.method.with_seed(seed)
        return method, self.shards, self.x0

    def run(self, pool=None, **kwargs):
        """Run on ``pool`` (default: a fresh in-process pool) with the pool's method; kwargs go to
        :func:`isparse.engines.run` (an asynchronous method runs on the pool's asynchronous view)."""
        from .engines import InProcessPool, run

        pool = pool if pool is not None else InProcessPool(*self.pool_args())
        method = pool.method
        engine = pool.asynchronous(seed=method.seed) if method.asynchronous else pool
        if method.asynchronous:
            kwargs.pop("checkpoint_every", None), kwargs.pop("on_checkpoint", None)
            if kwargs.get("resume") is not None:
                raise ConfigError("resume", "The 'resume' parameter is not supported for asynchronous methods; "
                                            "got a checkpoint.")
        return run(method, engine, self.problem, self.reference, self.bound, x0=self.x0, **kwargs)

    @property
    def derived(self) -> dict:
        """The derived parameters to log: n, m, d, N, tau, tau_m, L, mu, gamma, gamma_theory, r0, f_star."""
        p, m = self.problem, self.method
        return {"n": m.n, "m": m.blocks.m, "d": p.d, "N": p.N, "tau": m.tau, "tau_m": m.tau_m,
                "L": p.L, "mu": p.mu, "gamma": m.gamma, "gamma_theory": self.bound.gamma_theory,
                "r0": float(np.sum((self.x0 - self.reference.x_star) ** 2)), "f_star": self.reference.F_star,
                "sum_sq_local_grads_star": self.reference.sum_sq_local_grads,
                "bound_neighbourhood": self.bound.neighbourhood, "bound_rate": self.bound.rate,
                "bound_quantity": self.bound.quantity, "send_ids": m.sends_ids, **m.derived_params()}


def build(*, algorithm: str, data: Dataset | None = None, lam: float = 0.0, n: int, block_size: int, tau="auto",
          step_multiplier: float = 1.0, step_rule: str = "theory", seed: int = 0, split: str = "shuffle", split_seed: int = 0,
          reg: str = "none", reg_strength: float = 0.0, box=(-1.0, 1.0), reg_l2: float = 0.0, options: dict | None = None,
          reference: Reference | None = None, problem=None, loss: str = "logistic", penalty: str = "l2",
          cache_dir=None, send_ids: bool = False) -> RunSetup:
    """Build a run: split the rows, set up the problem, solve for x*, and let the method configure itself.

    Parameters
    ----------
    algorithm : str
        An id of ``isparse.methods.METHODS`` (ibcd, ibgd, isega, isaga, isaga_shared, isgd, iasgd, async_isgd,
        gd, sgd, saga, asgd, shared_bcd, diana, ef21).
    data : Dataset
        Builds a linear-model problem split over n workers; or pass ``problem``.
    lam : float
        lambda > 0 of the penalty (with ``data``).
    problem : QuadraticProblem, optional
        A problem already split over n workers, with its own start and closed-form reference.
    loss : {"logistic", "squared"}
    penalty : {"l2", "nonconvex"}
    n : int
        Workers, 1 <= n <= N.
    block_size : int
        b, 1 <= b <= d; m = ceil(d/b).
    tau : "auto", "<c>/n" or float
        Fraction of blocks sent, in [1/m, 1] with tau*m integer; auto = ceil(m/n)/m. Forced to 1
        for the full-communication baselines (gd, sgd, saga, asgd).
    step_multiplier : float
        gamma = step_multiplier x the rule's gamma (> 0).
    step_rule : {"theory", "paper"}
        ``paper``: the stepsize of the paper's experiments where it differs (``isparse.theory.paper``).
    seed : int
        Seed of every random draw of the workers.
    split, split_seed : str, int
        Row split (``isparse.data.split_rows``).
    reg, reg_strength, box, reg_l2 : R for the proximal methods (isega, diana).
    options : dict, optional
        Method options from the algorithm config (``batch``, ``schedule``, ``alpha``, ``rho``).
    reference : Reference, optional
        A cached reference solution of the same problem (skips the solve).
    cache_dir : str or Path, optional
        Keep x*, grad f_i(x*) and L_i on disk there (``isparse.cache``).
    send_ids : bool
        Messages carry the block ids too (4 B each; the old convention); default: values only.

    Raises
    ------
    ConfigError
        n > N, block size > d, tau out of [1/m, 1] or tau*m not integer, unknown algorithm or reg, or a
        problem that lacks what the method needs.
    """
    from .methods import Context, check_regularizer, method_class

    options = dict(options or {})
    check_static(algorithm=algorithm, n=n, block_size=block_size, tau=tau, step_multiplier=step_multiplier,
                 max_iter=1, tol=1.0, seed=seed, step_rule=step_rule)
    cls = method_class(algorithm)
    check_choice("problem.loss", loss, ["logistic", "squared"])
    check_choice("problem.penalty", penalty, ["l2", "nonconvex"])
    if problem is None:
        check_range("workers.n", n, 1, data.N, high_text="N (rows of the data set)", integer=True)
    d = problem.d if problem is not None else data.d
    blocks = BlockPartition(d, int(block_size))
    if cls.full:
        if tau not in ("auto", 1, 1.0):
            raise ConfigError("tau", f"The 'tau' parameter must be auto or 1 for algorithm={algorithm} "
                                     f"(a full-communication baseline); got {tau!r}.")
        tau = 1.0
    tau_f, tau_m = resolve_tau(tau, blocks.m, int(n))
    regularizer = make_regularizer(reg, reg_strength, *box, l2_strength=reg_l2)
    check_regularizer(algorithm, regularizer)      # before the reference solve
    if problem is None:
        problem = GLMProblem(data, split_rows(data.N, int(n), split, split_seed), lam, regularizer, loss, penalty)
    elif regularizer.name != "none":
        raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for {problem.name}; got {reg!r}.")
    ctx = Context(algorithm=algorithm, problem=problem, reference=None, n=int(n), blocks=blocks, tau=tau_f,
                  tau_m=tau_m, step_multiplier=step_multiplier, step_rule=step_rule, seed=int(seed),
                  send_ids=bool(send_ids), options=options, regularizer=regularizer, data=data)
    cls.check(ctx)                                 # what the method needs, before the reference solve
    if reference is None and hasattr(problem, "reference"):
        reference = problem.reference()
    elif reference is None and cache_dir is not None:
        from .cache import load_or_solve, problem_key

        reference, _ = load_or_solve(problem, reference_solve, cache_dir, problem_key(problem, split, split_seed))
    elif reference is None:
        reference = reference_solve(problem)
    ctx.reference = reference
    ctx.x0 = problem.start() if hasattr(problem, "start") else np.zeros(d)
    method, bound = cls.configure(ctx)
    method.name = algorithm
    shards, rows = cls.shards(ctx)
    return RunSetup(problem=problem, reference=reference, method=method, bound=bound, x0=ctx.x0, seed=int(seed),
                    shards=shards, rows=rows)
