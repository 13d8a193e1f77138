"""Specs for the tests, written with the short keyword names the tests use (``n``, ``block_size``, ``lam``, ...):
each keyword is the config key of :data:`KEYS`, so every spec here is built and checked by ``RunSpec.from_dict``
exactly as ``isparse-run``'s config is."""

from isparse import RunSpec, build

#: short keyword -> the config key it sets
KEYS = {"n": "workers.n", "block_size": "blocks.size", "lam": "problem.lam", "split": "workers.split",
        "split_seed": "workers.split_seed", "tau": "tau", "seed": "seed", "step_multiplier": "step.multiplier",
        "step_rule": "step.rule", "step_L": "step.L", "reg": "problem.reg", "reg_strength": "problem.reg_strength",
        "reg_l2": "problem.reg_l2", "box": "problem.box", "loss": "problem.loss", "penalty": "problem.penalty",
        "send_ids": "messages.send_ids", "codec": "messages.codec", "levels": "messages.levels",
        "downlink": "messages.downlink",
        "max_iter": "max_iter", "tol": "tol"}


def spec(algorithm: str = "isega", *, options: dict | None = None, data: str = "breast_cancer", **kw) -> RunSpec:
    """The RunSpec of ``algorithm`` with ``options`` (its ``algorithm.*`` keys) and the keys of ``kw``."""
    values = {"algorithm": {"name": algorithm, **(options or {})}, "data": data}
    for k, v in kw.items():
        values[KEYS[k]] = list(v) if isinstance(v, tuple) else v
    return RunSpec.from_dict(values)


def make(algorithm: str = "isega", *, data=None, problem=None, reference=None, cache_dir=None, **kw):
    """``isparse.build`` of :func:`spec` (``data``: an in-memory Dataset; ``problem``: a problem already split)."""
    return build(spec(algorithm, **kw), data=data, problem=problem, reference=reference, cache_dir=cache_dir)
