"""Item 12 (the crossover map): the power-law generator, the cells' summary, and the quick map on emulated hosts."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from benchmarks import crossover, crossover_grid, crossover_report
from benchmarks.powerlaw import feature_frequencies, power_law_logistic, power_law_slope


# -- the generator (fast) ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.8, 1.0, 1.5])
def test_feature_frequencies_follow_the_power_law(alpha):
    data = power_law_logistic(N=20_000, d=10_000, alpha=alpha, seed=1)
    slope = power_law_slope(feature_frequencies(data.A), 10, 1000)
    assert slope == pytest.approx(-alpha, abs=0.08)


def test_frequency_of_a_feature_matches_its_probability():
    # feature k is in a row with probability 1 - (1 - p_k)^k_draws, p_k = (k+1)^-alpha / sum_j (j+1)^-alpha
    N, d, k, alpha = 40_000, 5_000, 30, 1.0
    data = power_law_logistic(N=N, d=d, nnz_per_row=k, alpha=alpha, seed=3)
    p = np.arange(1, d + 1, dtype=float) ** -alpha
    p /= p.sum()
    expected = 1 - (1 - p) ** k
    freq = feature_frequencies(data.A)
    for j in (0, 1, 5, 50, 200):
        sd = math.sqrt(expected[j] * (1 - expected[j]) / N)
        assert abs(freq[j] - expected[j]) < 5 * sd + 1e-12, (j, freq[j], expected[j])


def test_generator_is_deterministic_for_a_seed():
    a = power_law_logistic(N=3000, d=4000, seed=7)
    b = power_law_logistic(N=3000, d=4000, seed=7)
    c = power_law_logistic(N=3000, d=4000, seed=8)
    assert (a.A != b.A).nnz == 0 and np.array_equal(a.b, b.b)
    assert (a.A != c.A).nnz > 0 or not np.array_equal(a.b, c.b)


def test_generator_rows_and_labels():
    data = power_law_logistic(N=5000, d=20_000, nnz_per_row=40, seed=0)
    A = data.A
    assert sp.isspmatrix_csr(A) and A.shape == (5000, 20_000)
    per_row = np.diff(A.indptr)
    assert per_row.max() <= 40 and per_row.min() >= 1
    assert np.allclose(np.sqrt(A.multiply(A).sum(axis=1)).A.ravel(), 1.0)
    assert set(np.unique(data.b)) == {-1.0, 1.0}
    assert 0.3 < (data.b > 0).mean() < 0.7


def test_generator_refuses_bad_sizes():
    with pytest.raises(ValueError, match="nnz_per_row"):
        power_law_logistic(N=10, d=5, nnz_per_row=6)


def test_generated_data_go_through_the_library(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # the benchmark's cache, outputs/bench_cache, is relative to where it runs
    data = power_law_logistic(N=2000, d=3000, seed=0)
    built = crossover.setups(data, 1e-2, 4)
    assert set(built) == {m[0] for m in crossover_grid.METHODS if m[1] is not None}
    ref = built["GD"].reference
    assert all(s.reference is ref for s in built.values())
    assert built["GD"].problem.d == 3000 and built["GD"].method.tau == 1.0
    assert built["ISEGA τ=1/n"].method.tau == pytest.approx(1 / 4)
    assert built["ISEGA τ=1/n natural7"].method.codec.label == "natural7"
    # F* of the library is that of dask-glm's objective scaled by 1/N: F(0) = log 2 there and here
    assert built["GD"].problem.F(np.zeros(3000)) == pytest.approx(math.log(2.0), rel=1e-12)
    assert ref.F_star < math.log(2.0)


# -- the summary (fast) ----------------------------------------------------------------------------------------------
def test_summary_winner_and_ratios():
    runs = {"GD": {"reached": True, "time": 4.0, "wall_s": 4.5},
            "ISEGA τ=1/n": {"reached": True, "time": 2.0, "wall_s": 2.2},
            "ISEGA τ=1/n natural7": {"reached": True, "time": 3.0, "wall_s": 3.1},
            "DIANA": {"reached": False, "wall_s": 40.2, "stopped": "cap"},
            crossover_grid.LBFGS: {"reached": False, "wall_s": 41.0, "stopped": "cap"}}
    out = crossover.summarize({"runs": runs}, cap=40.0)
    assert out["winner"] == "ISEGA τ=1/n"
    assert out["is_gd"] == {"value": 0.5, "kind": "="}
    assert out["is_lbfgs"]["kind"] == "<" and out["is_lbfgs"]["value"] == pytest.approx(2.0 / 41.0)
    assert crossover_report.fmt_ratio(out["is_lbfgs"]) == "< 0.0488"
    assert crossover_report.fmt_time(runs["DIANA"], 40.0) == "> 40 s"
    none = crossover.summarize({"runs": {k: {"reached": False, "wall_s": 41.0} for k in runs}}, cap=40.0)
    assert none["winner"] is None and math.isnan(none["is_gd"]["value"])


def test_item_registered():
    from benchmarks.__main__ import ITEMS, RUNNERS

    assert "12" in ITEMS and "12" in RUNNERS


# -- the quick map on emulated hosts (slow, root) ----------------------------------------------------------------------
@pytest.mark.slow
def test_quick_map(tmp_path):
    from pipeline.cluster.machine import available

    reason = available()
    if reason:
        pytest.skip(f"cluster=emulated needs root and the ip and tc commands: {reason}")
    fig = tmp_path / "crossover.png"
    res = crossover.measure(quick=True, figure=str(fig))
    assert len(res["cells"]) == 1
    cell = res["cells"][0]
    runs = cell["runs"]
    assert set(runs) == set(crossover_grid.MAP_METHODS)
    for label, r in runs.items():
        assert "error" not in r, (label, r)
        if r["reached"]:
            assert 0 < r["time"] <= r["wall_s"], (label, r)
            assert r["final_rel"] <= crossover_grid.EPS
    ours = [m[0] for m in crossover_grid.METHODS if m[1] is not None and m[0] in crossover_grid.MAP_METHODS]
    for label in ours:   # the tiny cell: every one of our methods reaches eps well within the cap
        assert runs[label]["reached"], (label, runs[label])
        assert runs[label]["link_up"] >= runs[label]["up_total"] > 0   # IP bytes carry at least the values
        if res["aggregate"] == "host":   # x once per host: the records count what crosses the links
            assert runs[label]["link_down"] >= runs[label]["down_total"] > 0
            # and nothing else of size crosses them
            assert runs[label]["link_down"] <= 1.1 * runs[label]["down_total"] + 100_000, (label, runs[label])
            if "natural7" not in label:   # float64 values: the IP and Dask overhead is a few per cent
                assert runs[label]["link_up"] <= 1.1 * runs[label]["up_total"] + 100_000, (label, runs[label])
    times = {k: r["time"] for k, r in runs.items() if r["reached"]}
    assert cell["winner"] == min(times, key=times.get)
    assert cell["is_gd"]["value"] == pytest.approx(runs["ISEGA τ=1/n"]["time"] / runs["GD"]["time"])
    assert runs["ISEGA τ=1/n"]["up"] < runs["GD"]["up"]
    assert runs["ISEGA τ=1/n natural7"]["link_up"] < runs["ISEGA τ=1/n"]["link_up"]
    # the compressed downlink: 8 bits a value instead of 64 (the same rounds here), on the records and on the links
    down, dense = runs[crossover_grid.DOWN], runs["ISEGA τ=1/n natural7"]
    assert down["down"] / down["rounds"] <= dense["down"] / dense["rounds"] / 7
    assert down["link_down"] < dense["link_down"] / 3
    assert runs[crossover_grid.LBFGS]["link_up"] > 0 and runs[crossover_grid.LBFGS]["iterations"] >= 1
    assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from benchmarks import report

    goal, section = report._item12(res)
    assert "| GD |" in section and cell["winner"] in section


def test_side_by_side_and_time_verdicts():
    """An earlier map is set beside the new one cell by cell; the time check's verdicts take the faster compressed
    downlink and say met / not met against the goals."""
    new = {"rounds_via": "stream", "grid": {"cap": 300.0},
           "cells": [{"H": 16, "d_label": "1e6", "link": "100mbit",
                      "runs": {"GD": {"reached": True, "time": 100.0, "rounds": 60},
                               crossover_grid.DOWN: {"reached": True, "time": 12.0, "rounds": 500},
                               crossover_grid.DOWN_RANDK: {"reached": False, "wall_s": 301.0, "stopped": "cap"}}},
                     {"H": 16, "d_label": "1e6", "link": "10:1 asym",
                      "runs": {crossover_grid.DOWN: {"reached": True, "time": 190.0, "rounds": 500},
                               crossover_grid.LBFGS: {"reached": False, "wall_s": 367.0, "stopped": "cap"}}}]}
    for c in new["cells"]:
        c.update(crossover.summarize(c, 300.0))
    old = crossover_report.before_of({"cells": [{"H": 16, "d_label": "1e6", "link": "100mbit",
                                          "runs": {"GD": {"reached": True, "time": 50.0, "rounds": 60}}}]},
                              "2026-12-03", "abc1234")
    assert old["rounds_via"] == "actor"
    lines = crossover_report.side_by_side(new, old, 300.0)
    text = "\n".join(lines)
    assert "2026-12-03 (commit abc1234, rounds over Dask actor calls" in text
    assert "| 16 | 1e6 | 100mbit | GD | 50 (60) | 100 (60) | 2.00 |" in text
    assert f"| 16 | 1e6 | 100mbit | {crossover_grid.DOWN} | not in that map | 12 (500) | – |" in text
    v = crossover_report.time_verdicts(new)
    assert len(v) == 2
    assert "0.12 × GD (goal ≤ 0.15: **met**)" in v[0]
    assert "< 0.518 × L-BFGS (goal < 1: **met**)" in v[1]
    new["cells"][0]["runs"][crossover_grid.DOWN]["time"] = 20.0
    new["cells"][0].update(crossover.summarize(new["cells"][0], 300.0))
    assert "0.2 × GD (goal ≤ 0.15: **not met**)" in crossover_report.time_verdicts(new)[0]
    # the τ = 1/H, when it is the fastest, is the one judged
    new["cells"][0]["runs"][crossover_grid.DOWN_H] = {"reached": True, "time": 14.0, "rounds": 235}
    new["cells"][0].update(crossover.summarize(new["cells"][0], 300.0))
    assert "0.14 × GD (goal ≤ 0.15: **met**)" in crossover_report.time_verdicts(new)[0]


def test_the_figure_has_a_colour_for_every_method_as_winner(tmp_path):
    """Each method of the table (and none) can win a cell of the figure (a ninth method once had no colour)."""
    labels = [m[0] for m in crossover_grid.METHODS] + [None]
    res = {"cells": [{"H": 16, "d_label": f"d{i}", "link": "100mbit", "winner": w, "is_gd": None}
                     for i, w in enumerate(labels)]}
    assert Path(crossover_report.plot(res, str(tmp_path / "map.png"))).stat().st_size > 0


def test_grid_from_the_command_line():
    g = crossover_grid.grid_from(crossover_grid.DEFAULT, H="4,8", d="1e4,1e5", links="10mbit,10:1 asym",
                                 named="w8a@100mbit", cap=90)
    assert g.H == (4, 8) and g.d == (10_000, 100_000) and g.links == ("10mbit", "10:1 asym")
    assert g.named == (("w8a", "100mbit"),) and g.cap == 90.0 and g.skip == ()
    assert crossover_grid.grid_from(crossover_grid.DEFAULT, cap=90).skip == crossover_grid.DEFAULT.skip
    with pytest.raises(SystemExit, match="--links"):
        crossover_grid.grid_from(crossover_grid.DEFAULT, links="56kbit")
    picked = crossover_grid.grid_from(crossover_grid.TIME, methods=f"GD; {crossover_grid.DOWN_H}")
    assert picked.methods == ("GD", crossover_grid.DOWN_H) and picked.runs("GD", "100mbit")
    assert not picked.runs(crossover_grid.DOWN, "100mbit")
    with pytest.raises(SystemExit, match="--methods: labels separated by ';'.*got 'ISEGA'"):
        crossover_grid.grid_from(crossover_grid.TIME, methods="GD;ISEGA")
    assert crossover_grid.d_label(100_000) == "1e5" and crossover_grid.d_label(3000) == "3000"


def _lambda_map():
    """Two cells of the λ axis at 10 Mbit symmetric (λ = 1e-2, not judged; 1e-3, judged) and one at 10:1."""
    def cell(lam, link, gd, down, down_h):
        c = {"H": 4, "d_label": "1e4", "link": link, "lam": lam, "kappa": 0.25 / lam, "N": 20000,
             "load_before": "0.5", "load_after": "0.6",
             "runs": {"GD": {"reached": True, "time": gd, "rounds": 500},
                      crossover_grid.DOWN: {"reached": True, "time": down, "rounds": 520},
                      crossover_grid.DOWN_H: {"reached": True, "time": down_h, "rounds": 390}},
             "planner": {"methods": {crossover_grid.DOWN_H: {
                 "covered": True, "round_s": 0.02, "latency_s": 0.004, "up_s": 0.002, "down_s": 0.008,
                 "compute_s": 0.006, "iterations": 390, "ratio": 1.1, "within": True, "predicted_s": 7.7,
                 "measured_s": 7.0}, "GD": {"covered": True, "round_s": 0.14, "latency_s": 0.004, "up_s": 0.064,
                                            "down_s": 0.064, "compute_s": 0.008, "iterations": 500, "ratio": 0.7,
                                            "within": False, "predicted_s": 50.0, "measured_s": 70.0}}}}
        c.update(crossover.summarize(c, 900.0))
        return c
    return {"grid": {"cap": 900.0, "lams": [1e-2, 1e-3]}, "load_before": "0.5", "load_after": "0.9",
            "cells": [cell(1e-2, "10mbit", 10.0, 14.0, 9.0), cell(1e-3, "10mbit", 70.0, 12.0, 7.0),
                      cell(1e-3, "10:1 asym", 30.0, 12.0, 8.0)]}


def test_lambda_verdicts_judge_the_byte_bound_cells_at_small_lambda():
    """Only the 10 Mbit symmetric cell at λ ≤ 1e-3 is judged, by the faster ISEGA (τ = 2/n here: 7 ÷ 70 = 0.1 ≤
    0.15), with its round's split and the largest part named; the planner's count is over every compared pair."""
    v = crossover_report.lambda_verdicts(_lambda_map())
    assert len(v) == 2 and v[0].startswith("λ = 0.001 (κ ≈ 250), 10mbit, H = 4: ")
    assert "the faster is 0.1 × GD (goal ≤ 0.15: **met**)" in v[0]
    assert "its round 20.0 ms = floor 4.0 + up 2.0 + down 8.0 + compute 6.0 (the largest part, bytes, keeps it" in v[0]
    assert "against GD's 140.0 ms" in v[0]
    assert v[1].startswith("the planner's predicted time within ±25% of the measured in 3 of 6 (method, cell) pairs "
                           "(50 %; goal ≥ 90 %: **not met**)")
    lines = "\n".join(crossover_report.report({**_lambda_map(), "eps": 1e-6, "workers_per_host": 2,
                                               "aggregate": "host", "grid": {"cap": 900.0, "H": [4], "d": [10000],
                                                                             "rows": 20000, "links": ["10mbit"],
                                                                             "named": [], "lams": [1e-2, 1e-3]}}))
    assert "| 4 | 1e4, λ=0.001 (κ≈250) | 20000 | 10mbit |" in lines and "λ ∈ {0.01, 0.001}" in lines


def test_splice_lambda_replaces_its_section_and_leaves_the_rest(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# B\n\n- **9. x**: a\n- **12. The map**: measured\n\n## 9. x\n\nnine\n\n## 12. The map\n\ntwelve\n\n"
                   "### The time check\n\nchecked\n\n## 13. y\n\nthirteen\n")
    res = {**_lambda_map(), "eps": 1e-6, "workers_per_host": 2, "aggregate": "host",
           "grid": {"cap": 900.0, "H": [4], "d": [10000], "rows": 20000, "links": ["10mbit"], "named": [],
                    "lams": [1e-2, 1e-3]}}
    crossover.splice_lambda(res, doc, None)
    first = doc.read_text()
    crossover.splice_lambda(res, doc, None)   # again: one section, one verdict on the goal line
    text = doc.read_text()
    assert text == first and text.count(crossover.LAMBDA_HEADING) == 1 and text.count("; λ axis: ") == 1
    assert text.index("checked") < text.index(crossover.LAMBDA_HEADING) < text.index("## 13. y")
    assert "nine" in text and "thirteen" in text and "**met**" in text.split("\n")[3]


def test_grid_from_lambda():
    g = crossover_grid.grid_from(crossover_grid.LAMBDA, lams="1e-3,1e-4")
    assert g.lams == (1e-3, 1e-4) and g.links == crossover_grid.LAMBDA.links
    with pytest.raises(SystemExit, match="--lam"):
        crossover_grid.grid_from(crossover_grid.LAMBDA, lams="0,1e-3")
