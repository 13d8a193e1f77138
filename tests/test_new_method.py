"""Adding a method is one module and one config file (issue 20): written into a temporary directory, outside the
checkout, with an option of its own; the real ``isparse-run`` finds the config through ``hydra.searchpath`` and the
module through PYTHONPATH (``algorithm.module``), runs it on both engines with the same iterates, and refuses a bad
value of its option with the one-line error. No file of the checkout is touched (the session's end checks it)."""

import re

import numpy as np
import pytest
from mlflow.tracking import MlflowClient
from outside import on_both_engines, refused_in_one_line, run_outside, write_outside


MODULE = '''"""IBCD with its step damped by a factor of its own: a method defined outside isparse."""
from dataclasses import dataclass

from isparse.methods import AlgorithmOptions, Method, Theory
from isparse.params import Interval, param
from isparse.theory import theorem1_stepsize


@dataclass
class DampedOptions(AlgorithmOptions):
    damping: float = param(0.5, Interval(float, 0.0, 1.0, low_open=True), "the factor on Theorem 1's step")


class DampedIBCD(Method):
    name = "damped_ibcd"
    options = DampedOptions
    theory = Theory(theorem1_stepsize)          # Theorem 1's rule; no bound

    def __init__(self, n, blocks, tau_m, gamma, **common):
        super().__init__(n, blocks, tau_m, gamma, **common)
        self.gamma = self.opts.damping * gamma   # its option, delivered to the constructor

    def worker_step(self, data, state, x, t, donate=False):
        s = self.sampled(data, t)
        return self.send(s, self.local_grads(data, x, s)), state

    def master_step(self, state, x, batch, donate=False):
        return self.averaged_step(x, batch), state
'''

CONFIG = """# IBCD with a damped step (tests/test_new_method.py): the module that defines it, and its option's default
name: damped_ibcd
module: damped_ibcd
damping: 0.5
"""


@pytest.fixture
def new_method(tmp_path):
    """The method's module (in <tmp>/pkg) and its config file (in <tmp>/conf/algorithm), nothing else."""
    return write_outside(tmp_path, "damped_ibcd", MODULE, "algorithm", CONFIG)


def _run(tmp_path, env, out, *overrides):
    return run_outside(tmp_path, env, out, "algorithm=damped_ibcd", *overrides)


@pytest.mark.slow
def test_a_method_from_one_module_and_one_config_file_runs_on_both_engines(new_method):
    tmp_path, env = new_method
    x_in, run_in = on_both_engines(_run, tmp_path, env, "algorithm.damping=0.25")["inprocess"]
    assert run_in.data.params["algorithm.damping"] == "0.25"
    assert run_in.data.metrics["summary/iterations"] == 60 and np.abs(x_in).max() > 0
    # its option reached the method: gamma is 0.25 x Theorem 1's 1/(2L(tau + 2(1 - tau)/n)), from the logged L, tau, n
    p = run_in.data.params
    L, tau, n = float(p["L"]), float(p["tau"]), int(p["n"])
    assert float(p["gamma"]) == pytest.approx(0.25 / (2 * L * (tau + 2 * (1 - tau) / n)), rel=1e-12)
    assert run_in.data.tags["bound_theorem"] == "no theorem of arXiv:1901.09437 covers damped_ibcd"
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir() if p.name != "__pycache__") == ["damped_ibcd.py"]


@pytest.mark.parametrize("override, message", [
    ("algorithm.damping=2", "The 'algorithm.damping' parameter must be in (0, 1]; got 2."),
    ("algorithm.damping=none", "The 'algorithm.damping' parameter must be a number in (0, 1]; got 'none'."),
    ("+algorithm.dampng=0.1", "The 'algorithm.dampng' parameter is not a key of algorithm=damped_ibcd (it would be "
                              "ignored); known: name, module, damping."),
    ("algorithm.module=no_such_module", "The 'algorithm.module' parameter must name an importable Python module"),
])
def test_its_bad_option_is_one_line_and_status_2(new_method, override, message):
    tmp_path, env = new_method
    proc = _run(tmp_path, env, tmp_path / "out", "engine=inprocess", override)
    refused_in_one_line(proc, message, tmp_path / "out")


# -- a method with an option that reaches its constructor and no theory ------------------------------------------
HEAVY_BALL = '''"""Independent-sparsification heavy ball: IBCD's messages, the master adds beta (x^t - x^{t-1}); no theory."""
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from isparse.methods import AlgorithmOptions, Method
from isparse.params import Interval, param


@dataclass
class HeavyBallOptions(AlgorithmOptions):
    beta: float = param(0.5, Interval(float, 0.0, 1.0, high_open=True), "the momentum beta")


class Previous(NamedTuple):
    x: np.ndarray                                             # x^{t-1}


class ISHeavyBall(Method):
    name = "is_heavy_ball"
    options = HeavyBallOptions
    theory = None

    def worker_step(self, data, state, x, t, donate=False):
        s = self.sampled(data, t)                             # U_i^t
        return self.send(s, self.local_grads(data, x, s)), state

    def master_init(self, x0):
        return Previous(np.array(x0, dtype=float))

    def master_step(self, state, x, batch, donate=False):
        return self.averaged_step(x, batch) + self.opts.beta * (x - state.x), Previous(x)
'''

