"""One owner per rule (issue 30, item 3): tau is read by one object for a run and a plan; a path key anchors by its
declaration; a library function names its own arguments and the glue names the config key."""

import math
import os
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from isparse import ConfigError, RunSpec, build, load_libsvm, split_rows
from isparse.compression.blocks import BlockPartition
from isparse.compression.tau import Tau, resolve_tau
from isparse.params import Nullable, Section, Text, param, section
from isparse.paths import PathValue, anchor_paths
from isparse.planning import resolve_tau_grid
from isparse.problems import GLMProblem, QuadraticProblem
from isparse.regularizers import make_regularizer

#: every form of the grammar, with the tau*m it must give at (m, n), derived here in exact arithmetic
FORMS = ["auto", "1/n", "0.5/n", "0.25/n", "2/n", "1.5/n", "1/m", "3/m", "0.5", "1", 1.0, 0.25]
GRID = [(m, n) for m in (1, 2, 3, 7, 10, 12, 30, 123) for n in (1, 2, 3, 4, 7, 10, 100)]


def expected_tau_m(form, m, n):
    """tau*m by the docs' rule, in fractions: '<c>/n' -> the smallest integer >= c m / n; '<k>/m' -> k; a number
    -> tau m, which must be an integer; None where the value is refused."""
    text = str(form)
    if text == "auto":
        text = "1/n"
    if text.endswith("/n"):
        c = Fraction(text[:-2])
        return None if c > n else math.ceil(c * m / n)
    if text.endswith("/m"):
        k = int(text[:-2])
        return k if k <= m else None
    x = Fraction(text) * m
    return int(x) if x.denominator == 1 and x >= 1 else None


@pytest.mark.parametrize("form", FORMS, ids=str)
def test_the_run_and_the_planner_agree_on_every_form(form):
    for m, n in GRID:
        want = expected_tau_m(form, m, n)
        if want is None:
            with pytest.raises(ConfigError) as run:
                resolve_tau(form, m, n)
            with pytest.raises(ConfigError) as plan:
                resolve_tau_grid([form], m, n)
            assert (run.value.key, plan.value.key) == ("tau", "plan.taus")
            assert str(plan.value) == str(run.value).replace("'tau' parameter", "'plan.taus' parameter")
            continue
        tau, tau_m = resolve_tau(form, m, n)
        assert tau_m == want and tau == want / m, (form, m, n)
        assert resolve_tau_grid([form], m, n) == [want], (form, m, n)


@pytest.mark.parametrize("d, n, form", [(7, 3, "2/n"), (12, 5, "0.5/n"), (10, 4, 0.3), (9, 2, "4/m"), (5, 7, "auto")])
def test_a_built_run_sends_the_planned_blocks(d, n, form):
    """build (what isparse-run runs) sends the tau*m the planner plans for the same m and n."""
    spec = RunSpec.from_dict({"algorithm": "isega", "data": {"name": "quadratic", "d": d, "o": d}, "workers.n": n,
                              "tau": form})
    method = build(spec).method
    assert [method.tau_m] == resolve_tau_grid([form], d, n) and method.tau == method.tau_m / d


@pytest.mark.parametrize("value, m, n, text", [
    (1.5, 123, 4, "The 'tau' parameter must be in (0, 1]; got 1.5."),                      # m not needed to refuse it
    (0.001, 123, 4, "The 'tau' parameter must be in [1/m = 0.00813, 1]; got 0.001."),
    ("x/n", 10, 2, "The 'tau' parameter written as '<c>/n' needs a number c > 0; got 'x/n'."),
    ("0/n", 10, 2, "The 'tau' parameter written as '<c>/n' needs a number c > 0; got '0/n'."),
    ("-1/n", 10, 2, "The 'tau' parameter written as '<c>/n' needs a number c > 0; got '-1/n'."),
    ("2/n", 10, 1, "The 'tau' parameter written as '<c>/n' must have c <= n = 1 (tau = c/n at most 1; tau=1 sends "
                   "every block); got '2/n'."),
    ("0.5/m", 10, 2, "The 'tau' parameter written as '<k>/m' needs an integer k >= 1 (k blocks); got '0.5/m'."),
    ("11/m", 10, 2, "The 'tau' parameter written as '<k>/m' must have k <= m = 10 (k of the m blocks); got '11/m'."),
    (0.25, 10, 2, "The 'tau' parameter times m = 10 must be an integer; got tau = 0.25 (tau*m = 2.5). Nearest allowed: "
                  "2/10 = 0.2 or 3/10 = 0.3 (written 2/m or 3/m), or '<c>/n', which is rounded up (auto = 1/n)."),
    ("often", 10, 2, "The 'tau' parameter must be auto, '<c>/n' (0 < c <= n), '<k>/m' (k an integer in [1, m]) or a "
                     "number in [1/m, 1] with tau*m an integer; got 'often'."),
])
def test_tau_errors_are_one_line_naming_the_key_and_the_range(value, m, n, text):
    with pytest.raises(ConfigError) as err:
        Tau.parse(value).resolve(m, n)
    assert err.value.key == "tau" and str(err.value) == text and "\n" not in text


