"""The schema of ``isparse-run``'s config: the library's :class:`~isparse.spec.RunSpec` plus the pipeline's own
sections (engine, cluster, checkpoint, resume, cache, progress, report, compare, paths, tracking), declared once,
and registered with Hydra's ConfigStore.

Who checks what:

- Hydra composes the config from these nodes (:func:`register`): the primary node ``isparse_run`` and one node
  per option of the ``algorithm`` (each method's options dataclass), ``data`` (each data source) and ``cluster``
  (each kind) groups, so ``algorithm=isgd`` brings ISGD's keys with their defaults, ``--help`` lists the options,
  and an override of a key the config does not have (``workers.N=16``) is refused at composition. Hydra checks the
  keys; the leaves of the nodes it composes are untyped (``Any``), so no value is converted on the way;
- :func:`load_job` turns the composed config into a :class:`JobConfig`: every value is checked by
  ``isparse.params`` (types, ranges, the rules between keys), a key added with ``+`` that no section has is
  refused, a string key gets the text as typed on the command line (Hydra reads ``run_name=1.10`` as the number
  1.1), and relative paths are anchored to the directory the command ran in (every key declared with
  ``isparse.paths.PathValue``, found by walking the schema).

A Python user's ``RunSpec.from_dict`` and the command line therefore refuse the same values with the same words.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional

from isparse.compression.tau import Tau
from isparse.compression import CODECS
from isparse.errors import ConfigError
from isparse.planning import CodecChoice, resolve_block_sizes, resolve_codecs, resolve_tau_grid
from isparse.params import Boolean, Interval, Nullable, OneOf, Section, Text, param, section
from isparse.paths import PathValue, anchor_paths
from isparse.spec import MessagesSpec, RunSpec

from .cluster.options import KINDS, ClusterOptions, LocalClusterOptions, Rates
from ._typed import job_overrides, keep_typed_text


@dataclass
class CheckpointSpec(Section):
    """Checkpoints of a run (``resume=<run id>`` continues from the last)."""

    every: int = param(1000, Interval(int, 0, None), "iterations between checkpoints (the MLflow artifact "
                                                     "checkpoint.pkl); 0: none")


@dataclass
class ReportSpec(Section):
    """The report of a sweep."""

    auto: bool = param(False, Boolean(), "at the end of a sweep (-m), write isparse-report's figures and tables "
                                         "(conf/experiment/* set true)")
    measure: str = param("both", OneOf("both", "subopt", "dist_sq"),
                         "the error measure of the comparison tables (compare.md): F(x) - F*, ||x - x*||^2, or a row "
                         "of each (isparse-report --measure)")


@dataclass
class CompareSpec(Section):
    """Method-vs-baseline comparisons (conf/arm/, the comparison experiments): which side this run is; the report
    divides each method run's result by the baseline run's of the same data and seed."""

    role: Optional[str] = param(None, Nullable(OneOf("method", "baseline")), "null (no comparison), method or baseline")
    arm: Optional[str] = param(None, Nullable(Text()), "the arm's name (conf/arm/<arm>.yaml sets it)")
    tune: Optional[str] = param(None, Nullable(Text()), "a tuned key (e.g. algorithm.rho): the report picks each "
                                                        "arm's best grid value and shows the grid")
    objective: Optional[str] = param(None, Nullable(OneOf("subopt", "dist_sq", "iterations")),
                                     "what each job returns to a sweeper that minimizes it (hydra/sweeper=optuna): "
                                     "its final error on that measure (the mean of measure / its t = 0 value over the "
                                     "last 20% of the logged steps; inf for a failed job) or its iterations; null: "
                                     "the job's summary")


@dataclass
class PathsSpec(Section):
    """Where a run writes: ``paths.outputs`` holds the MLflow store, the cache and the run directories."""

    root: str = param("${hydra:runtime.cwd}", PathValue(kind="dir"), "the directory the command ran in")
    outputs: str = param("${paths.root}/outputs", PathValue(kind="dir"), "the outputs directory (relative: to the "
                                                                         "command's directory)")


@dataclass
class TrackingSpec(Section):
    """MLflow tracking."""

    uri: str = param("sqlite:///${paths.outputs}/mlflow.db",
                     PathValue(kind="file", scheme="sqlite:///", text="sqlite:///<file> (relative: to the command's "
                                                                      "directory) or an http(s):// URI"),
                     "the MLflow store: a sqlite:/// file or an http(s):// tracking server")
    experiment: str = param("isparse", Text(), "the MLflow experiment")
    log_every: int = param(10, Interval(int, 1, None), "record metrics every this many iterations")
    run_name: Optional[str] = param(None, Nullable(Text()),
                                    "null: the swept keys first, then n<workers.n>-b<blocks.size>-tau<tau_m/m>-"
                                    "g<step.multiplier>[<step.rule> if not theory]-s<seed>-<algorithm>-<data>; a "
                                    "string is used as given")
    figure: str = param("auto", OneOf("auto", "always", "never"),
                        "the run's convergence.png: auto draws it for a single run and not for the jobs of a "
                        "multirun (isparse-report draws a sweep's figures from the store, once), always, never")


def _data_load_fits(job: "JobConfig", key: str) -> None:
    """``data.load=on_worker`` needs engine=dask and a data file the Dask workers can read."""
    if job.data.load == "on_worker" and (job.engine != "dask" or not job.data.from_file):
        raise ConfigError("data.load", f"The 'data.load' parameter must be client for engine={job.engine} and "
                                       f"data={job.data.name} (on_worker needs engine=dask and a data file); got "
                                       f"'on_worker'.")


def _link_is_emulated(job: "JobConfig", key: str, given=()) -> None:
    """``cluster.link.*`` only where a link is emulated: with engine=inprocess no cluster runs, so a link rate set
    (differing from its default, or named in ``given``, the command line's keys) would be ignored. (Other kinds have
    no ``link`` key: ``ClusterOptions.from_dict``.)"""
    link = getattr(job.cluster, "link", None)
    if job.engine != "inprocess" or link is None:
        return
    for name in ("up", "down"):
        full = f"cluster.link.{name}"
        if full in given or "cluster.link" in given or getattr(link, name) != getattr(type(link)(), name):
            raise ConfigError(full, f"The '{full}' parameter is for engine=dask only (with engine={job.engine} no "
                                    f"link is emulated: it would be ignored); got {getattr(link, name)!r}.")


@dataclass
class JobConfig(RunSpec):
    """One ``isparse-run`` job: the run (:class:`~isparse.spec.RunSpec`) and how the pipeline runs and logs it."""

    engine: str = param("dask", OneOf("dask", "inprocess"), "which engine runs the worker steps: dask (a Dask "
                                                           "cluster, see cluster) or inprocess")
    cluster: ClusterOptions = section(ClusterOptions, "the Dask cluster (cluster=<kind>)", factory=LocalClusterOptions)
    checkpoint: CheckpointSpec = section(CheckpointSpec)
    resume: Optional[str] = param(None, Nullable(Text()), "a run id: continue that run from its last checkpoint "
                                                          "(its stored config is used)")
    cache: bool = param(True, Boolean(), "keep x*, L_i and parsed data sets under paths.outputs/cache")
    progress: bool = param(True, Boolean(), "a tqdm progress bar (shown only when stderr is a terminal)")
    report: ReportSpec = section(ReportSpec)
    compare: CompareSpec = section(CompareSpec)
    paths: PathsSpec = section(PathsSpec)
    tracking: TrackingSpec = section(TrackingSpec)

    rules = RunSpec.rules + (_data_load_fits, _link_is_emulated)

    @property
    def cache_dir(self) -> Path | None:
        """``<paths.outputs>/cache``, or None with cache=false."""
        return Path(self.paths.outputs) / "cache" if self.cache else None


class _Grid:
    """``plan.taus`` / ``plan.block_sizes``: null (the default grid) or a list (a single value: a list of one); an
    empty list is refused now, naming what the grid holds (``isparse.planning``); each entry is checked now by ``entry``
    (a tau's grammar, :meth:`isparse.compression.tau.Tau.parse`) and its range once d and m are known."""

    text = "null or a list"

    def __init__(self, resolve, entry=None):
        self.resolve, self.entry = resolve, entry

    def __call__(self, key, value):
        if value is None:
            return None
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        if not items:
            self.resolve([], 1, 1, key=key)   # raises: the grid's own message
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (int, float, str)):
                raise ConfigError(key, f"The '{key}' parameter's entries must be numbers or '<c>/n'; got {item!r}.")
            if self.entry is not None:
                self.entry(item, key)
        return items


