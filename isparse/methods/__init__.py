"""The methods, each written once as worker and master steps, and their registry.

Each entry of :data:`SPECS` says which class runs an ``algorithm=<id>``, which stepsize rule and
bound (``isparse.theory``) go with it, whether it is a full-communication baseline (tau forced
to 1), and what it needs from a problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from ..errors import ConfigError, check_choice
from ..theory import (iasgd_bound, isgd_bound, isgd_schedule, theorem1_bound, theorem1_stepsize, theorem2_bound,
                      theorem2_stepsize, theorem3_bound,
                      theorem3_stepsize, theorem5_bound, theorem5_stepsize)
from ..theory.paper import isega_paper_stepsize, saga_paper_stepsize, sgd_paper_stepsize
from .base import BlockMethod, Method
from .ibcd import IBCD
from .async_isgd import AsyncISGD
from .iasgd import IASGD
from .ibgd import IBGD
from .isaga import ISAGA
from .isaga_shared import ISAGAShared
from .isega import ISEGA
from .isgd import ISGD
from .peers import DIANA, EF21, SharedBCD, diana_stepsize, ef21_stepsize, shared_bcd_stepsize


@dataclass(frozen=True)
class Spec:
    """How to run and bound one algorithm id.

    Attributes
    ----------
    cls : type
        The method class.
    stepsize : callable(L, mu, n, tau) -> float
        The default (theorem's) stepsize.
    bound : callable(**constants) or None
        The theorem's bound; None for peers.
    smoothness : str
        Which constant is "L" for the stepsize: ``L`` (of f_i) or ``L_example`` (of f_ij).
    full : bool
        A full-communication baseline: tau is forced to 1.
    needs : tuple of str
        Problem/shard attributes the method uses (checked before any work).
    prox : bool
        Supports a regularizer R.
    paper_stepsize : callable(L, mu, n, tau) -> float or None
        The stepsize of the paper's experiments (``step.rule=paper``, ``isparse.theory.paper``);
        None: the theorem's.
    """

    cls: type
    stepsize: object
    bound: object = None
    smoothness: str = "L"
    full: bool = False
    needs: tuple = ("grad",)
    prox: bool = False
    options: dict = field(default_factory=dict)
    paper_stepsize: object = None


_SGD = dict(cls=ISGD, stepsize=theorem1_stepsize, bound=isgd_bound, needs=("grad", "minibatch_grad"),
            paper_stepsize=sgd_paper_stepsize)
_SAGA = dict(cls=ISAGA, stepsize=theorem5_stepsize, bound=theorem5_bound, smoothness="L_example",
             needs=("grad", "example_grad"))

#: algorithm id -> Spec
SPECS = {
    "ibcd": Spec(IBCD, theorem1_stepsize, theorem1_bound),
    "ibgd": Spec(IBGD, theorem1_stepsize, partial(theorem1_bound, theorem="Theorem 4 (IBGD; the rate of Theorem 1)")),
    "isega": Spec(ISEGA, theorem3_stepsize, theorem3_bound, prox=True, paper_stepsize=isega_paper_stepsize),
    "isaga": Spec(**_SAGA),
    "isaga_shared": Spec(ISAGAShared, theorem2_stepsize, theorem2_bound, smoothness="L_example",
                         needs=("grad", "example_grad"), paper_stepsize=saga_paper_stepsize),
    "isgd": Spec(**_SGD),
    "iasgd": Spec(IASGD, None, iasgd_bound, needs=("grad", "minibatch_grad")),
    "async_isgd": Spec(AsyncISGD, theorem1_stepsize, None, needs=("grad", "minibatch_grad")),
    "gd": Spec(IBCD, theorem1_stepsize, theorem1_bound, full=True),
    "asgd": Spec(IASGD, None, iasgd_bound, needs=("grad", "minibatch_grad"), full=True),
    "sgd": Spec(**_SGD, full=True),
    "saga": Spec(**_SAGA, full=True),
    "shared_bcd": Spec(SharedBCD, shared_bcd_stepsize),
    "diana": Spec(DIANA, diana_stepsize, prox=True),
    "ef21": Spec(EF21, ef21_stepsize),
}
METHODS = SPECS


def make_method(name: str, *, n, blocks, tau_m, gamma, reg=None, seed=0, **options):
    """Build the method ``name`` (``algorithm=<name>``).

    Parameters
    ----------
    options : dict
        Method options from the algorithm config: ``batch`` (isgd/sgd), ``schedule`` (isgd/sgd:
        None or (a, c)), ``alpha`` (diana), ``L``, ``mu``, ``rho`` (iasgd/asgd).

    Raises
    ------
    ConfigError
        Unknown name, or a regularizer the method does not support.
    """
    check_regularizer(name, reg)
    spec = SPECS[name]
    kwargs = {}
    if spec.prox:
        kwargs["reg"] = reg
    if spec.cls in (ISGD, AsyncISGD):
        kwargs.update(batch=options.get("batch", 1), schedule=options.get("schedule"))
    if spec.cls is IASGD:
        kwargs.update(L=options["L"], mu=options["mu"], rho=options["rho"], batch=options.get("batch", 1))
    if spec.cls is DIANA:
        kwargs["alpha"] = options.get("alpha")
    if spec.cls is SharedBCD:
        kwargs["shared_seed"] = seed
    if spec.cls is ISAGAShared:
        kwargs.update(N=options["N"], shared_seed=seed)
    method = spec.cls(n, blocks, tau_m, gamma, **kwargs)
    method.name = name
    return method


def check_regularizer(name: str, reg) -> None:
    """Raise ConfigError for an unknown algorithm, or a regularizer it cannot take (no proximal step)."""
    check_choice("algorithm", name, SPECS)
    if reg is not None and reg.name != "none" and not SPECS[name].prox:
        allowed = ", ".join(k for k, s in SPECS.items() if s.prox)
        raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for algorithm={name} "
                                         f"(only {allowed} take a proximal step); got {reg.name!r}.")


def check_compatible(name: str, problem) -> None:
    """Raise ConfigError if the problem lacks what ``algorithm=name`` needs (skglm-style contract)."""
    shard = problem.shards[0]
    missing = [a for a in SPECS[name].needs if not hasattr(shard, a)]
    if missing:
        raise ConfigError("algorithm", f"{type(problem).__name__} is not compatible with {name}: its shards must "
                                       f"provide {', '.join(missing)}.")


__all__ = ["METHODS", "SPECS", "Spec", "Method", "AsyncISGD", "BlockMethod", "IASGD", "IBCD", "IBGD", "ISAGA", "ISAGAShared", "ISEGA", "ISGD",
           "SharedBCD", "DIANA", "EF21", "make_method", "check_compatible", "check_regularizer", "isgd_schedule"]
