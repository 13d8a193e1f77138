"""The text of an override as the user typed it (issue 20: a string key keeps its text).

Hydra's override grammar reads ``run_name=1.10`` as the float 1.1, ``True`` as a boolean and ``1e3`` as 1000.0,
and a sweeper hands each job its own rendering of the value (``data.path=1.10,2.0`` reaches the jobs as ``1.1``
and ``2.0``). :func:`keep_typed_text` gives every string key of the schema the text of its override;
:func:`job_overrides` gives a job the overrides as its sweep's command line typed them (the launching process
passes them in ``$ISPARSE_TYPED_OVERRIDES``, see :mod:`pipeline.jobenv`).
"""

from __future__ import annotations

import json

from isparse.compression import codec_class
from isparse.errors import ConfigError
from isparse.params import is_text, leaf_constraints

from .cluster.options import KINDS
from .jobenv import TYPED_ENV, job_env


def job_overrides() -> list[str]:
    """The running job's command-line overrides (Hydra's ``overrides.task``), or [] outside a Hydra job."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    if not HydraConfig.initialized():
        return []
    # as typed: an override's text may hold an interpolation (workers.n=${oops}) that must not be resolved here
    overrides = list(OmegaConf.to_container(HydraConfig.get().overrides.task, resolve=False))

    typed = job_env(TYPED_ENV)
    return as_typed(overrides, json.loads(typed)) if typed else overrides


def as_typed(job: list[str], typed: list[str]) -> list[str]:
    """A sweep job's overrides (the sweeper's rendering of each value: ``data.path=1.10`` comes as ``1.1``) with
    each value's text as the sweep's command line typed it: a key set once, or an element of a comma-separated
    list (``data.path=1.10,2.0``) whose value is the job's. Other sweeps (``range(...)``, ``glob(...)``) keep
    the sweeper's text."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    as_typed_by_key = {o.partition("=")[0]: o.partition("=")[2] for o in typed if "=" in o}
    out = []
    for override in job:
        key, sep, text = override.partition("=")
        raw = as_typed_by_key.get(key)
        if sep and raw is not None and raw != text:
            try:
                value = parser.parse_override(override).value()
                for element in _top_level_split(raw):
                    if parser.parse_override(f"{key}={element}").value() == value:
                        override = f"{key}={element}"
                        break
            except Exception:  # noqa: BLE001 - a sweep function or an odd text: the sweeper's rendering stays
                pass
        out.append(override)
    return out


def _top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside quotes and brackets (Hydra's choice sweep ``a,b,c``)."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def keep_typed_text(tree: dict, overrides, cls) -> None:
    """Give every string key set by an override the text as typed: Hydra's grammar reads ``1.10`` as the float 1.1,
    ``True`` as a boolean, ``1e3`` as 1000.0. In a sweep the text is the sweeper's rendering of the value."""
    constraints = _text_keys(tree, cls)
    for override in overrides:
        key, sep, text = override.partition("=")
        key = key.lstrip("+~")
        if not sep or key not in constraints:
            continue
        node, parts = tree, key.split(".")
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node:
            continue
        value = node[parts[-1]]
        if value is not None and not isinstance(value, (str, dict, list)):
            node[parts[-1]] = _unquote(text)


def _text_keys(tree: dict, cls) -> set:
    """The dotted keys whose constraint admits strings only, for the options the tree chose."""
    keys = {k for k, c in leaf_constraints(cls).items() if is_text(c)}
    for group, base in (("algorithm", _algorithm_for), ("data", _data_for), ("cluster", _cluster_for),
                        ("messages", _messages_for)):
        chosen = base(tree.get(group) or {})
        if chosen is not None:
            keys |= {f"{group}.{k}" for k, c in leaf_constraints(chosen).items() if is_text(c)}
    return keys


def _algorithm_for(values):
    from isparse.methods import method_class

    try:   # a method of another module is imported (algorithm.module); a bad name is from_dict's to refuse
        return method_class(str(values.get("name")), values.get("module")).options
    except ConfigError:
        return None


def _messages_for(values):
    try:   # a codec of another module is imported (messages.module); a bad name is from_dict's to refuse
        return codec_class(str(values.get("codec", "float64")), values.get("module")).options
    except ConfigError:
        return None


def _data_for(values):
    from isparse.data.registry import source_class

    try:   # a source of another module is imported (data.module); a bad name is from_dict's to refuse
        return source_class(str(values.get("name")), values.get("module"))
    except ConfigError:
        return None


def _cluster_for(values):
    return KINDS.get(values.get("kind"))


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text
