"""The theory functions take exactly the keywords they use: a misspelt option is a TypeError, never dropped.

``isparse.theory.base.with_constants`` is the one place where a run's common constants are handed to them (each
function receives only the constants its signature names).
"""

import pytest

from isparse.theory import (iasgd_bound, isgd_bound, theorem1_bound, theorem2_bound, theorem3_bound, theorem5_bound,
                            with_constants)

COMMON = dict(mu=0.1, n=10, tau=0.2, r0=3.0)
CASES = {
    theorem1_bound: dict(COMMON, L=2.0, gamma=0.05, sum_sq_local_grads=0.7),
    theorem3_bound: dict(COMMON, L=2.0, gamma=0.05, sum_sq_local_grads=0.7),
    isgd_bound: dict(COMMON, L=2.0, gamma=0.05, sum_sq_local_grads=0.7, sigma_sq=0.3),
    theorem2_bound: dict(COMMON, L_example=2.0, gamma=0.05, N=100, sum_sq_example_grads=0.7),
    theorem5_bound: dict(COMMON, L_example=2.0, gamma=0.05, sum_sq_local_grads=0.0, sum_sq_example_grads=0.7,
                         l_max=5),
    iasgd_bound: dict(L=2.0, mu=0.1, r0=3.0, rho=2.0, rho_is_computed=True, subopt0=1.0),
}


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_a_misspelt_keyword_raises_type_error(fn):
    kw = CASES[fn]
    fn(**kw)                                              # the right keywords are accepted
    with pytest.raises(TypeError, match="omgea"):
        fn(**kw, omgea=0.125)                             # omega misspelt
    if "gamma" in kw:
        bad = {("gamma_" if k == "gamma" else k): v for k, v in kw.items()}
        with pytest.raises(TypeError):
            fn(**bad)                                     # a required keyword misspelt: missing and unexpected


class _Ctx:
    """The part of a Context that ``with_constants`` reads."""

    def constants(self):
        return dict(L=2.0, mu=0.1, n=10, tau=0.2, r0=3.0, sum_sq_local_grads=0.7, omega=0.0)


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_with_constants_passes_only_the_declared_constants_and_checks_the_given_ones(fn):
    ctx = _Ctx()
    given = {k: v for k, v in CASES[fn].items() if k not in ctx.constants()}
    if fn is theorem5_bound:
        given["sum_sq_local_grads"] = 0.0                 # a given keyword wins over the constant of the same name
    b = with_constants(fn, ctx, **given)
    assert b == fn(**CASES[fn])                          # CASES holds the same constants (and omega = 0, the default)
    with pytest.raises(TypeError, match="gamm"):
        with_constants(fn, ctx, **given, gamm=0.05)


def test_with_constants_calls_each_bound_of_a_method_with_what_it_declares():
    """iasgd_bound declares neither n nor tau nor sum_sq_local_grads: they are not passed."""
    ctx = _Ctx()
    b = with_constants(iasgd_bound, ctx, rho=2.0, rho_is_computed=True, subopt0=1.0)
    assert b == iasgd_bound(L=2.0, mu=0.1, r0=3.0, omega=0.0, rho=2.0, rho_is_computed=True, subopt0=1.0)
