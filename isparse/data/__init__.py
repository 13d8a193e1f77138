"""Data: where a run's examples come from and how they are split across the n workers.

- :mod:`isparse.data.dataset`: :class:`Dataset` (a CSR matrix A of shape (N, d), labels b in {-1, +1}), the checks
  every loader applies, and :func:`split_rows`;
- :mod:`isparse.data.libsvm`: the readers (LIBSVM files, scikit-learn's bundled breast-cancer set);
- :mod:`isparse.data.named`: the named LIBSVM sets of the shared data directory;
- :mod:`isparse.data.sources`: the ``data`` section's typed options (:class:`DataSource`) and :func:`load_dataset`;
- :mod:`isparse.data.registry`: ``data=<name>`` -> its option (:data:`SOURCES`), filled by the classes themselves;
- :mod:`isparse.data.on_worker`: what a Dask worker needs to read its own shards (``data.load=on_worker``).
"""

from .dataset import Dataset, split_rows, to_pm1, validate_arrays
from .libsvm import load_breast_cancer, load_libsvm
from .named import DATA_DIR_ENV, NAMED_FEATURES, NAMED_FILES
from .sources import SOURCES, DataSource, load_dataset, source, source_class

__all__ = ["DATA_DIR_ENV", "NAMED_FEATURES", "NAMED_FILES", "SOURCES", "DataSource", "Dataset", "load_breast_cancer",
           "load_dataset", "load_libsvm", "source", "source_class", "split_rows", "to_pm1", "validate_arrays"]
