"""The estimators on Dask collections left where they are (isparse.data.dask_collection): no byte of X crosses the
network during fit (the Dask workers' own transfer logs), the iterates equal the in-process engine's on the same rows
bit for bit, the coefficients scikit-learn finds, the fitted model used on Dask collections, tracking, and one clear
error for each bad input, naming the argument."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_svmlight_file
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.preprocessing import StandardScaler

from isparse import LogisticRegression, Ridge

from conftest import DATA_DIR

da = pytest.importorskip("dask.array")


@pytest.fixture(scope="module")
def four_workers():
    """A real LocalCluster of 4 worker processes on 127.0.0.1."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=4, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def _scaled():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _dask(X, y, parts, client):
    """X and y as Dask Arrays of ``parts`` row partitions, persisted on ``client``'s workers (sparse X: scipy.sparse
    CSR chunks)."""
    rows = int(np.ceil(X.shape[0] / parts))
    Xd = da.from_array(X, chunks=(rows, -1), asarray=False)
    yd = da.from_array(np.asarray(y), chunks=(Xd.chunks[0],))
    return client.persist(Xd), client.persist(yd)


def _transfers(client, clear=False) -> dict:
    """Every Dask worker's transfer logs (outgoing: to other workers and to the client, ``who`` None; incoming), as
    lists of (peer, {key: bytes}); emptied with ``clear``."""
    def read(dask_worker, clear=clear):
        out = ([(e["who"], dict(e["keys"])) for e in dask_worker.transfer_outgoing_log],
               [(e["who"], dict(e["keys"])) for e in dask_worker.transfer_incoming_log])
        if clear:
            dask_worker.transfer_outgoing_log.clear()
            dask_worker.transfer_incoming_log.clear()
        return out

    return client.run(read)


def _bytes_of(logs: dict, name: str) -> int:
    """The bytes of the keys of the collection ``name`` in the transfer logs."""
    total = 0
    for outgoing, incoming in logs.values():
        for _, keys in outgoing + incoming:
            total += sum(b for k, b in keys.items() if (k[0] if isinstance(k, tuple) else k) == name)
    return total