def test_two_per_n_at_one_worker_is_refused_not_run_at_tau_one():
    """tau=2/n with workers.n=1 would be tau = 2: refused once n is known (build), naming tau; not clipped to 1."""
    spec = RunSpec.from_dict({"algorithm": "isega", "data": {"name": "quadratic", "d": 6, "o": 6}, "workers.n": 1,
                              "tau": "2/n"})
    with pytest.raises(ConfigError, match=r"^The 'tau' parameter written as '<c>/n' must have c <= n = 1 ") as err:
        build(spec)
    assert err.value.key == "tau"
    assert build(spec.with_(tau="1/n")).method.tau == 1.0      # c = n is tau = 1 exactly


# -- paths -----------------------------------------------------------------------------------------------------
@dataclass
class _Store(Section):
    """A test section: one new path key of each kind, and a string that is not a path."""

    where: Optional[str] = param(None, Nullable(PathValue(kind="dir")), "a directory")
    db: str = param("sqlite:///store.db", PathValue(kind="file", scheme="sqlite:///"), "a sqlite URI")
    label: str = param("out/x", Text(), "not a path: never anchored")


@dataclass
class _Config(Section):
    store: _Store = section(_Store)
    name: str = param("n", Text())


def test_a_new_path_key_anchors_by_its_declaration(tmp_path):
    values = {"store": {"where": "rel/dir", "db": "sqlite:///s/x.db", "label": "out/x"}, "name": "rel"}
    anchor_paths(_Config, values, str(tmp_path))
    assert values == {"store": {"where": str(tmp_path / "rel" / "dir"), "db": f"sqlite:///{tmp_path}/s/x.db",
                                "label": "out/x"}, "name": "rel"}
    absolute = {"store": {"where": "/a/../b", "db": "http://h:5000"}}
    anchor_paths(_Config, absolute, str(tmp_path))                          # normalized; another scheme kept
    assert absolute["store"] == {"where": "/b", "db": "http://h:5000"}
    assert _Config.from_dict(values).store.where == str(tmp_path / "rel" / "dir")


def test_a_new_path_key_anchors_through_load_job(compose, tmp_path, monkeypatch):
    """A schema with one more section (a subclass of isparse-run's): load_job anchors its path key to the command's
    directory (hydra.job.chdir=true moves the job elsewhere), as it anchors paths.outputs and data.path."""
    from omegaconf import OmegaConf

    from pipeline.schema import JobConfig, load_job

    @dataclass
    class Extended(JobConfig):
        store: _Store = section(_Store)

    job_dir = tmp_path / "job"
    job_dir.mkdir()
    monkeypatch.chdir(tmp_path)
    cfg = compose(["hydra.job.chdir=true", "data=libsvm", "data.path=rel.svm"])
    OmegaConf.set_struct(cfg, False)
    cfg.store = {"where": "mine"}
    monkeypatch.chdir(job_dir)
    job = load_job(cfg, cls=Extended, overrides=[])
    assert job.store.where == str(tmp_path.resolve() / "mine")
    assert job.data.path == str(tmp_path.resolve() / "rel.svm")


def test_a_missing_path_is_named_as_given(tmp_path):
    with pytest.raises(ConfigError) as err:
        PathValue(kind="file").existing("data.path", str(tmp_path))
    assert err.value.key == "data.path"
    assert str(err.value) == (f"The 'data.path' parameter must be an existing file (relative paths are read from the "
                              f"directory the command ran in); got {str(tmp_path)!r}: a directory.")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    with pytest.raises(ConfigError, match=r"got '.*link': a link to '.*gone', which does not exist\.$"):
        PathValue(kind="dir").existing("data.dir", str(tmp_path / "link"))


# -- a library function names its own arguments -------------------------------------------------------------
def _data():
    from isparse.data.libsvm import load_breast_cancer

    return load_breast_cancer()


