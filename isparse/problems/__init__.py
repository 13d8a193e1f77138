"""Problems: the local functions f_i of the workers, their constants, and the reference solution x*."""

from .glm import GLMProblem, GLMShard, LogisticProblem, LogisticShard
from .quadratic import QuadraticProblem, QuadraticShard
from .reference import Reference, reference_solve

__all__ = ["GLMProblem", "GLMShard", "LogisticProblem", "LogisticShard", "QuadraticProblem", "QuadraticShard", "Reference", "reference_solve"]
