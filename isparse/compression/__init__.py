"""Compression of the messages: which blocks a worker sends and how each value is coded.

- :mod:`isparse.compression.blocks`: the m blocks of the d coordinates (:class:`BlockPartition`);
- :mod:`isparse.compression.tau`: tau, the fraction of the blocks a worker sends (:class:`Tau`: one grammar, one
  rounding);
- :mod:`isparse.compression.sampling`: the counter-based draws keyed by (seed, i, t) (:class:`Sampler`);
- :mod:`isparse.compression.codecs`: the value codecs of ``messages.codec``;
- :mod:`isparse.compression.messages`: one round's batch of messages (:class:`Messages`) and its bytes.
"""

from .blocks import BlockPartition
from .codecs import Codec, codec
from .messages import Messages
from .sampling import Sampler
from .tau import Tau, resolve_tau

__all__ = ["BlockPartition", "Codec", "Messages", "Sampler", "Tau", "codec", "resolve_tau"]