HEAVY_BALL_CONFIG = """# IS heavy ball (tests/test_new_method.py): no theory, one option
name: is_heavy_ball
module: is_heavy_ball
beta: 0.5
"""


@pytest.fixture
def heavy_ball(tmp_path):
    return write_outside(tmp_path, "is_heavy_ball", HEAVY_BALL, "algorithm", HEAVY_BALL_CONFIG)


def _run_heavy_ball(tmp_path, env, out, *overrides):
    return run_outside(tmp_path, env, out, "algorithm=is_heavy_ball", "data=breast_cancer", "problem.lam=0.1",
                       "workers.n=4", "tau=1", "engine=inprocess", *overrides, max_iter=40)


@pytest.mark.slow
def test_a_method_without_theory_gets_its_option_in_the_constructor_and_runs_without_bound(heavy_ball):
    """beta = 0.3 reaches the method: the run's x^40 is heavy-ball GD's, computed here from the data with the logged
    gamma (tau = 1: every worker sends its whole gradient, so x^{t+1} = x^t - gamma grad f(x^t) + beta (x^t -
    x^{t-1})); without theory gamma = 1/L and the run says it has no bound."""
    from isparse import load_dataset

    tmp_path, env = heavy_ball
    out = tmp_path / "out"
    proc = _run_heavy_ball(tmp_path, env, out, "algorithm.beta=0.3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{out}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("isparse").experiment_id])
    p = run.data.params
    assert run.info.status == "FINISHED" and p["algorithm.beta"] == "0.3"
    gamma = float(p["gamma"])
    assert gamma == pytest.approx(1.0 / float(p["L"]), rel=1e-12)          # no theory: gamma = step.multiplier / L
    assert "declares no theory" in run.data.tags["bound_theorem"] and run.data.tags["bound_applicable"] == "false"
    assert "no bound: algorithm=is_heavy_ball declares no theory" in proc.stdout + proc.stderr
    ds = load_dataset("breast_cancer")
    A, b = ds.A.toarray(), ds.b

    def heavy_ball_x(beta, T=40):
        x_prev = x = np.zeros(ds.d)
        for _ in range(T):
            grad = A.T @ (-b / (1 + np.exp(b * (A @ x)))) / ds.N + 0.1 * x
            x, x_prev = x - gamma * grad + beta * (x - x_prev), x
        return x

    x_run = np.load(client.download_artifacts(run.info.run_id, "x_final.npy", str(out)))
    np.testing.assert_allclose(x_run, heavy_ball_x(0.3), rtol=1e-10, atol=1e-12)
    assert np.abs(heavy_ball_x(0.3) - heavy_ball_x(0.5)).max() > 1e-3       # beta shows in the iterates


def test_a_half_open_option_prints_its_interval_and_refuses_its_open_end_in_one_line(heavy_ball):
    from isparse.params import Interval

    assert Interval(float, 0.0, 1.0, high_open=True).text == "a number in [0, 1)"
    tmp_path, env = heavy_ball
    proc = _run_heavy_ball(tmp_path, env, tmp_path / "out", "algorithm.beta=1")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == ["isparse-run: error: The 'algorithm.beta' parameter must be in [0, 1); got 1."], proc.stderr


@pytest.mark.parametrize("declaration, message", [
    # a TypeError while the module defines its options: its own line, not "must name an importable module"
    ('Interval(float, 0.0, 1.0, high_opn=True)',
     r"The 'algorithm.module' parameter names a module that fails while defining its method: importing "
     r"'is_heavy_ball' raised TypeError at .*is_heavy_ball.py:\d+: Interval.__init__\(\) got an unexpected keyword "
     r"argument 'high_opn'"),
    # a default its own constraint refuses: the class statement says which
    pytest.param('Interval(float, 0.6, 1.0, high_open=True)',
     r"The 'algorithm.module' parameter names a module whose method is declared wrong; importing 'is_heavy_ball': "
     r"is_heavy_ball.ISHeavyBall.options: the default 0.5 of HeavyBallOptions.beta is refused by its own constraint "
     r"\(The 'algorithm.beta' parameter must be in \[0.6, 1\); got 0.5.\)", marks=pytest.mark.slow),
    # options without @dataclass: its beta would silently be no key (and self.opts.beta a dataclasses.Field)
    pytest.param(("@dataclass\nclass HeavyBallOptions", "class HeavyBallOptions"),
     r"The 'algorithm.module' parameter names a module whose method is declared wrong; importing 'is_heavy_ball': "
     r"is_heavy_ball.ISHeavyBall.options: HeavyBallOptions must be decorated with @dataclass \(its beta would not be "
     r"keys\)", marks=pytest.mark.slow),
])
def test_a_bad_declaration_in_an_outside_module_is_its_own_one_line_error(heavy_ball, declaration, message):
    tmp_path, env = heavy_ball
    module = tmp_path / "pkg" / "is_heavy_ball.py"
    old, new = declaration if isinstance(declaration, tuple) else ("Interval(float, 0.0, 1.0, high_open=True)",
                                                                   declaration)
    assert old in HEAVY_BALL
    module.write_text(HEAVY_BALL.replace(old, new))
    proc = _run_heavy_ball(tmp_path, env, tmp_path / "out")
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and re.fullmatch(f"isparse-run: error: {message}", lines[0]), proc.stderr
    assert "importable" not in lines[0]
