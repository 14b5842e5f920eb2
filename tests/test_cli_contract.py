"""CLI promises on outputs and exit codes: nothing lost, one line, codes that mean one thing."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tfcompress._files import check_output_path, write_bytes_atomic
from tfcompress.cli import EXIT_INTERNAL_ERROR, main
from tfcompress.errors import OutputExistsError, OutputLocationError


def _one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tfcompress {command}: error: "), lines[0]
    return lines[0]


def test_dangling_symlink_counts_as_existing(tmp_path):
    link = tmp_path / "out.tflite"
    link.symlink_to(tmp_path / "missing.tflite")
    with pytest.raises(OutputExistsError, match="symlink to a missing file"):
        write_bytes_atomic(link, b"data")
    assert link.is_symlink() and not (tmp_path / "missing.tflite").exists()
    write_bytes_atomic(link, b"data", overwrite=True)  # --force replaces the link itself
    assert not link.is_symlink() and link.read_bytes() == b"data"


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_special_files_are_never_replaced_even_with_force(tmp_path, kind):
    target = tmp_path / "out.tflite"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/null")
    with pytest.raises(OutputExistsError, match="only replaces regular files"):
        check_output_path(target, overwrite=True)
    assert stat.S_ISFIFO(target.stat().st_mode) if kind == "fifo" else target.is_symlink()


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/proc/tfcompress.tflite", "cannot write in /proc"),
        ("/sys/tfcompress.tflite", "cannot write in /sys"),
    ],
)
def test_unwritable_locations_fail_before_any_work(path, reason):
    with pytest.raises(OutputLocationError, match=reason):
        check_output_path(path)


def test_over_long_name_fails_before_any_work(tmp_path):
    with pytest.raises(OutputLocationError, match="longer than this file system allows"):
        check_output_path(tmp_path / ("m" * 300 + ".tflite"))


def test_written_files_honour_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        written = write_bytes_atomic(tmp_path / "a.tflite", b"x")
        assert stat.S_IMODE(written.stat().st_mode) == 0o644
        os.umask(0o077)
        written = write_bytes_atomic(tmp_path / "b.tflite", b"x")
        assert stat.S_IMODE(written.stat().st_mode) == 0o600
    finally:
        os.umask(previous)
    assert not list(tmp_path.glob(".tfcompress-*"))


def test_quantize_to_proc_fails_in_a_second_with_one_line(model_files, capsys):
    code = main(["quantize", str(model_files["keras3"]), "--out", "/proc/x.tflite"])
    assert code == 2
    _one_error_line(capsys.readouterr().err, "quantize")


def test_internal_error_is_exit_3_with_one_line(monkeypatch, capsys, tmp_path):
    def broken(*_, **__):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr("tfcompress.models.loading.load_model", lambda *_, **__: object())
    monkeypatch.setattr("tfcompress.inspection.api.inspect_model", broken)
    monkeypatch.delenv("TFCOMPRESS_DEBUG", raising=False)
    assert main(["inspect", str(tmp_path / "m.keras")]) == EXIT_INTERNAL_ERROR
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "internal error (a bug in tfcompress): ZeroDivisionError: boom" in line
    assert "--debug" in line


def test_debug_shows_the_traceback(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("tfcompress.models.loading.load_model", lambda *_, **__: object())
    monkeypatch.setattr(
        "tfcompress.inspection.api.inspect_model",
        lambda *_: (_ for _ in ()).throw(ZeroDivisionError("boom")),
    )
    assert main(["--debug", "inspect", str(tmp_path / "m.keras")]) == EXIT_INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("tfcompress inspect:")
    monkeypatch.setenv("TFCOMPRESS_DEBUG", "1")
    assert main(["inspect", str(tmp_path / "m.keras")]) == EXIT_INTERNAL_ERROR
    assert "Traceback" in capsys.readouterr().err


def test_debug_after_the_command_shows_the_traceback_too(monkeypatch, capsys, tmp_path):
    """ "rerun with --debug": where a reader puts it, at the end, works as well as before."""
    monkeypatch.setattr("tfcompress.models.loading.load_model", lambda *_, **__: object())
    monkeypatch.setattr(
        "tfcompress.inspection.api.inspect_model",
        lambda *_: (_ for _ in ()).throw(ZeroDivisionError("boom")),
    )
    monkeypatch.delenv("TFCOMPRESS_DEBUG", raising=False)
    assert main(["inspect", str(tmp_path / "m.keras"), "--debug"]) == EXIT_INTERNAL_ERROR
    assert "Traceback" in capsys.readouterr().err
    assert main(["--debug", "inspect", str(tmp_path / "m.keras"), "--json"]) == 3  # not reset
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "new"),
    [
        (["qat", "model.keras", "--val", "test.npz", "--train", "t.npz", "--out", "o"], "--eval"),
        (["prune", "model.keras", "--data=train.npz", "--out", "o.tflite"], "--train"),
        (["select", "--train", "t.npz", "--eval", "v.npz", "--backend", "cpu"], "--target"),
        (["gate", "model.keras", "model_int8.tflite", "--data", "test.npz"], "--eval"),
        (["quantize", "model.keras", "--batch-size", "1", "--out", "o.tflite"], "--static-batch"),
    ],
)
def test_an_old_flag_name_is_refused_naming_the_new_one(argv, new, capsys):
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"tfcompress {argv[0]}: error: ") and f"use {new} " in line


def test_a_static_batch_of_zero_is_refused_not_made_one(tmp_path, capsys):
    import keras

    inputs = keras.Input((4,))
    keras.Model(inputs, keras.layers.Dense(2)(inputs)).save(tmp_path / "m.keras")
    out = tmp_path / "m.tflite"
    for target in (["--target", "gpu"], []):
        argv = ["quantize", str(tmp_path / "m.keras"), *target, "--static-batch", "0"]
        assert main([*argv, "--out", str(out)]) == 2
        assert "static_batch must be a positive integer" in capsys.readouterr().err
        assert not out.exists()


def test_real_process_prints_nothing_after_the_error_line(model_files, tmp_path):
    """Native destructors log at exit (``INFO: DestroyAccelerator``); none of it may follow."""
    broken = tmp_path / "broken.tflite"
    broken.write_bytes(Path(model_files["keras3"]).read_bytes()[:10])
    good = tmp_path / "good.tflite"
    code = main(["quantize", str(model_files["keras3"]), "--recipe", "float32", "--out", str(good)])
    assert code == 0
    process = subprocess.run(
        [sys.executable, "-m", "tfcompress", "benchmark", str(good), str(broken)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TFCOMPRESS_DEBUG": ""},
    )
    assert process.returncode == 2
    assert process.stdout == ""
    _one_error_line(process.stderr, "benchmark")


def test_unwritable_report_folder_fails_before_timing(model_files, capsys, monkeypatch):
    timed = []
    monkeypatch.setattr("tfcompress.bench.rows.measure", lambda *a, **k: timed.append(a))
    code = main(["benchmark", str(model_files["keras3"]), "--report", "/proc/tfc-reports"])
    assert code == 2 and timed == []
    line = _one_error_line(capsys.readouterr().err, "benchmark")
    assert "cannot write in /proc" in line


def test_an_unavailable_gpu_is_one_line_with_no_native_lines_after_it(tmp_path):
    """LiteRT's environment logs ``DestroyAccelerator`` when freed: freed before the line."""
    import numpy as np

    import tfcompress
    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    tiny = tfcompress.quantize(model, recipe="float32").save(tmp_path / "tiny.tflite")
    np.savez(tmp_path / "d.npz", x=np.ones((8, 4), np.float32))
    argv = ["gate", str(tiny), str(tiny), "--backend", "gpu", "--eval", str(tmp_path / "d.npz")]
    process = subprocess.run(
        [sys.executable, "-m", "tfcompress", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TFCOMPRESS_DEBUG": ""},
    )
    if process.returncode != 2:
        pytest.skip("a GPU ran the gate here: there is no unavailable-GPU error to check")
    line = _one_error_line(process.stderr, "gate")
    assert "GPU" in line


def test_the_quick_demo_refuses_a_report_it_would_not_write(tmp_path, capsys):
    assert main(["demo", "--quick", "--report", str(tmp_path / "rep")]) == 2
    assert "drop --report or --quick" in capsys.readouterr().err
    assert not (tmp_path / "rep").exists()
