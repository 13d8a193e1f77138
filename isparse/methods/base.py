"""A method, declared: its box (``isparse.methods.contract``) with a name, options, traits and a theory, and how
it is built for one run from a :class:`~isparse.methods.context.Context`.

A method module reads like the paper's algorithm box::

    class ISEGA(Method):
        name = "isega"                                  # algorithm=isega
        options = AlgorithmOptions                       # its algorithm.<key> schema (a dataclass of params)
        traits = Traits(prox=True, state_text="...")    # what it is beside its steps
        theory = Theorem3(theorem3_stepsize, ...)        # stepsize rule and bound; None: none
        def worker_init(self, data, x0): ...            # the typed states and the four steps
        def worker_step(self, data, state, x, t, donate=False): ...
        def master_init(self, x0): ...
        def master_step(self, state, x, batch, donate=False): ...

Building (:func:`configure`): the theory gives the stepsize keywords (``{"gamma": ...}``; without a theory,
gamma = step.multiplier / L), and the constructor receives them with the run's common keywords (``options``: the
method's checked options object, ``reg``, ``seed``, ``send_ids``, ``codec``) and the run facts of
:meth:`Method._run_inputs`; the theory then gives the bound. The class statement checks the declaration (a
:class:`~isparse.methods.registry.DeclarationError` naming what is wrong) and registers every class that sets a
``name`` (``isparse.methods.registry``): adding a method is one module (here, or anywhere importable, named by
``algorithm.module``) and, for the command line, one ``conf/algorithm/<id>.yaml`` if it lives outside
``isparse.methods``.
"""

from __future__ import annotations

from typing import ClassVar, Optional

from ..errors import ConfigError
from ..params import check_options_declaration
from ..theory.base import NO_THEORY, Theory, strongly_convex_or_none, with_constants   # noqa: F401  (re-exported)
from .context import Context
from .contract import Box, Sampled, Traits, values_in_blocks   # noqa: F401  (re-exported: a method imports from here)
from .options import AlgorithmOptions, MinibatchOptions        # noqa: F401
from .registry import METHODS, DeclarationError, register


def _check_declaration(cls) -> None:
    """Raise DeclarationError (one line) if ``cls``'s box is declared wrong: options not an AlgorithmOptions
    dataclass of params whose defaults pass their constraints, traits not a Traits, theory not a Theory or None, or
    (for a named class) a step left abstract."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    check_options_declaration(where, cls.options, AlgorithmOptions, "algorithm")
    if not isinstance(cls.traits, Traits):
        raise DeclarationError(f"{where}.traits must be a Traits(...); got {cls.traits!r}")
    if cls.theory is not None and not isinstance(cls.theory, Theory):
        raise DeclarationError(f"{where}.theory must be a Theory instance (e.g. Theory(stepsize_rule)) or None; got "
                               f"{cls.theory!r}")
    if cls.__dict__.get("name"):
        missing = [s for s in ("worker_step", "master_step") if getattr(getattr(cls, s), "__isabstractmethod__", False)]
        if missing:
            raise DeclarationError(f"{where} (algorithm={cls.name}) must define {' and '.join(missing)}")


class Method(Box):
    """A method's box with its declaration (``name``, ``options``, ``traits``, ``theory``) and its building.

    A subclass declares the four class attributes below and defines :meth:`worker_step` and :meth:`master_step` (and,
    for a method with memory, :meth:`worker_init` and :meth:`master_init`): section 2 of arXiv:1901.09437, the common
    template (docs/algorithms.md §2). The class statement checks the declaration and registers a named class. Its
    constructor is :class:`~isparse.methods.contract.Box`'s; :func:`configure` passes it the run's values.

    Raises
    ------
    DeclarationError
        When the class statement runs, if the declaration is wrong (options not an ``AlgorithmOptions`` dataclass,
        traits not a :class:`Traits`, theory not a :class:`Theory`, a named class with an abstract step, a second
        class of the same name).

    Notes
    -----
    The declaration, four class attributes:

    ``name`` (str)
        ``algorithm=<name>``; a class that sets it is registered.
    ``options`` (type)
        The dataclass of its ``algorithm.<key>`` options (:class:`AlgorithmOptions` or a subclass); the built method
        reads the checked values as ``self.opts``.
    ``traits`` (Traits)
        What it is beside its steps (:class:`~isparse.methods.contract.Traits`).
    ``theory`` (Theory or None)
        Its stepsize rule and bound (``isparse.theory.base``); None: gamma = step.multiplier / L and no bound.
    """

    theory: ClassVar[Optional[Theory]] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _check_declaration(cls)
        if cls.__dict__.get("name"):
            register(cls)

    # -- before the method is built (the run's Context) ------------------------------------------------------
    @classmethod
    def _check(cls, ctx: Context) -> None:
        """Checks of the method against the run ``ctx`` before any work (a method's own checks come first, then
        ``super()._check(ctx)``).

        Raises
        ------
        ConfigError
            The problem lacks a capability ``traits.needs`` names (:func:`check_needs`), its regularizer needs a
            proximal step the method does not take (:func:`check_regularizer`), or the states
            (:meth:`_state_bytes`) do not fit in the available memory (the message names GiB).
        """
        check_needs(cls, ctx.problem)
        check_regularizer(cls, ctx.problem)
        need = cls._state_bytes(ctx)
        if need:
            from ..problems.reference import available_memory_bytes

            avail = available_memory_bytes()
            if need > avail:
                raise ConfigError("algorithm", f"algorithm={cls.name} needs about {need / 2**30:.3g} GiB for its "
                                               f"state ({cls.traits.state_text}, d = {ctx.problem.d}); only "
                                               f"{avail / 2**30:.3g} GiB are available.")

    @classmethod
    def _state_bytes(cls, ctx: Context) -> int:
        """Bytes of the method's worker and master states (float64), for the memory check before any work; 0 by
        default (no state)."""
        return 0

    # -- building -------------------------------------------------------------------------------------------
    @classmethod
    def _message_values(cls, ctx: Context) -> int:
        """The most values one worker sends in a round, known before the method is built (the codec's omega is
        computed for this many): min(d, tau*m x b) by default."""
        return values_in_blocks(ctx.problem.d, ctx.tau_m, ctx.blocks.size)

    @classmethod
    def _run_inputs(cls, ctx: Context) -> dict:
        """Constructor keywords the method takes from the run beyond the stepsize and the common ones (ISGD's
        effective minibatch, shared-data ISAGA's N); none by default."""
        return {}

    @classmethod
    def _shards(cls, ctx: Context) -> tuple[list, list | None]:
        """(shards, parts): what each of the n workers holds and its data rows (None: not from a data set); the
        problem's by default."""
        return ctx.problem.shards, ctx.problem.parts


def check_spec(cls, spec) -> None:
    """The rules of the method ``cls`` on the rest of the run ``spec``, before any data is read.

    A full-communication baseline takes tau = 1 (auto or 1), only a proximal method takes a regularizer, ``step.L=f``
    only where the stepsize rule takes L, only a synchronous method a compressed downlink.

    Raises
    ------
    ConfigError
        Naming the key that does not fit (``tau``, ``step.L``, ``problem.reg``).
    """
    theory = cls.theory or NO_THEORY
    if cls.traits.full and spec.tau not in ("auto", 1, 1.0):
        raise ConfigError("tau", f"The 'tau' parameter must be auto or 1 for algorithm={cls.name} "
                                 f"(a full-communication baseline); got {spec.tau!r}.")
    if spec.step.L == "f" and not (theory.step_L_choice and theory.smoothness == "L"):
        raise ConfigError("step.L", f"The 'step.L' parameter must be shards for algorithm={cls.name} (its "
                                    f"stepsize takes {'L_example' if theory.smoothness != 'L' else 'rho'}, not L); "
                                    f"got 'f'.")
    downlink = getattr(spec.messages, "downlink", "float64")
    if downlink != "float64" and cls.traits.asynchronous:
        raise ConfigError("messages.downlink", f"The 'messages.downlink' parameter must be float64 for "
                                               f"algorithm={cls.name} (an asynchronous method: each worker gets its "
                                               f"own model, no shared w); got {downlink!r}.")
    if spec.problem.reg != "none" and not cls.traits.prox:
        raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for algorithm={cls.name} "
                                         f"(only {_prox_methods()} take a proximal step); got "
                                         f"{spec.problem.reg!r}.")


