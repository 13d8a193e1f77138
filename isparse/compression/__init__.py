"""Compression of the messages: which blocks a worker sends and how each value is coded.

- :mod:`isparse.compression.blocks`: the m blocks of the d coordinates (:class:`BlockPartition`) and tau;
- :mod:`isparse.compression.sampling`: the counter-based draws keyed by (seed, i, t) (:class:`Sampler`);
- :mod:`isparse.compression.codecs`: the value codecs of ``messages.codec``;
- :mod:`isparse.compression.messages`: one round's batch of messages (:class:`Messages`) and its bytes.
"""

from .blocks import BlockPartition, resolve_tau
from .codecs import Codec, codec
from .messages import Messages
from .sampling import Sampler

__all__ = ["BlockPartition", "Codec", "Messages", "Sampler", "codec", "resolve_tau"]
