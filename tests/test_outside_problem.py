"""A problem of your own from outside the checkout (issue "Say each thing once", item 4): docs/extending.md's Huber
regression module and config file, written to a temporary directory, run by the real ``isparse-run`` with
``data=huber`` on both engines (the same iterates) and refused in one line when its module or keys are wrong; and
``isparse.testing``'s checks pass on the outside pieces (that module, tests/ternary_codec.py's codec,
tests/test_new_method.py's method) and fail on broken ones (tests/broken_pieces.py, and the Huber module with a
wrong stacked gradient). No file of the checkout is touched; the registries are left as they were."""

import importlib
import sys

import numpy as np
import pytest

from doc_snippets import ROOT, blocks
from outside import on_both_engines, refused_in_one_line, run_outside, write_outside
from isparse.compression.registry import CODECS
from isparse.data.registry import SOURCES, source_class
from isparse.errors import ConfigError, DeclarationError
from isparse.methods import METHODS
from isparse.testing import check_codec, check_method, check_problem

PAGE = ROOT / "docs" / "extending.md"
(MODULE,) = [b.text for b in blocks(PAGE, "python") if 'name = "huber"' in b.text]
(CONFIG,) = [b.text for b in blocks(PAGE, "yaml") if "name: huber" in b.text]
#: the stacked gradient of the page's module, and two wrong ones: without the penalty's term, and one whose sums run
#: over every hosted row (prefix sums), so a worker's bits depend on the workers stacked before it
STACKED = "G = self.scale * np.add.reduceat(self.A * r[:, None], self.row_ptr[:-1], axis=0) + self.lam * x"
WRONG = {"value": "G = self.scale * np.add.reduceat(self.A * r[:, None], self.row_ptr[:-1], axis=0)",
         "placement": "S = np.cumsum(self.A * r[:, None], axis=0)[self.row_ptr[1:] - 1]; "
                      "G = self.scale * np.diff(S, axis=0, prepend=0 * S[:1]) + self.lam * x"}


@pytest.fixture
def registries():
    """The method, codec and data source registries and the imported modules, restored after the test (a piece a
    test defines or imports registers for the session otherwise)."""
    methods, codecs, sources, modules = dict(METHODS), dict(CODECS), set(SOURCES), set(sys.modules)
    yield
    METHODS.clear(), METHODS.update(methods)
    CODECS.clear(), CODECS.update(codecs)
    for name in set(SOURCES) - sources:
        SOURCES.discard(name)
    for name in set(sys.modules) - modules:
        if name in ("my_huber", "damped_ibcd", "broken_pieces") or name.startswith("my_huber_"):
            del sys.modules[name]


@pytest.fixture
def huber(tmp_path):
    """The page's module (<tmp>/pkg/my_huber.py) and config file (<tmp>/conf/data/huber.yaml), nothing else."""
    return write_outside(tmp_path, "my_huber", MODULE, "data", CONFIG, option="huber")


def _run(tmp_path, env, out, *overrides):
    return run_outside(tmp_path, env, out, "data=huber", "workers.n=4", *overrides, max_iter=40)


@pytest.mark.slow
def test_a_problem_from_one_module_and_one_config_file_runs_on_both_engines(huber):
    tmp_path, env = huber
    x_in, run_in = on_both_engines(_run, tmp_path, env, "data.delta=0.5")["inprocess"]
    p = run_in.data.params
    assert (p["data.delta"], p["data.module"], p["data.source"]) == ("0.5", "my_huber", "Huber regression, seed 0")
    assert float(p["mu"]) == 0.1 and int(p["N"]) == 400 and int(p["d"]) == 20
    assert run_in.data.metrics["summary/iterations"] == 40 and np.abs(x_in).max() > 0


@pytest.mark.parametrize("override, message", [
    ("data.module=no_such_module", "The 'data.module' parameter must name an importable Python module"),
    ("data.delta=0", "The 'data.delta' parameter must be in (0, inf); got 0."),
    ("data.name=hubr", "The 'data' parameter must be one of breast_cancer, a1a, "),
    pytest.param("+data.dlta=1", "The 'data.dlta' parameter is not a key of data=huber (it would be ignored); known: "
                                 "name, module, lam, title, load, rows, d, delta, seed.", marks=pytest.mark.slow),
])
def test_its_bad_key_is_one_line_and_status_2(huber, override, message):
    tmp_path, env = huber
    proc = _run(tmp_path, env, tmp_path / "out", "engine=inprocess", override)
    line = refused_in_one_line(proc, message, tmp_path / "out")
    assert "data.name" not in override or "or a data source that 'data.module' defines; got 'hubr'." in line


def _import(tmp_path, monkeypatch, name, text):
    (tmp_path / "pkg").mkdir(exist_ok=True)
    (tmp_path / "pkg" / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path / "pkg"))   # for the Dask workers the checks start, too
    return importlib.import_module(name)


def test_check_problem_passes_on_the_outside_module(tmp_path, monkeypatch, registries):
    """The page's module as a user has it: the stacked shards, finite differences, L_i, L_f, mu, then ISEGA and
    IBGD on both engines (a LocalCluster the check starts and stops)."""
    _import(tmp_path, monkeypatch, "my_huber", MODULE)
    check_problem("huber")


