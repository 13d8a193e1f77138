"""Engines: the shared master loop and the pools that run the worker steps (in-process or on Dask).

``isparse.engines.dask`` is imported lazily, so the library works without ``distributed``.
"""

from .inprocess import InProcessPool
from .loop import DivergenceError, RunResult, run

__all__ = ["InProcessPool", "DivergenceError", "RunResult", "run"]
