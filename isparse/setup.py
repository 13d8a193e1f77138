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


def option_keys(cls) -> tuple:
    """The option keys (``algorithm.<key>``, ``build(options=...)``) method class ``cls`` reads; see conf/algorithm/.

    A method class may set ``option_keys`` itself; else by family: ISGD-type (isgd, sgd, async_isgd) batch and
    schedule, IASGD-type (iasgd, asgd) batch and rho, DIANA alpha, the others none.
    """
    own = getattr(cls, "option_keys", None)
    if own is not None:
        return tuple(own)
    from .methods.iasgd import IASGD
    from .methods.isgd import ISGD
    from .methods.peers import DIANA

    if issubclass(cls, IASGD):
        return ("batch", "rho")
    if issubclass(cls, ISGD):
        return ("batch", "schedule")
    if issubclass(cls, DIANA):
        return ("alpha",)
    return ()


def _finite(key, value):
    """``value`` if it is a finite number (check_range lets inf through where there is no upper bound)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not np.isfinite(value):
        raise ConfigError(key, f"The '{key}' parameter must be a finite number; got {value!r}.")
    return value


def check_bool(key: str, value) -> bool:
    """``value`` if it is true or false (not a string, not a number).

    Raises
    ------
    ConfigError
        Naming the key and the value.
    """
    if not isinstance(value, bool):
        raise ConfigError(key, f"The '{key}' parameter must be true or false; got {value!r}.")
    return value


def check_options(algorithm: str, options: dict | None) -> dict:
    """The algorithm's options, checked: only the keys the method reads, each value in its range.

    ``batch`` an integer >= 1; ``schedule`` constant or decreasing; ``rho`` null or a finite number >= 1;
    ``alpha`` null or a number in (0, 1] (DIANA also needs alpha <= tau, checked when tau is known).

    Raises
    ------
    ConfigError
        An option the method does not read (``algorithm.<key>``, with the ones it reads), or a value out of range.
    """
    from .methods import method_class

    options = dict(options or {})
    keys = option_keys(method_class(algorithm))
    unknown = [k for k in options if k not in keys]
    if unknown:
        raise ConfigError(f"algorithm.{unknown[0]}",
                          f"The 'algorithm.{unknown[0]}' parameter is not an option of algorithm={algorithm} "
                          f"(its options: {', '.join(keys) if keys else 'none'}); got {options[unknown[0]]!r}.")
    if "batch" in options:
        check_range("algorithm.batch", options["batch"], 1, None, integer=True)
    if "schedule" in options:
        check_choice("algorithm.schedule", options["schedule"], ["constant", "decreasing"])
    if options.get("rho") is not None:
        _finite("algorithm.rho", check_range("algorithm.rho", options["rho"], 1.0, None))
    if options.get("alpha") is not None:
        check_range("algorithm.alpha", options["alpha"], 0.0, 1.0, low_open=True)
    return options


def check_static(*, algorithm: str, n, block_size, tau, step_multiplier, max_iter, tol, log_every=1, seed=None,
                 step_rule: str = "theory", data: str | None = None, lam=None, loss=None, penalty=None, reg=None,
                 reg_strength=None, reg_l2=None, box=None, split=None, split_seed=None, options=None,
                 checkpoint_every=None) -> None:
    """Checks that need no data: run them before loading anything.

    The keyword arguments after ``step_rule`` are optional (None: not checked); ``data`` is the data set's name
    (``quadratic`` has no penalty, loss or rows: a ``lam``, ``loss``, ``penalty``, ``split`` or ``split_seed`` other
    than the defaults is refused there rather than ignored). Values: lam a finite number > 0 (0 for quadratic);
    loss logistic or squared; penalty l2 or nonconvex; reg one of none, l1, l2, elastic_net, box, with
    reg_strength (l1, l2, elastic_net) and reg_l2 (elastic_net) finite numbers >= 0 and 0 where unused, box a pair
    [lower, upper] of numbers with lower < upper (checked whatever reg is); split shuffle or contiguous;
    split_seed an integer >= 0; options see :func:`check_options`; checkpoint_every an integer >= 0.

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
    _finite("step.multiplier", check_range("step.multiplier", step_multiplier, 0.0, None, low_open=True))
    check_choice("step.rule", step_rule, ["theory", "paper"])
    check_range("max_iter", max_iter, 1, None, integer=True)
    _finite("tol", check_range("tol", tol, 0.0, None))   # 0: run all of max_iter
    check_range("tracking.log_every", log_every, 1, None, integer=True)
    if seed is not None:
        check_range("seed", seed, 0, None, integer=True)
    if checkpoint_every is not None:
        check_range("checkpoint.every", checkpoint_every, 0, None, integer=True)
    if options is not None:
        check_options(algorithm, options)
    quadratic = data == "quadratic"
    if lam is not None:
        if quadratic:
            if isinstance(lam, bool) or not isinstance(lam, (int, float)) or lam != 0:
                raise ConfigError("problem.lam", f"The 'problem.lam' parameter must be 0 for data=quadratic (problem "
                                                 f"(17) has no penalty: a lambda would be ignored); got {lam!r}.")
        else:
            _finite("problem.lam", check_range("problem.lam", lam, 0.0, None, low_open=True))
    for key, value, allowed, default in (("problem.loss", loss, ["logistic", "squared"], "logistic"),
                                         ("problem.penalty", penalty, ["l2", "nonconvex"], "l2"),
                                         ("workers.split", split, ["shuffle", "contiguous"], "shuffle")):
        if value is None:
            continue
        if quadratic and value != default:
            raise ConfigError(key, f"The '{key}' parameter must be {default} for data=quadratic (problem (17) is "
                                   f"given per worker: it would be ignored); got {value!r}.")
        check_choice(key, value, allowed)
    if split_seed is not None:
        check_range("workers.split_seed", split_seed, 0, None, integer=True)
        if quadratic and split_seed != 0:
            raise ConfigError("workers.split_seed", f"The 'workers.split_seed' parameter must be 0 for data=quadratic "
                                                    f"(no rows are split: it would be ignored); got {split_seed!r}.")
    if reg is not None:
        _check_reg(reg, reg_strength, reg_l2, box)


