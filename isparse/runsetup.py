"""From a run's spec to the objects of one run: problem, x*, method, stepsize and bound.

This is the one place where a run's derived quantities (m, tau, tau*m, L, mu, gamma, r_0, F*)
are computed, so that the Hydra pipeline, the tests and a notebook all get the same ones.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .compression.blocks import BlockPartition
from .compression.tau import resolve_tau
from .data.dataset import Dataset, split_rows
from .data.sources import lam_key
from .engines.hooks import with_seed
from .errors import ConfigError, keys
from .methods.base import configure
from .problems import Reference, reference_solve
from .problems.base import Problem
from .spec import RunSpec


@dataclass
class RunSetup:
    """Everything a run needs, derived once (made by :func:`build`).

    Attributes
    ----------
    bound : LinearBound, SublinearBound or NoBound
        The theorem's bound for the stepsize used.
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
    spec: RunSpec | None = None

    def pool_args(self, seed: int | None = None) -> tuple:
        """``(method, shards, x0)``: the arguments of ``InProcessPool`` and ``DaskPool(client, ...)``, the method with
        another ``seed`` if given (another set of random draws)."""
        method = self.method if seed is None or int(seed) == self.method.seed else with_seed(self.method, seed)
        return method, self.shards, self.x0

    def run(self, pool=None, **kwargs):
        """Run the method on ``pool`` until the stopping rule.

        Parameters
        ----------
        pool : InProcessPool or DaskPool, optional
            Where the workers' steps run (default: a fresh in-process pool of :meth:`pool_args`); the pool's
            method is the one run (an asynchronous method runs on the pool's asynchronous view).
        **kwargs
            Passed to :func:`isparse.engines.run`: ``max_iter`` and ``tol`` (required), and its options.

        Raises
        ------
        ConfigError
            ``resume`` given for an asynchronous method.
        DivergenceError
            The iterates became NaN or infinite.
        """
        from .engines import InProcessPool, run

        pool = pool if pool is not None else InProcessPool(*self.pool_args())
        method = pool.method
        engine = pool.asynchronous(seed=method.seed) if method.traits.asynchronous else pool
        if method.traits.asynchronous:
            kwargs.pop("checkpoint_every", None), kwargs.pop("on_checkpoint", None)
            if kwargs.get("resume") is not None:
                raise ConfigError("resume", "The 'resume' parameter is not supported for asynchronous methods; "
                                            "got a checkpoint.")
        return run(method, engine, self.problem, self.reference, self.bound, x0=self.x0, **kwargs)

    @property
    def derived(self) -> dict:
        """The derived parameters to log, by name.

        n, m, d, N, tau, tau_m, L, mu, gamma, gamma_theory (the theorem's rule), gamma_max (the largest stepsize its
        bound allows; nan where no bound), codec and omega (nan for a biased codec) and bits_per_value, downlink (its
        ``messages.downlink``), alpha_downlink (1 for float64) and downlink_bytes_per_message, r0, f_star,
        null_space_dim (k of ``dist_sq_null``'s basis; -1 where not computed) and null_space (how it was found),
        and the method's own (``_derived_params``).
        """
        p, m = self.problem, self.method
        Z, how = p.null_space()
        omega = m.codec.omega(m.values_per_message)   # None: a biased codec, which has none
        return {"n": m.n, "m": m.blocks.m, "d": p.d, "N": p.N, "tau": m.tau, "tau_m": m.tau_m,
                "L": p.L, "mu": p.mu, "gamma": m.gamma, "gamma_theory": self.bound.gamma_theory,
                "gamma_max": self.bound.gamma_max if self.bound.gamma_max is not None else float("nan"),
                "r0": float(np.sum((self.x0 - self.reference.x_star) ** 2)), "f_star": self.reference.F_star,
                "sum_sq_local_grads_star": self.reference.sum_sq_local_grads,
                "bound_neighbourhood": self.bound.neighbourhood, "bound_rate": self.bound.rate,
                "bound_quantity": self.bound.quantity, "send_ids": m.sends_ids, "codec": m.codec.label,
                "omega": float("nan") if omega is None else omega, "bits_per_value": m.codec.value_bits,
                "downlink": m.downlink.label if m.downlink is not None else "float64",
                "alpha_downlink": m.downlink.alpha if m.downlink is not None else 1.0,
                "downlink_bytes_per_message": m.downlink.bytes_per_copy if m.downlink is not None else p.d * 8.0,
                "null_space_dim": Z.shape[1] if Z is not None else -1, "null_space": how, **m._derived_params()}


def _codec_bound(ctx, cls, method, bound):
    """The bound with a lossy codec: the method's own where its theory carries omega (``Theory.codec_theory``) and
    the codec is unbiased; otherwise a NoBound that says why (a biased codec, or no derivation for the method). A
    method without theory keeps its NoBound (it says there is no theory)."""
    from .theory import NoBound

    theory = cls.theory
    if ctx.codec.exact or theory is None or (theory.codec_theory and ctx.omega is not None):
        return bound
    why = (f"messages.codec={ctx.codec.label} is biased ({ctx.codec.kind}, no omega): no bound is derived with it"
           if ctx.omega is None else f"no bound is derived for {cls.name} with messages.codec={ctx.codec.label}"
           + (f": {theory.codec_why}" if theory.codec_why else ""))
    return NoBound(theorem=why, gamma_theory=bound.gamma_theory, gamma=method.gamma, quantity=bound.quantity)


