"""Reports: versioned JSON schema, CSV, Markdown and PNG plots, written atomically."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tfcompress.bench.environment import capture_environment
from tfcompress.bench.result import BenchmarkResult, BenchmarkRow
from tfcompress.bench.size import SizeInfo
from tfcompress.bench.stats import summarize
from tfcompress.errors import InvalidInputError, MissingDependencyError, OutputExistsError
from tfcompress.report.schema import ROW_KEYS, SCHEMA_VERSION, validate_report
from tfcompress.report.writers import check_report_dir, csv_columns, report_paths


def _result() -> BenchmarkResult:
    size = SizeInfo(1000, 900, 200, 5000, 7, "float32")
    int8 = SizeInfo(300, 280, 200, 5000, 9, "int8")
    rows = []
    for name, info, ms in (("m.tflite", size, [0.004, 0.005]), ("m_int8.tflite", int8, [0.002])):
        for batch, scale in ((1, 1), (8, 6)):
            latency = summarize([s * scale for s in ms])
            rows.append(
                BenchmarkRow(
                    name,
                    "cpu",
                    1,
                    batch,
                    size=info,
                    init_ms=1.0,
                    latency=latency,
                    first_inference_ms=2.0,
                    accuracy=0.9 if "int8" in name else 0.92,
                    process_peak_rss_mb=100.0,
                    rss_growth_mb=12.0,
                    details={"delegated_ops": 5},
                )
            )
    rows.append(
        BenchmarkRow("m.tflite", "edgetpu", None, None, "unavailable: libedgetpu.so.1 not found")
    )
    settings = {"runs": 3, "min_seconds": 0, "warmup_runs": 1, "warmup_seconds": 0}
    return BenchmarkResult(
        tuple(rows),
        capture_environment(),
        settings,
        samples=100,
        reference="m.tflite",
        notes=("a finding",),
    )


def test_json_is_versioned_and_valid(tmp_path):
    result = _result().save(tmp_path, formats=("json",))
    (path,) = result.report_files
    report = json.loads(path.read_text())
    assert report["schema_version"] == SCHEMA_VERSION
    validate_report(report)
    row = report["rows"][0]
    assert set(ROW_KEYS) <= set(row)
    assert set(row["latency_ms"]) == {"runs", "mean", "std", "min", "p50", "p90", "p99", "max"}
    assert report["rows"][-1]["status"].startswith("unavailable: ")
    # Flags may be unknown (null) on a machine no source can read; the source says which.
    environment = report["environment"]
    assert {"cpu_flags", "cpu_flags_source", "int8_dot_product"} <= set(environment)
    assert (environment["cpu_flags"] is None) == (environment["cpu_flags_source"] is None)
    assert row["process_peak_rss_mb"] == 100.0 and row["rss_growth_mb"] == 12.0
    assert "peak_rss_mb" not in row  # renamed in schema 2.0: it is the process's, not the row's


def test_validate_report_rejects_other_versions_and_missing_keys():
    report = _result().to_dict()
    with pytest.raises(InvalidInputError, match="not readable"):
        validate_report({**report, "schema_version": "3.0"})
    with pytest.raises(InvalidInputError, match="not readable"):
        validate_report({**report, "schema_version": "1.0"})  # peak_rss_mb meant the process
    del report["rows"][0]["status"]
    with pytest.raises(InvalidInputError, match=r"rows\[0\]\.status"):
        validate_report(report)


def test_csv_and_markdown(tmp_path):
    result = _result().save(tmp_path, formats=("csv", "md"))
    csv_path, md_path = result.report_files
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert list(rows[0]) == csv_columns()
    assert len(rows) == 5
    assert float(rows[0]["latency_p50_ms"]) == pytest.approx(4.5)
    markdown = md_path.read_text()
    assert "| m_int8.tflite" in markdown and "## Environment" in markdown
    assert "a finding" in markdown and "benchmark_model" in markdown


def test_png_plots(tmp_path):
    pytest.importorskip("matplotlib")
    result = _result().save(tmp_path, formats=("png",))
    names = sorted(p.name for p in result.report_files)
    assert names == ["benchmark_accuracy_latency.png", "benchmark_batch.png", "benchmark_size.png"]
    for path in result.report_files:
        assert path.read_bytes().startswith(b"\x89PNG")
    # The existence check before a benchmark covers exactly the plots plot_all can draw.
    assert sorted(p.name for p in report_paths(tmp_path, ("png",))) == names


def test_existing_report_is_refused_without_overwrite_and_nothing_is_written(tmp_path):
    first = _result().save(tmp_path, formats=("json", "csv", "md"))
    before = {p: p.read_bytes() for p in first.report_files}
    (tmp_path / "benchmark.json").unlink()  # one file gone, two still there
    with pytest.raises(OutputExistsError, match=r"already holds benchmark\.csv, benchmark\.md"):
        _result().save(tmp_path, formats=("json", "csv", "md"))
    # Checked before the first write: no new benchmark.json beside the refused report.
    assert not (tmp_path / "benchmark.json").exists()
    assert all(p.read_bytes() == data for p, data in before.items() if p.exists())
    with pytest.raises(OutputExistsError, match="--force"):
        check_report_dir(tmp_path, formats=("md",))
    replaced = _result().save(tmp_path, formats=("json", "csv", "md"), overwrite=True)
    assert sorted(p.name for p in replaced.report_files) == [
        "benchmark.csv",
        "benchmark.json",
        "benchmark.md",
    ]
    check_report_dir(tmp_path, formats=("png",))  # no plot there: nothing to refuse


def test_a_folder_in_place_of_a_report_file_is_refused_even_with_overwrite(tmp_path):
    (tmp_path / "benchmark.json").mkdir()
    with pytest.raises(OutputExistsError, match="is a directory"):
        _result().save(tmp_path, formats=("json",), overwrite=True)


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    with pytest.raises(MissingDependencyError, match=r"tfcompress\[plot\]"):
        _result().save(tmp_path / "out", formats=("json", "png"))
    assert not (tmp_path / "out" / "benchmark.json").exists()  # nothing half-written


def test_unknown_format_and_file_as_folder(tmp_path):
    with pytest.raises(InvalidInputError, match="unknown report format"):
        _result().save(tmp_path, formats=("pdf",))
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(InvalidInputError, match="is a file"):
        _result().save(target, formats=("json",))


def test_str_is_readable():
    text = str(_result())
    assert "m_int8.tflite" in text and "unavailable" in text and "* a finding" in text


# --- the up-front check is the real check; a late failure leaves nothing -------------------


def test_a_dangling_link_or_an_overlong_name_is_refused_up_front(tmp_path):
    from tfcompress.errors import OutputLocationError

    link = tmp_path / "reports"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(OutputLocationError, match="symbolic link to a missing folder"):
        check_report_dir(link)
    with pytest.raises(OutputLocationError, match="longer than this file system allows"):
        check_report_dir(tmp_path / ("r" * 300))
    with pytest.raises(OutputLocationError, match="longer than this file system allows"):
        check_report_dir(tmp_path / "ok" / ("r" * 300) / "deeper")


def test_a_report_that_fails_midway_takes_back_its_files_and_folder(tmp_path, monkeypatch):
    from tfcompress.report import writers

    calls = []
    publish = writers._publish

    def flaky(staged, path, overwrite):  # the first file takes its name, the second fails
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return publish(staged, path, overwrite)

    monkeypatch.setattr(writers, "_publish", flaky)
    folder = tmp_path / "new" / "reports"
    with pytest.raises(OSError, match="No space"):
        writers.write_report(_result(), folder, formats=("json", "csv", "md"))
    assert not (tmp_path / "new").exists()  # the file, its staging folder and the folders
    # Files that were there before a --force run stay.
    folder.mkdir(parents=True)
    (folder / "benchmark.json").write_text("old")
    calls.clear()
    with pytest.raises(OSError):
        writers.write_report(_result(), folder, formats=("json", "csv", "md"), overwrite=True)
    assert sorted(p.name for p in folder.iterdir()) == ["benchmark.json"]


def test_a_report_appears_whole_after_every_file_is_on_disk(tmp_path, monkeypatch):
    from tfcompress.report import writers

    folder, seen = tmp_path / "reports", []
    publish = writers._publish

    def watching(staged, path, overwrite):
        # When the first name appears, every file's bytes are already written, staged.
        seen.append(sorted(p.name for p in staged.parent.iterdir()))
        return publish(staged, path, overwrite)

    monkeypatch.setattr(writers, "_publish", watching)
    written = writers.write_report(_result(), folder, formats=("json", "csv", "md"))
    assert seen[0] == ["benchmark.csv", "benchmark.json", "benchmark.md"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in written)


def test_cli_reports_into_bad_folders_exit_2_before_any_work(tmp_path, capsys):
    from tfcompress.cli import main

    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "gone")
    for report in (link, tmp_path / ("r" * 300)):
        code = main(["benchmark", str(tmp_path / "missing.tflite"), "--report", str(report)])
        assert code == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and ("symbolic link" in lines[0] or "longer" in lines[0]), lines


def test_compress_that_fails_to_write_its_artifact_takes_its_report_back(tmp_path, monkeypatch):
    from tfcompress._compat.keras import KerasFlavour, keras_module
    from tfcompress._files import write_text_atomic
    from tfcompress.cli import main
    from tfcompress.compression import api
    from tfcompress.compression.report import report_paths
    from tfcompress.errors import OutputLocationError
    from tfcompress.report.writers import report_files

    class Finished:  # what compress() returns, reduced to what the CLI writes
        passed, interrupted = True, False

        def write_report(self, folder, *, overwrite):
            with report_files(folder, report_paths(folder)) as written:
                written.append(write_text_atomic(folder / "compress.json", "{}"))
            return written

        def save(self, out, *, overwrite):
            raise OutputLocationError(f"{out}: the disk filled up")

    monkeypatch.setattr(api, "compress", lambda *a, **k: Finished())
    keras = keras_module(KerasFlavour.KERAS3)
    model = tmp_path / "m.keras"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).save(model)
    report, out = tmp_path / "report", tmp_path / "out.tflite"
    argv = ["compress", str(model), "--data", str(model), "--eval", str(model)]
    assert main([*argv, "--out", str(out), "--report", str(report)]) == 2
    assert not report.exists() and not out.exists()