class _CodecGrid:
    """``plan.codecs``: null (messages.codec alone) or a list of codec names (``<name>:<x>`` for a codec's one numeric
    option, ``dither:<s>`` for s levels), each checked now (``isparse.planning.resolve_codecs``)."""

    text = "null or a list"

    def __call__(self, key, value):
        if value is None:
            return None
        items = list(value) if isinstance(value, (list, tuple)) else [value]
        resolve_codecs(items, CodecChoice("float64"), key=key)
        return items


def _link_both_or_none(link, key) -> None:
    """plan.link.up and plan.link.down: both rates (the link model) or both null (the cluster measured)."""
    for name, other in (("up", "down"), ("down", "up")):
        if getattr(link, name) is None and getattr(link, other) is not None:
            full = f"{key or 'plan.link'}.{name}"
            raise ConfigError(full, f"The '{full}' parameter must be {Rates().rate_text} when "
                                    f"{key or 'plan.link'}.{other} is set (the link model needs both directions); "
                                    f"got None.")


@dataclass
class PlanLinkSpec(Section):
    """The link isparse-plan predicts for (``isparse.planning.predict_time``): both rates null = the configured cluster's
    rounds as measured (no link model)."""

    up: Any = param(None, Rates(), "each host's uplink (host -> master): a tc rate (10mbit, 1gbit), a list of one per "
                                   "host (the slowest host's link counts), or null: no link model, the rounds are "
                                   "measured on the configured cluster")
    down: Any = param(None, Rates(), "each host's downlink (master -> host: x, d x 8 B per round), as up")
    latency: Optional[float] = param(None, Nullable(Interval(float, 0.0, None)),
                                     "the round's floor in seconds (round trip, master step); null: measured by the "
                                     "probes (a round at the smallest messages minus its compute; with "
                                     "engine=inprocess plus 3.5 ms, a Dask actor round trip)")
    burst: float = param(0.0, Interval(float, 0.0, None),
                         "each link's token-bucket depth in bytes (a shaped link's tc burst: the first bytes of a "
                         "message after an idle gap cross at line speed); 0: a plain rate")
    calibrate: bool = param(True, Boolean(), "scale the bound's iterations by one in-process run of the configured "
                                             "tau to tol (its rounds / its bound's); false: the bound's counts as is")
    compute: str = param("auto", OneOf("auto", "parallel", "shared"),
                         "how the H hosts' worker compute adds up in a round: parallel (each host its own machine: "
                         "the busiest host's), shared (processes on this machine's cores: the whole round's compute "
                         "over min(H, cores)), auto: shared for engine=dask on cluster=local or emulated, else "
                         "parallel")
    rules: ClassVar[tuple] = (_link_both_or_none,)


