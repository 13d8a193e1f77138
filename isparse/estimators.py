"""scikit-learn estimators: :class:`LogisticRegression` and :class:`Ridge` fitted by a method of arXiv:1901.09437.

One implementation: ``fit`` makes the :class:`~isparse.spec.RunSpec` of the estimator's parameters (the keys of
``isparse-run``, :data:`PARAMS`), :func:`~isparse.runsetup.build`\\ s the run on the in-memory data and runs it on
the in-process engine, or on a Dask cluster when ``client`` is given (the same iterates, bit for bit). With
``tracking_uri`` the fit is also the MLflow run ``isparse-run`` would log (:func:`pipeline.job.log_fit`).

The objective is the one of :class:`~isparse.problems.glm.GLMProblem`, F(x) = (1/N) sum_j phi(a_j^T x; b_j) +
(lam/2)||x||^2, the rows split over ``n_workers`` workers. Hence (``isparse/problems/glm.py``):

- :class:`LogisticRegression`: scikit-learn's ``LogisticRegression(C=1/(lam N))`` minimizes N F;
- :class:`Ridge` (phi = (z - b)^2 / 2): scikit-learn's ``Ridge(alpha=lam N)`` minimizes 2 N F.

X in memory (NumPy arrays, scipy.sparse matrices, pandas frames) becomes the run's data set in :func:`dataset_of`.
A Dask Array or DataFrame stays on the Dask workers that hold its partitions
(:class:`~isparse.data.dask_collection.DaskRows`): each such worker is a host of logical workers, the run's
constants, x* and metrics are reduced from the hosts (:class:`~isparse.problems.remote.RemoteGLM`), and the
rounds run on :class:`~isparse.engines.dask.DaskPool` over those hosts; only the method's messages travel.
"""

from __future__ import annotations

import contextlib
import sys
import warnings

import numpy as np
import scipy.sparse as sp
from scipy.special import expit
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model._base import LinearClassifierMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .data.dataset import Dataset
from .errors import ConfigError

#: RunSpec key -> the estimator's parameter: the spec's errors are renamed with it (``workers.n`` -> ``n_workers``)
PARAMS = {"algorithm": "algorithm", "workers.n": "n_workers", "tau": "tau", "blocks.size": "block_size",
          "messages.codec": "codec", "messages.downlink": "downlink", "problem.lam": "lam", "lam": "lam",
          "step.rule": "step_rule", "step.multiplier": "step_multiplier", "max_iter": "max_iter", "tol": "tol",
          "seed": "random_state", "tracking.uri": "tracking_uri", "tracking.experiment": "experiment",
          "x_star": "x_star"}

#: n when ``n_workers`` is None and the rows are in memory
DEFAULT_WORKERS = 4
#: a record (the objective, evaluated on the hosts) every this many iterations when the rows are a Dask collection
DASK_LOG_EVERY = 10


def is_dask_collection(X) -> bool:
    """Whether ``X`` is a Dask array or data frame (checked without importing Dask when no one has)."""
    if "dask" not in sys.modules:
        return False
    from dask.base import is_dask_collection as is_collection

    return bool(is_collection(X))


def dataset_of(X, y, fit_intercept: bool, name: str) -> Dataset:
    """The run's data set of validated in-memory ``X`` and targets ``y`` (labels in {-1, +1} or real targets): X as
    CSR float64, with a column of ones appended when ``fit_intercept``. The path a Dask collection will take is a
    second implementation of this function."""
    A = sp.csr_matrix(X, dtype=np.float64)
    if fit_intercept:
        A = sp.hstack([A, np.ones((A.shape[0], 1))], format="csr")
    return Dataset(A=A, b=np.asarray(y, dtype=np.float64), name=name,
                   source=f"in memory: {type(X).__module__.split('.')[0]}.{type(X).__name__} of shape {X.shape}")


