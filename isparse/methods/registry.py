"""The registry of methods: ``algorithm=<name>`` -> its class (a leaf module: it imports nothing of the methods).

Every :class:`~isparse.methods.base.Method` subclass that sets ``name`` registers itself when its class statement
runs (``Method.__init_subclass__`` calls :func:`register`), so :data:`METHODS` holds every method defined so far:
those of ``isparse.methods`` (its ``__init__`` imports all its modules) and those of any module imported since, e.g.
the one ``algorithm.module`` names (:func:`method_class` imports it first).
"""

from __future__ import annotations

import importlib
import traceback

from ..errors import ConfigError, check_choice

#: algorithm id -> method class, filled by :func:`register`
METHODS: dict = {}


class DeclarationError(TypeError):
    """A method class whose box is declared wrong (its options, traits, theory or steps), raised by its class
    statement; the message is one line naming the class and the attribute."""


def register(cls) -> None:
    """Enter ``cls`` under ``cls.name`` (a second class of the same name is refused, unless it is the same class
    statement run again, e.g. a module reloaded)."""
    old = METHODS.get(cls.name)
    if old is not None and old is not cls and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise DeclarationError(f"two methods are named {cls.name!r}: {old.__module__}.{old.__qualname__} and "
                               f"{cls.__module__}.{cls.__qualname__}")
    entries = sorted({**METHODS, cls.name: cls}.items())   # kept in name order (the docs list them so)
    METHODS.clear()
    METHODS.update(entries)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _where(exc: BaseException) -> str:
    """file:line of the innermost frame of ``exc`` (where the module's definition failed)."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


def import_method_module(module: str, key: str = "algorithm") -> None:
    """Import ``module`` (``algorithm.module``), so the methods it defines register themselves.

    Raises
    ------
    ConfigError
        Naming ``<key>.module``, one line each: the module cannot be found or imported (an ImportError: "must name
        an importable Python module"); a method it defines is declared wrong (a :class:`DeclarationError`); or its
        code raised something else while it was being defined (the exception, with the file and line).
    """
    try:
        importlib.import_module(str(module))
    except DeclarationError as exc:
        raise ConfigError(f"{key}.module", f"The '{key}.module' parameter names a module whose method is declared "
                                           f"wrong; importing {module!r}: {_one_line(exc)}") from None
    except ImportError as exc:
        raise ConfigError(f"{key}.module", f"The '{key}.module' parameter must name an importable Python module "
                                           f"(on sys.path / PYTHONPATH); importing {module!r} failed: "
                                           f"{type(exc).__name__}: {_one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed while defining its method
        raise ConfigError(f"{key}.module", f"The '{key}.module' parameter names a module that fails while defining "
                                           f"its method: importing {module!r} raised {type(exc).__name__} at "
                                           f"{_where(exc)}: {_one_line(exc)}") from None


def method_class(name: str, module: str | None = None, key: str = "algorithm"):
    """The class of ``algorithm=name``; ``module`` (``algorithm.module``) is imported first, so a method defined
    outside ``isparse.methods`` registers itself.

    Raises
    ------
    ConfigError
        ``module`` fails to import (:func:`import_method_module`), or no method has that name (the message lists
        the known ones).
    """
    if module is not None:
        import_method_module(module, key)
    check_choice(key, name, METHODS)
    return METHODS[name]


__all__ = ["METHODS", "DeclarationError", "import_method_module", "method_class", "register"]
