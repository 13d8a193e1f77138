"""The planner's time model for a link (issue 32 item 6): ``isparse.planning.predict_time`` on numbers computed by hand,
its monotonicity in the rates, host aggregation's byte counts (tau = 1: exactly m values; tau < 1: the union's
expectation against a Monte-Carlo of the project's own sampler), and ``isparse-plan ... plan.link.up=...
plan.link.down=... --json`` run for real (a subprocess, engine=inprocess, a1a) with its bad values refused."""

import collections
import json
import math

import numpy as np
import pytest

from isparse import ConfigError
from isparse.compression.codecs import Dither
from isparse.compression.sampling import BLOCKS, Sampler
from isparse.planning import (STREAM_ROUND_TRIP_S, expected_union_blocks, host_uplink_bytes, predict_setup_time,
                              predict_time, scaled_iterations, workers_per_host)

from test_plan import cli, compose_plan

TERMS = {"latency_s", "up_s", "down_s", "compute_s", "round_s", "iterations", "total_s", "up_bytes_per_host",
         "down_bytes_per_host"}

#: the small case of the hand computations: d = 10 in m = 5 blocks of 2, each worker sends tau m = 2 blocks
#: (tau = 0.4, 4 values), n = 3 workers on H = 2 hosts (2 + 1)
SMALL = dict(d=10, m=5, tau_m=2, n=3, hosts=2)


def test_workers_per_host_as_the_dask_engine_splits():
    assert workers_per_host(3, 2) == [2, 1]
    assert workers_per_host(8, 3) == [3, 3, 2]
    assert workers_per_host(2, 4) == [1, 1, 0, 0]
    with pytest.raises(ValueError):
        workers_per_host(0, 2)


def test_predict_time_by_hand_per_worker_messages():
    """Host 1 carries 2 workers: 2 messages x 4 values x 8 B = 64 B, at 10 kbit/s 0.0512 s; x: 10 x 8 B = 80 B down,
    at 100 kbit/s 0.0064 s; round 0.01 + 0.0512 + 0.0064 + 0.003 = 0.0706 s; 50 rounds 3.53 s."""
    t = predict_time(**SMALL, up_bps=1e4, down_bps=1e5, iterations=50, latency_s=0.01, compute_s=0.003)
    assert t.up_bytes_per_host == pytest.approx(64.0)
    assert t.uplink_bytes_per_round == pytest.approx(96.0)      # + host 2's one message of 32 B
    assert t.down_bytes_per_host == pytest.approx(80.0)
    assert t.up_s == pytest.approx(0.0512) and t.down_s == pytest.approx(0.0064)
    assert t.round_s == pytest.approx(0.0706) and t.total_s == pytest.approx(3.53)
    assert t.workers_per_host == 2 and t.aggregate == "worker"


def test_predict_time_by_hand_host_aggregation():
    """Aggregated, host 1 sends one message on the union of its 2 masks: each block is in it with probability
    1 - 0.6^2 = 0.64, so 3.2 blocks = 6.4 values = 51.2 B on average (at 10 kbit/s 0.04096 s); host 2's single
    worker sends its 4 values, 32 B."""
    t = predict_time(**SMALL, up_bps=1e4, down_bps=1e5, iterations=50, latency_s=0.01, compute_s=0.003,
                     aggregate="host")
    assert t.up_bytes_per_host == pytest.approx(51.2)
    assert t.uplink_bytes_per_round == pytest.approx(83.2)
    assert t.up_s == pytest.approx(0.04096)
    assert t.total_s == pytest.approx(50 * (0.01 + 0.04096 + 0.0064 + 0.003))


def test_predict_time_token_bucket_burst():
    """A token bucket (rate, burst): the first burst bytes of each round's message cross at line speed. Host 1's 64 B
    less a 16 B burst at 10 kbit/s: 48 x 8 / 1e4 = 0.0384 s; x's 80 B under a 100 B burst: 0 s. A negative burst
    is refused."""
    t = predict_time(**SMALL, up_bps=1e4, down_bps=1e5, iterations=50, latency_s=0.01, compute_s=0.003,
                     up_burst_bytes=16, down_burst_bytes=100)
    assert t.up_s == pytest.approx(0.0384) and t.down_s == 0.0
    assert t.up_bytes_per_host == pytest.approx(64.0)              # the bytes sent are the same: only their time
    assert t.total_s == pytest.approx(50 * (0.01 + 0.0384 + 0.003))
    with pytest.raises(ValueError, match="burst"):
        predict_time(**SMALL, up_bps=1e4, down_bps=1e5, iterations=1, latency_s=0.0, compute_s=0.0,
                     up_burst_bytes=-1)


