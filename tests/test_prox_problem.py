"""A problem's own regularizer decides whether a run needs a proximal step (issue 44, point 2): a problem object with
R != 0 given to ``build(spec, problem=...)`` is refused by a method that takes no prox step, in one line, never run
smooth with its theorem logged as if it held; a prox method given the same object reaches x*."""

import numpy as np
import pytest

from isparse.errors import ConfigError
from isparse.regularizers import Regularizer
from tests.specs import make


@pytest.fixture(scope="module")
def l1_problem():
    """breast_cancer's logistic problem over 4 workers with R = 0.05 ||x||_1, made by the spec; its x* solved."""
    setup = make("isega", n=4, lam=0.1, reg="l1", reg_strength=0.05)
    return setup.problem, setup.reference


@pytest.mark.parametrize("algorithm", ["gd", "ibcd"])
def test_a_method_without_prox_refuses_the_problems_regularizer(l1_problem, algorithm):
    problem, reference = l1_problem
    with pytest.raises(ConfigError) as info:
        make(algorithm, n=4, lam=0.1, problem=problem, reference=reference)   # the spec says problem.reg=none
    text = str(info.value)
    assert "\n" not in text and info.value.key == "problem.reg"
    assert f"algorithm={algorithm}" in text and "l1 = 0.05" in text and "isega" in text


def test_a_regularizer_named_none_with_a_weight_is_not_dropped(l1_problem):
    problem, reference = l1_problem
    weighted = Regularizer("none", l1=0.05)
    assert not weighted.is_zero and np.allclose(weighted.prox(np.array([0.2, -0.01]), 1.0), [0.15, 0.0])
    with pytest.raises(ConfigError, match="problem.reg|proximal"):
        make("gd", n=4, lam=0.1, problem=_with_reg(problem, weighted), reference=reference)


def _with_reg(problem, reg):
    import copy

    other = copy.copy(problem)
    other.reg = reg
    return other


def test_a_prox_method_given_the_object_reaches_x_star(l1_problem):
    problem, reference = l1_problem
    setup = make("isega", n=4, lam=0.1, tau=1.0, problem=problem, reference=reference)
    result = setup.run(max_iter=20000, tol=1e-24)
    x_star = reference.x_star
    assert np.sum((result.x - x_star) ** 2) <= 1e-10 * max(1.0, np.sum(x_star ** 2))
    assert np.count_nonzero(x_star == 0) > 0   # R = l1 made x* sparse: the smooth run would not be at it
