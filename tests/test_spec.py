"""One spec through the library (issue 20): a Python user builds the same RunSpec the command line's config is made of,
and gets the same errors, word for word; a spec built from the dataclasses themselves is checked by ``build``."""

import dataclasses

import numpy as np
import pytest

from composing import check_command
from isparse import ConfigError, RunSpec, build
from isparse.methods.isgd import IsgdOptions
from isparse.spec import BlocksSpec, WorkersSpec

#: (the Python user's dict, the command line's overrides): the same bad input
SAME = [
    ({"tau": 1.5}, ["tau=1.5"]),
    ({"tau": "0/n"}, ["tau=0/n"]),
    ({"workers.n": 2.5}, ["workers.n=2.5"]),
    ({"workers": {"N": 3}}, ["+workers.N=3"]),
    ({"algorithm": "isgd", "algorithm.batch": 0}, ["algorithm=isgd", "algorithm.batch=0"]),
    ({"algorithm": "isega", "algorithm.batch": 4}, ["+algorithm.batch=4"]),
    ({"algorithm": {"name": "iasgd", "rho": 0.5}}, ["algorithm=iasgd", "algorithm.rho=0.5"]),
    ({"data": "libsvm"}, ["data=libsvm"]),
    ({"data": {"name": "a1a", "path": "/x"}}, ["data=a1a", "+data.path=/x"]),
    ({"data": "quadratic", "problem.lam": 0.1}, ["data=quadratic", "problem.lam=0.1"]),
    ({"problem.reg": "l1", "problem.reg_l2": 0.1}, ["problem.reg=l1", "problem.reg_l2=0.1"]),
    ({"algorithm": "gd", "tau": 0.5}, ["algorithm=gd", "tau=0.5"]),
    ({"step.multiplier": float("inf")}, ["step.multiplier=inf"]),
]


@pytest.mark.parametrize("values, overrides", SAME, ids=[" ".join(o) for _, o in SAME])
def test_python_and_command_line_refuse_alike(values, overrides):
    with pytest.raises(ConfigError) as lib:
        RunSpec.from_dict(values)
    with pytest.raises(ConfigError) as cli:
        check_command(["engine=inprocess", *overrides])
    assert str(lib.value) == str(cli.value) and lib.value.key == cli.value.key


def test_an_unknown_option_is_named_alike():
    with pytest.raises(ConfigError) as lib:
        RunSpec.from_dict({"algorithm": "adam"})
    with pytest.raises(ConfigError) as cli:
        check_command(["algorithm=adam"])
    assert str(cli.value).startswith(str(lib.value)[:-1])      # the command line adds "(no option 'algorithm/adam')"


def test_a_spec_made_of_dataclasses_is_checked_by_build():
    """No dict at all: the dataclasses themselves, with a bad value, are refused by build before any work."""
    spec = RunSpec(algorithm=IsgdOptions(name="isgd", batch=0), workers=WorkersSpec(n=4))
    with pytest.raises(ConfigError, match=r"^The 'algorithm.batch' parameter must be in \[1, inf\); got 0\.$"):
        build(spec)
    with pytest.raises(ConfigError, match=r"^The 'workers.n' parameter must be in \[1, N \(rows of the data set\) = "
                                          r"569\]; got 600\.$"):
        build(dataclasses.replace(RunSpec(), workers=WorkersSpec(n=600)))


def test_the_same_spec_builds_the_same_run_as_the_command_line(compose):
    """The composed config's job (a JobConfig is a RunSpec) and the Python user's spec build the same method: the
    same stepsize, tau, bound and iterates."""
    from pipeline.schema import load_job

    job = load_job(compose(["engine=inprocess", "algorithm=isgd", "algorithm.batch=4", "workers.n=8", "tau=2/n",
                            "blocks.size=2"]))
    spec = RunSpec.from_dict({"algorithm": {"name": "isgd", "batch": 4}, "workers.n": 8, "tau": "2/n",
                              "blocks": BlocksSpec(size=2).to_dict()})
    a, b = build(job), build(spec)
    assert (a.method.gamma, a.method.tau_m, a.method.batch) == (b.method.gamma, b.method.tau_m, b.method.batch)
    assert a.bound.theorem == b.bound.theorem
    ra, rb = a.run(max_iter=30, tol=0, keep_iterates=True), b.run(max_iter=30, tol=0, keep_iterates=True)
    np.testing.assert_array_equal(ra.iterates[-1], rb.iterates[-1])


def test_the_keys_doc_is_the_schemas():
    """docs/config.md lists every key as the schema declares it: regenerate it (python -m pipeline.schema) when a key,
    its constraint or its meaning changes."""
    from pathlib import Path

    from pipeline.schema import keys_markdown

    doc = Path(__file__).resolve().parents[1] / "docs" / "config.md"
    assert doc.read_text() == keys_markdown(), "docs/config.md is stale: run python -m pipeline.schema"


@pytest.mark.parametrize("override, key, text", [
    ("tracking.run_name=1.10", "run_name", "1.10"),        # Hydra reads a float, 1.1
    ("tracking.run_name=007", "run_name", "007"),          # Hydra keeps it a string
    ("tracking.experiment=2024", "experiment", "2024"),    # an int
    ("tracking.experiment=True", "experiment", "True"),    # a boolean
    ("resume=12e4", None, "12e4"),                         # a run id that Hydra reads as the float 120000.0
])
def test_a_string_key_gets_the_text_as_typed(override, key, text):
    (job,) = check_command(["engine=inprocess", override])
    assert (getattr(job.tracking, key) if key else job.resume) == text


@pytest.mark.slow
def test_the_text_as_typed_reaches_the_run(tmp_path):
    """Through the real isparse-run: the experiment and the run are named as typed."""
    import subprocess
    import sys
    from pathlib import Path

    from mlflow.tracking import MlflowClient

    cli = str(Path(sys.executable).parent / "isparse-run")
    proc = subprocess.run([cli, "engine=inprocess", "progress=false", "checkpoint.every=0", "max_iter=1",
                           f"paths.outputs={tmp_path}", "tracking.experiment=2024", "tracking.run_name=1.10"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("2024").experiment_id])
    assert run.info.run_name == "1.10" and run.data.params["tracking.run_name"] == "1.10"


@pytest.mark.slow
def test_the_text_as_typed_reaches_each_job_of_a_sweep(tmp_path):
    """In a multirun each job's overrides come from the sweep's text (Hydra's sweeper re-types 1.10 as 1.1)."""
    import subprocess
    import sys
    from pathlib import Path

    from mlflow.tracking import MlflowClient

    cli = str(Path(sys.executable).parent / "isparse-run")
    proc = subprocess.run([cli, "-m", "engine=inprocess", "progress=false", "checkpoint.every=0", "max_iter=1",
                           f"paths.outputs={tmp_path}", "tracking.experiment=2024", "tracking.run_name=1.10,007"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = [r for r in client.search_runs([client.get_experiment_by_name("2024").experiment_id])
            if "mlflow.parentRunId" in r.data.tags]
    assert sorted(r.data.params["tracking.run_name"] for r in runs) == ["007", "1.10"]
