"""`tfcompress benchmark` through tfcompress.cli.main: table, --json keys, reports, exit codes."""

from __future__ import annotations

import json

import pytest
from _bench_artifacts import build, runnable_backends

from tfcompress.bench import rows as harness_rows
from tfcompress.cli import main

FAST = ["--runs", "3", "--min-seconds", "0", "--warmup-seconds", "0"]
ROW_KEYS = {"artifact", "backend", "threads", "batch", "status", "size_bytes", "gzip_bytes"}
ROW_KEYS |= {"init_ms", "latency_ms", "throughput_per_s", "accuracy"}


@pytest.fixture(scope="module")
def files(trained_cnn, int8_result, mnist_split):
    return build(trained_cnn, int8_result, mnist_split)


def test_json_output(files, model_files, capsys):
    code = main(
        [
            "benchmark",
            str(files["float32"]),
            str(files["int8"]),
            "--data",
            str(model_files["test"]),
            "--backends",
            "cpu,edgetpu",
            "--threads",
            "1,2",
            "--batch-sizes",
            "1,8",
            "--json",
            *FAST,
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    assert {"environment", "rows", "schema_version"} <= set(payload)
    ok = [r for r in payload["rows"] if r["status"] == "ok"]
    # 2 artifacts x the backends that run each here x 2 threads x 2 batches (8 without an
    # Edge TPU, 16 with one).
    runnable = {
        p.name: runnable_backends(p, ("cpu", "edgetpu")) for p in (files["float32"], files["int8"])
    }
    assert len(ok) == sum(len(found) for found in runnable.values()) * 2 * 2
    for row in ok:
        assert set(row) >= ROW_KEYS
        assert set(row["latency_ms"]) >= {"mean", "std", "min", "p50", "p90", "p99", "max"}
        assert row["accuracy"] > 0.85
    edgetpu = [r for r in payload["rows"] if r["backend"] == "edgetpu"]
    assert edgetpu  # a row per artifact either way: measured, or why not
    for row in edgetpu:
        if "edgetpu" in runnable[row["artifact"]]:
            assert row["status"] == "ok"
        else:
            assert row["status"].startswith("unavailable: ") and "libedgetpu" in row["status"]


def test_table_and_reports(files, tmp_path, capsys):
    report = tmp_path / "report"
    code = main(["benchmark", str(files["int8"]), "--report", str(report), *FAST])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "cnn_int8.tflite" in captured.out and "p50 ms" in captured.out
    assert (report / "benchmark.json").is_file() and (report / "benchmark.csv").is_file()
    assert (report / "benchmark.md").is_file()


def test_existing_report_needs_force(files, tmp_path, capsys, monkeypatch):
    """One rule for every output: an existing report is replaced only with --force."""
    report = tmp_path / "report"
    assert main(["benchmark", str(files["int8"]), "--report", str(report), *FAST]) == 0
    capsys.readouterr()
    before = (report / "benchmark.json").read_bytes()
    timed = []
    real_measure = harness_rows._measure  # in this process, whichever process times

    def counting_measure(*args, **kwargs):
        timed.append(1)
        return real_measure(*args, **kwargs)

    monkeypatch.setattr(harness_rows, "_measure", counting_measure)
    code = main(["benchmark", str(files["int8"]), "--report", str(report), "--json", *FAST])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("tfcompress benchmark: error: ")
    assert "already holds benchmark.json" in line and "--force" in line
    assert timed == []  # refused before anything was timed
    assert (report / "benchmark.json").read_bytes() == before
    code = main(["benchmark", str(files["int8"]), "--report", str(report), "--force", *FAST])
    assert code == 0, capsys.readouterr().err
    assert timed  # measured this time, and the report replaced
    assert (report / "benchmark.json").read_bytes() != before


def test_corrupt_artifact_exits_2_with_one_line_and_no_output(files, capsys):
    code = main(["benchmark", str(files["int8"]), str(files["corrupt"]), "--json", *FAST])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("tfcompress benchmark: error: ") and "corrupt.tflite" in line


def test_failed_row_exits_2_but_keeps_other_rows(files, capsys):
    code = main(["benchmark", str(files["int8"]), str(files["unresolved"]), "--json", *FAST])
    captured = capsys.readouterr()
    assert code == 2
    statuses = {r["artifact"]: r["status"] for r in json.loads(captured.out)["rows"]}
    assert statuses["cnn_int8.tflite"] == "ok"
    assert statuses["unresolved_op.tflite"].startswith("error: ")
    (line,) = captured.err.strip().splitlines()
    assert "1 of 2 rows could not be measured" in line and "NotARealOp" in line


@pytest.mark.parametrize(
    "argv",
    [["--backends", "tpu"], ["--threads", "0"], ["--batch-sizes", "x"], ["--min-seconds", "-1"]],
)
def test_bad_usage_exits_2(files, capsys, argv):
    assert main(["benchmark", str(files["int8"]), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error" in captured.err
