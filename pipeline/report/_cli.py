"""The console script ``isparse-report`` (and ``python -m pipeline.report``): the report of a sweep, its files
listed and its tables printed (what the report holds: :mod:`pipeline.report`)."""
from __future__ import annotations

from ._compare import compare_markdown, grid_markdown
from ._tables import table_markdown

DESCRIPTION = "isparse-report: read a sweep's runs back from MLflow and compare them with the theory."


def main(argv=None) -> None:
    """The console script ``isparse-report`` (bad arguments: one line and exit status 2, ``pipeline.errors``)."""
    from ..errors import ArgumentParser, console

    parser = ArgumentParser(prog="isparse-report", description=DESCRIPTION)
    parser.add_argument("--uri", default="sqlite:///outputs/mlflow.db", help="MLflow tracking URI "
                        "(default: the store isparse-run writes from this directory)")
    parser.add_argument("--experiment", default="isparse", help="MLflow experiment; its newest sweep is reported")
    parser.add_argument("--parent", default=None, help="the sweep's parent run id (instead of the newest); several "
                        "comma-separated ids merge sweeps (a later one's runs replace an earlier one's)")
    parser.add_argument("--outputs", default="outputs", help="directory for reports/<experiment>/<run id>/")
    parser.add_argument("--measure", default="both", choices=["both", "subopt", "dist_sq"],
                        help="the comparison tables' error measure: F(x) - F*, ||x - x*||^2 or both (default)")
    args = parser.parse_args(argv)
    console("isparse-report", _report, args)


def _report(args) -> None:
    from ._writing import build_report    # imports matplotlib (_figures.py)

    result = build_report(args.uri, experiment=args.experiment, parent_id=args.parent, outputs=args.outputs,
                          measure=args.measure)
    keys = ", ".join(result["series_keys"]) or "none"
    print(f"report of sweep {result['parent']} ({len(result['records'])} runs; series keys besides data, method, n: "
          f"{keys}) in {result['dir']}:")
    for path in result["files"]:
        print(f"  {path.name}")
    for line in result["not_built"]:
        print(line)
    for line in result["notes"]:
        print(f"note: {line}")
    if result["table"]:
        print(table_markdown(result["table"]))
    if result["compare"]:
        print(compare_markdown(result["compare"]))
    if result["compare_grid"]:
        print(grid_markdown(result["compare_grid"]))

