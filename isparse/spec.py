"""The specification of one run, declared once: every key with its type, default, constraint and meaning.

A :class:`RunSpec` is what ``isparse.build`` takes, and what ``isparse-run``'s config is made of (``pipeline``
registers these dataclasses with Hydra's ConfigStore and adds its own sections: engine, cluster, tracking, ...).
A Python user builds the same spec and gets the same errors as the command line::

    from isparse import RunSpec, build
    spec = RunSpec.from_dict({"algorithm": "isgd", "data": "a1a", "workers.n": 10, "algorithm.batch": 4})
    setup = build(spec)                       # reads a1a, solves for x*, builds ISGD's stepsize and bound
    result = setup.run(max_iter=spec.max_iter, tol=spec.tol)

Keys follow the config's layout (``workers.n``, ``blocks.size``, ``problem.lam``, ...): ``algorithm`` and
``data`` are typed options (a method's own options, :class:`~isparse.methods.base.AlgorithmOptions`; a data
source, :mod:`isparse.data.sources`), picked by their ``name``; a plain string is taken as that name. ``messages``
is picked the same way by ``messages.codec``: :class:`~isparse.compression.registry.MessagesSpec` and, for a codec
with keys of its own, its ``options`` (dither's ``messages.levels``; ``isparse.compression``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .compression.tau import TauSetting
from .compression.registry import MessagesSpec
from .errors import ConfigError
from .methods.base import AlgorithmOptions, check_spec
from .params import Interval, Nullable, OneOf, Pair, Section, param, section
from .regularizers import NAMES as REGULARIZERS
from .data.sources import Bundled, DataSource


def _reg_weights_used(p: "ProblemSpec", key: str) -> None:
    """reg_strength is used by l1, l2 and elastic_net, reg_l2 by elastic_net only: another non-zero would be
    ignored."""
    uses = {"none": (), "l1": ("reg_strength",), "l2": ("reg_strength",),
            "elastic_net": ("reg_strength", "reg_l2"), "box": ()}[p.reg]
    for name, used_by in (("reg_strength", "l1, l2 and elastic_net"), ("reg_l2", "elastic_net")):
        value = getattr(p, name)
        if name not in uses and value != 0:
            full = f"{key}.{name}" if key else name
            raise ConfigError(full, f"The '{full}' parameter must be 0 with {key or 'problem'}.reg={p.reg} (it is "
                                    f"used by {used_by} only: it would be ignored); got {value!r}.")


@dataclass
class ProblemSpec(Section):
    """F = f + R: the loss and penalty of the linear models, lambda, and R of the proximal methods."""

    loss: str = param("logistic", OneOf("logistic", "squared"),
                      "logistic, or squared (least squares; with penalty l2 this is ridge regression)")
    penalty: str = param("l2", OneOf("l2", "nonconvex"),
                         "l2: (lam/2)||x||^2; nonconvex: lam sum x_k^2/(1 + x_k^2) (Theorem 7, isgd/sgd)")
    lam: float | None = param(None, Nullable(Interval(float, 0.0, None, low_open=True)),
                              "lambda of the penalty (mu = lambda for the logistic loss); null: the data set's "
                              "data.lam")
    reg: str = param("none", OneOf(*REGULARIZERS), "R of the proximal step of isega and diana")
    reg_strength: float = param(0.0, Interval(float, 0.0, None), "the l1 weight (l1, elastic_net) or the l2 weight "
                                                                 "(l2)")
    reg_l2: float = param(0.0, Interval(float, 0.0, None), "elastic_net's l2 weight")
    box: list = param(constraint=Pair(), factory=lambda: [-1.0, 1.0], doc="the box [lower, upper] of reg=box")

    rules = (_reg_weights_used,)


@dataclass
class WorkersSpec(Section):
    """The n logical workers and how the data rows are split among them."""

    n: int = param(4, Interval(int, 1, None), "logical workers n (at most N, the rows of the data set)")
    split: str = param("shuffle", OneOf("shuffle", "contiguous"),
                       "rows -> contiguous shards: shuffle (seeded) or contiguous (file order)")
    split_seed: int = param(0, Interval(int, 0, None), "the seed of the shuffle")


@dataclass
class BlocksSpec(Section):
    """The m = ceil(d / b) blocks of coordinates."""

    size: int = param(1, Interval(int, 1, None), "block size b (at most d); m = ceil(d / b)")


@dataclass
class StepSpec(Section):
    """The stepsize gamma."""

    rule: str = param("theory", OneOf("theory", "paper", "paper_literal", "bound"),
                      "theory: each theorem's gamma; paper: the gamma of the paper's plots where it differs (ISEGA "
                      "4x, ISGD and async ISGD gamma tau = 1/(5 L_f), one-worker SGD's step, L_f of f itself; "
                      "ISAGA 1/(L(3/n+tau))); paper_literal: as paper, but ISGD's caption read literally, gamma = "
                      "1/(5L) with L = max_i L_i; bound: the largest gamma of the bound that covers the whole run "
                      "(its gamma_max: with a compressed messages.downlink the derived EF21-P bound's, 5-40x below "
                      "the method's own; else the theorem's limit), so that the run logs that bound")
    multiplier: float = param(1.0, Interval(float, 0.0, None, low_open=True), "gamma = multiplier x the rule's gamma")
    L: str = param("shards", OneOf("shards", "f"),
                   "the L a rule that takes L uses: shards: L = max_i L_i of the workers' f_i (Assumption 1; the "
                   "paper's choice for GD beside ISEGA); f: L_f of f itself, one machine holding all the data "
                   "(methods whose stepsize takes L: not ISAGA's L_example, not IASGD's rho)")


def _data_fits_run(spec: "RunSpec", key: str) -> None:
    spec.data.check_run(spec, "data")


def _method_fits_run(spec: "RunSpec", key: str) -> None:
    check_spec(spec.algorithm.method_class(), spec)


def _tol_needs_x_star(spec: "RunSpec", key: str) -> None:
    """``tol`` stops on ||x - x*||^2: without x* (``x_star=none``) it must be 0."""
    if spec.x_star == "none" and spec.tol > 0:
        raise ConfigError("tol", f"The 'tol' parameter must be 0 with x_star=none (it stops on ||x - x*||^2, and no "
                                 f"x* is solved: the run goes to max_iter); got {spec.tol!r}.")


@dataclass
class RunSpec(Section):
    """One run: method, data, problem, workers, blocks, tau, stepsize, seed and the stopping rule.

    ``algorithm`` and ``data`` accept a plain name in :meth:`from_dict` (``"isega"``, ``"a1a"``). Every key, with its
    default, constraint and meaning, is a field of this class or of its sections (``python -m pipeline.schema``
    writes them to docs/config.md).

    Examples
    --------
    >>> spec = RunSpec.from_dict({"algorithm": "isega", "data": "breast_cancer", "workers.n": 4})
    >>> spec.workers.n, spec.tau
    (4, 'auto')
    """

    algorithm: AlgorithmOptions = section(AlgorithmOptions, "the method: name and its own options",
                                          factory=lambda: AlgorithmOptions(name="isega"))
    data: DataSource = section(DataSource, "the data source: name and its own keys", factory=Bundled)
    problem: ProblemSpec = section(ProblemSpec)
    workers: WorkersSpec = section(WorkersSpec)
    blocks: BlocksSpec = section(BlocksSpec)
    tau: Any = param("auto", TauSetting(), "fraction of blocks each worker sends (isparse.compression.tau): '<c>/n' "
                                           "(e.g. 0.5/n, 2/n; 0 < c <= n) follows n, rounded up: tau*m = ceil(c*m/n); "
                                           "auto = 1/n; '<k>/m': k blocks; a number in [1/m, 1] with tau*m an "
                                           "integer (never rounded)")
    messages: MessagesSpec = section(MessagesSpec)
    step: StepSpec = section(StepSpec)
    seed: int = param(0, Interval(int, 0, None), "seed of every random draw: worker i's draws at iteration t "
                                                 "depend on (seed, i, t) only")
    max_iter: int = param(20000, Interval(int, 1, None), "iterations at most")
    tol: float = param(1e-8, Interval(float, 0.0, None), "stop when ||x - x*||^2 <= tol * r_0; 0: run all of "
                                                         "max_iter")
    eps: float = param(1e-6, Interval(float, 0.0, None, low_open=True),
                       "epsilon of the run metrics time_to_eps_s, rounds_to_eps, uplink_bytes_to_eps and "
                       "downlink_bytes_to_eps: the first logged iterate with eps_on <= eps x its value at t = 0 "
                       "(only logged iterates count: tracking.log_every bounds the resolution; the run does not stop "
                       "there: tol stops it)")
    eps_on: str = param("subopt", OneOf("subopt", "dist_sq"),
                        "the measure of eps: subopt (F - F* <= eps (F(x0) - F*)) or dist_sq (||x - x*||^2 <= eps r0)")

    x_star: str = param("solve", OneOf("solve", "none"),
                        "solve: x* is solved (closed form, cache, or Newton-CG on the hosts to machine precision) for "
                        "the bound, dist_sq, subopt, tol and eps; none: no x* (a data set too large to solve first): "
                        "the run logs F (objective) and ||grad f||^2 (grad_norm_sq), no bound on the distance, and "
                        "tol must be 0")

    rules = (_data_fits_run, _method_fits_run, _tol_needs_x_star)

    @classmethod
    def from_dict(cls, values: Mapping | None, key: str = ""):
        """The spec of ``values``, every value checked.

        Parameters
        ----------
        values : mapping or None
            Nested or dotted keys (``{"workers.n": 4}``); ``algorithm`` and ``data`` may be plain names
            (``"isega"``, ``"a1a"``). None: every default.
        key : str
            Where the spec sits in a larger config (``""`` at the top).

        Returns
        -------
        RunSpec

        Raises
        ------
        ConfigError
            An unknown key (naming the known ones), a value out of its range, or a combination the rules refuse.
        """
        values = dict(values or {})
        for name in ("algorithm", "data"):
            if isinstance(values.get(name), str):
                values[name] = {"name": values[name]}
        return super().from_dict(values, key)

    @property
    def lam(self) -> float:
        """lambda of the penalty: ``problem.lam``, or the data set's ``data.lam`` when that is null."""
        return self.data.lam if self.problem.lam is None else self.problem.lam

    def method_class(self):
        """The class of ``algorithm.name`` (``isparse.methods``)."""
        return self.algorithm.method_class()

    def with_(self, **changes) -> "RunSpec":
        """A copy with top-level keys replaced (``tau="2/n"``, ``blocks=BlocksSpec(size=4)``), checked again: the
        ConfigError of :meth:`from_dict` for a value out of its range or a combination the rules refuse."""
        import dataclasses

        return dataclasses.replace(self, **changes).check()


__all__ = ["BlocksSpec", "MessagesSpec", "ProblemSpec", "RunSpec", "StepSpec", "WorkersSpec"]
