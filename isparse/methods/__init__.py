"""The methods, each written once as worker and master steps, and their registry."""

from ..errors import ConfigError, check_choice
from .base import BlockMethod, Method
from .ibcd import IBCD
from .isega import ISEGA

#: algorithm id -> class
METHODS = {"ibcd": IBCD, "isega": ISEGA}


def make_method(name: str, *, n, blocks, tau_m, gamma, reg=None):
    """Build the method ``name`` (``algorithm=<name>``).

    Raises
    ------
    ConfigError
        Unknown name, or a regularizer the method does not support (IBCD needs R = 0).
    """
    check_choice("algorithm", name, METHODS)
    if name == "ibcd":
        if reg is not None and reg.name != "none":
            raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for algorithm=ibcd "
                                             f"(Algorithm 1 has no proximal step); got {reg.name!r}.")
        return IBCD(n, blocks, tau_m, gamma)
    return ISEGA(n, blocks, tau_m, gamma, reg=reg)


__all__ = ["METHODS", "Method", "BlockMethod", "IBCD", "ISEGA", "make_method"]
