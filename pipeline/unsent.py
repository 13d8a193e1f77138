"""Metric points a run could not send, sent later: ``python -m pipeline.tracking import FILE --uri URI``.

While a tracking server is away, :class:`pipeline.tracking.RunLogger` queues its calls and, if the server does not
come back before the run ends, writes the metric points and the run's end status to ``unsent_metrics.jsonl`` in the
run's directory (one JSON object per line). :func:`import_metrics` checks such a file line by line and sends it.
"""

from __future__ import annotations

import json

from isparse.errors import DataError

from ._store import MAX_METRICS, client_for


def import_metrics(path, uri: str) -> int:
    """Send the points of an ``unsent_metrics.jsonl`` file to ``uri``; returns how many.

    Raises
    ------
    DataError
        Before anything is sent: a line that is not a JSON object of a metric point (run_id, key, value,
        timestamp, step) or of a run's end (run_id, status FINISHED, FAILED or KILLED), naming the file and the
        line; a run id the store does not have.
    """
    by_run, statuses, first_line = _read_unsent(path)
    client = client_for(uri)
    for run_id, line in first_line.items():
        try:
            client.get_run(run_id)
        except Exception as exc:  # noqa: BLE001 - MLflow's "not found", through the helper or not
            raise DataError(f"{path}, line {line}: run {run_id!r} is not a run of {uri} ({one_line_text(exc)}); "
                            f"import the file into the store its run logged to.") from exc
    for run_id, points in by_run.items():
        for i in range(0, len(points), MAX_METRICS):
            client.log_batch_plain(run_id, metrics=points[i:i + MAX_METRICS])
    for run_id, status in statuses.items():
        client.set_terminated(run_id, status=status)
    return sum(len(p) for p in by_run.values())


_END_STATUSES = ("FINISHED", "FAILED", "KILLED")


def _read_unsent(path):
    """The points and end statuses of an ``unsent_metrics.jsonl`` file, checked line by line (see
    :func:`import_metrics`); and the first line of each run id."""
    by_run, statuses, first_line = {}, {}, {}
    with open(path, encoding="utf-8", errors="replace") as fh:
        for k, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}, line {k}"
            try:
                r = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where} is not JSON ({exc.msg} at column {exc.colno}); each line of an "
                                f"unsent_metrics.jsonl file is one JSON object.") from exc
            if not isinstance(r, dict) or not isinstance(r.get("run_id"), str) or not r["run_id"]:
                raise DataError(f"{where}: a JSON object with a non-empty string run_id expected; got {line.strip()[:80]!r}.")
            first_line.setdefault(r["run_id"], k)
            if "status" in r:
                if r["status"] not in _END_STATUSES:
                    raise DataError(f"{where}: status must be one of {', '.join(_END_STATUSES)}; got {r['status']!r}.")
                statuses[r["run_id"]] = r["status"]
                continue
            missing = [f for f in ("key", "value", "timestamp", "step") if f not in r]
            if missing:
                raise DataError(f"{where}: a metric point needs run_id, key, value, timestamp and step; "
                                f"{', '.join(missing)} missing.")
            if not isinstance(r["key"], str) or not r["key"]:
                raise DataError(f"{where}: key must be a non-empty string; got {r['key']!r}.")
            if not isinstance(r["value"], (int, float)) or isinstance(r["value"], bool):
                raise DataError(f"{where}: value must be a number; got {r['value']!r}.")
            for field in ("timestamp", "step"):
                if not isinstance(r[field], int) or isinstance(r[field], bool) or r[field] < 0:
                    raise DataError(f"{where}: {field} must be an integer >= 0; got {r[field]!r}.")
            by_run.setdefault(r["run_id"], []).append((r["key"], float(r["value"]), r["timestamp"], r["step"]))
    return by_run, statuses, first_line


def one_line_text(exc: BaseException) -> str:
    """An exception's text on one line, its first 160 characters."""
    return " ".join(str(exc).split())[:160]