@dataclass
class PlanSpec(Section):
    """isparse-plan's grid and probes (pipeline/plan.py)."""

    taus: Optional[list] = param(None, _Grid(resolve_tau_grid, Tau.parse),
                                 "the tau grid, each entry as the tau key (auto, '<c>/n' rounded up, '<k>/m', or a "
                                 "number in [1/m, 1] with tau*m an integer); null: tau*m in {1, 2, 4, ...} up to m, "
                                 "plus ceil(m/n) and m")
    block_sizes: Optional[list] = param(None, _Grid(resolve_block_sizes),
                                        "block sizes b in [1, d]; null: blocks.size alone")
    codecs: Optional[list] = param(None, _CodecGrid(),
                                   "value codecs (messages.codec names; dither:<s> for s levels); null: "
                                   "messages.codec alone")
    rounds: int = param(20, Interval(int, 2, None), "rounds timed per probe (after a warm-up of tracking.log_every; "
                                                    "rounded up to a multiple of it)")
    repeats: int = param(3, Interval(int, 1, None), "runs per probe, interleaved; the median seconds per round is kept")
    json: bool = param(False, Boolean(), "print one JSON object instead of the table (--json)")
    link: PlanLinkSpec = section(PlanLinkSpec, "the link to predict for (plan.link.up, plan.link.down: tc rates; "
                                               "null: the configured cluster as measured)")