def test_sparse_chunks_stay_put_and_give_the_in_process_iterates(four_workers):
    """From a Dask Array of scipy.sparse chunks on 4 workers: X bytes moved during fit = 0 by the workers' transfer
    logs (while the test's own gather of X is seen in them: the check can fail), and the in-process engine on the same
    rows per logical worker gives the same iterates, bit for bit."""
    from isparse.data.dataset import Dataset
    from isparse.problems.glm import GLMProblem
    from isparse.runsetup import build

    X, y = load_svmlight_file(str(DATA_DIR / "a1a"), n_features=123)
    X = X.tocsr()
    Xd, yd = _dask(X, y, 8, four_workers)
    assert isinstance(four_workers.compute(Xd.blocks[0]).result(), sp.spmatrix | sp.sparray)
    _transfers(four_workers, clear=True)
    est = LogisticRegression(lam=1e-3, algorithm="isega", max_iter=300, tol=0, random_state=5,
                             client=four_workers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(Xd, yd)
    logs = _transfers(four_workers, clear=True)
    assert _bytes_of(logs, Xd.name) == 0
    assert len(est.worker_rows_) == 8 and est.history_.index[-1] == 300
    from distributed import futures_of

    four_workers.gather(futures_of(Xd)[0])               # the check sees a transfer of X when there is one
    assert _bytes_of(_transfers(four_workers), Xd.name) > 0

    # the same rows on the same logical workers, in-process
    A = sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")
    data = Dataset(A=A, b=np.where(y == est.classes_[1], 1.0, -1.0), name="a1a", source="in memory")
    spec = est.run_spec(len(est.worker_rows_))
    setup = build(spec, problem=GLMProblem(data, est.worker_rows_, est.lam))
    local = setup.run(max_iter=300, tol=0)
    assert np.array_equal(np.append(est.coef_.ravel(), est.intercept_), local.x)


@pytest.mark.slow
@pytest.mark.needs_data
@pytest.mark.parametrize("algorithm, tol", [("gd", 1e-14), ("isega", 1e-13)])
def test_a9a_dask_array_matches_sklearn(dask_client, algorithm, tol):
    """coef_ on a9a from a Dask Array of 4 partitions on a LocalCluster of 2 workers within 1e-6 (relative) of
    scikit-learn's LogisticRegression with C = 1/(lam N), both without intercept."""
    X, y = load_svmlight_file(str(DATA_DIR / "a9a"), n_features=123)
    X = X.tocsr()
    lam = 0.01
    Xd, yd = _dask(X, y, 4, dask_client)
    ours = LogisticRegression(lam=lam, algorithm=algorithm, fit_intercept=False, tol=tol, max_iter=200000,
                              random_state=0, client=dask_client).fit(Xd, yd)
    theirs = SkLogisticRegression(C=1.0 / (lam * X.shape[0]), fit_intercept=False, solver="newton-cholesky",
                                  tol=1e-12, max_iter=1000).fit(X, y)
    assert ours.n_iter_ < 200000
    assert np.linalg.norm(ours.coef_ - theirs.coef_) / np.linalg.norm(theirs.coef_) < 1e-6


def test_dense_dask_array_matches_in_memory_fit(dask_client):
    """A dense Dask Array fitted to tol: the coefficients of the in-memory fit (which splits the rows otherwise) and
    scikit-learn's; the fitted model predicts, scores and gives probabilities on Dask collections, computed there."""
    X, y = _scaled()
    Xd, yd = _dask(X, y, 4, dask_client)
    kw = dict(lam=0.1, algorithm="gd", tol=1e-15, max_iter=50000, random_state=0, fit_intercept=False)
    on_dask = LogisticRegression(**kw).set_params(client=dask_client).fit(Xd, yd)
    in_memory = LogisticRegression(**kw).fit(X, y)
    theirs = SkLogisticRegression(C=1.0 / (0.1 * X.shape[0]), fit_intercept=False, tol=1e-12,
                                  max_iter=10000).fit(X, y)
    assert np.linalg.norm(on_dask.coef_ - theirs.coef_) / np.linalg.norm(theirs.coef_) < 1e-6
    assert np.linalg.norm(on_dask.coef_ - in_memory.coef_) / np.linalg.norm(in_memory.coef_) < 1e-6
    assert on_dask.n_features_in_ == X.shape[1] and list(on_dask.classes_) == [0, 1]
    assert on_dask.score(Xd, yd) == pytest.approx(in_memory.score(X, y))
    assert np.array_equal(dask_client.compute(on_dask.predict(Xd)).result(), on_dask.predict(X))
    np.testing.assert_allclose(dask_client.compute(on_dask.predict_proba(Xd)).result(), on_dask.predict_proba(X),
                               rtol=1e-12)
@pytest.mark.slow


def test_dataframe_and_ridge(dask_client):
    """A Dask DataFrame and Series (partition sizes unknown until counted where they are) fit as the same rows in
    a Dask Array do; Ridge on a Dask Array matches scikit-learn's Ridge(alpha = lam N)."""
    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd
    from sklearn.linear_model import Ridge as SkRidge

    X, y = _scaled()
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    labels = dd.from_pandas(pd.Series(y), npartitions=3)
    kw = dict(lam=0.1, algorithm="gd", max_iter=20000, tol=1e-16, random_state=0)
    from_frame = LogisticRegression(**kw, client=dask_client).fit(frame, labels)
    in_memory = LogisticRegression(**kw).fit(X, y)
    assert len(from_frame.worker_rows_) == 3 and sum(len(r) for r in from_frame.worker_rows_) == len(y)
    assert np.linalg.norm(from_frame.coef_ - in_memory.coef_) / np.linalg.norm(in_memory.coef_) < 1e-6
    assert from_frame.score(frame, labels) == pytest.approx(in_memory.score(X, y))

    t = X @ np.linspace(-1, 1, X.shape[1]) + 0.5
    Xd, td = _dask(X, t, 4, dask_client)
    ours = Ridge(lam=0.1, algorithm="gd", tol=1e-20, max_iter=20000, random_state=0, client=dask_client).fit(Xd, td)
    theirs = SkRidge(alpha=0.1 * X.shape[0], fit_intercept=False).fit(np.column_stack([X, np.ones(len(t))]), t)
    assert np.allclose(np.append(ours.coef_, ours.intercept_), theirs.coef_, rtol=1e-6, atol=1e-9)
    assert ours.score(Xd, td) == pytest.approx(theirs.score(np.column_stack([X, np.ones(len(t))]), t), rel=1e-9)


def test_workers_per_host_splits_each_hosts_rows(dask_client):
    X, y = _scaled()
    Xd, yd = _dask(X, y, 4, dask_client)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = LogisticRegression(algorithm="isega", workers_per_host=3, max_iter=50, client=dask_client).fit(Xd, yd)
    hosts = len({sorted(addresses)[0] for addresses in dask_client.who_has(Xd).values()})
    assert len(est.worker_rows_) == 3 * hosts
    assert sorted(np.concatenate(est.worker_rows_).tolist()) == list(range(X.shape[0]))


def test_tracked_fit_on_dask(dask_client, tmp_path):
    """With a client and tracking_uri the fit is the MLflow run isparse-run would log, on the Dask engine."""
    from mlflow.tracking import MlflowClient

    X, y = _scaled()
    Xd, yd = _dask(X, y, 2, dask_client)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    est = LogisticRegression(lam=0.1, algorithm="gd", random_state=0, tracking_uri=uri, client=dask_client,
                             tol=1e-6).fit(Xd, yd)
    run = MlflowClient(uri).get_run(est.run_id_)
    assert run.info.status == "FINISHED" and run.data.params["engine"] == "dask"
    assert run.data.metrics["summary/uplink_bytes_total"] == est.uplink_bytes_


def _bad(case, client):
    """X, y and the estimator's keyword arguments of one bad input."""
    X, y = _scaled()
    X, y = X[:80], y[:80]
    Xd, yd = _dask(X, y, 4, client)
    kw = {"client": client, "max_iter": 5}
    if case == "y not binary":
        yd = da.from_array(np.arange(80) % 3, chunks=(Xd.chunks[0],))
    elif case == "rows chunked differently":
        yd = da.from_array(y, chunks=40)
    elif case == "NaN in a partition":
        X = X.copy()
        X[65, 2] = np.nan
        Xd, yd = _dask(X, y, 4, client)
    elif case == "inf in y":
        Xd, yd = _dask(X, np.where(np.arange(80) == 70, np.inf, X[:, 0]), 4, client)
        return Xd, yd, {**kw, "_cls": Ridge}
    elif case == "unknown partition sizes":
        Xd = Xd[Xd[:, 0] > -100]                         # boolean indexing: chunk sizes unknown
    elif case == "empty partition":
        Xd = da.from_array(X, chunks=((20, 20, 40, 0), -1))
        yd = da.from_array(y, chunks=(Xd.chunks[0],))
    elif case == "y in memory":
        yd = y
    elif case == "columns chunked":
        Xd = Xd.rechunk((Xd.chunks[0], 10))
    elif case == "workers_per_host":
        kw["workers_per_host"] = 0
    elif case == "n_workers":
        kw["n_workers"] = 3
    elif case == "algorithm needs every row":
        kw["algorithm"] = "isaga_shared"
    return Xd, yd, kw


@pytest.mark.parametrize("case, error, names", [
    ("y not binary", ValueError, "'y' argument must hold exactly 2 classes"),
    ("rows chunked differently", ValueError, "'y' argument must be chunked like X"),
    ("NaN in a partition", ValueError, r"'X' argument must be finite: partition 3 .*row 65"),
    ("inf in y", ValueError, r"'y' argument must be finite: partition 3 .*row 70"),
    ("unknown partition sizes", ValueError, "'X' argument must have known partition sizes"),
    ("empty partition", ValueError, "'X' argument must have rows in every partition: partition 3"),
    ("y in memory", TypeError, "'y' argument must be a Dask Array"),
    ("columns chunked", ValueError, "'X' argument must have one chunk along the columns"),
    ("workers_per_host", ValueError, "'workers_per_host' parameter must be an int in"),
    ("n_workers", ValueError, "'n_workers' parameter must be None or"),
    ("algorithm needs every row", ValueError, "'algorithm' parameter must be a method whose workers hold only"),
])
def test_bad_dask_input_names_the_argument(dask_client, case, error, names):
    Xd, yd, kw = _bad(case, dask_client)
    cls = kw.pop("_cls", LogisticRegression)
    with pytest.raises(error, match=names):
        cls(**kw).fit(Xd, yd)


def test_no_client_and_none_current_names_client():
    """In a fresh process without a Dask client: one line naming 'client'."""
    import subprocess
    import sys

    code = ("import dask.array as da, numpy as np\n"
            "from isparse import LogisticRegression\n"
            "X = da.ones((20, 3), chunks=10); y = da.from_array(np.arange(20) % 2, chunks=10)\n"
            "try:\n    LogisticRegression().fit(X, y)\n"
            "except ValueError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.startswith("The 'client' parameter must be a distributed.Client"), out.stdout + out.stderr


@pytest.mark.slow
def test_a_killed_host_is_recovered_with_the_same_iterates():
    """kill -9 of a Dask worker holding partitions at round 150: its logical workers come back on the other worker
    from their partitions (recomputed by Dask from X's graph), their state from the snapshot, its RowsHost from the
    same shards; the iterates and the records' objective equal those of the run without the kill, to the bit."""
    from isparse.data.dask_collection import DaskRows
    from killing import same_iterates_with_a_host_killed

    X, y = load_svmlight_file(str(DATA_DIR / "a1a"), n_features=123)
    est = LogisticRegression(lam=1e-3, algorithm="isega", random_state=2)

    made = {}

    def rows_of(client):   # from_array: in the graph, so Dask can recompute a lost chunk; made once, fitted twice
        made.setdefault("Xy", _dask(X.tocsr(), y, 4, client))
        return DaskRows.of(*made["Xy"], client=client, lam=est.lam)

    plans = same_iterates_with_a_host_killed(rows_of, lambda rows: est.run_spec(rows.n), at=150, max_iter=300,
                                             log_every=50, snapshot_every=40)
    assert plans[0] == plans[1] and len(plans[0]) == 2


@pytest.mark.slow
@pytest.mark.needs_data
@pytest.mark.parametrize("name, d", [("a9a", 123), ("w8a", 300)])
def test_reference_on_the_hosts_agrees_with_scipy(dask_client, name, d):
    """x* of the Newton-CG solve on the hosts (products H v and gradients reduced from the RowsHost actors, X never
    gathered) within 1e-10 (relative) of scipy's exact trust-region Newton (``trust-exact``, gradient norm ~1e-15) on
    the whole data in memory, with an objective and a dense Hessian written here."""
    from scipy.optimize import minimize
    from scipy.special import expit, log_expit

    from isparse.data.dask_collection import DaskRows
    from isparse.runsetup import build

    X, y = load_svmlight_file(str(DATA_DIR / name), n_features=d)
    X, b, lam = X.tocsr(), np.where(y > 0, 1.0, -1.0), 1e-4
    Xd, yd = _dask(X, y, 4, dask_client)
    rows = DaskRows.of(Xd, yd, client=dask_client, lam=lam, fit_intercept=False)
    try:
        x_star = build(LogisticRegression(lam=lam).run_spec(rows.n), problem=rows.problem).reference.x_star
    finally:
        rows.close()
    N = X.shape[0]

    def F(x):
        return -np.mean(log_expit(b * (X @ x))) + 0.5 * lam * x @ x

    def grad(x):
        return -(X.T @ (b * expit(-b * (X @ x)))) / N + lam * x

    def hess(x):
        s = expit(b * (X @ x))
        return (X.T @ sp.diags(s * (1 - s)) @ X).toarray() / N + lam * np.eye(X.shape[1])

    theirs = minimize(F, np.zeros(X.shape[1]), jac=grad, hess=hess, method="trust-exact",
                      options={"gtol": 1e-15, "maxiter": 1000}).x
    assert np.linalg.norm(grad(theirs)) < 1e-13
    assert np.linalg.norm(x_star - theirs) / np.linalg.norm(theirs) < 1e-10


def test_the_fitted_model_on_dask_collections(dask_client):
    """String labels; predict_proba's shape; score with y as a 1-column frame or an (N, 1) array and with a DataFrame
    X beside an Array y; a predict with other columns refused in scikit-learn's words; pickled without its client."""
    import pickle

    dd = pytest.importorskip("dask.dataframe")
    import pandas as pd

    X, y = _scaled()
    labels = np.where(y == 1, "yes", "no")
    Xd, yd = _dask(X, labels, 4, dask_client)
    est = LogisticRegression(lam=0.1, algorithm="gd", tol=1e-10, max_iter=5000, random_state=0,
                             client=dask_client).fit(Xd, yd)
    local = LogisticRegression(lam=0.1, algorithm="gd", tol=1e-10, max_iter=5000, random_state=0).fit(X, labels)
    assert list(est.classes_) == ["no", "yes"]
    proba = est.predict_proba(Xd)
    assert proba.shape == (len(y), 2) and dask_client.compute(proba[:, 1]).result().shape == (len(y),)
    accuracy = local.score(X, labels)
    assert est.score(Xd, yd) == pytest.approx(accuracy)
    assert est.score(Xd, yd.reshape(-1, 1)) == pytest.approx(accuracy)
    frame = dd.from_pandas(pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])]), npartitions=3)
    assert est.score(frame, yd) == pytest.approx(accuracy)
    assert est.score(Xd, dd.from_pandas(pd.DataFrame({"y": labels}), npartitions=2)) == pytest.approx(accuracy)
    with pytest.raises(ValueError, match=f"X has 3 features, but LogisticRegression is expecting {X.shape[1]}"):
        est.predict(Xd[:, :3])
    copy = pickle.loads(pickle.dumps(est))
    assert copy.client is None and est.client is dask_client
    assert np.array_equal(copy.predict(X), est.predict(X))


def test_complex_x_is_refused_naming_x(dask_client):
    X, y = _scaled()
    Xd, yd = _dask(X[:80] + 1j, y[:80], 2, dask_client)
    with pytest.raises(ValueError, match="'X' argument must be real; got the complex dtype complex128"):
        LogisticRegression(max_iter=5, client=dask_client).fit(Xd, yd)
