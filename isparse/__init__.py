"""isparse: independent sparsification of worker-to-master communication.

Mishchenko, Hanzely, Richtarik, "99% of Distributed Optimization is a Waste of Time: The Issue
and How to Fix it", arXiv:1901.09437 (UAI 2020). Each of n workers sends only a fraction tau of
the m parameter blocks, sampled independently of the other workers; the master averages.

The public surface::

    from isparse import load_dataset, build
    setup = build(algorithm="isega", data=load_dataset("breast_cancer"), lam=0.1, n=4, block_size=1)
    result = setup.run(max_iter=10_000, tol=1e-8)          # in-process

``setup.run(isparse.engines.dask.DaskPool(client, *setup.pool_args()), ...)`` runs the same steps on Dask.
"""

from .blocks import BlockPartition, resolve_tau
from .data import Dataset, load_dataset, load_libsvm, split_rows
from .engines import DivergenceError, InProcessPool, RunResult, run
from .errors import ConfigError, DataError
from .messages import Messages
from .methods import IBCD, ISEGA, METHODS, method_class
from .problems import LogisticProblem, Reference, reference_solve
from .sampling import Sampler
from .setup import RunSetup, build, check_static

__all__ = [
    "BlockPartition", "ConfigError", "DataError", "Dataset", "DivergenceError", "IBCD", "ISEGA",
    "InProcessPool", "LogisticProblem", "METHODS", "Messages", "Reference", "RunResult", "RunSetup", "Sampler",
    "build", "check_static", "load_dataset", "load_libsvm", "method_class", "reference_solve",
    "resolve_tau", "run", "split_rows",
]
