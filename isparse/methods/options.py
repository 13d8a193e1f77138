"""The ``algorithm`` section of a run: which method, and its own options (``algorithm.<key>``).

:class:`AlgorithmOptions` is the schema every method's ``options`` dataclass extends: ``algorithm.name`` picks the
method class (``isparse.methods.registry``), and that class's ``options`` is the schema of the other keys, each
with its constraint (``isparse.params``). The built method receives the checked object as ``options`` and reads
it as ``self.opts``. An option shared by a family of methods is declared once here: :class:`MinibatchOptions`
(``algorithm.batch`` of ISGD, SGD, async ISGD, IASGD and ASGD).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional

from ..params import Interval, Nullable, Section, Text, param
from .registry import method_class

log = logging.getLogger(__name__)


@dataclass
class AlgorithmOptions(Section):
    """The ``algorithm`` section: which method, and (in subclasses, one per family of methods) its own options.

    ``algorithm.name`` picks the method class (``isparse.methods.METHODS``; ``algorithm.module`` is imported
    first, for a method defined outside ``isparse.methods``), and that class's ``options`` dataclass is the
    schema of the other keys: a key it does not have is refused.
    """

    name: str = param("isega", Text(), "the method (algorithm=<name>)")
    module: Optional[str] = param(None, Nullable(Text()), "the Python module that defines the method, imported "
                                                          "first; null: a method of isparse.methods")

    @classmethod
    def choose(cls, values, key):
        """``method_class(name, module).options``: the options dataclass of the method that the section's raw
        ``values`` name (its schema for the other keys); ``key`` is the section's (default ``algorithm``).

        Raises
        ------
        ConfigError
            The module fails to import or no method has that name.
        """
        # the class statement checked that ``options`` subclasses AlgorithmOptions (Method.__init_subclass__)
        return method_class(values.get("name", AlgorithmOptions.name), values.get("module"), key or "algorithm").options

    @classmethod
    def label(cls, values, key):
        """How the chosen method is named in a message: ``algorithm=<name>``."""
        return f"{key or 'algorithm'}={values.get('name', AlgorithmOptions.name)}"

    def method_class(self):
        """The method class of ``name`` (and ``module``)."""
        return method_class(self.name, self.module)


@dataclass
class MinibatchOptions(AlgorithmOptions):
    """``algorithm.batch``: the minibatch of the stochastic methods (ISGD, SGD, async ISGD, IASGD, ASGD)."""

    batch: int = param(1, Interval(int, 1, None), "minibatch size per worker, capped at the smallest shard's number "
                                                  "of examples (the cap is announced; the batch that runs is logged "
                                                  "as batch_effective)")

    def effective_batch(self, shards, *, announce: bool = False) -> int:
        """The minibatch that runs: min(batch, l_min), l_min the smallest shard's number of examples; ``announce``
        logs a warning when the cap applies (the build does, once per run)."""
        l_min = min(int(s.l) for s in shards)
        if announce and self.batch > l_min:
            log.warning("algorithm.batch=%d is capped at the smallest shard's %d examples (the batch that runs: %d)",
                        self.batch, l_min, l_min)
        return min(int(self.batch), l_min)


__all__ = ["AlgorithmOptions", "MinibatchOptions"]