@dataclass
class PlanConfig(JobConfig):
    """isparse-plan's config: isparse-run's and ``plan``."""

    plan: PlanSpec = section(PlanSpec)


# -- Hydra ---------------------------------------------------------------------------------------------------------
#: the sections whose option Hydra's defaults list picks (group name -> {option: its values})
def group_options() -> dict[str, dict[str, dict]]:
    """{group: {option: the option's values}} of the typed groups: algorithm (every registered method), data (every
    data source), cluster (every kind)."""
    from isparse.methods import METHODS
    from isparse.data.sources import SOURCES

    return {"algorithm": {name: cls.options(name=name).to_dict() for name, cls in METHODS.items()},
            "data": {name: src.to_dict() for name, src in SOURCES.items()},
            "cluster": {kind: cls().to_dict() for kind, cls in KINDS.items()}}


GROUPS = ("algorithm", "data", "cluster")
#: the option each group takes unless told otherwise (isparse-run: ISEGA on the bundled breast-cancer set, on a local
#: Dask cluster)
DEFAULT_OPTIONS = {"algorithm": "isega", "data": "breast_cancer", "cluster": "local"}


def hydra_node(cls, values: dict | None = None, skip=(), defaults=None, name: str | None = None) -> type:
    """A structured-config dataclass with the keys of the Section ``cls`` (nested sections nested; the ``skip``ped
    keys, the groups the defaults list fills, untyped), every leaf typed ``Any`` (Hydra checks the keys; the values are
    checked by :func:`load_job`), with the defaults ``values`` (default: ``cls()``'s). ``defaults``: the node's own
    defaults list (Hydra's, e.g. the default option of each group). The class is a name of this module (``name``,
    default ``<cls>Node``), so a composed config pickles (the Dask and joblib launchers send it to their workers)."""
    values = values if values is not None else cls().to_dict()
    node_name = name or f"{cls.__name__}Node"
    fields = [] if defaults is None else [("defaults", list, dataclasses.field(default_factory=lambda: list(defaults)))]
    for field_name, f in cls.fields().items():
        if field_name in skip:   # a group the defaults list fills with one of its options
            fields.append((field_name, Any, dataclasses.field(default=None)))
            continue
        sub = f.metadata.get("section")
        default = values.get(field_name)
        if sub is not None and hasattr(sub, "composed_values"):   # keys chosen by a value (messages.codec): open
            fields.append((field_name, Any, dataclasses.field(
                default_factory=lambda s=sub, v=default: {**s.composed_values(), **(v or {})})))
        elif sub is not None and field_name not in GROUPS:
            node = hydra_node(sub, default, name=f"{node_name}_{field_name}")
            fields.append((field_name, node, dataclasses.field(default_factory=node)))
        elif isinstance(default, (list, dict)):
            fields.append((field_name, Any, dataclasses.field(default_factory=lambda v=default: _copy(v))))
        else:
            fields.append((field_name, Any, dataclasses.field(default=default)))
    node = dataclasses.make_dataclass(node_name, fields)
    node.__module__ = __name__
    globals()[node_name] = node   # importable by name: pickle finds it
    return node


