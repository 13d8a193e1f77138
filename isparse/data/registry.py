"""The registry of data sources: ``data=<name>`` -> its option (a leaf module: it imports no data source).

Every :class:`~isparse.data.sources.DataSource` subclass that sets ``name`` registers itself when its class statement
runs (``DataSource.__init_subclass__`` calls :func:`register`), so :data:`SOURCES` holds every source defined so far:
those of ``isparse.data.sources`` and those of any module imported since, e.g. the one ``data.module`` names
(:func:`source_class` imports it first). A source class is also its options dataclass, and its class statement
runs before its ``@dataclass`` decorator: the option with its defaults is made, and its declaration checked, when
first asked for.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import ConfigError, DeclarationError, import_user_module


class _Sources(Mapping):
    """data.name -> the option with its defaults (``cls(name=name)``), made when first asked for."""

    def __init__(self):
        self._classes: dict = {}
        self._made: dict = {}
        self.check = None   # check(cls, name) -> the option, or DeclarationError (set by isparse.data.sources)

    def register(self, name: str, cls) -> None:
        old = self._classes.get(name)
        if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
            raise DeclarationError(f"two data sources are named {name!r}: {old.__module__}.{old.__qualname__} and "
                                   f"{cls.__module__}.{cls.__qualname__}")
        self._classes[name] = cls   # a reload of the same module replaces its class
        self._made.pop(name, None)

    def discard(self, name: str) -> None:
        """Forget ``name`` (a test's source, defined for the test only)."""
        self._classes.pop(name, None)
        self._made.pop(name, None)

    def __getitem__(self, name):
        if name not in self._made:
            self._made[name] = self.check(self._classes[name], name)
        return self._made[name]

    def __iter__(self):
        return iter(self._classes)

    def __len__(self):
        return len(self._classes)

    def __contains__(self, name):
        return name in self._classes


#: data.name -> the option with its defaults (each named LIBSVM set is a NamedLibsvm of that name), in the order the
#: classes were defined
SOURCES = _Sources()


def register(cls, names) -> None:
    """Enter ``cls`` under each of ``names`` (a second class of one name is refused, unless it is the same class
    statement run again, e.g. a module reloaded)."""
    for name in names:
        SOURCES.register(name, cls)


def source_class(name: str, module: str | None = None, key: str = "data") -> type:
    """The class of ``data=name``; ``module`` (``data.module``) is imported first, so that a source defined outside
    ``isparse.data.sources`` registers itself; errors name the section ``key``.

    Raises
    ------
    ConfigError
        ``module`` fails to import or declares its source wrong (one line naming ``<key>.module``,
        :func:`isparse.errors.import_user_module`), or no source has that name (naming ``key``, listing the known
        ones).
    DeclarationError
        The source of ``name`` is declared wrong (a source defined in Python, without ``module``).
    """
    if module is not None:
        before = set(SOURCES)
        import_user_module(module, key, "data source",
                           then=lambda: [SOURCES[n] for n in SOURCES if n not in before or n == name])
    if name not in SOURCES:
        raise ConfigError(key, f"The '{key}' parameter must be one of {', '.join(SOURCES)}, or a data source that "
                               f"'{key}.module' defines; got {name!r}.")
    return type(SOURCES[name])


__all__ = ["SOURCES", "register", "source_class"]
