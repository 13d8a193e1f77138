"""Tuning with Hydra's Optuna sweeper (issue 21, item 6): a short real search over IASGD's rho through isparse-run
(+experiment=rho_optuna). Each job returns its final error (compare.objective=subopt); Optuna's best value and
parameter are checked against the trials' final errors recomputed here from their MLflow metric histories."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml


@pytest.mark.slow
def test_a_short_optuna_search_returns_the_best_trial_of_the_store(tmp_path):
    from mlflow.tracking import MlflowClient

    cli = str(Path(sys.executable).parent / "isparse-run")
    proc = subprocess.run([cli, "-m", "+experiment=rho_optuna", "data=breast_cancer",
                           "hydra.sweeper.n_trials=5", "max_iter=300", f"paths.outputs={tmp_path}",
                           f"hydra.sweep.dir={tmp_path}/sweep", "progress=false", "checkpoint.every=0"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    best = yaml.safe_load((tmp_path / "sweep" / "optimization_results.yaml").read_text())
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = [r for r in client.search_runs([client.get_experiment_by_name("paper-rho_optuna").experiment_id])
            if "mlflow.parentRunId" in r.data.tags]
    assert len(runs) == 5
    errors = {}
    for r in runs:
        hist = sorted((m.step, m.value) for m in client.get_metric_history(r.info.run_id, "subopt"))
        assert hist[0][0] == 0
        tail = [v for s, v in hist if s >= 0.8 * hist[-1][0]]
        errors[float(r.data.params["algorithm.rho"])] = sum(tail) / len(tail) / hist[0][1]
    rho = min(errors, key=errors.get)
    assert float(best["best_params"]["algorithm.rho"]) == pytest.approx(rho, rel=1e-9)
    assert float(best["best_value"]) == pytest.approx(errors[rho], rel=1e-9)
    assert len(set(errors)) == 5 and all(1 <= k <= 1024 for k in errors)     # TPE's draws, on the log interval
