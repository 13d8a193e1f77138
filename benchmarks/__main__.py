"""``python -m benchmarks [--quick] [--only 1,2,...] [--merge JSON] [--out docs/benchmarks.md]``: run the suite, write the doc.

``--merge outputs/benchmarks.json`` keeps the items of an earlier run that this run does not measure (the doc's
table of runs names which items come from which run, its commit, date and load)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

from . import report as doc

#: the items of a plain run (10 and 11 are standalone sections with their own commands: see report.STANDALONE)
ITEMS = ("1", "2", "3", "4", "5", "6", "7", "8", "9", "12")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer repetitions and iterations (development)")
    p.add_argument("--only", default=",".join(ITEMS), help="comma-separated items to run (1..9, 12; 6 is the d = 10^6 problem, 7 the parallel sweeps, 8 isparse-plan on shaped links, 9 the fixed costs of a run, 12 the crossover map: time to eps of GD, ISEGA, DIANA and dask-ml's L-BFGS on emulated hosts, needs root)")
    p.add_argument("--map-grid", choices=("default", "full"), default="default",
                   help="item 12's grid: default (what fits 2 cores in about 20 minutes) or full (the issue's grid: hours)")
    p.add_argument("--map-cap", type=float, default=None, help="item 12: seconds per run before it counts as not at eps")
    p.add_argument("--out", default="docs/benchmarks.md")
    p.add_argument("--no-netns", action="store_true", help="skip the bandwidth-limited runs (they need root)")
    p.add_argument("--merge", metavar="JSON", help="keep the other items of an earlier run's outputs/benchmarks.json")
    p.add_argument("--render", metavar="JSON", help="only re-render the doc from a run's outputs/benchmarks.json")
    args = p.parse_args(argv)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        previous = Path(args.out).read_text() if Path(args.out).is_file() else ""
        Path(args.out).write_text(doc.render(saved["context"], saved["results"], saved.get("errors", {}), previous))
        print(f"[benchmarks] re-rendered {args.out} from {args.render}", flush=True)
        return 0
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    started = time.time()
    ctx = doc.context(quick=args.quick)
    results, errors = {}, {}
    if args.merge:
        saved = json.loads(Path(args.merge).read_text())
        runs = saved["context"].get("runs") or [_run_row(saved["context"], sorted(saved["results"]))]
        keep = {k: v for k, v in saved["results"].items() if k not in only}
        results.update(keep)
        ctx["runs"] = [dict(r, items=[i for i in r["items"] if i in keep]) for r in runs]
        ctx["runs"] = [r for r in ctx["runs"] if r["items"]]
    for item in only:
        t0 = time.time()
        try:
            results[item] = RUNNERS[item](args)
        except Exception:  # one failing item must not lose the others: its traceback goes into the doc
            errors[item] = traceback.format_exc()
            print(errors[item], file=sys.stderr, flush=True)
        print(f"[benchmarks] item {item} took {time.time() - t0:.0f} s", flush=True)
    ctx["duration_s"] = time.time() - started
    ctx["load_after"] = doc.load_average()
    if args.merge:
        ctx["runs"].append(_run_row(ctx, only))
    out = Path(args.out)
    text = doc.render(ctx, results, errors, out.read_text() if out.is_file() else "")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    Path("outputs").mkdir(exist_ok=True)
    Path("outputs/benchmarks.json").write_text(json.dumps({"context": ctx, "results": results, "errors": errors}, default=str, indent=1))
    print(f"[benchmarks] wrote {out} in {ctx['duration_s']:.0f} s", flush=True)
    return 1 if errors else 0


def _run_row(ctx: dict, items) -> dict:
    """Which items a run measured, with its commit, date, load and duration (for a merged doc)."""
    return {"items": list(items), "date": ctx["date"], "commit": ctx["versions"].get("git commit", "?"),
            "load_before": ctx.get("load_before", "?"), "load_after": ctx.get("load_after", "?"),
            "duration_s": ctx.get("duration_s", 0)}


def _item1(args):
    from . import inprocess

    return inprocess.measure_before_after(quick=args.quick)


def _item2(args):
    from . import dask_overhead

    return dask_overhead.measure_all(quick=args.quick)


def _item3(args):
    from . import versus

    return versus.measure(quick=args.quick, netns=not args.no_netns)


def _item4(args):
    from . import memory

    return memory.measure(quick=args.quick)


def _item5(args):
    from . import scaling

    return scaling.measure(quick=args.quick)


def _item6(args):
    from . import highdim

    return highdim.measure(quick=args.quick)


def _item7(args):
    from . import sweeps

    return sweeps.measure(quick=args.quick)


def _item8(args):
    from . import plan_check

    if args.no_netns:
        return {"skipped": "--no-netns"}
    return plan_check.measure(quick=args.quick)


def _item9(args):
    from . import fixed_costs

    return fixed_costs.measure(quick=args.quick)


def _item12(args):
    from pathlib import Path

    from . import crossover
    from .crossover_grid import DEFAULT, FIGURE, FULL, QUICK, TIME, grid_from
    from .crossover_report import before_of

    if args.no_netns:
        return {"skipped": "--no-netns"}
    grid = QUICK if args.quick else FULL if args.map_grid == "full" else DEFAULT
    if args.map_cap:
        grid = grid_from(grid, cap=args.map_cap)
    before = None
    if args.merge:   # the map being replaced is shown beside the new one
        saved = json.loads(Path(args.merge).read_text())
        if "12" in saved["results"] and saved["results"]["12"].get("cells"):
            row = next((r for r in saved["context"].get("runs", []) if "12" in r["items"]), {})
            before = before_of(saved["results"]["12"], row.get("date", "?"), row.get("commit", "?"))
    res = crossover.measure(grid=grid, figure=str(Path(args.out).parent / FIGURE), before=before)
    if not args.quick and args.map_grid == "default":   # the time check at H = 16, d = 10^6
        res["time_check"] = crossover.measure(grid=TIME, figure=None)
    return res


RUNNERS = {"1": _item1, "2": _item2, "3": _item3, "4": _item4, "5": _item5, "6": _item6, "7": _item7, "8": _item8,
           "9": _item9, "12": _item12}

if __name__ == "__main__":
    sys.exit(main())