class _IsparseLinear(BaseEstimator):
    """What both estimators share: the spec of their parameters, the fit and the fitted attributes."""

    _loss = ""

    def __init__(self, lam=0.01, *, algorithm="isega", n_workers=None, workers_per_host=None, tau="auto", block_size=1,
                 codec="float64", downlink="float64", step_rule="theory", step_multiplier=1.0, max_iter=20000,
                 tol=1e-8, x_star="solve", fit_intercept=True, random_state=None, client=None, tracking_uri=None,
                 experiment="isparse"):
        self.lam = lam
        self.algorithm = algorithm
        self.n_workers = n_workers
        self.workers_per_host = workers_per_host
        self.tau = tau
        self.block_size = block_size
        self.codec = codec
        self.downlink = downlink
        self.step_rule = step_rule
        self.step_multiplier = step_multiplier
        self.max_iter = max_iter
        self.tol = tol
        self.x_star = x_star
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.client = client
        self.tracking_uri = tracking_uri
        self.experiment = experiment

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def __sklearn_clone__(self):
        """A clone (``sklearn.base.clone``) that shares ``client``: a connected Dask client cannot be copied."""
        client, self.client = self.client, None
        try:
            new = super().__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def __getstate__(self):
        """The pickled estimator (joblib, a process pool) without ``client``: a connected Dask client cannot be
        pickled (the unpickled copy has ``client=None``, as ``xgboost.dask``'s estimators do)."""
        state = super().__getstate__()
        if state.get("client") is not None:
            state = {**state, "client": None}
        return state

    def _seed(self) -> int:
        """``random_state`` as the run's seed: an int is the seed itself; None or a RandomState draws one."""
        if isinstance(self.random_state, (int, np.integer)) and not isinstance(self.random_state, bool):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def run_spec(self, n=None):
        """The :class:`~isparse.spec.RunSpec` of the estimator's parameters (its data set: the one given to ``fit``), with
        ``n`` logical workers (default: ``n_workers``, or :data:`DEFAULT_WORKERS` when None).

        Raises
        ------
        ValueError
            A parameter out of its range, naming the parameter (the spec's ConfigError renamed).
        """
        from .data.sources import InMemory
        from .spec import RunSpec

        n = n if n is not None else self.n_workers if self.n_workers is not None else DEFAULT_WORKERS
        keys = {"algorithm": self.algorithm, "workers.n": n, "tau": self.tau,
                "blocks.size": self.block_size, "messages.codec": self.codec, "messages.downlink": self.downlink,
                "problem.loss": self._loss, "problem.lam": self.lam, "step.rule": self.step_rule,
                "step.multiplier": self.step_multiplier, "max_iter": self.max_iter, "tol": self.tol,
                "x_star": self.x_star,
                "seed": self._seed()}
        with renamed_errors():
            spec = RunSpec.from_dict(keys)
            return spec.with_(data=InMemory(name="in_memory", lam=spec.lam))

    def _fit(self, X, y):
        """Build and run the spec on in-memory (X, b); set the fitted attributes; returns (coef, intercept)."""
        from .runsetup import build

        n = self.n_workers
        if n is None and self.workers_per_host is not None:
            if self.client is None:
                raise ValueError(f"The 'workers_per_host' parameter needs a Dask cluster (client=) or a Dask "
                                 f"collection X; got workers_per_host={self.workers_per_host!r} and no client.")
            n = int(self.workers_per_host) * len(self.client.scheduler_info()["workers"])
        spec = self.run_spec(n)
        N = X.shape[0]
        if isinstance(spec.workers.n, (int, np.integer)) and spec.workers.n > N:   # in scikit-learn's words (its
            # check_fit2d_1sample looks for "1 sample"): the spec's own n <= N check says "rows of the data set"
            raise ValueError(f"The 'n_workers' parameter must be at most the number of samples: X has {N} sample"
                             f"{'' if N == 1 else 's'}; got n_workers={spec.workers.n}.")
        data = dataset_of(X, y, self.fit_intercept, type(self).__name__)
        if hasattr(self, "worker_rows_"):   # of an earlier fit on a Dask collection
            del self.worker_rows_
        with renamed_errors():
            setup = build(spec, data=data)
            return self._execute(spec, setup, None)

    def _fit_rows(self, X, y):
        """Fit on a Dask collection, left where it is (:class:`~isparse.data.dask_collection.DaskRows`); returns
        (coef, intercept) and sets ``classes_`` for the logistic loss."""
        from .data.dask_collection import DaskRows
        from .runsetup import build

        with renamed_errors():
            self.run_spec(1)   # the parameters' own errors first, before the cluster is asked anything
        rows = DaskRows.of(X, y, client=self.client, loss=self._loss, lam=self.lam, fit_intercept=self.fit_intercept,
                           workers_per_host=self.workers_per_host)
        try:
            if self.n_workers is not None and self.n_workers != rows.n:
                raise ValueError(f"The 'n_workers' parameter must be None or the logical workers of X's partitions "
                                 f"({rows.n}: one per partition, or workers_per_host per Dask worker holding them); "
                                 f"got n_workers={self.n_workers!r}.")
            if rows.classes is not None:
                self.classes_ = rows.classes
            spec = self.run_spec(rows.n)
            with renamed_errors():
                try:
                    setup = build(spec, problem=rows.problem)
                except ConfigError as exc:
                    if exc.key != "data":
                        raise
                    raise ValueError(f"The 'algorithm' parameter must be a method whose workers hold only their own "
                                     f"rows when X is a Dask collection: algorithm={spec.algorithm.name} needs every "
                                     f"row on every worker ({exc}).") from None
                out = self._execute(spec, setup, rows)
            self.n_features_in_ = rows.d - (1 if self.fit_intercept else 0)
            self.worker_rows_ = rows.parts
            columns = getattr(X, "columns", None)
            if columns is not None and all(isinstance(c, str) for c in columns):
                self.feature_names_in_ = np.asarray(list(columns), dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            return out
        finally:
            rows.close()

    def _execute(self, spec, setup, rows):
        """Run ``setup`` (in-process, or on ``client``'s cluster, over ``rows``' hosts when given; tracked with
        ``tracking_uri``), set the fitted attributes and return (coef, intercept)."""
        pool = None
        if rows is not None or self.client is not None:
            from .engines.dask import DaskPool

            client = rows.client if rows is not None else self.client
            pool = DaskPool(client, *setup.pool_args(), source=rows)
        options = {"log_every": DASK_LOG_EVERY} if rows is not None else {}
        try:
            if self.tracking_uri is not None:
                from pipeline.job import log_fit

                result, self.run_id_ = log_fit(spec, setup, self.tracking_uri, self.experiment, pool, **options)
            else:
                result = setup.run(pool, max_iter=spec.max_iter, tol=spec.tol, **options)
        finally:
            if pool is not None:
                pool.close()
        last = result.records[-1]
        self.n_iter_ = int(result.iterations)
        self.history_ = result.frame()
        self.bound_, self.bound_theorem_ = float(last["bound"]), setup.bound.theorem
        self.uplink_bytes_, self.downlink_bytes_ = last["uplink_bytes"], last["downlink_bytes"]
        if not result.converged and spec.tol > 0:
            warnings.warn(f"{type(self).__name__}: max_iter={spec.max_iter} reached before tol={spec.tol:g} "
                          f"(||x - x*||^2 / r0 = {last['dist_sq'] / max(setup.derived['r0'], 1e-300):.3g}); "
                          "raise max_iter", ConvergenceWarning, stacklevel=4)
        x = np.asarray(result.x, dtype=np.float64)
        return (x[:-1], float(x[-1])) if self.fit_intercept else (x, 0.0)

    def _compute(self, *values) -> tuple:
        """``dask.compute(*values)`` on ``client`` (else the current one): with several clients in one process, the
        current one need not be the cluster that holds the collections."""
        import dask

        from .data.dask_collection import current_client

        with current_client(self.client).as_current():
            return dask.compute(*values)

    def _dask_rows(self, Z, name: str, ndim: int):
        """A Dask collection as a Dask Array with known row chunks (a DataFrame's lengths counted on the cluster;
        ``y`` of one column made 1-D), on ``client`` (else the current one)."""
        from .data.dask_collection import _as_array, current_client

        with current_client(self.client).as_current():
            return _as_array(Z, name, ndim)

    def _margins(self, X):
        """X @ coef + intercept of a Dask collection, as a Dask Array computed where X's partitions are (a ValueError
        when X's columns are not the fit's, in scikit-learn's words)."""
        check_is_fitted(self)
        X = self._dask_rows(X, "X", 2)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                             f"{self.n_features_in_} features as input.")
        coef, b = np.ravel(self.coef_), float(np.ravel(self.intercept_)[0])
        return X.map_blocks(lambda block: np.asarray(block @ coef, dtype=np.float64).ravel() + b, drop_axis=1,
                            dtype=np.float64)

    def _targets(self, y, margins):
        """y of :meth:`score` as a Dask Array of ``margins``' row chunks."""
        return self._dask_rows(y, "y", 1).rechunk(margins.chunks)

    def _validated(self, X, y, **kwargs):
        if is_dask_collection(y):
            raise TypeError(f"{type(self).__name__}.fit: the argument y is a Dask collection ({type(y).__name__}) but X "
                            f"is not ({type(X).__name__}): pass both as Dask collections with the same row partitions, "
                            f"or both in memory.")
        return validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, **kwargs)


