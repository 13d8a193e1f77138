"""scikit-learn's LogisticRegression (lbfgs, saga) on the community convention: C = 1 / lmbd, no intercept."""

import warnings

from benchopt import BaseSolver


class Solver(BaseSolver):
    name = "sklearn"
    sampling_strategy = "iteration"
    requirements = ["scikit-learn"]
    parameters = {"solver": ["lbfgs", "saga"]}
    parameter_template = "{solver}"

    def set_objective(self, X, y, lmbd, **_):
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.linear_model import LogisticRegression

        warnings.filterwarnings("ignore", category=ConvergenceWarning)
        self.X, self.y = X, y
        self.clf = LogisticRegression(solver=self.solver, C=1.0 / lmbd, fit_intercept=False, tol=1e-15)

    def run(self, n_iter):
        self.clf.max_iter = max(int(n_iter), 1)
        self.clf.fit(self.X, self.y)

    def get_result(self):
        return dict(beta=self.clf.coef_.ravel().copy())
