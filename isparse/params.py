"""Parameters declared as data: each config key is a dataclass field with its type, default, constraint and
meaning written once, next to each other, and checked by one machinery with one error format.

The model is scikit-learn's ``_parameter_constraints`` (``"tol": [Interval(Real, 0, None, closed="left")]``):
a :class:`Section` is a dataclass whose fields are made with :func:`param` (a leaf) or :func:`section` (a
nested group of keys); :meth:`Section.from_dict` builds one from a mapping (a composed Hydra config, a
notebook's dict), refusing keys the section does not have, and checks every value against its field's
constraint; :meth:`Section.check` checks an instance built in Python. Rules that tie several fields
together are small named functions in the section's ``rules``.

Every error is a :class:`~isparse.errors.ConfigError` naming the key as the user types it::

    The 'workers.n' parameter must be an integer in [1, inf); got 2.5.
    The 'workers.N' parameter is not a key of workers; known: n, split, split_seed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from .errors import ConfigError, DeclarationError, check_choice, check_range


# -- constraints -----------------------------------------------------------------------------------------
class Constraint:
    """What a value may be. Calling it returns the value (normalized: an integral float for an int field is an
    error, not a cast) or raises ConfigError naming ``key``. ``text`` says what is allowed (for the docs)."""

    text = "anything"

    def __call__(self, key: str, value):
        return value


class Interval(Constraint):
    """A number in an interval: ``kind`` int or float, bounds ``low``/``high`` (None: unbounded), ``low_open``
    / ``high_open`` for an exclusive lower / upper bound (beta in [0, 1): ``Interval(float, 0, 1, high_open=True)``);
    floats must be finite unless ``finite=False``."""

    def __init__(self, kind: type, low=None, high=None, *, low_open: bool = False, high_open: bool = False,
                 finite: bool = True):
        if high_open and high is None:
            raise TypeError("Interval: high_open=True needs a finite high (an unbounded end is open already)")
        self.kind, self.low, self.high, self.finite = kind, low, high, finite
        self.low_open, self.high_open = low_open, high_open
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        #: the interval as printed, e.g. [0, 1); an unbounded end is open: inf itself is refused
        self.allowed = f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high is None or high_open else ']'}"
        self.text = f"{'an integer' if kind is int else 'a number'} in {self.allowed}"

    def __call__(self, key, value):
        if self.high_open:   # check_range knows closed upper ends only: the open one is checked here, same wording
            bad_type = isinstance(value, bool) or not isinstance(value, (int, float)) or (
                self.kind is int and not float(value).is_integer())
            if bad_type:
                raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got {value!r}.")
            if not float(value) < self.high:
                raise ConfigError(key, f"The '{key}' parameter must be in {self.allowed}; got {value!r}.")
        try:
            value = check_range(key, value, self.low, self.high, integer=self.kind is int, low_open=self.low_open)
        except ConfigError:
            if not self.high_open:
                raise
            raise ConfigError(key, f"The '{key}' parameter must be in {self.allowed}; got {value!r}.") from None
        if self.kind is float and self.finite and not math.isfinite(value):
            raise ConfigError(key, f"The '{key}' parameter must be a finite number; got {value!r}.")
        return value   # as given: an int stays an int (its logged param reads as typed)


class OneOf(Constraint):
    """One of the ``choices`` (strings, compared as given)."""

    def __init__(self, *choices):
        self.choices = tuple(choices)
        self.text = "one of " + ", ".join(map(str, choices))

    def __call__(self, key, value):
        return check_choice(key, value, self.choices)


class Boolean(Constraint):
    """true or false (not a string, not a number)."""

    text = "true or false"

    def __call__(self, key, value):
        if not isinstance(value, bool):
            raise ConfigError(key, f"The '{key}' parameter must be true or false; got {value!r}.")
        return value


class Text(Constraint):
    """A string (non-empty unless ``empty=True``). A number or boolean is refused: the pipeline gives a string
    field the text as typed before it is checked (``pipeline.schema``)."""

    def __init__(self, *, empty: bool = False):
        self.empty = empty
        self.text = "a string" if empty else "a non-empty string"

    def __call__(self, key, value):
        if not isinstance(value, str) or (not self.empty and not value.strip()):
            raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got {value!r}.")
        return value


class Nullable(Constraint):
    """null, or what ``inner`` allows."""

    def __init__(self, inner: Constraint):
        self.inner = inner
        self.text = f"null or {inner.text}"

    def __call__(self, key, value):
        if value is None:
            return None
        try:
            return self.inner(key, value)
        except ConfigError as exc:
            text = str(exc)
            if text.startswith(f"The '{key}' parameter must be "):   # say that null is allowed too
                text = text.replace(" must be ", " must be null or ", 1)
            raise ConfigError(key, text) from None


class Pair(Constraint):
    """[lower, upper]: two numbers with lower < upper."""

    text = "[lower, upper], two numbers with lower < upper"

    def __call__(self, key, value):
        pair = list(value) if isinstance(value, (list, tuple)) else None
        if (pair is None or len(pair) != 2
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) or v != v for v in pair)
                or not pair[0] < pair[1]):
            raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got {value!r}.")
        return [float(pair[0]), float(pair[1])]


class FreeMapping(Constraint):
    """A mapping whose keys are free (passed as they are to another library: a cluster class's keyword
    arguments). ``+<key>.<name>=value`` adds a key."""

    text = "a mapping (its keys are passed on as they are)"

    def __call__(self, key, value):
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got {value!r}.")
        return dict(value)


class ListOf(Constraint):
    """A list whose items ``inner`` allows (a single item is taken as a list of one)."""

    def __init__(self, inner: Constraint, *, nonempty: bool = True):
        self.inner, self.nonempty = inner, nonempty
        self.text = f"a {'non-empty ' if nonempty else ''}list of {inner.text}"

    def __call__(self, key, value):
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if self.nonempty and not items:
            raise ConfigError(key, f"The '{key}' parameter must be {self.text}; got [].")
        return [self.inner(f"{key}[{k}]", v) for k, v in enumerate(items)]


# -- fields ----------------------------------------------------------------------------------------------
def param(default=dataclasses.MISSING, constraint: Constraint | None = None, doc: str = "", *, factory=None):
    """A leaf key: its ``default`` (omit it for a key without one; ``factory`` makes a mutable one), the ``constraint``
    called with (key, value) when the section is checked, and ``doc``, what the key means (the docs' table and
    ``python -m pipeline.schema``): a dataclasses.Field."""
    meta = {"constraint": constraint or Constraint(), "doc": doc}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def section(cls, doc: str = "", *, factory=None):
    """A nested group of keys, ``cls`` a :class:`Section` subclass (a base class whose :meth:`Section.choose` picks the
    option's class from the values: the data source named by ``data.name``); default ``factory``: ``cls()``."""
    return dataclasses.field(default_factory=factory or cls, metadata={"section": cls, "doc": doc})


def required(key: str, what: str) -> ConfigError:
    """The ConfigError, for the caller to raise, of a ``key`` that must be set and is not (``???`` in a config, or
    missing); ``what`` it must name goes in the message."""
    return ConfigError(key, f"The '{key}' parameter must be set ({what}); got nothing.")


class Section:
    """A group of config keys: a dataclass whose fields are :func:`param` leaves and :func:`section` groups.

    Subclasses may set ``rules``: functions ``rule(section, key)`` run after every field is checked, raising
    ConfigError for combinations of values that cannot be used together (or would be ignored).
    """

    rules: ClassVar[tuple] = ()

    # -- the option of a polymorphic section -----------------------------------------------------------
    @classmethod
    def choose(cls, values: Mapping, key: str) -> type:
        """The class of the section at ``key`` given its ``values``: ``cls`` itself, unless a base class of
        several options decides (by ``name`` or ``kind``)."""
        return cls

    @classmethod
    def fields(cls) -> dict:
        """The section's keys: ``{name: dataclasses.Field}`` of its init fields, in declaration order."""
        return {f.name: f for f in dataclasses.fields(cls) if f.init}

    @classmethod
    def label(cls, values: Mapping, key: str) -> str:
        """How the unknown-key error names this section at ``key`` ("workers", "algorithm=isega", "the config")."""
        return key or "the config"

    # -- building and checking -------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, values: Mapping | None, key: str = "") -> "Section":
        """The section of ``values`` (a mapping of this section's keys; nested mappings for nested sections;
        a key may also be dotted, ``{"workers.n": 4}``), every value checked.

        Raises
        ------
        ConfigError
            A key this section does not have (naming the known ones), a value its constraint refuses, or a
            combination its rules refuse.
        """
        values = _undot(values or {}, key)
        chosen = cls.choose(values, key)
        if chosen is not cls:
            return chosen.from_dict(values, key)
        fields = cls.fields()
        unknown = [k for k in values if k not in fields]
        if unknown:
            raise unknown_key(_join(key, unknown[0]), cls.label(values, key), list(fields))
        kwargs = {}
        for name, f in fields.items():
            full = _join(key, name)
            if name not in values:
                continue
            value = values[name]
            sub = f.metadata.get("section")
            if sub is not None:
                if value is not None and not isinstance(value, Mapping):
                    raise ConfigError(full, f"The '{full}' parameter is a group of keys "
                                            f"({', '.join(sub.fields()) or 'none'}); got {value!r}.")
                kwargs[name] = sub.from_dict(value, full)
            else:
                kwargs[name] = f.metadata["constraint"](full, value)
        obj = cls(**kwargs)
        obj.check_rules(key)
        return obj

    def check(self, key: str = "") -> "Section":
        """Check every field (and nested section) of this instance and the rules; ``key`` is where the section sits
        (``""``
        at the top), for the messages. Returns this instance, its values normalized.

        Raises
        ------
        ConfigError
            A value its constraint refuses, a nested section of the wrong type, or a combination the rules refuse.
        """
        for name, f in type(self).fields().items():
            full = _join(key, name)
            value = getattr(self, name)
            if f.metadata.get("section") is not None:
                if not isinstance(value, Section):
                    raise ConfigError(full, f"The '{full}' parameter must be a {f.metadata['section'].__name__}; "
                                            f"got {value!r}.")
                value.check(full)
            else:
                object.__setattr__(self, name, f.metadata["constraint"](full, value))
        self.check_rules(key)
        return self

    def check_rules(self, key: str = "") -> None:
        """Run the class's ``rules`` on this instance; ``key`` is where the section sits (``''`` at the top).

        Raises
        ------
        ConfigError
            A combination of values a rule refuses.
        """
        for rule in type(self).rules:
            rule(self, key)

    def to_dict(self) -> dict:
        """The section as plain containers (nested sections as dicts)."""
        out = {}
        for name in type(self).fields():
            value = getattr(self, name)
            out[name] = value.to_dict() if isinstance(value, Section) else _plain(value)
        return out

    @classmethod
    def keys_doc(cls, key: str = "") -> list[tuple[str, str, str]]:
        """(key, allowed, meaning) of every leaf, nested sections flattened: the table of the docs."""
        rows = []
        for name, f in cls.fields().items():
            full = _join(key, name)
            sub = f.metadata.get("section")
            if sub is not None:
                rows += sub.keys_doc(full)
            else:
                rows.append((full, f.metadata["constraint"].text, f.metadata.get("doc", "")))
        return rows


def unknown_key(key: str, where: str, known) -> ConfigError:
    """The ConfigError, for the caller to raise, of a ``key`` (in full) a section does not have (it would be ignored);
    ``where`` names the section (:meth:`Section.label`), ``known`` its keys, listed in the message."""
    return ConfigError(key, f"The '{key}' parameter is not a key of {where} (it would be ignored); known: "
                            f"{', '.join(known) or 'none'}.")


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _undot(values: Mapping, key: str) -> dict:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}`` (dotted keys of a Python user's dict); nested mappings kept."""
    out: dict = {}
    for k, v in values.items():
        if not isinstance(k, str):
            raise ConfigError(_join(key, str(k)), f"The '{_join(key, str(k))}' parameter must be named by a string; "
                                                 f"got {k!r}.")
        head, _, rest = k.partition(".")
        if not rest:
            if isinstance(v, Mapping) and isinstance(out.get(head), dict):
                out[head].update(v)
            else:
                out[head] = dict(v) if isinstance(v, Mapping) else v
            continue
        node = out.setdefault(head, {})
        if not isinstance(node, dict):
            raise ConfigError(_join(key, k), f"The '{_join(key, head)}' parameter is a value ({node!r}), not a group "
                                             f"of keys; got {k!r}.")
        node.update({rest: v})
    return out


def _plain(value):
    if isinstance(value, tuple):
        return list(value)
    return value


def leaf_constraints(cls, key: str = "") -> dict[str, Constraint]:
    """{dotted key: constraint} of every leaf of a Section class (nested sections flattened)."""
    out = {}
    for name, f in cls.fields().items():
        full = _join(key, name)
        sub = f.metadata.get("section")
        if sub is not None:
            out.update(leaf_constraints(sub, full))
        else:
            out[full] = f.metadata["constraint"]
    return out


def is_text(constraint: Constraint) -> bool:
    """Whether a constraint admits strings only (a string field: its value keeps the text as typed)."""
    inner = constraint.inner if isinstance(constraint, Nullable) else constraint
    return isinstance(inner, (Text, OneOf)) or getattr(inner, "is_text", False)


__all__ = ["Boolean", "Constraint", "FreeMapping", "Interval", "ListOf", "Nullable", "OneOf", "Pair", "Section",
           "Text", "Any", "is_text", "leaf_constraints", "param", "required", "section", "unknown_key"]


def check_options_declaration(where: str, opts, base: type, key: str, label: str | None = None) -> None:
    """Raise :class:`~isparse.errors.DeclarationError` (one line naming ``label``, default ``<where>.options``)
    unless ``opts`` is a @dataclass subclass of ``base`` whose fields beyond ``base``'s are all made with :func:`param`
    and whose defaults pass their own constraints (checked as ``<key>.<field>``): what a method's or a codec's
    ``options`` must be, and a data source itself."""
    label = label or f"{where}.options"
    if not (isinstance(opts, type) and issubclass(opts, base) and dataclasses.is_dataclass(opts)):
        raise DeclarationError(f"{label} must be a @dataclass subclass of {base.__name__}; got {opts!r}")
    fields = {f.name: f for f in dataclasses.fields(opts)}
    undeclared = [n for n, a in opts.__dict__.get("__annotations__", {}).items()
                  if n not in fields and not str(a).startswith(("ClassVar", "typing.ClassVar"))
                  and getattr(a, "__origin__", None) is not ClassVar]
    if undeclared:   # a subclass without @dataclass inherits is_dataclass, but its own fields are not fields
        raise DeclarationError(f"{label}: {opts.__name__} must be decorated with @dataclass (its "
                               f"{', '.join(undeclared)} would not be keys)")
    inherited = {f.name for f in dataclasses.fields(base)} if dataclasses.is_dataclass(base) else set()
    for f in fields.values():
        if f.name in inherited:      # the base's own keys (name, module, codec, ...) are checked where they are used
            continue
        constraint = f.metadata.get("constraint")
        if constraint is None:
            raise DeclarationError(f"{label}: field {f.name!r} of {opts.__name__} must be made with "
                                   f"isparse.params.param(default, constraint, doc)")
        if f.default is not dataclasses.MISSING:
            try:
                constraint(f"{key}.{f.name}", f.default)
            except ConfigError as exc:
                raise DeclarationError(f"{label}: the default {f.default!r} of {opts.__name__}.{f.name} is "
                                       f"refused by its own constraint ({exc})") from None