@contextlib.contextmanager
def renamed_errors():
    """Within, a :class:`~isparse.errors.ConfigError` naming a spec key is raised again naming the estimator's
    parameter (:data:`PARAMS`), a ValueError still."""
    try:
        yield
    except ConfigError as exc:
        raise exc.renamed(PARAMS) from None


_DOC_PARAMS = """
    Parameters
    ----------
    lam : float, default 0.01
        lambda > 0 of the penalty (lam/2)||x||^2 (``problem.lam``); {lam}
    algorithm : str, default "isega"
        The method (``algorithm``): isega, gd, ibcd, isgd, ... (docs/algorithms.md).
    n_workers : int, optional
        n, the logical workers the rows are split over (``workers.n``); at most the number of samples. None: 4 in
        memory (or ``workers_per_host`` per Dask worker of ``client``); for a Dask collection, what its partitions
        make (an int must equal it).
    workers_per_host : int, optional
        For a Dask collection: each Dask worker holding partitions of X is a host, and its rows (its partitions in
        order) are split into this many logical workers; None: one logical worker per partition. In memory with
        ``client``: n = this times the Dask workers.
    tau : str or float, default "auto"
        The fraction of the m blocks each worker sends per round (``tau``): "auto" (1/n), "<c>/n", "<k>/m" or a
        number in [1/m, 1].
    block_size : int, default 1
        Coordinates per block (``blocks.size``).
    codec : str, default "float64"
        How each value sent travels (``messages.codec``; docs/codecs.md).
    downlink : str, default "float64"
        The master-to-worker messages (``messages.downlink``).
    step_rule : {{"theory", "paper", "paper_literal", "bound"}}, default "theory"
        The stepsize rule (``step.rule``).
    step_multiplier : float, default 1.0
        gamma = step_multiplier x the rule's gamma (``step.multiplier``).
    max_iter : int, default 20000
        Iterations at most (``max_iter``); a ConvergenceWarning when reached before ``tol``.
    tol : float, default 1e-8
        Stop when ||x - x*||^2 <= tol r_0, x* solved to machine precision by the run's set-up (``tol``).
    x_star : {{"solve", "none"}}, default "solve"
        "none": solve no x* first (a large Dask collection: the set-up's Newton-CG passes over the data are saved);
        ``history_`` then has ``objective`` and ``grad_norm_sq`` instead of ``dist_sq`` and ``subopt``, there is no
        bound, and ``tol`` must be 0 (``x_star``).
    fit_intercept : bool, default True
        Append a column of ones to X: the intercept is its coefficient, penalized like the others (unlike
        scikit-learn's default; compare with ``fit_intercept=False`` on both sides).
    random_state : int, RandomState or None, default None
        The run's ``seed`` (every draw of worker i at round t depends on (seed, i, t)): an int is the seed; None or a
        RandomState draws one.
    client : distributed.Client, optional
        Run the workers' steps on this Dask cluster (the same iterates as in-process, for the same random_state and
        the same rows on each logical worker). A Dask collection X uses the current client when none is given.
    tracking_uri : str, optional
        An MLflow store (``tracking.uri``): the fit is logged as the MLflow run ``isparse-run`` logs.
    experiment : str, default "isparse"
        The MLflow experiment of a tracked fit (``tracking.experiment``).

    Attributes
    ----------
    coef_ : ndarray of shape {coef_shape}
        The weights, the run's last iterate without the intercept.
    intercept_ : {intercept_type}
        The intercept (0 when ``fit_intercept`` is False).
    n_iter_ : int
        The iterations run.
    history_ : pandas.DataFrame
        The run's records (``RunResult.frame``): dist_sq, subopt, bound, uplink_bytes, downlink_bytes, wall_s, ...
        by step.
    bound_ : float
        The theorem's bound at the last iteration (NaN where none applies); ``bound_theorem_`` names it.
    uplink_bytes_, downlink_bytes_ : float
        The bytes the workers sent and received in all.
    run_id_ : str
        The MLflow run of a tracked fit (only with ``tracking_uri``).
    worker_rows_ : list of range or ndarray of int
        For a Dask collection: the rows of X each logical worker held, a ``range`` where they are contiguous (an
        in-process fit with these parts gives the same iterates).
    n_features_in_ : int
        The columns of X.
    feature_names_in_ : ndarray of str
        The column names of X, when it has string names."""


