"""Value codecs as registered classes, and the ``messages`` section whose ``codec`` key picks one.

:data:`CODECS` maps every ``messages.codec=<name>`` to its class. It is filled by the classes themselves: every
:class:`Codec` subclass that sets ``name`` registers when it is defined (two classes with one name is an error), so
a codec defined anywhere importable is one module, named by ``messages.module`` (imported first, as
``algorithm.module`` is for a method). A codec declares its own keys as its ``options``, a subclass of
:class:`MessagesSpec` (dither's ``levels``): :meth:`MessagesSpec.choose` picks the codec's options by
``messages.codec``, so a key the chosen codec does not have is refused, naming it.

A codec pickles by its class (module and qualified name, found by import on the receiving side: a Dask worker whose
PYTHONPATH has the module) and the values that rebuild it (:meth:`Codec.state`), never by a name lookup.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np

from ..errors import ConfigError, DeclarationError, check_choice, import_user_module
from ..params import (Boolean, Constraint, Nullable, OneOf, Section, Text, check_options_declaration, param,
                      unknown_key)
from .compressors import KINDS, Compressor
from .sampling import CODEC

#: messages.codec -> its class, in the order the classes were defined
CODECS: dict[str, type] = {}


def codec_class(name: str, module: str | None = None, key: str = "messages") -> type:
    """The :class:`Codec` subclass of ``messages.codec=name``; ``module`` (``messages.module``) is imported
    first, so that a codec defined outside ``isparse.compression`` registers itself; errors name the section ``key``.

    Raises
    ------
    ConfigError
        ``module`` cannot be imported (naming ``<key>.module``), or no codec has that name (naming ``<key>.codec``
        and listing the known ones).
    """
    if module is not None:
        before = set(CODECS)
        import_user_module(module, key, "codec")
        if name not in CODECS and not set(CODECS) - before and not _defines_codec(module):
            raise ConfigError(f"{key}.module", f"The '{key}.module' parameter names a module that registers no codec "
                                               f"(a Codec subclass that sets name); {module!r} defines none, so "
                                               f"{key}.codec={name!r} is unknown.")
    check_choice(f"{key}.codec", name, CODECS)
    return CODECS[name]


def _defines_codec(module: str) -> bool:
    """Whether the imported ``module`` holds a registered codec class."""
    mod = sys.modules.get(str(module))
    return any(isinstance(v, type) and v in CODECS.values() for v in vars(mod).values()) if mod else False


#: the parser of ``messages.downlink`` (``isparse.compression.downlink.parse_downlink``, which registers itself here
#: when its module is imported, as ``isparse.compression`` does): a name lookup, so this module does not import it
DOWNLINK_PARSER: dict = {}


class DownlinkText(Constraint):
    """A ``messages.downlink`` (``isparse.compression.downlink.parse_downlink``): its grammar checked before any data
    is read (the counts k against d once the data are read)."""

    is_text = True
    text = ("float64 (dense x, no error feedback), or pieces joined by '+': at most one randk:<k> / topk:<k> (k a "
            "fraction of d in (0, 1] or a count in [1, d]), then a codec (natural7, natural, dither:<s>, float32, ...)")

    def __call__(self, key, value):
        Text()(key, value)
        DOWNLINK_PARSER["parse"](value, None, key=key)
        return value


class CodecName(Constraint):
    """A registered codec's name, looked up when a value is checked (a codec of ``messages.module`` included)."""

    is_text = True

    @property
    def text(self) -> str:
        """The registered codec names, for error messages and the docs."""
        return f"one of {', '.join(CODECS)}, or a codec messages.module defines"

    def __call__(self, key, value):
        return check_choice(key, value, CODECS)


def _keys_of_the_codec(m: "MessagesSpec", key: str) -> None:
    """An instance built in Python with keys of another codec (``DitherOptions(codec="natural")``): refused, as
    ``from_dict`` refuses them."""
    own = codec_class(m.codec, m.module, key or "messages").options.fields()
    extra = [k for k in type(m).fields() if k not in own]
    if extra:
        full = f"{key}.{extra[0]}" if key else extra[0]
        raise unknown_key(full, f"{key or 'messages'}.codec={m.codec}", list(own))


