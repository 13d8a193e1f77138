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
from .base import AlgorithmOptions, Context, Method, check_needs


def _collect(imported: bool = False) -> dict:
    """{name: class} of every Method subclass with a ``name`` (this package's modules imported first)."""
    if not imported:
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


def method_class(name: str, module: str | None = None, key: str = "algorithm"):
    """The class of ``algorithm=name``; ``module`` (``algorithm.module``) is imported first, so a method defined
    outside this package registers itself.

    Raises
    ------
    ConfigError
        ``module`` cannot be imported (naming ``algorithm.module``), or no method has that name (the message lists
        the known ones).
    """
    if module is not None:
        try:
            importlib.import_module(str(module))
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's module's
            raise ConfigError(f"{key}.module", f"The '{key}.module' parameter must name an importable Python module "
                                               f"(on sys.path / PYTHONPATH); importing {module!r} failed: "
                                               f"{type(exc).__name__}: {exc}") from None
    if name not in METHODS:   # a subclass defined since the registry was collected (an imported module's)
        METHODS.update(_collect(imported=True))
    check_choice(key, name, METHODS)
    return METHODS[name]


__all__ = ["METHODS", "AlgorithmOptions", "Context", "Method", "check_needs", "isgd_schedule", "method_class",
           *sorted(cls.__name__ for cls in METHODS.values())]
