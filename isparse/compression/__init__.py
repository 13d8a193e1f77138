"""Compression of the messages: which blocks a worker sends and how each value is coded, as pieces that compose.

A **piece** (:class:`Compressor`) maps a batch of messages to a payload and back with pure ``encode``/``decode``,
its random draws made from the counter-based sampler keyed by (seed, worker, iteration), so both engines, resume and
replay see the same draws; it declares its ``kind`` and constant. :func:`chain` composes pieces:
``chain(IndependentBlocks(tau_m, m), codec)`` is the uplink of every method, C(v) = (1/tau) Q(v_U), and
:class:`Chain` computes its constants by the composition rule, so no method computes them
(:mod:`isparse.compression.compressors`). The downlink uses the same pieces.

**Value codecs** (``messages.codec``) are :class:`Codec` subclasses, registered by their ``name`` in :data:`CODECS`
(:mod:`isparse.compression.registry`).

**A codec from outside** is one module and one config file: the module defines a :class:`Codec` subclass (``name``,
``kind`` and its constant, ``encode``/``decode``, ``value_bits``/``header_bits`` or ``bits``, ``stream = CODEC``
if it draws, and ``options`` for keys of its own); the config file, e.g. ``<dir>/messages/<name>.yaml`` holding
``codec: <name>``, ``module: <module>`` and its keys' values, is used with ``hydra.searchpath=[file://<dir>]
+messages=<name>`` (the module on PYTHONPATH). ``messages.module`` is imported before ``messages.codec`` is looked
up, as ``algorithm.module`` is for a method; an import failure is one error line naming ``messages.module``.

Modules:

- :mod:`isparse.compression.compressors`: :class:`Compressor`, :class:`IndependentBlocks`, :class:`Chain`,
  :func:`chain`;
- :mod:`isparse.compression.registry`: :class:`Codec`, :data:`CODECS`, :func:`codec_class`, :class:`MessagesSpec`;
- :mod:`isparse.compression.codecs`: the built-in value codecs (float64, float32, bfloat16, natural, natural7, dither);
- :mod:`isparse.compression.blocks`: the m blocks of the d coordinates (:class:`BlockPartition`);
- :mod:`isparse.compression.tau`: tau, the fraction of the blocks a worker sends (:class:`Tau`: one grammar, one
  rounding);
- :mod:`isparse.compression.sampling`: the counter-based draws keyed by (seed, i, t) (:class:`Sampler`);
- :mod:`isparse.compression.messages`: one round's batch of messages (:class:`Messages`) and its bytes;
- :mod:`isparse.compression.downlink`: the compressed downlink with error feedback (EF21-P, :class:`Downlink`,
  ``messages.downlink``)."""

from .blocks import BlockPartition
from .codecs import FLOAT64, codec
from .compressors import Chain, Compressor, IndependentBlocks, Selection, chain
from .downlink import Downlink, parse_downlink
from .messages import Messages
from .registry import CODECS, Codec, MessagesSpec, codec_class
from .sampling import Sampler
from .tau import Tau, resolve_tau

__all__ = ["BlockPartition", "CODECS", "Chain", "Codec", "Compressor", "Downlink", "FLOAT64", "IndependentBlocks",
           "Messages", "MessagesSpec", "Sampler", "Selection", "Tau", "chain", "codec", "codec_class", "parse_downlink",
           "resolve_tau"]
