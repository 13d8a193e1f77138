"""From plain parameters to the objects of one run: problem, x*, method, stepsize and bound.

This is the one place where a run's derived quantities (m, tau, tau*m, L, mu, gamma, r_0, F*)
are computed, so that the Hydra pipeline, the tests and a notebook all get the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .blocks import BlockPartition, resolve_tau, tau_per_n, worker_streams
from .data import Dataset, split_rows
from .errors import ConfigError, check_choice, check_range
from .methods import METHODS, isgd_schedule, make_method
from .problems import GLMProblem, Reference, reference_solve
from .regularizers import make_regularizer
from .theory import NoBound
from .theory.isgd import theorem7_stepsize


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
    check_range("tol", tol, 0.0, None, low_open=True)
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
    bound : LinearBound, SublinearBound or NoBound
        The theorem's bound for the stepsize used.
    x0 : ndarray of shape (d,)
        Zero.
    seed : int
        Seed of the workers' random streams.
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

    def streams(self, seed: int | None = None):
        """Fresh per-worker random streams spawned from ``seed`` (default: the run's)."""
        return worker_streams(self.seed if seed is None else seed, self.method.n)

    def pool_args(self, seed: int | None = None) -> tuple:
        """(method, shards, streams, x0): the arguments of ``InProcessPool`` and ``DaskPool(client, ...)``."""
        return self.method, self.shards, self.streams(seed), self.x0

    def run(self, pool=None, **kwargs):
        """Run on ``pool`` (default: a fresh in-process pool); kwargs go to :func:`isparse.engines.run`
        (or to :func:`isparse.engines.async_loop.run_async` for an asynchronous method)."""
        from .engines import InProcessPool, run
        from .engines.async_loop import run_async

        pool = pool if pool is not None else InProcessPool(*self.pool_args())
        if getattr(self.method, "asynchronous", False):
            kwargs.setdefault("async_pool", pool.asynchronous(seed=self.seed))
            kwargs.pop("progress", None)
            if kwargs.pop("resume", None) is not None:
                raise ConfigError("resume", "The 'resume' parameter is not supported for asynchronous methods; got a checkpoint.")
            kwargs.pop("checkpoint_every", None), kwargs.pop("on_checkpoint", None)
            return run_async(self.method, pool, self.problem, self.reference, self.bound, x0=self.x0, **kwargs)
        kwargs.pop("async_pool", None)
        return run(self.method, pool, self.problem, self.reference, self.bound, x0=self.x0, **kwargs)

    @property
    def derived(self) -> dict:
        """The derived parameters to log: n, m, d, N, tau, tau_m, L, mu, gamma, gamma_theory, r0, f_star."""
        p, m = self.problem, self.method
        return {"n": m.n, "m": m.blocks.m, "d": p.d, "N": p.N, "tau": m.tau, "tau_m": m.tau_m,
                "L": p.L, "mu": p.mu, "gamma": m.gamma, "gamma_theory": self.bound.gamma_theory,
                "r0": float(np.sum((self.x0 - self.reference.x_star) ** 2)), "f_star": self.reference.F_star,
                "sum_sq_local_grads_star": self.reference.sum_sq_local_grads,
                "bound_neighbourhood": self.bound.neighbourhood, "bound_rate": self.bound.rate,
                "bound_quantity": self.bound.quantity, **({"rho": m.rho} if hasattr(m, "rho") else {})}


def build(*, algorithm: str, data: Dataset | None = None, lam: float = 0.0, n: int, block_size: int, tau="auto",
          step_multiplier: float = 1.0, step_rule: str = "theory", seed: int = 0, split: str = "shuffle", split_seed: int = 0,
          reg: str = "none", reg_strength: float = 0.0, box=(-1.0, 1.0), reg_l2: float = 0.0, options: dict | None = None,
          reference: Reference | None = None, problem=None, loss: str = "logistic", penalty: str = "l2",
          cache_dir=None) -> RunSetup:
    """Build a run: split the rows, set up the problem, solve for x*, pick gamma = multiplier x theorem's gamma.

    Parameters
    ----------
    algorithm : str
        An id of ``isparse.methods.SPECS`` (ibcd, ibgd, isega, isaga, isgd, gd, sgd, saga, shared_bcd, diana, ef21).
    data : Dataset
        Builds an l2-regularized logistic problem split over n workers; or pass ``problem``.
    lam : float
        lambda > 0 of the l2 term (with ``data``).
    problem : QuadraticProblem, optional
        A problem already split over n workers, with its own start and closed-form reference.
    loss : {"logistic", "squared"}
        The loss of the linear model built from ``data`` (squared = least squares / ridge).
    penalty : {"l2", "nonconvex"}
        (lambda/2)||x||^2, or the non-convex lambda sum_k x_k^2/(1 + x_k^2) (Theorem 7; only isgd/sgd get a bound).
    n : int
        Workers, 1 <= n <= N.
    block_size : int
        b, 1 <= b <= d; m = ceil(d/b).
    tau : "auto" or float
        Fraction of blocks sent, in [1/m, 1] with tau*m integer; auto = ceil(m/n)/m. Forced to 1
        for the full-communication baselines gd, sgd, saga.
    step_multiplier : float
        gamma = step_multiplier x the theorem's gamma (> 0); for decreasing steps every gamma_t is scaled.
    step_rule : {"theory", "paper"}
        ``paper``: the stepsize of the paper's experiments where it differs from the theorem's
        (``isparse.theory.paper``: ISEGA 4x, ISGD/SGD 1/(5L), shared ISAGA/SAGA 1/(L(3/n + tau))),
        times ``step_multiplier``. The bound is still the theorem's, flagged not applicable when gamma
        exceeds the theorem's.
    seed : int
        Seed of the workers' sampling streams.
    split, split_seed : str, int
        Row split (``isparse.data.split_rows``).
    reg, reg_strength, box, reg_l2 : R for the proximal methods (isega, diana): ``none``, ``l1`` or ``l2``
        (weight ``reg_strength``), ``elastic_net`` (l1 weight ``reg_strength``, l2 weight ``reg_l2``), ``box``.
    options : dict, optional
        Method options: ``batch`` (minibatch per worker), ``schedule`` (``constant`` or ``decreasing``), ``alpha``.
    reference : Reference, optional
        A cached reference solution of the same problem (skips the solve).
    cache_dir : str or Path, optional
        Keep x*, grad f_i(x*) and L_i on disk there, keyed by data set, lambda, split and n
        (``isparse.cache``), so the jobs of a sweep solve each reference problem once.

    Raises
    ------
    ConfigError
        n > N, block size > d, tau out of [1/m, 1] or tau*m not integer, unknown algorithm or reg.
    """
    from .methods import IASGD, ISGD, SPECS, AsyncISGD, check_compatible, check_regularizer

    options = dict(options or {})
    check_static(algorithm=algorithm, n=n, block_size=block_size, tau=tau, step_multiplier=step_multiplier,
                 max_iter=1, tol=1.0, seed=seed, step_rule=step_rule)
    spec = SPECS[algorithm]
    check_choice("problem.loss", loss, ["logistic", "squared"])
    check_choice("problem.penalty", penalty, ["l2", "nonconvex"])
    if problem is None:
        check_range("workers.n", n, 1, data.N, high_text="N (rows of the data set)", integer=True)
    d = problem.d if problem is not None else data.d
    blocks = BlockPartition(d, int(block_size))
    if spec.full:
        if tau not in ("auto", 1, 1.0):
            raise ConfigError("tau", f"The 'tau' parameter must be auto or 1 for algorithm={algorithm} "
                                     f"(a full-communication baseline); got {tau!r}.")
        tau = 1.0
    tau_f, tau_m = resolve_tau(tau, blocks.m, int(n))
    batch = check_range("algorithm.batch", options.get("batch", 1), 1, None, integer=True)
    schedule = check_choice("algorithm.schedule", options.get("schedule", "constant"), ["constant", "decreasing"])
    regularizer = make_regularizer(reg, reg_strength, *box, l2_strength=reg_l2)
    check_regularizer(algorithm, regularizer)      # before the reference solve
    if problem is None:
        problem = GLMProblem(data, split_rows(data.N, int(n), split, split_seed), lam, regularizer, loss, penalty)
    elif regularizer.name != "none":
        raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for {problem.name}; got {reg!r}.")
    if problem.mu <= 0 and issubclass(spec.cls, IASGD):
        raise ConfigError("problem.penalty", f"The 'problem.penalty' parameter must be l2 for algorithm={algorithm} "
                                             f"(the accelerated step needs mu > 0); got {penalty!r}.")
    check_compatible(algorithm, problem)
    if reference is None and hasattr(problem, "reference"):
        reference = problem.reference()
    elif reference is None and cache_dir is not None:
        from .cache import load_or_solve, problem_key

        reference, _ = load_or_solve(problem, reference_solve, cache_dir, problem_key(problem, split, split_seed))
    elif reference is None:
        reference = reference_solve(problem)
    ref = reference
    x0 = problem.start() if hasattr(problem, "start") else np.zeros(d)
    extra = {}
    constants = dict(L=problem.L, mu=problem.mu, n=int(n), tau=tau_f, r0=float(np.sum((x0 - ref.x_star) ** 2)),
                     sum_sq_local_grads=ref.sum_sq_local_grads)
    shards, rows = problem.shards, getattr(problem, "parts", None)
    if getattr(spec.cls, "shared_data", False):    # Alg. 4: every worker holds the whole data set
        if data is None:
            raise ConfigError("data", f"The 'data' parameter must be a data set for algorithm={algorithm} "
                                      f"(the workers share its examples); got {problem.name!r}.")
        whole = GLMProblem(data, [np.arange(data.N)], lam, loss=loss, penalty=penalty)   # psi_j = phi_j + P
        shards, rows = [whole.shards[0]] * int(n), [whole.parts[0]] * int(n)
        constants.update(L_example=whole.L_example, N=data.N, sum_sq_example_grads=whole.sum_sq_example_grads(ref.x_star))
        extra["N"] = data.N
    elif spec.smoothness == "L_example":
        constants.update(L_example=problem.L_example, l_max=max(s.l for s in problem.shards),
                         sum_sq_example_grads=problem.sum_sq_example_grads(ref.x_star))
    smooth = constants[spec.smoothness]
    if spec.cls in (ISGD, AsyncISGD):
        constants["sigma_sq"] = float(np.mean([s.gradient_noise_bound(batch) for s in problem.shards]))
        constants["decreasing"] = schedule == "decreasing"
        if problem.mu <= 0:   # Theorem 7's constants
            constants.update(nu_sq=problem.gradient_dissimilarity_bound(), f0_minus_low=problem.F(x0))
        extra["batch"] = batch
        if schedule == "decreasing":
            a, c = isgd_schedule(problem.L, problem.mu, int(n), tau_f)
            extra["schedule"] = (a / step_multiplier, c / step_multiplier)
    if issubclass(spec.cls, IASGD):
        rho, computed = _iasgd_rho(problem, options.get("rho"), batch, int(n), tau_f)
        rho /= step_multiplier                      # a larger multiplier means a larger step 1/(rho L)
        computed = computed and step_multiplier <= 1
        constants.update(rho=rho, rho_is_computed=computed, subopt0=problem.F(x0) - ref.F_star)
        extra.update(L=problem.L, mu=problem.mu, rho=rho, batch=batch)
        gamma = 1.0 / (rho * problem.L)
    elif "schedule" in extra:
        gamma = 1.0 / extra["schedule"][0]          # gamma_0 of the decreasing schedule
    elif spec.cls is ISGD and problem.mu <= 0:      # non-convex: Theorem 7's stepsize
        gamma = step_multiplier * theorem7_stepsize(problem.L, problem.mu, int(n), tau_f)
    else:
        rule = spec.paper_stepsize if step_rule == "paper" and spec.paper_stepsize else spec.stepsize
        gamma = step_multiplier * rule(smooth, problem.mu, int(n), tau_f)
    if algorithm == "diana" and options.get("alpha") is not None:
        extra["alpha"] = float(options["alpha"])
    method = make_method(algorithm, n=n, blocks=blocks, tau_m=tau_m, gamma=gamma, reg=regularizer, seed=seed, **extra)
    if getattr(spec.cls, "shared_data", False):       # Theorem 2's Lyapunov targets, grad psi_j(x*)
        method.targets = np.stack([shards[0].example_grad(ref.x_star, j) for j in range(data.N)])
    if spec.bound is None:
        bound = NoBound(theorem=f"no theorem of arXiv:1901.09437 covers {algorithm}",
                        gamma_theory=spec.stepsize(smooth, problem.mu, int(n), tau_f), gamma=gamma)
    elif problem.mu <= 0 and spec.cls is not ISGD:
        bound = NoBound(theorem=f"the theorem for {algorithm} needs a strongly convex f", gamma_theory=gamma, gamma=gamma)
    else:
        bound = spec.bound(gamma=gamma, **constants)
    return RunSetup(problem=problem, reference=ref, method=method, bound=bound, x0=x0, seed=int(seed), shards=shards,
                    rows=rows)


def _iasgd_rho(problem, rho, batch, n, tau):
    """(rho, computed): the configured rho, or rho_hat of ``isparse.theory.iasgd`` where it can be computed."""
    from .theory import strong_growth_rho

    if rho is not None:
        return float(check_range("algorithm.rho", rho, 1.0, None)), False
    rho_tilde = problem.strong_growth_constant() if hasattr(problem, "strong_growth_constant") else None
    exact = all(s.l <= batch for s in problem.shards)   # minibatch = whole shard: rho_bar = 0
    if rho_tilde is None or not exact:
        raise ConfigError("algorithm.rho", f"The 'algorithm.rho' parameter must be set (a number >= 1) for "
                                           f"{type(problem).__name__}: its strong-growth constant cannot be computed "
                                           f"(it needs Assumption 2 and exact local gradients); got null.")
    return strong_growth_rho(rho_tilde, 0.0, n, tau), True