class LogisticRegression(LinearClassifierMixin, _IsparseLinear):
    """Binary logistic regression fitted by a distributed method with independent sparsification.

    Minimizes (1/N) sum_j log(1 + exp(-b_j a_j^T x)) + (lam/2)||x||^2 over x = (``coef_``, ``intercept_``), b_j = +1 for
    ``classes_[1]`` and -1 for ``classes_[0]``; scikit-learn's ``LogisticRegression(C=1/(lam N))`` minimizes N times
    this (isparse/problems/glm.py). The parameters and fitted attributes are listed below.
    """

    _loss = "logistic"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    def fit(self, X, y):
        """Fit on X (array-like or sparse, shape (n_samples, n_features), finite; or a Dask Array or DataFrame, left
        on its workers) and y (two distinct labels; a Dask collection with X's row partitions when X is one);
        returns self.

        Raises
        ------
        ValueError
            NaN or inf in X or y, y not binary, n_workers above the samples, a parameter out of its range, and for a
            Dask collection its own cases (:meth:`isparse.data.dask_collection.DaskRows.of`), each naming its argument.
        TypeError
            Only one of X and y a Dask collection.
        """
        if is_dask_collection(X):
            coef, intercept = self._fit_rows(X, y)
        else:
            X, y = self._validated(X, y)
            check_classification_targets(y)
            self.classes_ = np.unique(y)
            if len(self.classes_) != 2:
                raise ValueError(f"Only binary classification is supported: the 'y' argument must hold exactly 2 "
                                 f"classes; got {len(self.classes_)} class{'es' if len(self.classes_) != 1 else ''}: "
                                 f"{self.classes_[:5].tolist()}{' ...' if len(self.classes_) > 5 else ''}.")
            coef, intercept = self._fit(X, np.where(y == self.classes_[1], 1.0, -1.0))
        self.coef_, self.intercept_ = coef[None, :], np.array([intercept])
        return self

    def decision_function(self, X):
        """The margins ``X @ coef_ + intercept_``, shape (n_samples,) (a Dask Array, computed where X's partitions
        are, for a Dask collection)."""
        return self._margins(X) if is_dask_collection(X) else super().decision_function(X)

    def predict(self, X):
        """The label of each row: ``classes_[1]`` where the margin is > 0, else ``classes_[0]``."""
        if not is_dask_collection(X):
            return super().predict(X)
        check_is_fitted(self)
        classes = self.classes_
        return self._margins(X).map_blocks(lambda z: classes[(z > 0).astype(int)], dtype=classes.dtype)

    def predict_proba(self, X):
        """The probabilities of ``classes_`` for each row of X, shape (n_samples, 2): 1 - p and p = 1 / (1 +
        exp(-decision_function))."""
        if is_dask_collection(X):
            z = self._margins(X)
            return z.map_blocks(lambda m: np.column_stack([1.0 - expit(m), expit(m)]), new_axis=1,
                                chunks=(z.chunks[0], (2,)), dtype=np.float64)
        p = expit(self.decision_function(X))
        return np.column_stack([1.0 - p, p])

    def predict_log_proba(self, X):
        """The log of :meth:`predict_proba`, without its rounding to 0 or 1."""
        if is_dask_collection(X):
            z = self._margins(X)
            return z.map_blocks(lambda m: np.column_stack([-np.logaddexp(0.0, m), -np.logaddexp(0.0, -m)]),
                                new_axis=1, chunks=(z.chunks[0], (2,)), dtype=np.float64)
        z = self.decision_function(X)
        return np.column_stack([-np.logaddexp(0.0, z), -np.logaddexp(0.0, -z)])

    def score(self, X, y, sample_weight=None):
        """The mean accuracy on (X, y); reduced on the cluster for Dask collections."""
        if is_dask_collection(X) and sample_weight is None:
            predicted = self.predict(X)
            return float(self._compute((predicted == self._targets(y, predicted)).mean())[0])
        return super().score(X, y, sample_weight)


