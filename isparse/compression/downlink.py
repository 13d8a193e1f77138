"""The compressed downlink with error feedback in the primal space (EF21-P; docs/algorithms.md §9).

The master holds the iterate x^t and, with the hosts, the model w^{t-1} they compute at. A round sends
c^t = C(x^t - w^{t-1}) with a contractive C (parameter alpha), and master and hosts both set
w^t = w^{t-1} + c^t (the same floating-point operations on the same numbers: the same w^t, bit for bit); the
workers' gradients are taken at w^t (Gruntkowska, Tyurin, Richtarik, "EF21-P and Friends", ICML 2023,
arXiv:2209.15218, Algorithm 1). w^{-1} = x^0. The error x^t - w^t is not lost: it is sent in later rounds.

C is a chain of pieces (``isparse.compression.compressors``): optional subset selections (:class:`RandomK`, the same k
coordinates for every host, drawn from (seed, t): values only; :class:`TopK`: the coordinates travel), then a value
codec (float64, float32, bfloat16, or an unbiased codec scaled to be contractive, :class:`Contractive`). Its alpha
comes from the composition rule (:class:`~isparse.compression.compressors.Chain`): (k/d) x 1/(1 + omega) for
random-k then natural7.

``messages.downlink`` names it (:func:`parse_downlink`): ``float64`` (the dense x of every round, no error feedback:
the uncompressed run bit for bit), ``natural7``, ``randk:0.125+natural7``, ``topk:100``, ...
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError
from .compressors import Chain, Contractive, RandomK, Selected, Selection, TopK
from .registry import DOWNLINK_PARSER

#: the selections ``messages.downlink`` knows, by the name written before ``:``
SELECTIONS = {"randk": RandomK, "topk": TopK}
_ZERO = np.zeros(1, np.int64)


class DownlinkMessage(NamedTuple):
    """What crosses a host's link in one round of a compressed downlink.

    Attributes
    ----------
    t : int
        The iteration (the receiver redraws the random selections from (seed, t)).
    supports : tuple
        Per selection, its kept coordinates when they travel (top-k, int32 of shape (1, k)), else None.
    payload : object
        The value codec's payload of the kept values (float64 values for the float64 codec).
    """

    t: int
    supports: tuple
    payload: object


def _selection_of(text: str, d: int | None, key: str) -> Selection:
    name, _, arg = text.partition(":")
    of = f"d = {d}" if d else "d"
    bad = ConfigError(key, f"The '{key}' parameter's selections must be randk:<k> or topk:<k> with k a fraction in "
                           f"(0, 1] of {of} or a count in [1, {d or 'd'}]; got {text!r}.")
    try:
        value = float(arg)
    except ValueError:
        raise bad from None
    k = int(value) if re.fullmatch(r"\s*\d+\s*", arg) and value >= 1 and "." not in arg else None
    if k is None:
        if not 0.0 < value <= 1.0:
            raise bad
        k = max(1, int(round(value * d))) if d else 1
    if d is None:   # the grammar only (before the data are read)
        return SELECTIONS[name](k, k)
    if not 1 <= k <= d:
        raise bad
    return SELECTIONS[name](k, d)


def parse_downlink(text: str, d: int | None, *, key: str = "messages.downlink", scale: float = 1.0) -> "Downlink | None":
    """The downlink that ``messages.downlink`` names, for models of ``d`` values.

    Parameters
    ----------
    text : str
        Pieces joined by ``+``, applied left to right: at most one selection ``randk:<k>`` / ``topk:<k>`` (k a
        fraction of d in (0, 1] or a count in [1, d]), then at most one value codec, a ``messages.codec`` name or ``<name>:<option>``
        (``natural7``, ``dither:7``); no codec: float64 values.
    d : int or None
        Values of the model; None checks the grammar only (the counts k are checked against d later).
    key : str
        The key errors name.
    scale : float
        The size of a round's update x^{t+1} - w^t at the start (gamma x the largest local gradient entry at x^0):
        where a codec with an exponent window (natural, natural7) places it.

    Returns
    -------
    Downlink or None
        None for ``float64`` alone (today's dense downlink, no error feedback).

    Raises
    ------
    ConfigError
        (``key``) an unknown piece, a k out of range, two selections, a codec before a selection or two codecs, or a
        codec that is biased (no constant: EF21-P needs a contractive one).
    """
    from .choices import CodecChoice, _codec_grammar, resolve_codecs
    from .codecs import codec as make_codec

    parts = [p.strip() for p in str(text).split("+")]
    if not text or any(not p for p in parts):
        raise ConfigError(key, f"The '{key}' parameter must be pieces joined by '+' (randk:<k>, topk:<k>, then a codec "
                               f"such as float64 or natural7); got {text!r}.")
    selections, value_codec = [], None
    for p in parts:
        if p.partition(":")[0] in SELECTIONS:
            if value_codec is not None:
                raise ConfigError(key, f"The '{key}' parameter takes its selections before its value codec; got "
                                       f"{text!r}.")
            if selections:   # a second selection would be sized on d, not on what the first kept
                raise ConfigError(key, f"The '{key}' parameter takes at most one selection (randk:<k> or topk:<k>), "
                                       f"then a value codec; got {text!r}.")
            selections.append(_selection_of(p, d, key))
            continue
        if value_codec is not None:
            raise ConfigError(key, f"The '{key}' parameter takes at most one value codec; got {text!r}.")
        try:
            choice = resolve_codecs([p], CodecChoice("float64"), key)[0]
        except ConfigError:
            raise ConfigError(key, f"The '{key}' parameter's pieces must be randk:<k>, topk:<k> or a codec "
                                   f"({_codec_grammar()}); got {p!r} in {text!r}.") from None
        value_codec = make_codec(choice.codec, **dict(choice.options))
    if value_codec is None or value_codec.exact:
        if not selections:
            return None
        last = make_codec("float64")
    elif value_codec.kind == "unbiased":
        last = Contractive(value_codec.scaled(scale) if value_codec.needs_scale else value_codec)
    elif value_codec.kind == "contractive":
        last = value_codec
    else:
        raise ConfigError(key, f"The '{key}' parameter's codec must be exact, unbiased or contractive (EF21-P needs a "
                               f"contraction); {value_codec.label} is {value_codec.kind}.")
    return Downlink(Chain(*selections, last), d or 1, text=str(text)) if d else None


class Downlink:
    """A contractive compressor of the model's update, with the master's and the hosts' sides of EF21-P.

    Stateless (w is held by the master loop and by each host): pickles with the method it belongs to.

    Parameters
    ----------
    compressor : Chain
        Subset selections then a value codec; its kind must be contractive (or exact).
    d : int
        Values of the model.
    text : str, optional
        What ``messages.downlink`` said (the label).

    Raises
    ------
    ValueError
        The chain is neither contractive nor exact.

    References
    ----------
    arXiv:2209.15218, Algorithm 1 (EF21-P); docs/algorithms.md §9.
    """

    def __init__(self, compressor: Chain, d: int, text: str | None = None):
        if compressor.kind not in ("exact", "contractive"):
            raise ValueError(f"a downlink needs a contractive compressor; {compressor!r} is {compressor.kind}")
        self.compressor, self.d = compressor, int(d)
        self.selections = [p for p in compressor.pieces if isinstance(p, Selection)]
        self.codec = compressor.pieces[-1]
        self.label = text or repr(compressor)
        self._samplers = {}

    def __getstate__(self):
        return {"compressor": self.compressor, "d": self.d, "text": self.label}

    def __setstate__(self, state):
        self.__init__(state["compressor"], state["d"], state["text"])

    def __repr__(self):
        return f"Downlink({self.label!r}, d={self.d})"

    @property
    def alpha(self) -> float:
        """alpha of E||C(v) - v||^2 <= (1 - alpha)||v||^2 for the model's d values (the composition rule)."""
        return float(self.compressor.alpha(self.d))

    @property
    def bytes_per_copy(self) -> float:
        """Bytes of one round's message to one host: the pieces' wire bits at d values / 8 (float: 9-bit codes)."""
        return float(self.compressor.bits(np.array([self.d]))[0]) / 8.0

    def _sampler(self, sampler):
        """The downlink streams of the run's ``sampler`` (``Sampler.downlink``), kept per seed."""
        out = self._samplers.get(sampler.seed)
        if out is None:
            out = self._samplers[sampler.seed] = sampler.downlink()
        return out

    def _supports(self, t, supports, sampler):
        """(each selection's support, the counts reaching each piece) at iteration t."""
        counts, out, chain_counts = np.array([self.d]), [], []
        for p, s in zip(self.selections, supports):
            chain_counts.append(counts)
            if s is None:
                s = p.draw(sampler, _ZERO, t, counts, int(counts[0]))
            out.append(s)
            counts = p.out_counts(counts, s)
        return out, chain_counts, counts

    def encode(self, v: np.ndarray, t: int, sampler) -> DownlinkMessage:
        """The message of v = x^t - w^{t-1} at iteration t.

        Parameters
        ----------
        v : ndarray of float64, shape (d,)
        t : int
        sampler : Sampler
            The run's (the method's) sampler; the downlink draws from its shifted streams.

        Returns
        -------
        DownlinkMessage
        """
        sampler = self._sampler(sampler)
        counts, supports, values = np.array([self.d]), [], np.asarray(v, dtype=np.float64)
        for p in self.selections:
            sel = p.encode(values, counts, p.draw(sampler, _ZERO, t, counts, int(counts[0])))
            supports.append(sel.support if p.support_travels else None)
            values, counts = sel.values, sel.counts
        u = self.codec.draw(sampler, _ZERO, t, counts, int(counts[0])) if self.codec.random else None
        return DownlinkMessage(int(t), tuple(supports), self.codec.encode(values, counts, u))

    def decode(self, msg: DownlinkMessage, sampler) -> np.ndarray:
        """C(v), float64 of shape (d,), from a message (the random selections redrawn from (seed, t)).

        Parameters
        ----------
        msg : DownlinkMessage
        sampler : Sampler
            The run's sampler.
        """
        supports, chain_counts, counts = self._supports(msg.t, msg.supports, self._sampler(sampler))
        out = self.codec.decode(msg.payload, counts)
        for p, s, c in zip(reversed(self.selections), reversed(supports), reversed(chain_counts)):
            out = p.decode(Selected(s, out, None), c)
        return out

    def send(self, x: np.ndarray, w: np.ndarray, t: int, sampler) -> tuple:
        """The master's side of round t: the message of x^t - w^{t-1} and the new model w^t.

        Returns
        -------
        w : ndarray of float64, shape (d,)
            w^t = w^{t-1} + C(x^t - w^{t-1}) (a new array).
        msg : DownlinkMessage
        """
        msg = self.encode(x - w, t, sampler)
        return self.receive(w, msg, sampler), msg

    def receive(self, w: np.ndarray, msg: DownlinkMessage, sampler) -> np.ndarray:
        """A host's side: w^t = w^{t-1} + C(x^t - w^{t-1}) from the message (a new array; the master's, bit for bit)."""
        return w + self.decode(msg, sampler)


DOWNLINK_PARSER["parse"] = parse_downlink   # the messages section's check of the key (a name lookup: no import cycle)

__all__ = ["Downlink", "DownlinkMessage", "SELECTIONS", "parse_downlink"]
