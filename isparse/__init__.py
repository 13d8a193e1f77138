"""isparse: independent sparsification of worker-to-master communication.

Mishchenko, Hanzely, Richtarik, "99% of Distributed Optimization is a Waste of Time: The Issue
and How to Fix it", arXiv:1901.09437 (UAI 2020). Each of n workers sends only a fraction tau of
the m parameter blocks, sampled independently of the other workers; the master averages.

The public surface::

    from isparse import RunSpec, build
    spec = RunSpec.from_dict({"algorithm": "isega", "data": "breast_cancer", "workers.n": 4, "blocks.size": 1})
    setup = build(spec)                                     # data, problem, x*, method, stepsize, bound
    result = setup.run(max_iter=spec.max_iter, tol=spec.tol)   # in-process

The spec is the same one ``isparse-run``'s config is made of (the same keys, the same checks and errors).

``setup.run(isparse.engines.dask.DaskPool(client, *setup.pool_args()), ...)`` runs the same steps on Dask.

``isparse.LogisticRegression`` and ``isparse.Ridge`` are scikit-learn estimators that build and run the same spec
(``isparse.estimators``; imported when first named, so that ``import isparse`` does not import scikit-learn).
"""

from .compression import BlockPartition, Messages, Sampler, resolve_tau
from .data import Dataset, load_dataset, load_libsvm, split_rows
from .engines import DivergenceError, InProcessPool, RunResult, run
from .errors import ConfigError, DataError
from .methods import IBCD, ISEGA, METHODS, method_class
from .problems import LogisticProblem, Reference, reference_solve
from .problems.base import Problem
from .runsetup import RunSetup, build
from .data import DataSource, source
from .spec import RunSpec

__all__ = [
    "BlockPartition", "ConfigError", "DataError", "DataSource", "Dataset", "DivergenceError", "IBCD", "ISEGA",
    "InProcessPool", "LogisticProblem", "METHODS", "Messages", "Problem", "Reference", "RunResult", "RunSetup",
    "RunSpec", "Sampler", "build", "load_dataset", "load_libsvm", "method_class", "reference_solve",
    "resolve_tau", "run", "source", "split_rows", "LogisticRegression", "Ridge",
]


def __getattr__(name):
    """The estimators of :mod:`isparse.estimators`, imported when first asked for."""
    if name in ("LogisticRegression", "Ridge"):
        from . import estimators

        return getattr(estimators, name)
    raise AttributeError(f"module 'isparse' has no attribute {name!r}")