def _copy(value):
    import copy

    return copy.deepcopy(value)


_REGISTERED: list = []


def register() -> None:
    """Store the schema in Hydra's ConfigStore (once per process): ``isparse_run`` (conf/config.yaml's first default),
    ``isparse_plan`` (conf/plan.yaml's; both with :data:`DEFAULT_OPTIONS` as their defaults list) and the options of
    the algorithm, data and cluster groups."""
    if _REGISTERED:
        return
    from hydra.core.config_store import ConfigStore

    cs = ConfigStore.instance()
    defaults = ["_self_"] + [{group: option} for group, option in DEFAULT_OPTIONS.items()]   # the groups after _self_
    cs.store(name="isparse_run", node=hydra_node(JobConfig, skip=GROUPS, defaults=defaults, name="JobNode"))
    cs.store(name="isparse_plan", node=hydra_node(PlanConfig, skip=GROUPS, defaults=defaults, name="PlanNode"))
    for group, options in group_options().items():
        base = {"algorithm": _algorithm_class, "data": _data_class, "cluster": _cluster_class}[group]
        for option, values in options.items():
            cs.store(group=group, name=option, node=hydra_node(base(option), values, name=f"{group}_{option}_Node"))
    # Hydra deep-copies its config repository, and with it this store, for every group it lists (--help: 160 copies
    # of the whole schema, 2-3 s of CPU); its loads already return copies of the nodes (ConfigStore.load), so the
    # copies may share the one store (the instance's __deepcopy__, which copy.deepcopy looks up on the object)
    cs.__deepcopy__ = lambda memo: cs
    _REGISTERED.append(True)


def _algorithm_class(name):
    from isparse.methods import METHODS

    return METHODS[name].options


def _data_class(name):
    from isparse.data.sources import SOURCES

    return type(SOURCES[name])


def _cluster_class(kind):
    return KINDS[kind]


# -- composed config -> JobConfig ----------------------------------------------------------------------------------
def load_job(cfg, cls=JobConfig, overrides=None):
    """The :class:`JobConfig` (or ``cls``, e.g. :class:`PlanConfig`) of a composed config, checked.

    Parameters
    ----------
    cfg : DictConfig
        As Hydra composed it (its ``hydra`` node, if any, is left out).
    cls : type
        The schema.
    overrides : list of str, optional
        The job's command-line overrides, as typed (default: Hydra's, when a job runs): a string key that Hydra read
        as a number or boolean gets the text as typed.

    Raises
    ------
    ConfigError
        A value out of its range, a key no section has (added with ``+``), or a combination the rules refuse.
    """
    from omegaconf import OmegaConf

    tree = {k: OmegaConf.to_container(v, resolve=True, throw_on_missing=False) if OmegaConf.is_config(v) else v
            for k, v in cfg.items_ex(resolve=True) if k != "hydra"}
    _unmissing(tree)
    if isinstance(tree.get("messages"), dict):   # the codecs' own keys left null: each codec's default
        tree["messages"] = MessagesSpec.given(tree["messages"])
    overrides = job_overrides() if overrides is None else overrides
    keep_typed_text(tree, overrides, cls)
    _anchor(tree, cls)
    job = cls.from_dict(tree)
    _link_is_emulated(job, "", {o.lstrip("+~").split("=", 1)[0] for o in overrides})   # also a default value given
    return job