@dataclass
class MessagesSpec(Section):
    """The ``messages`` section: what a worker's message carries besides its values, and how they are coded.

    ``codec`` picks the value codec (:data:`CODECS`), whose ``options`` (a subclass of this section) add its own keys;
    every key is described by its ``param`` (``python -m pipeline.schema`` lists them); codecs and the bounds with
    omega: docs/algorithms.md §7."""

    send_ids: bool = param(False, Boolean(), "false: values only, the master recomputes the block ids from "
                                             "(seed, i, t); true: the ids travel too (4 B each). EF21's Top-K ids "
                                             "always travel")
    aggregate: str = param("worker", OneOf("worker", "host"),
                           "worker: every logical worker's message crosses the link; host: a Dask worker (a machine) "
                           "holding several logical workers sends one float64 sum of their messages, on the union "
                           "of their coordinates (no ids: the master recomputes the union from the seeds), where the "
                           "master step needs only the sum and the values are float64, and x goes down once per "
                           "machine; uplink_bytes and downlink_bytes then count what crosses each machine's link. The "
                           "in-process engine's workers are each their own machine (docs/algorithms.md §6)")
    codec: str = param("float64", CodecName(),
                       "how each value travels: float64 (8 B, exact), float32 (4 B) or bfloat16 (2 B; both "
                       "deterministic rounding, biased: no bound), natural (9 bits, unbiased, omega = 1/8; an 8-bit "
                       "exponent over 2^-190 .. 2^64 x the largest local gradient entry at x^0), natural7 (8 bits: "
                       "natural with a 7-bit exponent over 2^-102 .. 2^24 x that entry) or dither "
                       "(QSGD with s = messages.levels, unbiased, omega = min(q/s^2, sqrt(q)/s) for q values, one 4 B "
                       "norm per message); a codec's own keys are listed under messages.codec=<name>; the theorems' "
                       "bounds carry omega (docs/algorithms.md §7)")
    module: Optional[str] = param(None, Nullable(Text()), "the Python module that defines the codec, imported "
                                                          "first; null: a codec of isparse.compression")
    downlink: str = param("float64", DownlinkText(),
                          "how the model travels to the hosts: float64 (x^t dense, every round) or a contractive "
                          "compressor with error feedback (EF21-P: the hosts keep w^t and get C(x^{t+1} - w^t), the "
                          "gradients are taken at w^t): pieces joined by '+', at most one selection, randk:<k> (the "
                          "same k coordinates for every host, drawn from the seed: values only) or topk:<k> (the ids travel), k a fraction "
                          "of d in (0, 1] or a count in [1, d], then a codec, an unbiased one scaled by 1/(1 + omega) "
                          "(natural7: alpha = 8/9); e.g. natural7, randk:0.125+natural7 (docs/algorithms.md §9)")

    rules = (_keys_of_the_codec,)

    @classmethod
    def choose(cls, values, key):
        """The options class of the codec named by ``values`` (``codec``; ``module`` imported first).

        Raises
        ------
        ConfigError
            ``module`` cannot be imported, or no codec has that name.
        """
        return codec_class(values.get("codec", "float64"), values.get("module"), key or "messages").options

    @classmethod
    def label(cls, values, key):
        """``messages.codec=<name>``, how the unknown-key error names the section."""
        return f"{key or 'messages'}.codec={values.get('codec', 'float64')}"

    def check(self, key: str = "") -> "MessagesSpec":
        """Check the section, ``module`` imported first so that its codecs register.

        Raises
        ------
        ConfigError
            An unknown codec or module, a value out of its range, or a key of another codec.
        """
        codec_class(self.codec, self.module, key or "messages")   # messages.module first: its codecs register
        return super().check(key)

    @classmethod
    def composed_values(cls) -> dict:
        """The section's keys for a config composer (Hydra's node, ``pipeline.schema``): these keys' defaults and every
        registered codec's own keys, null (so ``messages.codec=dither messages.levels=7`` overrides keys that exist;
        a codec's config file adds its own). :meth:`given` leaves a null own key out."""
        return {**cls().to_dict(), **{k: None for c in CODECS.values() for k in c.own_options()}}

    @staticmethod
    def given(values: dict) -> dict:
        """A composed section's ``values`` without the codecs' own keys left null: a null own key takes the
        codec's default, and another codec's key that is null is not given."""
        base = MessagesSpec.fields()
        return {k: v for k, v in values.items() if k in base or v is not None}

    def codec_class(self) -> type:
        """The class of ``codec`` (and ``module``)."""
        return codec_class(self.codec, self.module)

    def make_codec(self) -> "Codec":
        """The :class:`Codec` of these keys."""
        return self.codec_class().from_options(self)

    def choice(self) -> dict:
        """``codec`` and the codec's own keys (what a grid of codecs varies): ``{"codec": "dither", "levels": 7}``."""
        own = self.codec_class().own_options()
        return {"codec": self.codec, **{k: getattr(self, k) for k in own if hasattr(self, k)}}