def _method_and_bound(cls, ctx, downlink):
    """The method of ``ctx`` and the bound that covers it: its theorem's (``configure``), with a lossy codec
    :func:`_codec_bound`'s, with a compressed downlink (``downlink``: gamma -> its Downlink) the derived EF21-P bound
    (:func:`isparse.theory.ef21p.downlink_bound`)."""
    method, bound = configure(cls, ctx, downlink)
    bound = _codec_bound(ctx, cls, method, bound)
    if downlink is not None:
        method.name = cls.name
        from .theory.ef21p import downlink_bound

        bound = downlink_bound(method, ctx.problem, ctx.reference, ctx.x0, bound)
    return method, bound


def _grad_scale(problem, x0) -> float:
    """max_i ||grad f_i(x^0)||_inf, the largest local gradient entry at the start (where the natural codecs place
    their exponent window)."""
    if hasattr(problem, "local_grads_max_abs"):   # a GLM: from its sparse product, not an (n, d) dense matrix
        return problem.local_grads_max_abs(x0)
    grads = problem.local_grads(x0) if hasattr(problem, "local_grads") else np.zeros(0)
    return float(np.max(np.abs(grads), initial=0.0))


def _downlink(spec, problem, x0, gamma):
    """The compressed downlink of ``messages.downlink`` (EF21-P), its codec's window at gamma x
    the largest local gradient entry at x^0 (the size of the first rounds' updates x^{t+1} - w^t)."""
    from .compression.downlink import parse_downlink

    key = "messages.downlink"
    down = parse_downlink(spec.messages.downlink, problem.d, key=key)
    if getattr(getattr(down.codec, "piece", down.codec), "needs_scale", False):   # natural, natural7
        down = parse_downlink(spec.messages.downlink, problem.d, key=key, scale=gamma * _grad_scale(problem, x0))
    return down


def make_problem(spec: RunSpec, data: Dataset | None = None, cache_dir=None) -> Problem:
    """The problem ``spec.data`` makes: its data set (``data`` if given, else read, from ``cache_dir`` if given) split
    into ``spec.workers.n`` parts as ``workers.split`` says, then :meth:`~isparse.data.sources.DataSource.problem`.

    Raises
    ------
    ConfigError
        The source's own errors, or n > N (``workers.n``).
    DataError
        A data file that cannot be used.
    """
    if data is None:
        data = spec.data.dataset(cache_dir)
    parts = None
    if data is not None:
        with keys(n="workers.n", how="workers.split", seed="workers.split_seed"):
            parts = split_rows(data.N, spec.workers.n, spec.workers.split, spec.workers.split_seed)
    return spec.data.problem(spec, data, parts)


