"""The methods, each written once as batched worker and master steps, and their registry.

:data:`METHODS` maps every ``algorithm=<id>`` to its class. It is collected, not written: every
module of this package is imported and every :class:`~isparse.methods.base.Method` subclass that
sets ``name`` is registered, so a new method is one file here (and one ``conf/algorithm/<id>.yaml``).
"""

from __future__ import annotations

import importlib
import pkgutil

from ..errors import ConfigError, check_choice
from ..theory import isgd_schedule
from .base import Context, Method, check_needs


def _collect() -> dict:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
    out, todo = {}, list(Method.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__dict__.get("name"):
            if cls.name in out and out[cls.name] is not cls:
                raise RuntimeError(f"two methods are named {cls.name!r}: {out[cls.name]} and {cls}")
            out[cls.name] = cls
    return dict(sorted(out.items()))


#: algorithm id -> method class
METHODS = _collect()
globals().update({cls.__name__: cls for cls in METHODS.values()})


def method_class(name: str):
    """The class of ``algorithm=name``.

    Raises
    ------
    ConfigError
        Unknown algorithm (the message lists the known ones).
    """
    check_choice("algorithm", name, METHODS)
    return METHODS[name]


def check_regularizer(name: str, reg) -> None:
    """Raise ConfigError for an unknown algorithm, or a regularizer it cannot take (no proximal step)."""
    cls = method_class(name)
    if reg is not None and reg.name != "none" and not cls.prox:
        allowed = ", ".join(k for k, c in METHODS.items() if c.prox)
        raise ConfigError("problem.reg", f"The 'problem.reg' parameter must be none for algorithm={name} "
                                         f"(only {allowed} take a proximal step); got {reg.name!r}.")


__all__ = ["METHODS", "Context", "Method", "check_needs", "check_regularizer", "isgd_schedule", "method_class",
           *sorted(cls.__name__ for cls in METHODS.values())]