class Codec(Compressor):
    """A value codec: codes each value of a message (a :class:`~isparse.compression.compressors.Compressor` that
    keeps every value), registered by ``name``, with its own ``options``.

    The attributes below are class attributes a subclass sets.

    Attributes
    ----------
    name : str
        ``messages.codec=<name>``; a subclass that sets it registers in :data:`CODECS`.
    options : type
        The :class:`MessagesSpec` subclass of its keys; its fields beyond :class:`MessagesSpec`'s are the
        constructor's keyword arguments and the instance's attributes of the same names (:meth:`own_options`,
        :meth:`option_values`).
    short_option : (str, str) or None
        Its one numeric option and the letter it is written with (dither: ``("levels", "s")``): ``<name>:<value>`` in
        ``plan.codecs`` and ``dither(s=15)`` in the label.
    value_bits, header_bits : int
        Bits per value, and per message besides the values (dither's norm): :meth:`bits`.
    needs_scale : bool
        Its window is placed by the problem's scale (:meth:`scaled`; the natural codecs).
    stream : int or None
        ``isparse.compression.sampling.CODEC`` for a random codec (its draws: one uniform per value, :meth:`draw`).
    """

    name = ""
    options: ClassVar[type] = MessagesSpec
    short_option: ClassVar[tuple | None] = None
    header_bits = 0
    value_bits = 64
    needs_scale = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if not name:
            return
        _check_codec_declaration(cls)
        old = CODECS.get(name)
        if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
            raise DeclarationError(f"two codecs are named {name!r}: {old.__module__}.{old.__qualname__} and "
                                   f"{cls.__module__}.{cls.__qualname__}")
        CODECS[name] = cls   # a reload of the same module replaces its class

    # -- options ----------------------------------------------------------------------------------------
    @classmethod
    def own_options(cls) -> list[str]:
        """The codec's own keys: its options' fields beyond :class:`MessagesSpec`'s."""
        return [k for k in cls.options.fields() if k not in MessagesSpec.fields()]

    @classmethod
    def from_options(cls, spec: MessagesSpec) -> "Codec":
        """The codec of a checked ``messages`` section: its values of the codec's own keys are the
        constructor's keyword arguments (a key the section lacks takes the constructor's default)."""
        return cls(**{k: getattr(spec, k) for k in cls.own_options() if hasattr(spec, k)})

    def option_values(self) -> dict:
        """The values of its own keys (attributes of the same names)."""
        return {k: getattr(self, k) for k in self.own_options()}

    def state(self) -> dict:
        """The keyword arguments that rebuild this codec (by default its options)."""
        return self.option_values()

    # -- what the methods ask -----------------------------------------------------------------------------
    def scaled(self, scale: float) -> "Codec":
        """The codec for messages whose largest absolute value at the start is about ``scale``,
        max_i ||grad f_i(x^0)||_inf (``isparse.runsetup.build`` computes it): this codec itself, or a new one for a
        codec
        whose window the problem places (``needs_scale``)."""
        return self

    def relative_error(self) -> float | None:
        """delta of ||Q(v) - v|| <= delta ||v|| for a deterministic codec (float32, bfloat16): 0 for an exact
        codec, None for a random one."""
        return 0.0 if self.exact else None

    def bits(self, counts: np.ndarray) -> np.ndarray:
        """``header_bits`` (for a message with values) + ``value_bits`` per value."""
        counts = np.asarray(counts, dtype=np.int64)
        return counts * self.value_bits + np.where(counts > 0, self.header_bits, 0)

    def draw(self, sampler, ids, t, counts, q):
        """One uniform in [0, 1) per value (float64, shape (counts.sum(),)), from stream ``CODEC``; None for a
        deterministic codec. Worker ``ids[k]``'s draws are the first ``counts[k]`` of its q."""
        if not self.random:
            return None
        return sampler.uniforms(self.stream, ids, t, q)[np.arange(q) < np.asarray(counts)[:, None]]

    # -- identity ---------------------------------------------------------------------------------------
    def key(self) -> tuple:
        """What identifies the codec: its name and :meth:`state`."""
        return (self.name, *self.state().values())

    def __reduce__(self):   # by its class (pickled by reference: module + qualname) and state, not by name
        state = self.state()
        return (type(self), ()) if not state else (type(self), (), state)

    def __setstate__(self, state: dict):
        self.__init__(**state)

    def __eq__(self, other):
        return type(other) is type(self) and other.key() == self.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"codec{self.key()!r}"

    @property
    def label(self) -> str:
        """The codec as a user writes it: its name, with its options (``dither(s=15)``)."""
        values = self.option_values()
        if not values:
            return self.name
        sym = dict([self.short_option]) if self.short_option else {}
        return f"{self.name}({', '.join(f'{sym.get(k, k)}={v}' for k, v in values.items())})"