def _token_bucket_period(base_s: float, message_bytes: float, rate_Bps: float, burst_bytes: float,
                         rounds: int = 2000) -> float:
    """The steady period of rounds of ``base_s`` seconds off the link, then one message through a token bucket
    (refilled at the rate up to the burst, a message sent with the tokens it finds, the rest at the rate), simulated
    round by round: an independent count of what the model's max(sum, rate) claims."""
    tokens, t, times = burst_bytes, 0.0, []
    for _ in range(rounds):
        tokens = min(burst_bytes, tokens + base_s * rate_Bps)
        send = max(message_bytes - tokens, 0.0) / rate_Bps
        tokens = max(tokens - message_bytes, 0.0)   # spent; the rest of the message takes what refills while it goes
        t += base_s + send
        times.append(t)
    return (times[-1] - times[rounds // 2]) / (rounds - 1 - rounds // 2)


@pytest.mark.parametrize("base_s", [0.002, 0.005, 0.0064, 0.02])
def test_predict_time_rate_floor_is_a_token_buckets_steady_state(base_s):
    """A shaped link carries no more than its rate a round: where the round's other terms are shorter than the
    bucket takes to refill, the message waits for tokens, and the round is the bytes at the rate, whatever the
    burst. 10 kB a round through 10 Mbit/s with an 8 kB bucket (the emulator's at 10 Mbit): 8 ms a round at least,
    as the bucket simulated round by round gives, both below (2, 5 ms of other work) and above (6.4, 20 ms) the
    refill time."""
    d = m = 1250                                                   # x: 1250 values x 8 B = 10 kB down
    t = predict_time(d=d, m=m, tau_m=1, n=1, hosts=1, up_bps=1e9, down_bps=1e7, iterations=100, latency_s=base_s,
                     compute_s=0.0, up_burst_bytes=8, down_burst_bytes=8000)
    assert t.rate_s == pytest.approx(10_000 * 8 / 1e7)
    assert t.round_s == pytest.approx(_token_bucket_period(base_s, 10_000, 1e7 / 8, 8000), rel=1e-6)
    assert t.round_s == pytest.approx(max(base_s + 2000 * 8 / 1e7, 0.008))


def test_round_trip_by_how_the_rounds_travel():
    """The round trip an in-process floor gets: the streams' (item 2: 0.57 ms) below the actors' (3.5 ms); a name
    that is neither is refused."""
    from isparse.planning import ROUND_TRIP_S, round_trip_for

    assert round_trip_for("stream") == STREAM_ROUND_TRIP_S < round_trip_for("actor") == ROUND_TRIP_S
    with pytest.raises(ValueError, match="stream"):
        round_trip_for("carrier pigeon")


def test_predict_time_start_is_paid_once():
    """The run's start (its first rounds beyond steady ones) is added once to iterations x round; a negative start
    is refused."""
    common = dict(**SMALL, up_bps=1e4, down_bps=1e5, latency_s=0.01, compute_s=0.003)
    for iterations in (1, 50):
        t = predict_time(**common, iterations=iterations, start_s=0.25)
        assert t.total_s == pytest.approx(0.25 + iterations * t.round_s) and t.start_s == 0.25
    with pytest.raises(ValueError, match="start_s"):
        predict_time(**common, iterations=1, start_s=-0.1)


def test_predict_time_slowest_host_link_counts():
    """One rate per host: host 2 sends half host 1's bytes (32 B) but on a 1 kbit/s link, 0.256 s > host 1's 0.0512 s."""
    t = predict_time(**SMALL, up_bps=[1e4, 1e3], down_bps=[1e5, 1e5], iterations=1, latency_s=0.0, compute_s=0.0)
    assert t.up_s == pytest.approx(0.256)
    with pytest.raises(ValueError):
        predict_time(**SMALL, up_bps=[1e4], down_bps=1e5, iterations=1, latency_s=0.0, compute_s=0.0)
    with pytest.raises(ValueError):
        predict_time(**SMALL, up_bps=0.0, down_bps=1e5, iterations=1, latency_s=0.0, compute_s=0.0)


def test_codec_bits_by_hand():
    """dither with s = 7: 32 bits of norm per message + 4 bits per value. Per worker: 2 messages x (32 + 16) bits =
    12 B; aggregated: one message of 6.4 values on average, 32 + 25.6 bits = 7.2 B."""
    codec = Dither(7)
    assert host_uplink_bytes(10, 5, 2, 2, "worker", codec=codec) == pytest.approx(12.0)
    assert host_uplink_bytes(10, 5, 2, 2, "host", codec=codec) == pytest.approx(7.2)
    assert host_uplink_bytes(10, 5, 2, 2, "host", send_ids=True) == pytest.approx(51.2 + 3.2 * 4)   # + 3.2 ids x 4 B


@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_tau_one_aggregated_host_sends_m_values(k):
    """tau = 1 (no draw, no ids): an aggregating host sends exactly its one sum of d = m values (blocks of 1),
    whatever its k workers; per worker it sends k of them."""
    m = 37
    assert host_uplink_bytes(m, m, m, k, "host", send_ids=True) == m * 8.0
    assert host_uplink_bytes(m, m, m, k, "worker", send_ids=True) == k * m * 8.0
    t = predict_time(d=m, m=m, tau_m=m, n=4 * k, hosts=4, up_bps=8e3, down_bps=8e3, iterations=1, latency_s=0,
                     compute_s=0, aggregate="host")
    assert t.up_bytes_per_host == m * 8.0 and t.up_s == pytest.approx(m * 8 * 8 / 8e3)


@pytest.mark.parametrize("m, tau_m, k", [(40, 4, 3), (123, 31, 4), (10, 1, 8), (50, 49, 2)])
def test_union_expectation_against_the_sampler(m, tau_m, k):
    """The mean union size of k workers' masks drawn by isparse.compression.sampling (independent tau m-nice samplings,
    the ids of the workers of one host) over 3000 iterations is within 3 standard errors of m (1 - (1 - tau)^k)."""
    sampler = Sampler(12345)
    sizes = np.array([np.unique(sampler.subsets(BLOCKS, np.arange(3, 3 + k), t, m, tau_m)).size
                      for t in range(3000)], dtype=float)
    expected = expected_union_blocks(m, tau_m, k)
    se = sizes.std(ddof=1) / math.sqrt(sizes.size)
    assert abs(sizes.mean() - expected) <= 3 * se + 1e-12, (sizes.mean(), expected, se)
    assert expected == pytest.approx(m * (1 - (1 - tau_m / m) ** k))


def test_halving_the_up_rate_never_decreases_the_time():
    """Over a grid of sizes, tau, hosts, aggregation and codecs (random rates per host): halving every uplink rate
    (or host's alone) never gives a shorter predicted time, and the uplink term exactly doubles."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        m = int(rng.integers(1, 200))
        d = m * int(rng.integers(1, 4))
        tau_m = int(rng.integers(1, m + 1))
        n, hosts = int(rng.integers(1, 20)), int(rng.integers(1, 8))
        up = rng.uniform(1e5, 1e9, hosts)
        common = dict(d=d, m=m, tau_m=tau_m, n=n, hosts=hosts, down_bps=float(rng.uniform(1e5, 1e9)),
                      iterations=float(rng.uniform(1, 1e4)), latency_s=float(rng.uniform(0, 0.01)),
                      compute_s=float(rng.uniform(0, 0.01)), aggregate=str(rng.choice(["worker", "host"])),
                      codec=[None, Dither(7)][int(rng.integers(0, 2))])
        base = predict_time(up_bps=up, **common)
        halved = predict_time(up_bps=up / 2, **common)
        assert halved.total_s >= base.total_s
        assert halved.up_s == pytest.approx(2 * base.up_s)
        one = up.copy()
        one[int(rng.integers(0, hosts))] /= 2
        assert predict_time(up_bps=one, **common).total_s >= base.total_s


def test_scaled_iterations():
    assert scaled_iterations(300.0, 600.0, 200) == pytest.approx(100.0)
    with pytest.raises(ValueError):
        scaled_iterations(300.0, math.inf, 200)


@pytest.mark.needs_data
def test_predict_setup_time_reads_the_configuration():
    """Of a built a1a run (d = 123, blocks of 1, n = 4, tau = 31/123) on 2 hosts at 1 Mbit/s up, 10 Mbit/s down:
    each host sends 2 x 31 x 8 B = 496 B (3.968 ms) and gets 984 B (0.7872 ms); given 100 iterations, 1 ms of
    latency and 0.5 ms of compute, 100 x 6.2552 ms."""
    from conftest import DATA_DIR
    from isparse import load_dataset
    from specs import make

    setup = make("isega", data=load_dataset("a1a", data_dir=str(DATA_DIR)), n=4, tau="31/m", lam=0.3, block_size=1)
    t = predict_setup_time(setup, hosts=2, up_bps=1e6, down_bps=1e7, latency_s=1e-3, compute_s=5e-4, iterations=100)
    assert t.up_bytes_per_host == pytest.approx(496.0) and t.down_bytes_per_host == pytest.approx(984.0)
    assert t.total_s == pytest.approx(100 * (1e-3 + 3.968e-3 + 0.7872e-3 + 5e-4))
    bound = predict_setup_time(setup, hosts=2, up_bps=1e6, down_bps=1e7, latency_s=1e-3, compute_s=5e-4, tol=1e-4)
    half = predict_setup_time(setup, hosts=2, up_bps=1e6, down_bps=1e7, latency_s=1e-3, compute_s=5e-4, tol=1e-4,
                              reference=(2.0, 1.0))
    assert 0 < half.iterations == pytest.approx(bound.iterations / 2)


@pytest.mark.needs_data
def test_plan_cli_with_a_link(tmp_path):
    """isparse-plan with plan.link.* and --json (a subprocess, engine=inprocess, a1a d = 123, n = 4 on
    cluster.n_workers = 2 hosts): every row holds the terms; its uplink term is the hand count of its bytes at
    10 Mbit/s (2 workers x tau m values x 8 B), its downlink x (123 x 8 B) at 100 Mbit/s; the round is the sum of
    the terms, the total the run's start + the calibrated iterations x the round, the recommendation the argmin of
    the totals."""
    proc = cli(tmp_path, "isparse-plan", "--json", "data=a1a", "problem.lam=0.3", "workers.n=4", "tol=1e-4",
               "engine=inprocess", "cluster.n_workers=2", "progress=false", "plan.taus=[1/n,1]", "plan.rounds=4",
               "plan.repeats=1", "plan.link.up=10mbit", "plan.link.down=100mbit", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = json.loads(proc.stdout)
    link = plan["link"]
    assert (link["up_bps"], link["down_bps"], link["hosts"], link["workers_per_host"]) == (1e7, 1e8, 2, 2)
    # engine=inprocess over the default cluster.rounds=stream: the floor holds a stream round trip (0.57 ms)
    assert link["latency_s"] >= STREAM_ROUND_TRIP_S and link["calibration"]["converged"]
    assert "cluster.rounds=stream" in link["latency_source"]
    assert {r["tau_m"] for r in plan["rows"]} == {31, 123}
    for r in plan["rows"]:
        t = r["link"]
        assert TERMS <= set(t)
        assert t["up_bytes_per_host"] == pytest.approx(2 * r["tau_m"] * 8.0)
        assert t["up_s"] == pytest.approx(2 * r["tau_m"] * 8 * 8 / 1e7)
        assert t["down_s"] == pytest.approx(123 * 8 * 8 / 1e8)
        assert t["round_s"] == pytest.approx(t["latency_s"] + t["up_s"] + t["down_s"] + t["compute_s"])
        assert t["rate_s"] == pytest.approx(max(2 * r["tau_m"] * 8 * 8 / 1e7, 123 * 8 * 8 / 1e8))   # below the sum
        assert t["iterations"] == pytest.approx(r["predicted_iterations"] * link["calibration"]["scale"])
        assert t["start_s"] == link["start_s"] >= 0.0
        assert r["predicted_time_s"] == pytest.approx(t["start_s"] + t["iterations"] * t["round_s"])
        assert r["predicted_uplink_bytes"] == pytest.approx(t["iterations"] * r["uplink_bytes_per_round"])
    assert plan["recommended"]["predicted_time_s"] == min(r["predicted_time_s"] for r in plan["rows"])


def test_plan_cli_bad_link_rate(tmp_path):
    """A bad rate is one line on stderr naming plan.link.up and the allowed form, exit status 2, before any work."""
    proc = cli(tmp_path, "isparse-plan", "engine=inprocess", "plan.link.up=10mbps", "plan.link.down=100mbit",
               timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == ["isparse-plan: error: The 'plan.link.up' parameter must be a tc rate: a positive number "
                     "followed by kbit, mbit or gbit (e.g. 10mbit, 2.5mbit, 1gbit); got '10mbps'."]
    assert not (tmp_path / "cache").exists()


RATE = "a tc rate: a positive number followed by kbit, mbit or gbit (e.g. 10mbit, 2.5mbit, 1gbit)"


@pytest.mark.parametrize("overrides, key, text", [
    (["plan.link.up=0mbit", "plan.link.down=1gbit"], "plan.link.up",
     f"The 'plan.link.up' parameter must be {RATE}; got '0mbit'."),
    (["plan.link.up=10mbit"], "plan.link.down",
     f"The 'plan.link.down' parameter must be {RATE} when plan.link.up is set (the link model needs both "
     f"directions); got None."),
    (["plan.link.up=[10mbit,1mbit,1mbit]", "plan.link.down=1gbit", "cluster.n_workers=2"], "plan.link.up",
     "The 'plan.link.up' parameter must be one rate or a list of H = 2 rates (one per host, H the cluster's "
     "workers); got 3."),
    (["plan.link.up=1gbit", "plan.link.down=1gbit", "plan.link.latency=-1"], "plan.link.latency",
     "The 'plan.link.latency' parameter must be null or in [0, inf); got -1."),
    (["plan.link.up=1gbit", "plan.link.down=1gbit", "plan.link.burst=-8"], "plan.link.burst",
     "The 'plan.link.burst' parameter must be in [0, inf); got -8."),
])
def test_plan_bad_link_values_named(tmp_path, overrides, key, text):
    """Each bad plan.link.* value names its key and the allowed form (in process: the checks of the CLI above)."""
    from composing import check_command
    from pipeline.plan import plan_job

    overrides = [f"paths.outputs={tmp_path}", "engine=inprocess", *overrides]
    with pytest.raises(ConfigError) as err:
        check_command(overrides, config_name="plan")
        plan_job(compose_plan(overrides))
    assert err.value.key == key and str(err.value) == text


def test_measure_round_terms_in_process():
    """A short in-process run of a small problem: the floor is at least the round trip added, one worker's compute
    is positive, and the busiest host's compute is it x ceil(n / H) (n = 4: x 4 on one host, x 2 on 2 or 3)."""
    from isparse.planning import ROUND_TRIP_S, measure_round_terms
    from specs import make

    setup = make("isega", n=4, tau="auto")
    terms = measure_round_terms(setup, rounds=10, log_every=5)
    assert terms.rounds == 10 and terms.latency_s >= ROUND_TRIP_S and terms.compute_per_worker_s > 0
    assert terms.compute_s(4, 1) == pytest.approx(4 * terms.compute_per_worker_s)
    assert terms.compute_s(4, 3) == pytest.approx(2 * terms.compute_per_worker_s)
    bare = measure_round_terms(setup, rounds=10, log_every=5, round_trip_s=0.0)
    assert 0 <= bare.latency_s < ROUND_TRIP_S


def test_measure_round_terms_on_a_dask_pool(dask_client):
    """On a real DaskPool (n = 4 on the LocalCluster's 2 workers, 2 a host) with no round trip added: the floor is
    a real round's (at least the in-process floor + 0.5 ms: a Dask round trip costs 3-5 ms here), one worker's
    compute is the slowest host's / 2, the start of a fresh pool more than a round, and the run leaves the pool's
    iterates the in-process ones."""
    from isparse.engines.dask import DaskPool
    from isparse.planning import measure_round_terms
    from specs import make

    setup = make("isega", n=4, tau="auto")
    inproc = measure_round_terms(setup, rounds=10, log_every=5, round_trip_s=0.0)
    pool = DaskPool(dask_client, *setup.pool_args())
    try:
        assert sorted(collections.Counter(pool.placement.values()).values()) == [2, 2]
        before = pool.timing["compute_s"]
        terms = measure_round_terms(setup, rounds=10, log_every=5, round_trip_s=0.0, pool=pool)
        whole = (pool.timing["compute_s"] - before) / 15          # 5 warm-up + 10 timed rounds
    finally:
        pool.close()
    assert terms.rounds == 10 and terms.latency_s >= inproc.latency_s + 5e-4
    assert 0 < terms.compute_per_worker_s and terms.compute_s(4, 2) == pytest.approx(2 * terms.compute_per_worker_s)
    assert terms.compute_s(4, 2) == pytest.approx(whole, rel=1.0)     # the timed rounds' share of the same counter
    # a fresh pool's first rounds set up its exchange (the hosts' states, the streams): more than a steady round
    assert terms.start_s > terms.latency_s + terms.compute_s(4, 2)


def _strict(text):
    """The JSON, refusing NaN and Infinity (which strict JSON does not have)."""
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.needs_data
@pytest.mark.parametrize("algorithm, messages", [
    ("gd", ["messages.downlink=natural7"]),                              # plan.taus=[auto]: GD's own tau, 1
    ("isega", ["messages.codec=natural7", "messages.downlink=natural7"]),  # natural7 both ways, at its own step
    ("diana", []),                                                       # no theorem: its rounds are measured
])
def test_plan_every_method_with_its_own_downlink(tmp_path, algorithm, messages):
    """isparse-plan --json with a link for GD, ISEGA with natural7 both ways and DIANA (issue 49's audit): no error,
    strict JSON, each row costed with its own downlink (natural7: 1 B a value down, against x's 8 B), and where the
    theory gives no count (DIANA; a compressed downlink above the EF21-P bound's step) the row's iterations are the
    rounds of one in-process run of it to tol, unscaled by the calibration."""
    proc = cli(tmp_path, "isparse-plan", "--json", "data=a1a", "problem.lam=0.3", "workers.n=4", "tol=1e-4",
               "engine=inprocess", "cluster.n_workers=2", "progress=false", "plan.taus=[auto]", "plan.rounds=4",
               "plan.repeats=1", "plan.link.up=30mbit", "plan.link.down=300mbit", f"algorithm={algorithm}", *messages,
               timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    plan = _strict(proc.stdout)
    downlink = "natural7" if "messages.downlink=natural7" in messages else "float64"
    assert plan["downlink"] == downlink and plan["link"]["compute"] == "parallel"   # engine=inprocess: real hosts
    (row,) = plan["rows"]
    assert row["tau_m"] == (123 if algorithm == "gd" else 31)   # GD's own tau is 1; the others' auto is 1/n
    down = row["link"]["down_bytes_per_host"]
    assert (down < 123 * 8 / 4) if downlink == "natural7" else down == pytest.approx(123 * 8)
    cal = plan["link"]["calibration"]
    if algorithm == "gd":   # at GD's own step the EF21-P bound does not apply: no count, measured
        assert row["iterations_source"] == "measured" and "EF21-P" in row["bound_theorem"]
    if row["iterations_source"] == "measured":
        assert cal["bound_iterations"] is None and cal["converged"]
        assert row["predicted_iterations"] == cal["measured_rounds"] == row["link"]["iterations"]
    else:
        assert row["link"]["iterations"] == pytest.approx(row["predicted_iterations"] * cal["scale"])
    assert plan["recommended"]["tau_m"] == row["tau_m"]


@pytest.mark.parametrize("overrides, compute", [
    (["engine=inprocess"], "parallel"), (["engine=dask", "cluster=local"], "shared"),
    (["engine=dask", "cluster=local", "plan.link.compute=parallel"], "parallel"),
    (["engine=inprocess", "plan.link.compute=shared"], "shared"),
])
def test_hosts_compute_parallel_or_shared(tmp_path, overrides, compute):
    """plan.link.compute: auto is shared for hosts on this machine (engine=dask, cluster=local) and parallel
    otherwise; n = 6 workers on H = 3 hosts at 1 ms each: parallel waits for the busiest host's 2 ms, shared for
    the 6 ms of work over min(3, 2 cores) = 2 cores, 3 ms."""
    from pipeline.plan import _LinkModel
    from pipeline.schema import PlanConfig, load_job

    job = load_job(compose_plan([f"paths.outputs={tmp_path}", "workers.n=6", "cluster.n_workers=3",
                                 "plan.link.up=10mbit", "plan.link.down=10mbit", *overrides]), PlanConfig)
    link = _LinkModel(job, 6)
    link.cores, link.taus, link.per_worker = 2, [0.1, 1.0], [1e-3, 1e-3]
    assert link.compute == compute
    assert link.compute_s(0.5, offset_s=1e-4) == pytest.approx((2e-3 if compute == "parallel" else 3e-3) + 1e-4)
