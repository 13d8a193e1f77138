"""What a method is built from: the :class:`Context` of one run.

``isparse.runsetup.build`` fills a :class:`Context` from the run's spec (``isparse.spec.RunSpec``), the problem and
its reference solution; :func:`isparse.methods.base.configure` reads it to build the method, and the
method's theory (``isparse.theory.base.Theory``) reads it to compute the stepsize and the bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..compression.blocks import BlockPartition
from ..compression.codecs import FLOAT64, Codec
from ..compression.compressors import IndependentBlocks, chain
from .options import AlgorithmOptions


@dataclass
class Context:
    """Everything a method needs to be built for one run (``isparse.runsetup.build`` makes it); the fields are the
    run's keys and the glossary's names.

    Attributes
    ----------
    step_rule : {"theory", "paper", "paper_literal", "bound"}
        ``step.rule`` (``build`` resolves ``bound`` to ``theory`` with the multiplier that reaches the bound's
        gamma_max).
    step_L : {"shards", "f"}
        ``step.L``: the stepsize's L is max_i L_i (shards) or L_f of f itself (f).
    omega : float or None
        The codec's (``messages.codec``) omega for this method's messages (0 for float64, None for a biased codec):
        set by ``build``.
    options : AlgorithmOptions
        The method's own options (``batch``, ``schedule``, ``alpha``, ``rho``, ...), checked.
    data : Dataset or None
        None for a problem not built from a data set.
    """

    algorithm: str
    problem: object
    reference: object
    n: int
    blocks: BlockPartition
    tau: float
    tau_m: int
    step_multiplier: float = 1.0
    step_rule: str = "theory"
    step_L: str = "shards"
    seed: int = 0
    send_ids: bool = False
    options: AlgorithmOptions = field(default_factory=AlgorithmOptions)
    regularizer: object = None
    data: object = None
    x0: np.ndarray | None = None
    cache: dict = field(default_factory=dict)   # what a method derives once per build (e.g. the whole-data problem)
    codec: Codec = FLOAT64
    omega: Optional[float] = 0.0

    def common(self) -> dict:
        """The keyword arguments every method's constructor takes from the run: ``options``, ``reg``, ``seed``,
        ``send_ids`` and ``codec`` (:class:`~isparse.methods.contract.Box`)."""
        return dict(options=self.options, reg=self.regularizer, seed=self.seed, send_ids=self.send_ids,
                    codec=self.codec)

    @property
    def uplink(self):
        """The uplink compressor of the run, C(v) = (1/tau) Q(v_U): ``chain(IndependentBlocks(tau*m, m, b), codec)``;
        its ``omega(d)`` is the composed (1 + omega_Q)/tau - 1 (docs/algorithms.md §7)."""
        return chain(IndependentBlocks(self.tau_m, self.blocks.m, self.blocks.size), self.codec)

    @property
    def r0(self) -> float:
        """r_0 = ||x^0 - x*||^2 (float), the initial distance of every bound (docs/algorithms.md §3)."""
        return float(np.sum((self.x0 - self.reference.x_star) ** 2))

    def constants(self, **extra) -> dict:
        """The run's common constants, by the glossary's names, which the theory functions take by keyword
        (``isparse.theory.base.with_constants`` hands each the ones it declares): ``L``, ``mu``, ``n``, ``tau``,
        ``r0``, ``sum_sq_local_grads`` and ``omega`` (0 for float64 or a biased codec), and ``extra``."""
        p = self.problem
        return dict(L=p.L, mu=p.mu, n=self.n, tau=self.tau, r0=self.r0,
                    sum_sq_local_grads=self.reference.sum_sq_local_grads, omega=self.omega or 0.0, **extra)
