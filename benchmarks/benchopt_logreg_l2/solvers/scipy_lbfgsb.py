"""scipy's L-BFGS-B on the community convention (sum of log-losses + lmbd/2 ||beta||^2), one run per curve: its
per-iteration callback is benchopt's (StopIteration ends the run; scipy >= 1.11)."""

import numpy as np
from benchopt import BaseSolver


class Solver(BaseSolver):
    name = "scipy-lbfgsb"
    sampling_strategy = "callback"
    requirements = ["scipy"]

    def set_objective(self, X, y, lmbd, **_):
        self.X, self.y, self.lmbd = X, np.asarray(y, dtype=float), float(lmbd)

    def _fun(self, w):
        from scipy.special import expit

        z = self.y * (self.X @ w)
        f = float(np.sum(np.logaddexp(0.0, -z)) + 0.5 * self.lmbd * (w @ w))
        g = -(self.X.T @ (self.y * expit(-z))) + self.lmbd * w
        return f, np.asarray(g, dtype=float).ravel()

    def run(self, callback):
        from scipy.optimize import minimize

        self.w = np.zeros(self.X.shape[1])

        def step(intermediate_result):
            self.w = np.array(intermediate_result.x)
            if not callback():
                raise StopIteration

        if callback():
            minimize(self._fun, self.w, jac=True, method="L-BFGS-B", callback=step,
                     options=dict(maxiter=10 ** 6, maxfun=10 ** 7, gtol=0.0, ftol=0.0))

    def get_result(self):
        return dict(beta=self.w.copy())