def build(spec: RunSpec, *, data: Dataset | None = None, problem: Problem | None = None,
          reference: Reference | None = None, cache_dir=None) -> RunSetup:
    """Build the run of ``spec``: read the data, split the rows, set up the problem, solve for x*, and let the
    method configure its stepsize and bound.

    Parameters
    ----------
    spec : RunSpec
        The run (``isparse.spec``); checked here (:meth:`~isparse.params.Section.check`), so a spec built in
        Python is refused exactly as the command line's.
    data : Dataset, optional
        The data set, already read (instead of ``spec.data``'s file; e.g. an in-memory set or a cached one).
    problem : Problem, optional
        A problem already split over ``spec.workers.n`` workers (instead of the one ``spec.data`` makes).
    reference : Reference, optional
        A solved x* of the same problem (skips the solve; it depends on neither tau nor the block size).
    cache_dir : str or Path, optional
        Keep x*, grad f_i(x*), L_i and parsed data sets on disk there (``isparse.cache``).

    Raises
    ------
    ConfigError
        Any key of ``spec`` out of its range or in a combination its rules refuse (before anything is read);
        then, once the data are read: n > N (``workers.n``), a block size > d (``blocks.size``), tau out of
        [1/m, 1] or tau*m not an integer (``tau``), a problem that lacks what the method needs (``algorithm``),
        the method's own checks against the problem (``isparse.methods.base.Method._check``), or a stepsize that is
        not a finite number > 0.
    DataError
        A data file that cannot be used, or L, mu or kappa = L/mu of the data that would not be finite
        (``GLMProblem.check_constants``; before the solve).

    See Also
    --------
    RunSetup.run : run the built setup.

    Examples
    --------
    >>> spec = RunSpec.from_dict({"algorithm": "isega", "workers.n": 4, "max_iter": 50})
    >>> result = build(spec).run(max_iter=spec.max_iter, tol=spec.tol)
    """
    from .methods import Context

    spec.check()
    cls = spec.method_class()
    n = spec.workers.n
    if problem is None:
        data = spec.data.dataset(cache_dir) if data is None else data
        problem = make_problem(spec, data)
    if problem.n != n or len(problem.shards) != n:   # the method averages over n: every worker must hold a shard
        raise ConfigError("workers.n", f"The 'workers.n' parameter must be the problem's number of workers: "
                                       f"{type(problem).__name__} has n = {problem.n} and {len(problem.shards)} "
                                       f"shards; got {n}.")
    with keys(size="blocks.size"):
        blocks = BlockPartition(problem.d, spec.blocks.size)
    tau, tau_m = resolve_tau(1.0 if cls.traits.full else spec.tau, blocks.m, n)   # errors name the key tau
    regularizer = problem.reg
    ctx = Context(algorithm=cls.name, problem=problem, reference=None, n=n, blocks=blocks, tau=tau, tau_m=tau_m,
                  step_multiplier=spec.step.multiplier, step_rule=spec.step.rule, step_L=spec.step.L, seed=spec.seed,
                  send_ids=spec.messages.send_ids, options=spec.algorithm, regularizer=regularizer, data=data,
                  codec=spec.messages.make_codec())
    ctx.omega = ctx.codec.omega(cls._message_values(ctx))
    with keys(lam=lam_key(spec)):
        problem.check_constants()                  # L, mu, kappa finite and > 0, before the reference solve
    cls._check(ctx)                                # what the method needs, before the reference solve
    if reference is None:
        reference = problem.reference()            # closed form, where the problem has one
    key = problem.reference_key(spec.workers.split, spec.workers.split_seed) if cache_dir is not None else None
    if reference is None and spec.x_star == "none":   # nothing to measure against: NaNs, and no bound below
        reference = Reference.unknown(problem.n, problem.d)
    if reference is None and key is not None:
        from .cache import load_or_make

        def solve():   # what the cache keeps of a reference: its arrays and numbers, and the problem's L_i
            return {**vars(reference_solve(problem)), "L_i": problem.L_i}

        kept, _ = load_or_make(cache_dir, key, solve, "the reference problem (x*, L_i)",
                               names=("x_star", "F_star", "sum_sq_local_grads", "residual", "L_i"))
        if "rows" in problem.capabilities:   # a GLMProblem's L_i, computed from its rows otherwise
            problem._L_i = kept["L_i"]
        reference = Reference(x_star=kept["x_star"], F_star=float(kept["F_star"]),
                              sum_sq_local_grads=float(kept["sum_sq_local_grads"]),
                              residual=float(kept["residual"]))
    elif reference is None:
        reference = reference_solve(problem)
    ctx.reference = reference
    ctx.x0 = problem.start()
    if ctx.codec.needs_scale:                      # natural, natural7: the exponent window sits at the start's gradients
        ctx.codec = ctx.codec.scaled(_grad_scale(problem, ctx.x0))
    downlink = (None if spec.messages.downlink == "float64"
                else functools.partial(_downlink, spec, problem, ctx.x0))   # gamma -> its Downlink
    at_limit = spec.step.rule == "bound"   # the largest step of the bound that covers the run, x step.multiplier
    if at_limit:   # first at the theorem's own step, which gives the bound and its gamma_max
        ctx.step_rule, ctx.step_multiplier = "theory", 1.0
    method, bound = _method_and_bound(cls, ctx, downlink)
    if at_limit:
        limit = getattr(bound, "gamma_max", None)
        if limit is not None and np.isfinite(limit) and limit > 0:
            ctx.step_multiplier = spec.step.multiplier * limit / method.gamma
            method, bound = _method_and_bound(cls, ctx, downlink)
        ctx.step_rule, ctx.step_multiplier = spec.step.rule, spec.step.multiplier
        if limit is None or not bound.applicable and spec.step.multiplier <= 1:   # no bound covers the run at all
            raise ConfigError("step.rule", f"The 'step.rule' parameter must be one of theory, paper, paper_literal "
                                           f"for algorithm={cls.name} here: bound takes the largest stepsize of the "
                                           f"bound that covers the run, and none does ({bound.theorem}); got "
                                           f"'bound'.")
    if not reference.solved:
        from .theory.bound import NoBound

        bound = NoBound(theorem="no bound on the distance is shown: no x* was solved (x_star=none)",
                        gamma_theory=bound.gamma_theory, gamma=method.gamma)
    if not (np.isfinite(method.gamma) and method.gamma > 0):   # a last guard: never run with a NaN/inf/0 step
        raise ConfigError("step.multiplier", f"The stepsize of algorithm={cls.name} must be a finite number > 0; got "
                                             f"gamma = {method.gamma!r} (L = {problem.L!r}, mu = {problem.mu!r}, "
                                             f"step.multiplier = {spec.step.multiplier!r}).")
    method.name = cls.name
    shards, rows = cls._shards(ctx)
    return RunSetup(problem=problem, reference=reference, method=method, bound=bound, x0=ctx.x0, seed=spec.seed,
                    shards=shards, rows=rows, spec=spec)