__all__ = ["CODECS", "Codec", "CodecName", "MessagesSpec", "codec_class"]


def _check_codec_declaration(cls) -> None:
    """Raise DeclarationError (one line) if a named codec class is declared wrong: its options not a @dataclass of
    params (subclass of MessagesSpec) whose defaults pass their constraints, a ``kind`` outside KINDS, an unbiased
    codec without its own ``omega`` or a contractive one without its own ``alpha`` (the constant its kind promises)."""
    where = f"{cls.__module__}.{cls.__qualname__}"
    check_options_declaration(where, cls.options, MessagesSpec, "messages")
    if cls.kind not in KINDS:
        raise DeclarationError(f"{where}.kind must be one of {', '.join(KINDS)}; got {cls.kind!r}")
    constant = {"unbiased": "omega", "contractive": "alpha"}.get(cls.kind)
    if constant and getattr(cls, constant) is getattr(Compressor, constant):
        bound = "omega ||v||^2" if constant == "omega" else "(1 - alpha) ||v||^2"
        raise DeclarationError(f"{where} declares kind {cls.kind!r} and must define {constant}(q), its constant "
                               f"(E||Q(v) - v||^2 <= {bound})")
    stream = cls.__dict__.get("stream", getattr(cls, "stream", None))
    if cls.kind == "unbiased" and stream is None:   # E Q(v) = v for every v with Q deterministic means Q(v) = v: exact
        raise DeclarationError(f"{where} declares kind 'unbiased' but no random stream: a deterministic codec that is "
                               f"unbiased is exact (kind 'exact'); a random one must say where its draws come from: "
                               f"add 'stream = CODEC' (from isparse.compression.sampling import CODEC) to the class")
    if stream is not None and stream != CODEC:
        raise DeclarationError(f"{where}.stream must be isparse.compression.sampling.CODEC (a value codec's draws; the "
                               f"other streams are the block samplers'); got {stream!r}")