@pytest.mark.parametrize("call, key, text", [
    (lambda: split_rows(10, 20), "n", "The 'n' parameter must be in [1, N (rows of the data set) = 10]; got 20."),
    (lambda: split_rows(10, 2, "random"), "how", "The 'how' parameter must be one of shuffle, contiguous; got 'random'."),
    (lambda: BlockPartition(5, 6), "size", "The 'size' parameter must be in [1, d = 5]; got 6."),
    (lambda: QuadraticProblem(d=1, o=1, n=1), "d", "The 'd' parameter must be in [2, inf); got 1."),
    (lambda: QuadraticProblem(d=10, o=2, n=0), "n", "The 'n' parameter must be in [1, inf); got 0."),
    (lambda: QuadraticProblem(d=10, o=2, n=2), "o", "The 'o' parameter times 'n' must be at least d - 1 = 9 so that "
                                                    "mu > 0; got o = 2, n = 2."),
    (lambda: make_regularizer("l3"), "name", "The 'name' parameter must be one of none, l1, l2, elastic_net, box; "
                                             "got 'l3'."),
    (lambda: make_regularizer("l1", -1.0), "strength", "The 'strength' parameter must be in [0, inf); got -1.0."),
    (lambda: make_regularizer("elastic_net", 0.1, l2_strength=-2.0), "l2_strength",
     "The 'l2_strength' parameter must be in [0, inf); got -2.0."),
    (lambda: make_regularizer("box", lower=1.0, upper=0.0), "lower", "The 'lower' parameter must be below upper = "
                                                                     "0.0; got 1.0."),
    (lambda: GLMProblem(_data(), [np.arange(569)], 0.0), "lam", "The 'lam' parameter must be in (0, inf); got 0.0."),
])
def test_a_library_function_names_its_own_argument(call, key, text):
    with pytest.raises(ConfigError) as err:
        call()
    assert err.value.key == key and str(err.value) == text


def test_load_libsvm_names_its_own_arguments(tmp_path):
    f = tmp_path / "x.svm"
    f.write_text("1 1:0.5\n-1 2:1\n")
    with pytest.raises(ConfigError, match=r"^The 'empty_rows' parameter must be one of keep, drop, error") as err:
        load_libsvm(f, empty_rows="maybe")
    assert err.value.key == "empty_rows"
    with pytest.raises(ConfigError, match=r"^The 'n_features' parameter must be in \[1, inf\); got 0\.$"):
        load_libsvm(f, n_features=0)


@pytest.mark.parametrize("values, key, text", [
    ({"workers.n": 600}, "workers.n", "The 'workers.n' parameter must be in [1, N (rows of the data set) = 569]; "
                                      "got 600."),
    ({"data": {"name": "quadratic", "d": 10, "o": 2}, "workers.n": 2}, "data.o",
     "The 'data.o' parameter times 'workers.n' must be at least d - 1 = 9 so that mu > 0; got o = 2, n = 2."),
    ({"data": {"name": "breast_cancer", "lam": 0.0}}, "data.lam",    # problem.lam null: the data set's lambda
     "The 'data.lam' parameter must be in (0, inf); got 0.0."),
    ({"blocks.size": 31}, "blocks.size", "The 'blocks.size' parameter must be in [1, d = 30]; got 31."),
])
def test_the_glue_names_the_config_key(values, key, text):
    """The same library errors through build: the argument mapped to the key the value came from."""
    with pytest.raises(ConfigError) as err:
        build(RunSpec.from_dict({"algorithm": "isega", **values}))
    assert err.value.key == key and str(err.value) == text


CLI = str(Path(sys.executable).parent / "isparse-run")


@pytest.mark.parametrize("overrides, line", [
    (["workers.n=100000"], "The 'workers.n' parameter must be in [1, N (rows of the data set) = 569]; got 100000."),
    (["tau=2/n", "workers.n=1"], "The 'tau' parameter written as '<c>/n' must have c <= n = 1 (tau = c/n at most 1; "
                                 "tau=1 sends every block); got '2/n'."),
    (["data=quadratic", "data.d=10", "data.o=2", "workers.n=2"],
     "The 'data.o' parameter times 'workers.n' must be at least d - 1 = 9 so that mu > 0; got o = 2, n = 2."),
])
def test_the_command_line_names_the_key_in_one_line(tmp_path, overrides, line):
    proc = subprocess.run([CLI, f"paths.outputs={tmp_path}", "engine=inprocess", "progress=false", *overrides],
                          capture_output=True, text=True, timeout=180, env=dict(os.environ))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert [x for x in proc.stderr.splitlines() if x.strip()] == [f"isparse-run: error: {line}"]
