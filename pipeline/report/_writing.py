"""Assembling a report: :func:`build_report` reads a sweep back from MLflow, writes its figures, tables and
``README.md`` under ``<outputs>/reports/<experiment>/<parent run id>/`` and logs them as artifacts of the parent run
(under ``report/``).
"""
from __future__ import annotations

import logging
from pathlib import Path

from isparse.errors import ConfigError

from ..tracking import check_reachable, client_for
from ._figures import convergence_figures, plt, tau_figure   # plt: pyplot with the Agg backend figures.py selects
from ._records import ALIASES, MEASURES, RunRecord, assign_series, latest_sweep, load_children
from ._compare import comparison, write_comparison
from ._tables import (_tau_list, add_slopes, single_tau_series, sweep_rows, table99, table99_gaps, tau_rows,
                     write_sweep_table, write_table, write_tau_table)

log = logging.getLogger(__package__)   # "pipeline.report": the logger's name before the package was split


def write_readme(out: Path, *, parent: str, experiment: str, records: list[RunRecord], series_keys: list[str],
                 built: list[str], not_built: list[str], notes: list[str]) -> Path:
    """``README.md`` of a report: what it holds, its series, what it could not build and why."""
    keys = ", ".join(f"{k} (shown as {ALIASES[k]})" if k in ALIASES else k for k in series_keys)
    text = [f"# Report of sweep {parent}", "",
            f"{len(records)} finished runs of the MLflow experiment `{experiment}`. One series per data set, method, n"
            + (f" and {keys}" if series_keys else "") + ": "
            + ("the keys besides seed and τ that differ among the runs." if series_keys
               else "no key besides seed and τ differs among the runs."), "",
            "## Built", ""] + [f"- {b}" for b in built] + [""]
    if not_built:
        text += ["## Not built", ""] + [f"- {b}" for b in not_built] + [""]
    if notes:
        text += ["## Notes", ""] + [f"- {b}" for b in notes] + [""]
    path = out / "README.md"
    path.write_text("\n".join(text))
    return path


# ------------------------------------------------------------------------------------------ entry
def build_report(uri: str, *, experiment: str | None = None, parent_id: str | None = None,
                 outputs: str | Path = "outputs", measure: str = "both") -> dict:
    """Build the report of one sweep; ``measure`` (``both``, ``subopt`` or ``dist_sq``) is the comparison tables'
    error measure (``report.measure``, ``isparse-report --measure``).

    Returns
    -------
    dict
        ``parent`` (run id), ``dir`` (Path), ``files`` (list of Path), ``table`` (rows of table99, maybe empty),
        ``sweep`` (rows of the table of every configuration, :func:`sweep_rows`), ``compare`` / ``compare_grid`` (rows of the method-vs-baseline table and of its tuning grid, maybe empty;
        :func:`comparison`), ``failed`` (RunRecords of runs that logged their constants but did not finish),
        ``records`` (the RunRecords), ``series_keys`` (the keys besides seed and tau that differ among the runs)
        and ``not_built`` / ``notes`` (lines: what the report could not build and why, runs left out, ...; the
        same as in its ``README.md``).

    Raises
    ------
    ConfigError
        The tracking URI is unreachable, the experiment or parent run does not exist, or the sweep has no
        finished child run.
    """
    check_reachable(uri, key="--uri", must_exist=True)
    client = client_for(uri)
    parents = []
    for pid in (parent_id.split(",") if parent_id else []):
        try:
            parents.append(client.get_run(pid.strip()))
        except Exception as exc:  # noqa: BLE001 - MLflow raises its own error types per store
            raise ConfigError("parent", f"The '--parent' parameter must be the id of a sweep run in {uri}; "
                                        f"got {pid!r} ({type(exc).__name__}).") from None
    parent = parents[0] if parents else latest_sweep(client, experiment or "isparse")
    notes, not_built = [], []
    records, failed = {}, {}
    for p in parents or [parent]:       # later sweeps (re-runs of failed jobs) replace earlier runs of a configuration
        lost = []
        for rec in load_children(client, p, notes, lost):
            records[rec.identity] = rec
            failed.pop(rec.identity, None)
        for rec in lost:
            failed[rec.identity] = rec
    records = list(records.values())
    failed = [r for k, r in failed.items() if k not in {x.identity for x in records}]
    if not records:
        raise ConfigError("parent", f"The sweep {parent.info.run_id} has no child run with logged constants.")
    series_keys = assign_series(records)
    records.sort(key=lambda r: (r.data, r.algorithm, r.label_extra, r.n, r.group, r.tau_m, r.seed))
    exp_name = client.get_experiment(parent.info.experiment_id).name
    out = Path(outputs) / "reports" / exp_name / parent.info.run_id
    out.mkdir(parents=True, exist_ok=True)
    files = []
    figures = convergence_figures(records)
    rows = add_slopes(tau_rows(records))
    single = single_tau_series(rows)
    try:
        fig = tau_figure(records)
        if fig is not None:
            figures["iterations_vs_tau.png"] = fig
            if single:
                notes.append("iterations_vs_tau.png leaves out the series with a single τ: " + "; ".join(single))
        else:
            taus = _tau_list(records)
            not_built.append(f"iterations_vs_tau.png not built: each of the {len(single)} series has a single τ "
                             f"(τ here: {taus}); sweep tau (e.g. tau=0.5/n,1/n,1.0) to draw iterations against τ")
        for name, f in figures.items():
            f.savefig(out / name, dpi=110)
            files.append(out / name)
    finally:
        for f in figures.values():
            plt.close(f)
    files.append(write_tau_table(rows, out))
    sweep = sweep_rows(records)
    files += write_sweep_table(sweep, out)
    table = table99(records)
    gaps = table99_gaps(records)
    if table:
        files += write_table(table, out)
        notes += [f"table99 leaves out {g}" for g in gaps]
    elif any(r.role for r in records):    # a comparison sweep: its arms are compared in compare.md instead
        not_built.append("table99 not built: no series of this comparison sweep has both τ = 1/n and τ = 1 "
                         "(its arms are compared in compare.md)")
    else:
        not_built.append(f"table99 not built: {'; '.join(gaps)}")
    if measure not in ("both", *MEASURES):
        raise ConfigError("measure", f"The '--measure' parameter must be one of both, {', '.join(MEASURES)}; got "
                                     f"{measure!r}.")
    compare, grid, compare_gaps = comparison(records, failed, MEASURES if measure == "both" else (measure,))
    if compare:
        files += write_comparison(compare, grid, out)
        notes += [f"compare leaves out {g}" for g in compare_gaps]
    elif any(r.role for r in records):
        not_built.append("compare not built: " + ("; ".join(compare_gaps) or "no run has compare.role=method"))
    missed = sorted({f"{r.label()} (seed {r.seed})" for r in records if r.to_eps()[0] is None})
    if missed:
        notes.append(f"ε (tol) not reached by: {', '.join(missed)}")
    built = [p.name for p in files]
    files.append(write_readme(out, parent=parent.info.run_id, experiment=exp_name, records=records,
                              series_keys=series_keys, built=built, not_built=not_built, notes=notes))
    for line in not_built + notes:
        log.info("report: %s", line)
    for path in files:
        client.log_artifact(parent.info.run_id, str(path), artifact_path="report")
    client.set_tag(parent.info.run_id, "report_dir", str(out.resolve()))
    return {"parent": parent.info.run_id, "dir": out, "files": files, "table": table, "records": records,
            "series_keys": series_keys, "not_built": not_built, "notes": notes, "compare": compare,
            "compare_grid": grid, "failed": failed, "sweep": sweep}
