"""The scikit-learn estimators (isparse.estimators): scikit-learn's own checks, a Pipeline and a GridSearchCV, the
coefficients scikit-learn finds for the same objective, the Dask engine's fit equal to the in-process one, and one
clear error for each bad input, naming the argument."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_svmlight_file
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.linear_model import Ridge as SkRidge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from isparse import LogisticRegression, Ridge
from isparse.estimators import DEFAULT_WORKERS, PARAMS
from isparse.spec import RunSpec

from conftest import DATA_DIR

#: small runs, so that scikit-learn's checks (about 110 fits) take seconds
SMALL = dict(algorithm="gd", n_workers=2, max_iter=300, tol=1e-6)
#: the checks expected to fail, with the reason: none. (check_array_api_input is skipped by scikit-learn itself unless
#: SCIPY_ARRAY_API=1 is set: the estimators take NumPy and scipy.sparse input only.)
EXPECTED_FAILED: dict[str, str] = {}


@parametrize_with_checks([LogisticRegression(**SMALL), Ridge(**SMALL)],
                         expected_failed_checks=lambda est: EXPECTED_FAILED)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_sklearn_checks(estimator, check):
    check(estimator)


def _spec_default(key: str):
    section, _, name = key.rpartition(".")
    cls = RunSpec
    for part in filter(None, section.split(".")):
        cls = cls.fields()[part].metadata["section"]
    f = cls.fields()[name]
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()


@pytest.mark.parametrize("cls", [LogisticRegression, Ridge])
def test_defaults_are_the_specs(cls):
    """Each parameter that is a key of isparse-run has that key's default (lam and the seed aside: an estimator
    has a lambda of its own, and random_state=None draws a seed)."""
    defaults = {k: p.default for k, p in inspect.signature(cls).parameters.items()}
    assert defaults["n_workers"] is None and DEFAULT_WORKERS == _spec_default("workers.n")   # None: the spec's n
    for key, name in PARAMS.items():
        if name in ("lam", "random_state", "tracking_uri", "experiment", "n_workers") or key == "algorithm":
            continue
        assert defaults[name] == _spec_default(key), (name, key)
    assert defaults["algorithm"] == RunSpec().algorithm.name


def _breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X, y


def test_pipeline_and_grid_search():
    X, y = _breast_cancer()
    pipe = make_pipeline(StandardScaler(), LogisticRegression(lam=0.1, algorithm="gd", random_state=0))
    assert pipe.fit(X, y).score(X, y) > 0.95
    grid = GridSearchCV(make_pipeline(StandardScaler(), LogisticRegression(algorithm="isega", n_workers=4,
                                                                           max_iter=300, random_state=0)),
                        {"logisticregression__lam": [0.01, 0.1], "logisticregression__tau": ["auto", 0.5]}, cv=2)
    with pytest.warns(Warning):   # 300 ISEGA rounds stop before tol: a ConvergenceWarning per fit
        grid.fit(X, y)
    assert set(grid.best_params_) == {"logisticregression__lam", "logisticregression__tau"}
    assert grid.best_score_ > 0.9
    proba = grid.predict_proba(X)
    assert proba.shape == (len(y), 2) and np.allclose(proba.sum(axis=1), 1.0)


def _libsvm(name):
    X, y = load_svmlight_file(str(DATA_DIR / name), n_features=123)
    return X.tocsr(), y


def _agreement(name, algorithm, lam=0.01, tol=1e-14):
    """||coef_ - sklearn's|| / ||sklearn's||, scikit-learn's LogisticRegression with C = 1/(lam N) (the objective of
    isparse/problems/glm.py times N), both without intercept."""
    X, y = _libsvm(name)
    ours = LogisticRegression(lam=lam, algorithm=algorithm, fit_intercept=False, tol=tol, max_iter=100000,
                              random_state=0).fit(X, y)
    theirs = SkLogisticRegression(C=1.0 / (lam * X.shape[0]), fit_intercept=False, solver="newton-cholesky",
                                  tol=1e-12, max_iter=1000).fit(X, y)
    assert ours.n_iter_ < 100000
    return float(np.linalg.norm(ours.coef_ - theirs.coef_) / np.linalg.norm(theirs.coef_))


@pytest.mark.slow
@pytest.mark.needs_data
@pytest.mark.parametrize("algorithm", ["gd", "isega"])
def test_coef_matches_sklearn_a1a(algorithm):
    assert _agreement("a1a", algorithm) < 1e-6


@pytest.mark.slow
@pytest.mark.needs_data
@pytest.mark.parametrize("algorithm", ["gd", "isega"])
def test_coef_matches_sklearn_a9a(algorithm):
    assert _agreement("a9a", algorithm) < 1e-6


def test_ridge_matches_sklearn():
    X, _ = _breast_cancer()
    X = StandardScaler().fit_transform(X)
    y = X @ np.linspace(-1, 1, X.shape[1]) + 0.5
    ours = Ridge(lam=0.1, algorithm="gd", tol=1e-20, max_iter=20000, random_state=0).fit(X, y)
    theirs = SkRidge(alpha=0.1 * X.shape[0], fit_intercept=False).fit(np.column_stack([X, np.ones(len(y))]), y)
    assert np.allclose(np.append(ours.coef_, ours.intercept_), theirs.coef_, rtol=1e-6, atol=1e-9)


def test_dask_fit_equals_in_process(dask_client):
    X, y = _breast_cancer()
    X = StandardScaler().fit_transform(X)
    est = LogisticRegression(lam=0.1, algorithm="isega", max_iter=200, tol=0, random_state=3)
    local = est.fit(X, y).coef_.copy()
    on_dask = est.set_params(client=dask_client).fit(X, y)
    assert np.array_equal(on_dask.coef_, local)
    assert on_dask.history_["uplink_bytes"].iloc[-1] == on_dask.uplink_bytes_


@pytest.mark.parametrize("change, error, names", [
    ({"y": np.arange(20) % 3}, ValueError, "'y'"),
    ({"y": np.linspace(0, 1, 20)}, ValueError, "Unknown label type"),
    ({"X_nan": True}, ValueError, "X contains NaN"),
    ({"X_inf": True}, ValueError, "X contains infinity"),
    ({"n_workers": 50}, ValueError, "'n_workers'"),
    ({"tau": 2.0}, ValueError, "'tau'"),
    ({"tau": "3/m"}, ValueError, "'tau'"),
    ({"lam": 0.0}, ValueError, "'lam'"),
    ({"block_size": 99}, ValueError, "'block_size'"),
    ({"random_state": -1}, ValueError, "'random_state'"),
    ({"codec": "nope"}, ValueError, "'codec'"),
    ({"x_star": "none", "tol": 1e-6}, ValueError, "The 'tol' parameter must be 0 with x_star=none"),
    ({"x_star": "maybe"}, ValueError, "'x_star'"),
])
def test_bad_input_names_the_argument(change, error, names):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 3)), np.arange(20) % 2
    change = dict(change)
    y = change.pop("y", y)
    if change.pop("X_nan", False):
        X[3, 1] = np.nan
    if change.pop("X_inf", False):
        X[3, 1] = np.inf
    with pytest.raises(error, match=names):
        LogisticRegression(**{**SMALL, **change}).fit(X, y)


def test_dask_y_with_in_memory_x_is_refused_naming_y():
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match="argument y is a Dask collection"):
        LogisticRegression(**SMALL).fit(np.ones((20, 3)), da.from_array(np.arange(20) % 2, chunks=10))


def test_tracked_fit_is_an_mlflow_run(tmp_path):
    """With tracking_uri the fit is logged as isparse-run logs a run: its params, the bound beside the measured
    values, the bytes; the fit's attributes are the run's."""
    from mlflow.tracking import MlflowClient

    X, y = _breast_cancer()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    est = LogisticRegression(lam=0.1, algorithm="gd", random_state=0, tracking_uri=uri, experiment="fits")
    est.fit(StandardScaler().fit_transform(X), y)
    run = MlflowClient(uri).get_run(est.run_id_)
    assert run.info.status == "FINISHED"
    assert run.data.params["data.name"] == "in_memory" and run.data.params["problem.lam"] == "0.1"
    assert {"bound/log10_slack", "dist_sq", "uplink_bytes"} <= set(run.data.metrics)
    assert run.data.metrics["summary/uplink_bytes_total"] == est.uplink_bytes_
    assert run.data.metrics["summary/iterations"] == est.n_iter_
    with pytest.raises(ValueError, match="'tracking_uri'"):
        LogisticRegression(tracking_uri="mysql://nowhere").fit(X, y)


def test_without_x_star_the_same_iterates_and_the_objective_its_gradient_instead():
    """x_star="none" solves no x*: the iterates are those of the run that solves it (x* only measures), the records
    carry F and ||grad f||^2 (checked against a direct computation), and no bound is given."""
    X, y = _breast_cancer()
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    keys = dict(lam=0.1, algorithm="isega", tol=0, max_iter=150, random_state=0, fit_intercept=False)
    solved = LogisticRegression(**keys).fit(X, y)
    free = LogisticRegression(x_star="none", **keys).fit(X, y)
    np.testing.assert_array_equal(free.coef_, solved.coef_)
    last = free.history_.iloc[-1]
    b = np.where(y == 1, 1.0, -1.0)
    x = free.coef_.ravel()
    F = np.mean(np.logaddexp(0.0, -b * (X @ x))) + 0.05 * x @ x
    grad = -(X.T @ (b / (1.0 + np.exp(b * (X @ x))))) / len(y) + 0.1 * x
    assert last["objective"] == pytest.approx(F, rel=1e-12)
    assert last["grad_norm_sq"] == pytest.approx(grad @ grad, rel=1e-9)
    assert np.isnan(last["dist_sq"]) and np.isnan(free.bound_) and "x_star=none" in free.bound_theorem_
    assert free.history_["objective"].iloc[0] > last["objective"]   # it descended
    assert "objective" not in solved.history_