def _unmissing(node) -> None:
    """``???`` (a key that must be set) -> None, so that its constraint names it ("must be set")."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in list(items):
        if v == "???":
            node[k] = None
        elif isinstance(v, (dict, list)):
            _unmissing(v)


def _anchor(tree: dict, cls) -> None:
    """Relative paths mean the directory the command ran in, as ``hydra.run.dir`` does (with ``hydra.job.chdir=true``
    they would otherwise mean the job's directory: a second store and cache there; a Dask worker reads the same
    file): every key ``cls`` declares with a :class:`~isparse.paths.PathValue` (``paths.outputs``, a ``sqlite:///``
    ``tracking.uri``, ``data.path``, ``data.dir`` and its ``$ISPARSE_DATA_DIR``, ...) is anchored to Hydra's
    ``runtime.cwd`` when a job runs (whatever ``hydra.job.chdir`` says), else to this process's directory."""
    from hydra.core.hydra_config import HydraConfig

    base = HydraConfig.get().runtime.cwd if HydraConfig.initialized() else os.getcwd()
    anchor_paths(cls, tree, base)


register()   # importing the schema registers it: isparse-run, isparse-plan and a test composing conf/ import it first


def keys_markdown() -> str:
    """docs/config.md: every key of isparse-run's config, what it may be and what it means, from the schema (the
    sections, each method's options, each data source's and each cluster kind's keys)."""
    from isparse.methods import METHODS
    from isparse.data.sources import SOURCES

    def cell(text):
        return str(text).replace("|", "\\|")

    def rows(cls, key=""):
        return [f"| `{k}` | {cell(allowed)} | {cell(doc)} |" for k, allowed, doc in cls.keys_doc(key)
                if not k.endswith((".name", ".kind")) or k.count(".") > 1]

    head = ["| key | allowed | meaning |", "|---|---|---|"]
    out = ["# The keys of isparse-run's config", "",
           "Written by `python -m pipeline.schema` from the dataclasses that declare them (a test checks it is up to",
           "date): `isparse/spec.py` (the run), each method's `options` (`isparse/methods/`), `isparse/data/sources.py` (the",
           "data sources), `pipeline/cluster/options.py` (the clusters) and `pipeline/schema.py` (the pipeline's own",
           "sections). `isparse-run --cfg job` prints a composed config with its values.", "",
           "## The run and the pipeline", "", *head]
    base = [r for r in rows(JobConfig) if not r.startswith(("| `algorithm.", "| `data.", "| `cluster."))]
    out += base + ["", "## algorithm=<name>: each method's options", ""]
    seen = {}
    for name, cls in METHODS.items():
        seen.setdefault(cls.options, []).append(name)
    for options, names in seen.items():
        out += [f"`algorithm={'`, `algorithm='.join(names)}` ({options.__name__}):", "", *head, *rows(options, "algorithm"), ""]
    out += ["## messages.codec=<name>: each codec's own keys", ""]
    for name, cls in CODECS.items():
        if cls.own_options():
            own = [r for r in rows(cls.options, "messages") if r.startswith(tuple(f"| `messages.{k}`"
                                                                                 for k in cls.own_options()))]
            out += [f"`messages.codec={name}` ({cls.options.__name__}):", "", *head, *own, ""]
    out += ["## data=<name>: each data source's keys", ""]
    kinds = {}
    for name, src in SOURCES.items():
        kinds.setdefault(type(src), []).append(name)
    for cls, names in kinds.items():
        out += [f"`data={'`, `data='.join(names)}` ({cls.__name__}):", "", *head, *rows(cls, "data"), ""]
    out += ["## cluster=<kind>: each cluster's keys", ""]
    for kind, cls in KINDS.items():
        out += [f"`cluster={kind}` ({cls.__name__}):", "", *head, *rows(cls, "cluster"), ""]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":   # python -m pipeline.schema: rewrite docs/config.md
    Path(__file__).resolve().parent.parent.joinpath("docs", "config.md").write_text(keys_markdown())