def _check_reg(reg, strength, l2, box) -> None:
    from .regularizers import NAMES

    check_choice("problem.reg", reg, NAMES)
    uses = {"none": (), "l1": ("reg_strength",), "l2": ("reg_strength",), "elastic_net": ("reg_strength", "reg_l2"),
            "box": ("box",)}[reg]
    for name, value in (("reg_strength", strength), ("reg_l2", l2)):
        if value is None:
            continue
        key = f"problem.{name}"
        _finite(key, check_range(key, value, 0.0, None))
        if name not in uses and value != 0:
            raise ConfigError(key, f"The '{key}' parameter must be 0 with problem.reg={reg} (it is used by "
                                   f"{'l1, l2 and elastic_net' if name == 'reg_strength' else 'elastic_net'} only: it "
                                   f"would be ignored); got {value!r}.")
    if box is not None:   # its shape always (a malformed box breaks the run even when unused), used by box only
        pair = list(box) if isinstance(box, (list, tuple)) else None
        if (pair is None or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) or v != v for v in pair)
                or not pair[0] < pair[1]):
            raise ConfigError("problem.box", f"The 'problem.box' parameter must be [lower, upper], two numbers with "
                                             f"lower < upper; got {box!r}.")


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
        """The derived parameters to log: n, m, d, N, tau, tau_m, L, mu, gamma, gamma_theory (the theorem's rule),
        gamma_max (the largest stepsize its bound allows; nan where no bound), r0, f_star."""
        p, m = self.problem, self.method
        return {"n": m.n, "m": m.blocks.m, "d": p.d, "N": p.N, "tau": m.tau, "tau_m": m.tau_m,
                "L": p.L, "mu": p.mu, "gamma": m.gamma, "gamma_theory": self.bound.gamma_theory,
                "gamma_max": self.bound.gamma_max if self.bound.gamma_max is not None else float("nan"),
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
        n > N, block size > d, tau out of [1/m, 1] or tau*m not integer, unknown algorithm or reg, an option the
        method does not read or out of its range (:func:`check_options`), a problem that lacks what the method needs,
        or a stepsize that is not a finite number > 0.
    DataError
        L, mu or kappa = L/mu of the data would not be finite (``GLMProblem.check_constants``; before the solve).
    """
    from .methods import Context, check_regularizer, method_class

    options = dict(options or {})
    check_static(algorithm=algorithm, n=n, block_size=block_size, tau=tau, step_multiplier=step_multiplier,
                 max_iter=1, tol=1.0, seed=seed, step_rule=step_rule, options=options, split=split,
                 split_seed=split_seed, reg=reg, reg_strength=reg_strength, reg_l2=reg_l2, box=box)
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
    if options.get("alpha") is not None:           # DIANA's theory needs alpha <= 1/(omega + 1) = tau
        check_range("algorithm.alpha", options["alpha"], 0.0, tau_f, high_text="1/(omega+1) = tau", low_open=True)
    regularizer = make_regularizer(reg, reg_strength, *box, l2_strength=reg_l2)
    check_regularizer(algorithm, regularizer)      # before the reference solve
    if problem is None:
        problem = GLMProblem(data, split_rows(data.N, int(n), split, split_seed), lam, regularizer, loss, penalty)
    elif regularizer.name != "none":
        raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for {problem.name}; got {reg!r}.")
    ctx = Context(algorithm=algorithm, problem=problem, reference=None, n=int(n), blocks=blocks, tau=tau_f,
                  tau_m=tau_m, step_multiplier=step_multiplier, step_rule=step_rule, seed=int(seed),
                  send_ids=bool(send_ids), options=options, regularizer=regularizer, data=data)
    if hasattr(problem, "check_constants"):
        problem.check_constants()                  # L, mu, kappa finite and > 0, before the reference solve
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
    if not (np.isfinite(method.gamma) and method.gamma > 0):   # a last guard: never run with a NaN/inf/0 step
        raise ConfigError("step.multiplier", f"The stepsize of algorithm={algorithm} must be a finite number > 0; got "
                                             f"gamma = {method.gamma!r} (L = {problem.L!r}, mu = {problem.mu!r}, "
                                             f"step.multiplier = {step_multiplier!r}).")
    method.name = algorithm
    shards, rows = cls.shards(ctx)
    return RunSetup(problem=problem, reference=reference, method=method, bound=bound, x0=ctx.x0, seed=int(seed),
                    shards=shards, rows=rows)