@pytest.mark.parametrize("wrong, message", [
    ("value", r"its stacked grads of workers \[0, 1\] at a point x differ from the shards' own gradients"),
    ("placement", r"worker 1's stacked grads are not the same bits stacked with workers \[0, 1\] and alone"),
])
def test_check_problem_fails_on_a_wrong_stacked_gradient(tmp_path, monkeypatch, registries, wrong, message):
    assert STACKED in MODULE
    text = MODULE.replace(STACKED, WRONG[wrong]).replace('name = "huber"', f'name = "huber_{wrong}"')
    _import(tmp_path, monkeypatch, f"my_huber_{wrong}", text)
    with pytest.raises(AssertionError, match=rf"^check_problem\(data=huber_{wrong}\): {message}") as info:
        check_problem(f"huber_{wrong}", client=object())   # fails before any engine runs
    assert "\n" not in str(info.value)


def test_a_second_source_of_one_name_and_a_source_without_dataclass_are_refused(tmp_path, monkeypatch, registries):
    _import(tmp_path, monkeypatch, "my_huber", MODULE)
    with pytest.raises(DeclarationError, match=r"^two data sources are named 'huber': my_huber.HuberSource and "
                                               r"my_huber_copy.HuberSource$"):
        _import(tmp_path, monkeypatch, "my_huber_copy", MODULE)
    plain = MODULE.replace("@dataclass\nclass HuberSource", "class HuberSource").replace('"huber"', '"huber_plain"')
    assert "class HuberSource" in plain and "@dataclass\nclass HuberSource" not in plain
    (tmp_path / "pkg" / "my_huber_plain.py").write_text(plain)
    with pytest.raises(ConfigError, match=r"^The 'data.module' parameter names a module whose data source is declared "
                                          r"wrong; importing 'my_huber_plain': my_huber_plain.HuberSource must be "
                                          r"decorated with @dataclass \(its keys would not be keys, its name not "
                                          r"'huber_plain'\)$"):
        source_class("huber_plain", "my_huber_plain")


def test_check_codec_passes_on_the_outside_codec_and_fails_on_a_biased_one(dask_client, registries):
    from ternary_codec import Ternary

    CODECS[Ternary.name] = Ternary            # imported before by another test: registered again
    check_codec(Ternary, client=dask_client)
    from broken_pieces import HalvedTernary

    with pytest.raises(AssertionError, match=r"^check_codec\('halved_ternary_test'\): declares kind 'unbiased' but "
                                             r"E Q\(v\) != v: over 4000 draws value \d+ averages "):
        check_codec(HalvedTernary, client=dask_client)


def test_check_method_passes_on_the_outside_method(tmp_path, monkeypatch, registries):
    from test_new_method import MODULE as DAMPED

    _import(tmp_path, monkeypatch, "damped_ibcd", DAMPED)
    check_method("damped_ibcd", spec={"algorithm.damping": 0.25})


@pytest.mark.parametrize("name, message", [
    ("global_random_test", r"two in-process runs give different iterates, first at round 1, .* never of numpy's "
                           r"global random state"),
    ("host_clipped_test", r"the in-process and the Dask engine give different iterates, first at round 1, .* which "
                          r"workers share its host"),
])
def test_check_method_fails_on_a_method_whose_runs_differ(dask_client, registries, name, message):
    import broken_pieces

    METHODS[name] = getattr(broken_pieces, {"global_random_test": "GlobalRandomIBCD",
                                            "host_clipped_test": "HostClippedIBCD"}[name])
    with pytest.raises(AssertionError, match=rf"^check_method\('{name}'\): {message}"):
        check_method(name, client=dask_client)


def test_the_built_in_stacked_shards_have_every_member_of_the_protocol():
    from isparse import load_dataset, split_rows
    from isparse.problems import GLMProblem, QuadraticProblem
    from isparse.problems.stacked import MEMBERS, missing_members

    ds = load_dataset("breast_cancer")
    for problem in (GLMProblem(ds, split_rows(ds.N, 4), 0.1), QuadraticProblem(10, 5, 3)):
        data = type(problem.shards[0]).stack(problem.shards[:2], [0, 1])
        assert set(data.capabilities) == set(MEMBERS) and missing_members(data) == []


def test_check_codec_passes_on_a_contractive_sign_codec_that_sends_zero_as_a_sign(tmp_path, monkeypatch, registries):
    """A 1-bit sign codec cannot send 0 (it decodes to +scale): a biased codec owes no zero, only its contraction
    (docs/extending.md's scaled sign, which a fresh user found refused)."""
    from test_compressors import MODULE

    (tmp_path / "scaled_sign_check.py").write_text(MODULE.replace('"scaled_sign"', '"scaled_sign_check"'))
    monkeypatch.syspath_prepend(str(tmp_path))   # before the check's own cluster starts: its workers import it too
    importlib.import_module("scaled_sign_check")
    check_codec("scaled_sign_check")


def test_a_problem_of_other_workers_than_workers_n_is_refused_by_key():
    """The method averages over workers.n: a problem with fewer shards (a source that ignores its parts, a problem
    built for another n) would run on the wrong average."""
    from isparse import RunSpec, build
    from isparse.problems import QuadraticProblem

    spec = RunSpec.from_dict({"algorithm": "isega", "data": "quadratic", "workers.n": 4})
    with pytest.raises(ConfigError, match=r"^The 'workers.n' parameter must be the problem's number of workers: "
                                          r"QuadraticProblem has n = 2 and 2 shards; got 4\.$"):
        build(spec, problem=QuadraticProblem(d=20, o=10, n=2, seed=1))
