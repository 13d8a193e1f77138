"""The registry of methods: ``algorithm=<name>`` -> its class (a leaf module: it imports nothing of the methods).

Every :class:`~isparse.methods.base.Method` subclass that sets ``name`` registers itself when its class statement
runs (``Method.__init_subclass__`` calls :func:`register`), so :data:`METHODS` holds every method defined so far:
those of ``isparse.methods`` (its ``__init__`` imports all its modules) and those of any module imported since, e.g.
the one ``algorithm.module`` names (:func:`method_class` imports it first).
"""

from __future__ import annotations

from ..errors import DeclarationError, check_choice, import_user_module

#: algorithm id -> method class, filled by :func:`register`
METHODS: dict = {}


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


def import_method_module(module: str, key: str = "algorithm") -> None:
    """Import ``module`` (``algorithm.module``), so the methods it defines register themselves
    (:func:`isparse.errors.import_user_module`: one ConfigError line naming ``<key>.module`` for a module that cannot
    be imported, a method declared wrong, or a module that fails while defining its method)."""
    import_user_module(module, key, "method")


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
