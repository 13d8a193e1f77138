"""Problems: the local functions f_i of the workers, their constants, and the reference solution x*."""

from .logistic import LogisticProblem, LogisticShard
from .reference import Reference, reference_solve

__all__ = ["LogisticProblem", "LogisticShard", "Reference", "reference_solve"]
