"""Composing the real conf/ as ``isparse-run`` (or ``isparse-plan``) does, for the tests: every job of a command line's
overrides, with Hydra's compose API and the basic sweeper's expansion of sweeps (``workers.n=4,16``) and of an
experiment's ``hydra.sweeper.params``; each job's config checked by ``pipeline.schema.load_job``, as the job does."""

import itertools

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from conftest import CONF_DIR
from isparse import ConfigError
from pipeline.errors import user_message
from pipeline.schema import JobConfig, PlanConfig, load_job

#: the experiments whose sweeps took over 5 s to compose on a 2-core machine: their composition tests run in the slow
#: run only (``-m slow``), the others' in the default run
SLOW_TO_COMPOSE = ("isaga_vs_saga", "iasgd_vs_asgd", "isgd_vs_sgd", "tau_sweep_quadratic", "isega_vs_gd")
#: at most about this many combinations of a sweep are composed (spread over the whole sweep)
MAX_JOBS = 64
#: the config groups of conf/ and the ConfigStore (an override of one picks an option; the others set keys)
GROUPS = ("algorithm", "data", "cluster", "experiment", "arm")


def job_overrides(overrides, multirun: bool = False, config_name: str = "config") -> list[list[str]]:
    """The overrides of each job of the command line (a single run: one job), the experiment's sweep included."""
    parser = OverridesParser.create()
    parsed = parser.parse_overrides(list(overrides))
    if not multirun:
        return [list(overrides)]

    def expand(ovs):
        lists = []
        for o in ovs:
            if o.is_sweep_override():
                lists.append([f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()])
            else:
                lists.append([o.input_line])
        jobs = [list(c) for c in itertools.islice(itertools.product(*lists), 100 * MAX_JOBS)]
        step = -(-len(jobs) // MAX_JOBS)   # a larger sweep: every step-th job, so each value of each key is met
        return jobs[::step]

    groups = [o for o in expand(parsed)[0] if o.lstrip("+").split("=")[0] in GROUPS or o.startswith("hydra/")]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):   # the experiment's sweep, if any
        first = compose(config_name, overrides=groups, return_hydra_config=True)
    params = OmegaConf.to_container(first.hydra.sweeper.params, resolve=False) if first.hydra.sweeper.get("params") else {}
    given = {o.get_key_element() for o in parsed}
    extra = parser.parse_overrides([f"{k}={v}" for k, v in params.items() if k not in given])
    return expand(parsed + extra)[:MAX_JOBS]


def compose_job(overrides, config_name: str = "config"):
    """One job's composed config, HydraConfig set as for a job (``${hydra:...}`` resolves, its overrides known)."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    return cfg


def check_command(overrides, multirun: bool = False, config_name: str = "config") -> list:
    """Compose and check every job of a command line; returns their checked configs (JobConfig or PlanConfig).

    Raises
    ------
    ConfigError
        A job's config does not compose (the message is what isparse-run prints: ``pipeline.errors``) or is refused
        by the schema.
    """
    cls = PlanConfig if config_name == "plan" else JobConfig
    out = []
    try:
        for job in job_overrides(overrides, multirun, config_name):
            out.append(load_job(compose_job(job, config_name), cls, overrides=job))
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - Hydra's composition errors, in isparse-run's words
        message = user_message(exc)
        if message is None:
            raise
        raise ConfigError(message.split("'")[1] if message.startswith("The '") else "", message) from exc
    return out