class Ridge(RegressorMixin, _IsparseLinear):
    """Least squares with an l2 penalty (ridge regression) fitted by a distributed method with independent
    sparsification.

    Minimizes (1/N) sum_j (a_j^T x - y_j)^2 / 2 + (lam/2)||x||^2 over x = (``coef_``, ``intercept_``); scikit-learn's
    ``Ridge(alpha=lam N)`` minimizes 2N times this (isparse/problems/glm.py). The parameters and fitted attributes
    are listed below.
    """

    _loss = "squared"

    def fit(self, X, y):
        """Fit on X (as :meth:`LogisticRegression.fit` takes it) and the real targets y; returns self.

        Raises
        ------
        ValueError
            As :meth:`LogisticRegression.fit`'s, but for the labels.
        TypeError
            Only one of X and y a Dask collection.
        """
        if is_dask_collection(X):
            self.coef_, self.intercept_ = self._fit_rows(X, y)
            return self
        X, y = self._validated(X, y, y_numeric=True)
        self.coef_, self.intercept_ = self._fit(X, y)
        return self

    def predict(self, X):
        """``X @ coef_ + intercept_``, shape (n_samples,) (a Dask Array for a Dask collection)."""
        if is_dask_collection(X):
            return self._margins(X)
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=False)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_

    def score(self, X, y, sample_weight=None):
        """R^2 of the predictions; reduced on the cluster for Dask collections."""
        if is_dask_collection(X) and sample_weight is None:
            predicted = self.predict(X)
            y = self._targets(y, predicted)
            res, tot = self._compute(((y - predicted) ** 2).sum(), ((y - y.mean()) ** 2).sum())
            return float(1.0 - res / tot) if tot > 0 else float("nan")
        return super().score(X, y, sample_weight)


LogisticRegression.__doc__ += _DOC_PARAMS.format(
    lam="scikit-learn's C = 1/(lam N), N the samples", coef_shape="(1, n_features)",
    intercept_type="ndarray of shape (1,)") + """
    classes_ : ndarray of shape (2,)
        The two labels.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import scale
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = LogisticRegression(lam=0.1, algorithm="gd", random_state=0).fit(scale(X), y)
    >>> bool(clf.score(scale(X), y) > 0.9)
    True
"""
Ridge.__doc__ += _DOC_PARAMS.format(lam="scikit-learn's alpha = lam N, N the samples", coef_shape="(n_features,)",
                                    intercept_type="float") + """

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(200, 5))
    >>> reg = Ridge(lam=0.01, algorithm="gd", random_state=0).fit(X, X @ np.arange(5.0))
    >>> bool(np.abs(reg.coef_ - np.arange(5.0)).max() < 0.1)
    True
"""

__all__ = ["LogisticRegression", "PARAMS", "Ridge", "dataset_of", "is_dask_collection"]
