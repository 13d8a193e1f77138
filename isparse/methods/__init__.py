"""The methods, each written once as batched worker and master steps, and their registry.

:data:`METHODS` maps every ``algorithm=<id>`` to its class. It is collected, not written: every module of this
package is imported here, and every :class:`~isparse.methods.base.Method` subclass that sets ``name`` registers
itself (``isparse.methods.registry``), so a new method is one file here (one module plus one
``<conf dir>/algorithm/<id>.yaml`` naming it and its ``module`` if it lives outside this package).
The contract a method fills is ``isparse.methods.contract`` (its four steps) and ``isparse.methods.base`` (its
declaration and building).
"""

from __future__ import annotations

import importlib
import pkgutil

from ..theory.base import Theory
from .base import AlgorithmOptions, Context, Method, MinibatchOptions, Sampled, Traits, check_needs
from .registry import METHODS, DeclarationError, method_class

for _info in pkgutil.iter_modules(__path__):    # the method modules: each registers its classes
    importlib.import_module(f"{__name__}.{_info.name}")

globals().update({cls.__name__: cls for cls in METHODS.values()})

__all__ = ["METHODS", "AlgorithmOptions", "Context", "DeclarationError", "Method", "MinibatchOptions", "Sampled",
           "Theory", "Traits", "check_needs", "method_class", *sorted(cls.__name__ for cls in METHODS.values())]
