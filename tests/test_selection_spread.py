"""``select --scheduler``: candidates submitted together spread over the free Dask workers.

Two in-budget candidates once trained one after the other on one worker of a two-worker
cluster while the other stayed idle. The runner now sends each task to the worker with the
fewest of its tasks in flight, and a task's large arrays travel once to every worker (as
futures), so no task is pinned to the worker that holds its data; the report says which
worker measured and which trained each candidate.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tfcompress.selection.executors import SHARE_BYTES, Runner


def _where(task: dict) -> dict:
    from distributed import get_worker

    started = time.time()
    time.sleep(1.0)  # long enough that a second task on the same worker would have to wait
    return {
        "worker": get_worker().address,
        "images": type(task["x_train"]).__name__,
        "total": float(task["x_train"].sum()),
        "started": started,
    }


def test_tasks_submitted_together_run_on_different_workers_with_the_data_sent_once():
    distributed = pytest.importorskip("distributed")
    import dask

    images = np.ones((SHARE_BYTES // 4 + 1,), np.float32)  # just over the sharing size
    # Dask's active memory manager drops replicas no task needs any more (every 2 s): the
    # copies are counted below, after the tasks, so it stays off for this cluster.
    amm = {"distributed.scheduler.active-memory-manager.start": False}
    with (
        dask.config.set(amm),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        client.wait_for_workers(2)
        runner = Runner(client)
        futures = [runner.submit(_where, {"x_train": images, "i": i}) for i in range(2)]
        answers = [future.result() for future in runner.as_completed(futures)]
        assert {a["worker"] for a in answers} == set(client.scheduler_info()["workers"])
        assert abs(answers[0]["started"] - answers[1]["started"]) < 0.9  # side by side
        assert all(a["images"] == "ndarray" and a["total"] == images.size for a in answers)
        # the images were scattered once, to both workers, and both tasks used that copy
        held = client.has_what()
        shared = [key for key, keys in held.items() for key in keys if "ndarray" in str(key)]
        assert len(shared) == 2 and len(set(shared)) == 1, held
        runner.close()


def test_the_report_says_which_worker_measured_and_trained_each_candidate():
    from tfcompress.selection.budgets import Budgets
    from tfcompress.selection.report import HEADER, table_rows
    from tfcompress.selection.result import CandidateRecord, SelectionResult

    record = CandidateRecord(
        "m", "mobilenet_v2", 0.35, 32, "trained",
        worker="tcp://127.0.0.1:40001", train_worker="tcp://127.0.0.1:40002",
    )  # fmt: skip
    result = SelectionResult(
        candidates=(record,), pareto=(), best=None, budgets=Budgets(), objective="accuracy"
    )
    [row] = table_rows(result)
    assert row[HEADER.index("measured / trained on")] == "127.0.0.1:40001 / 127.0.0.1:40002"
