"""The LIBSVM sets of the paper through isparse's loader (``isparse.load_dataset``; provenance in the data directory,
``ISPARSE_DATA_DIR``, default ../shared/datasets beside the checkout): a1a, w1a, mushrooms, phishing, a9a."""

import os
from pathlib import Path

from benchopt import BaseDataset


def data_dir() -> str:
    """``ISPARSE_DATA_DIR``, else ``../shared/datasets`` beside the checkout holding this benchmark."""
    here = Path(__file__).resolve().parents[3] / ".." / "shared" / "datasets"
    return os.environ.get("ISPARSE_DATA_DIR") or str(here.resolve())


class Dataset(BaseDataset):
    name = "libsvm"
    requirements = ["pip::isparse"]
    parameters = {"data": ["a1a", "w1a"]}   # also mushrooms, phishing, a9a: -d "libsvm[data=a9a]"

    def get_data(self):
        from isparse import load_dataset

        data = load_dataset(self.data, data_dir=data_dir())
        X = data.A.copy()   # 32-bit indices, as scikit-learn's own LIBSVM reader gives (its saga refuses int64)
        X.indices, X.indptr = X.indices.astype("int32"), X.indptr.astype("int32")
        return dict(X=X, y=data.b)
