"""Numbers the docs quote are what their command gives today (issue 34): each quoted table is re-measured here with
the configuration of its command, and a table that drifted fails, naming the page, the cell and both numbers."""

import re

import pytest

from doc_snippets import ROOT
from isparse import RunSpec, build

PAGE = ROOT / "docs" / "reproducing-the-paper.md"


def _ibcd_quadratic_table() -> dict[int, dict[str, str]]:
    """The rows of the ``ibcd_quadratic`` table of docs/reproducing-the-paper.md, by n: column header -> cell."""
    text = PAGE.read_text()
    section = text[text.index("## IBCD vs GD vs shared-stream block coordinate descent on the quadratic"):]
    body = section.splitlines()[1:]
    start = next(i for i, line in enumerate(body) if line.startswith("|"))
    lines = []
    for line in body[start:]:   # the first table: its lines up to the first that is not a row
        if not line.startswith("|"):
            break
        lines.append(line)
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return {int(cells[0]): dict(zip(header, cells))
            for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])}


def _count(cell: str) -> int:
    """The iteration count at the start of a cell (``870 (2.79× GD)`` -> 870, ``1,391`` -> 1391)."""
    return int(re.match(r"[\d,]+", cell).group(0).replace(",", ""))


def _iterations(algorithm: str, n: int) -> tuple[int, float]:
    """(iterations, uplink bytes) to eps of ``isparse-run -m +experiment=ibcd_quadratic``'s job (algorithm, n):
    conf/experiment's tol = 1e-8, max_iter = 100000, log_every = 10, the defaults for the rest (seed 0)."""
    spec = RunSpec.from_dict({"algorithm": algorithm, "data": "quadratic", "workers.n": n})
    res = build(spec).run(max_iter=100000, tol=1e-8, log_every=10)
    assert res.converged
    return res.iterations, res.records[-1]["uplink_bytes"]


@pytest.mark.parametrize("n", [10, 50])
def test_ibcd_quadratic_counts_are_what_a_run_gives(n):
    row = _ibcd_quadratic_table()[n]
    (gd, gd_up), (ibcd, ibcd_up) = _iterations("gd", n), _iterations("ibcd", n)
    measured = {"GD (γ = 1/(2L))": gd, "IBCD, τ = 1/n": ibcd, "shared-stream BCD, τ = 1/n": _iterations("shared_bcd", n)[0]}
    for column, value in measured.items():
        assert _count(row[column]) == value, f"{PAGE.name}, ibcd_quadratic, n = {n}, {column}: doc {row[column]}, run {value}"
    assert f"({ibcd / gd:.2f}× GD)" in row["IBCD, τ = 1/n"]
    uplink = {"GD uplink": gd_up, "IBCD uplink": ibcd_up}
    for column, value in uplink.items():
        assert row[column] == f"{value / 1e6:.3f} MB", f"{PAGE.name}, ibcd_quadratic, n = {n}, {column}: doc " \
                                                     f"{row[column]}, run {value / 1e6:.3f} MB"