def configure(cls, ctx: Context, downlink=None):
    """Build the method ``cls`` for the run ``ctx``, and the bound that covers it.

    The theory's stepsize keywords (or :data:`~isparse.theory.base.NO_THEORY`'s gamma = step.multiplier / L), the
    common keywords (``ctx.common()``) and ``cls._run_inputs(ctx)`` go to the constructor; then the theory's bound is
    computed for the method built (docs/algorithms.md §3).

    Returns
    -------
    method : Method
        The built method.
    bound : LinearBound, SublinearBound or NoBound
        The theorem's bound for its stepsize.
    """
    theory = cls.theory or NO_THEORY
    kwargs = {**theory.step(ctx), **ctx.common(), **cls._run_inputs(ctx)}
    method = cls(ctx.n, ctx.blocks, ctx.tau_m, **kwargs)
    if downlink is not None:   # its codec's window is set by the gamma the method was built with
        method = cls(ctx.n, ctx.blocks, ctx.tau_m, **kwargs, downlink=downlink(method.gamma))
    return method, theory.bound(ctx, method)


def check_needs(cls, problem) -> None:
    """Check that ``problem`` offers every capability ``cls.traits.needs`` names (before any work).

    The capabilities are declared by the problem (``isparse.problems.base.Problem.capabilities``: what its stacked
    shards compute, and what the problem itself offers, e.g. ``strong_growth``).

    Raises
    ------
    ConfigError
        Naming the missing capabilities and those the problem provides.
    """
    missing = [c for c in cls.traits.needs if c not in problem.capabilities]
    if missing:
        raise ConfigError("algorithm", f"{type(problem).__name__} is not compatible with algorithm={cls.name}: it "
                                       f"must provide {', '.join(missing)} (it provides "
                                       f"{', '.join(sorted(problem.capabilities)) or 'nothing'}).")


def _prox_methods() -> str:
    """The registered methods that take a proximal step, comma-separated."""
    return ", ".join(k for k, c in METHODS.items() if c.traits.prox)


def check_regularizer(cls, problem) -> None:
    """Refuse a problem whose own regularizer R (``problem.reg``, wherever the problem came from: the spec or
    ``build(spec, problem=...)``) is not zero for a method that takes no proximal step: it would run on f alone and
    its theorem would be logged for a problem it does not cover.

    Raises
    ------
    ConfigError
        Key ``problem.reg``, naming R, the method and the methods that take a proximal step.
    """
    reg = getattr(problem, "reg", None)
    if reg is None or reg.is_zero or cls.traits.prox:
        return
    raise ConfigError("problem.reg", f"The problem's regularizer R = {reg.describe} needs a proximal step, which "
                                     f"algorithm={cls.name} does not take (only {_prox_methods()} do): give a problem with "
                                     f"R = 0 or choose one of those.")


__all__ = ["AlgorithmOptions", "Context", "Method", "MinibatchOptions", "Sampled", "Theory", "Traits", "check_needs",
           "check_regularizer", "check_spec", "configure", "strongly_convex_or_none", "with_constants"]
