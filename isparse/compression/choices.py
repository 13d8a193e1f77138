"""The value codecs of a grid (``plan.codecs`` of ``isparse-plan``): each entry a :class:`CodecChoice`, a registered
codec and the values of its own keys, written ``<name>``, ``<name>:<x>`` (a codec with one numeric option,
``dither:7``) or as a mapping of the ``messages`` keys. The grammar comes from the codec classes (their
``short_option``), so a codec of ``messages.module`` is a grid entry too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..errors import ConfigError
from .registry import CODECS, MessagesSpec


class CodecChoice(NamedTuple):
    """One value codec of the grid: ``messages.codec`` and the values of the codec's own keys (hashable)."""

    codec: str
    options: tuple = ()   # ((key, value), ...), in the order of the codec's options

    def keys(self) -> dict:
        """The ``messages`` keys it sets: ``{"codec": "dither", "levels": 7}``."""
        return {"codec": self.codec, **dict(self.options)}

    @classmethod
    def of(cls, messages) -> "CodecChoice":
        """The choice of a checked ``messages`` section."""
        keys = messages.choice()
        return cls(keys.pop("codec"), tuple(keys.items()))

    @property
    def label(self) -> str:
        """What a row of the plan shows: the name, ``<name>:<value>`` for a codec with one numeric option
        (``dither:7``), ``<name>(key=value, ...)`` for other options."""
        short = getattr(CODECS.get(self.codec), "short_option", None)
        values = dict(self.options)
        if short and list(values) == [short[0]]:
            return f"{self.codec}:{values[short[0]]}"
        return f"{self.codec}({', '.join(f'{k}={v}' for k, v in values.items())})" if values else self.codec


def _defaults(cls) -> CodecChoice:
    """The choice of codec class ``cls`` with its options' defaults."""
    spec = cls.options()
    return CodecChoice(cls.name, tuple((k, getattr(spec, k)) for k in cls.own_options()))


def _codec_grammar() -> str:
    """The forms of an entry: every registered name, and ``<name>:<x> with x in [lo, hi]`` for a short option."""
    shorts = []
    for name, cls in CODECS.items():
        if cls.short_option:
            option, sym = cls.short_option
            text = cls.options.fields()[option].metadata["constraint"].text
            shorts.append(f"{name}:<{sym}> with {sym} in {text.split(' in ', 1)[-1]}")
    return ", ".join(CODECS) + (" or " + " or ".join(shorts) if shorts else "")


def _choice(entry, own: CodecChoice, key: str, index: int) -> CodecChoice:
    """The choice of one entry of the grid (see :func:`resolve_codecs`)."""
    if isinstance(entry, Mapping):   # {codec: dither, levels: 7}: checked as the messages section
        return CodecChoice.of(MessagesSpec.from_dict(dict(entry), f"{key}[{index}]"))
    name, sep, text = entry.strip().partition(":") if isinstance(entry, str) else ("", "", "")
    cls = CODECS.get(name)
    bad = ConfigError(key, f"The '{key}' parameter's entries must be one of {_codec_grammar()}; got {entry!r}.")
    if cls is None:
        raise bad
    if not sep:
        return own if own.codec == name else _defaults(cls)
    if not cls.short_option or not text.strip():
        raise bad
    option = cls.short_option[0]
    try:
        value = int(text) if text.strip().lstrip("+-").isdigit() else float(text)
        value = cls.options.fields()[option].metadata["constraint"](f"{key}.{option}", value)
    except (ValueError, ConfigError):
        raise bad from None
    return CodecChoice(name, tuple((k, value if k == option else v) for k, v in _defaults(cls).options))


def resolve_codecs(codecs, default: CodecChoice, key: str = "plan.codecs") -> list[CodecChoice]:
    """The grid's value codecs, in the order given, without repeats.

    Parameters
    ----------
    codecs : list or None
        Each a registered codec name, ``"<name>:<x>"`` for a codec with one numeric option (``dither:7``: dither with
        s = 7 levels; the codec's ``short_option``), or a mapping of the ``messages`` keys (``{codec: dither, levels:
        7}``). A name alone takes ``default``'s options if the run's codec is that one, else the codec's defaults. None:
        the run's own codec ``default`` (``CodecChoice.of(job.messages)``) alone.

    Raises
    ------
    ConfigError
        (``key``) an empty list, an entry that is not one of the forms above.
    """
    if codecs is None:
        return [default]
    codecs = list(codecs) if isinstance(codecs, (list, tuple)) else [codecs]
    if not codecs:
        raise ConfigError(key, f"The '{key}' parameter must be a non-empty list of codecs ({_codec_grammar()}), or "
                               f"null for messages.codec alone; got [].")
    out = []
    for index, entry in enumerate(codecs):
        choice = _choice(entry, default, key, index)
        if choice not in out:
            out.append(choice)
    return out


def codec_label(choice) -> str:
    """What a row of the plan shows for ``choice`` (a :class:`CodecChoice` or a built codec): ``dither:7``, the name
    otherwise."""
    if not isinstance(choice, CodecChoice):
        choice = CodecChoice(choice.name, tuple(choice.option_values().items()))
    return choice.label


__all__ = ["CodecChoice", "codec_label", "resolve_codecs"]
