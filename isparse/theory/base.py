"""The theory half of a method's box: its stepsize rule and its bound, as one object (``Method.theory``).

A method names what covers it by a :class:`Theory`: the theorem's stepsize rule ``(L, mu, n, tau[, omega]) ->
gamma``, the stepsizes of the paper's plots where they differ (``step.rule=paper``, ``paper_literal``), which
smoothness constant is "L" in the rule, whether the rule and the bound carry a lossy codec's omega
(``codec_theory``; otherwise ``codec_why`` says why a lossy codec leaves the run without a bound), and
:meth:`Theory.bound`, the theorem's bound for the stepsize used. The stepsize multiplies the rule's gamma by
``step.multiplier``. A method with ``theory = None`` has none of this: it runs with :data:`NO_THEORY`, gamma =
step.multiplier / L (the step of gradient descent on an L-smooth f; ``step.L`` picks L), and logs a NoBound that
says so.

A Theory reads the run from an ``isparse.methods.context.Context`` (the problem's constants, n, tau, the codec's
omega, ``step.*``, the method's options) and keeps no state: one object per method class, shared by every run.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Optional

from .bound import NoBound


@dataclass(frozen=True)
class Theory:
    """A method's stepsize rule and bound. Its methods take ``ctx``, the run (a
    :class:`~isparse.methods.context.Context`), and ``method``, the built method (its ``gamma``).

    Parameters
    ----------
    stepsize : callable
        The theorem's rule ``(L, mu, n, tau) -> gamma``; with ``codec_theory`` it also takes ``omega=``.
    paper_stepsize : callable, optional
        The stepsize of the paper's plots (``step.rule=paper``), where it differs; same signature.
    paper_literal_stepsize : callable, optional
        The caption's gamma read literally (``step.rule=paper_literal``), where it differs from ``paper_stepsize``.
    theorem : str
        What the bound cites, e.g. "Theorem 1 (IBCD)".
    smoothness : {"L", "L_example"}
        Which constant of the problem is "L" in the rule: L (of the f_i; or L_f of f with ``step.L=f``) or
        L_example (of the f_ij).
    step_L_choice : bool
        ``step.L=f`` is allowed (the rule takes L through :meth:`smooth`).
    codec_theory : bool
        The rule and the bound take the codec's omega (derived in ``isparse.theory``); otherwise a lossy codec
        leaves the run without a bound (``isparse.runsetup.build`` says so in its NoBound).
    codec_why : str
        Why a lossy codec leaves the method without a bound, when ``codec_theory`` is False.
    """

    stepsize: Callable
    paper_stepsize: Optional[Callable] = None
    paper_literal_stepsize: Optional[Callable] = None
    theorem: str = ""
    smoothness: str = "L"
    step_L_choice: bool = True
    codec_theory: bool = False
    codec_why: str = ""

    def smooth(self, ctx) -> float:
        """The smoothness constant the rule takes (Assumption 1's L; docs/algorithms.md §4): L = max_i L_i, L_f of f
        itself (``step.L=f``), or L_example of the f_ij (``smoothness="L_example"``)."""
        if self.smoothness != "L":
            return ctx.problem.L_example
        return ctx.problem.L_f if ctx.step_L == "f" else ctx.problem.L

    def omega_kw(self, ctx) -> dict:
        """The codec keyword of the rules: ``{"omega": omega}`` when they take the codec's omega (``codec_theory``) and
        the codec has one (unbiased, lossy); else empty."""
        return {"omega": ctx.omega} if self.codec_theory and ctx.omega else {}

    def stepsize_rule(self, rule: str) -> Callable:
        """The rule that ``step.rule`` selects: the theorem's (``theory``, and where no paper stepsize is given), the
        paper's plots' (``paper``; docs/algorithms.md §5) or the caption read literally (``paper_literal``; as ``paper``
        unless given)."""
        if rule == "paper_literal" and self.paper_literal_stepsize is not None:
            return self.paper_literal_stepsize
        if rule in ("paper", "paper_literal") and self.paper_stepsize is not None:
            return self.paper_stepsize
        return self.stepsize

    def step(self, ctx) -> dict:
        """The stepsize keywords of the method's constructor: ``{"gamma": step.multiplier x the rule's gamma}`` (a
        method with a schedule or another step parameter returns those too: ISGD's ``schedule``, IASGD's ``rho``)."""
        rule = self.stepsize_rule(ctx.step_rule)
        return {"gamma": ctx.step_multiplier * rule(self.smooth(ctx), ctx.problem.mu, ctx.n, ctx.tau,
                                                    **self.omega_kw(ctx))}

    def gamma_theory(self, ctx) -> float:
        """The rule's gamma without multiplier or codec (what a NoBound reports as ``gamma_theory``)."""
        return self.stepsize(self.smooth(ctx), ctx.problem.mu, ctx.n, ctx.tau)

    def bound(self, ctx, method):
        """The theorem's bound for ``method.gamma`` (LinearBound, SublinearBound or NoBound); this default, which a
        method's theory class overrides, is a NoBound."""
        return NoBound(theorem=f"no theorem of arXiv:1901.09437 covers {ctx.algorithm}",
                       gamma_theory=self.gamma_theory(ctx), gamma=method.gamma)


def gradient_step(L: float, mu: float, n: int, tau: float) -> float:
    """gamma = 1/L: gradient descent's step on an L-smooth f (the stepsize of a method without theory; mu, n and
    tau unused)."""
    return 1.0 / L


class NoTheory(Theory):
    """What a method with ``theory = None`` runs with: gamma = step.multiplier / L, and a NoBound saying so."""

    def bound(self, ctx, method):
        """A NoBound saying the method declares no theory (gamma = step.multiplier / L)."""
        return NoBound(theorem=f"algorithm={ctx.algorithm} declares no theory (Method.theory is None): no bound; its "
                               f"stepsize is gamma = step.multiplier / L", gamma_theory=self.gamma_theory(ctx),
                       gamma=method.gamma)


#: the theory of a method that declares none
NO_THEORY = NoTheory(gradient_step)


def with_constants(fn: Callable, ctx, **given):
    """Call a theory function with the run's constants it declares, and the given keywords.

    The one place where the common constants of a run (``ctx.constants()``: ``L``, ``mu``, ``n``, ``tau``, ``r0``,
    ``sum_sq_local_grads``, ``omega``) are handed to a bound function: each function takes exactly the keywords it
    uses, and receives only those of the constants its signature names. The ``given`` keywords (e.g. ``gamma``; a
    constant of the same name is then not passed) are passed as they are, so a misspelt one raises TypeError instead
    of being dropped. Returns what ``fn`` returns.

    Raises
    ------
    TypeError
        A keyword of ``given`` that ``fn`` does not take, or a parameter of ``fn`` that neither ``given`` nor the
        constants supply.
    """
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    constants = {k: v for k, v in ctx.constants().items() if k not in given and (takes_all or k in params)}
    return fn(**given, **constants)


def strongly_convex_or_none(ctx, method, build_bound):
    """``build_bound()`` when f is strongly convex (mu > 0: the strongly convex theorems 1 to 5 need it), else a
    NoBound saying why."""
    if ctx.problem.mu <= 0:
        return NoBound(theorem=f"the theorem for {ctx.algorithm} needs a strongly convex f", gamma_theory=method.gamma,
                       gamma=method.gamma)
    return build_bound()


__all__ = ["NO_THEORY", "NoTheory", "Theory", "gradient_step", "strongly_convex_or_none", "with_constants"]
