"""A run on rows left on a Dask cluster, made twice: once as it is and once with the Dask worker holding the last
host's rows killed (kill -9) at a given record; the recovery must give the same iterates (test_estimators_dask,
test_files)."""

import os
import signal

import numpy as np


def same_iterates_with_a_host_killed(make_rows, spec_of, *, at: int, max_iter: int, log_every: int,
                                     snapshot_every: int) -> list:
    """Run the setup of ``spec_of(rows)`` on the rows ``make_rows(client)`` gives (a DaskRows), on a LocalCluster of
    2 worker processes, without and then with kill -9 of the last host's worker at record ``at``; check that the lost
    host was recovered once (its workers and its RowsHost) and that the iterates and the records' objective are the
    same to the bit. Returns the two rows' plans."""
    from distributed import Client, LocalCluster

    from isparse.engines.dask import DaskPool
    from isparse.runsetup import build

    runs, plans = [], []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for kill in (False, True):
            rows = make_rows(client)
            plans.append(rows.plan)
            setup = build(spec_of(rows), problem=rows.problem)
            pool = DaskPool(client, *setup.pool_args(), source=rows, snapshot_every=snapshot_every, worker_timeout=30)
            victim = sorted(rows.plan)[-1]
            pid = client.run(os.getpid, workers=[victim])[victim]

            def observer(rec, kill=kill):
                if kill and rec["step"] == at:
                    os.kill(pid, signal.SIGKILL)

            runs.append(setup.run(pool, max_iter=max_iter, tol=0, keep_iterates=True, log_every=log_every,
                                  observer=observer))
            assert (pool.restarts, rows.problem.hosts.remade) == ((1, 1) if kill else (0, 0)), \
                f"kill={kill}: restarts {pool.restarts}, actors remade {rows.problem.hosts.remade}, events {pool.events}"
            pool.close()
            rows.close()
    np.testing.assert_array_equal(np.array(runs[1].iterates), np.array(runs[0].iterates))
    diff = [(a["step"], a["subopt"], b["subopt"]) for a, b in zip(runs[0].records, runs[1].records)
            if a["subopt"] != b["subopt"]]
    assert not diff and len(runs[0].records) == len(runs[1].records), f"records' F - F* differ (step, run, killed run): {diff}"
    return plans
