"""A small simulated set for ``benchopt test``: Gaussian features, labels from a noisy linear model (not separable)."""

import numpy as np
from benchopt import BaseDataset


def simulated(n_samples: int = 200, n_features: int = 20, seed: int = 0):
    """(X of shape (n_samples, n_features), y in {-1, +1}): y = sign(X beta + 2 e), beta and e standard normal."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    beta = rng.standard_normal(n_features)
    y = np.where(X @ beta + 2.0 * rng.standard_normal(n_samples) > 0, 1.0, -1.0)
    return X, y


class Dataset(BaseDataset):
    name = "Simulated"
    parameters = {"n_samples, n_features": [(200, 20)]}

    def get_data(self):
        X, y = simulated(self.n_samples, self.n_features)
        return dict(X=X, y=y)
