"""What ``mcu``, ``select --target mcu`` and ``quantize --target mcu`` advise.

Every fix they print is one that works for the file the user has: a ``.tflite`` is
requantized from the model it came from; the arena budget is written the same way in ``mcu``
and ``select`` (a size, ``64KB``), the old ``--max-arena-kib`` names its heir; ``select``'s
table shows the arena and the flash of every candidate.
"""

from __future__ import annotations

import json

import pytest
from _tflite_craft import build, op, tensor

from tfcompress.cli import main


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip() and x[:5] != "INFO "]
    assert len(lines) == 1, lines
    return lines[0]


def test_the_advice_for_a_float_tflite_is_one_that_works_on_it(tmp_path, capsys):
    pytest.importorskip("tflite_micro", reason="tflite-micro is not installed (the mcu extra)")
    path = tmp_path / "float.tflite"
    path.write_bytes(build([tensor([1, 4], "FLOAT32")] * 2, [op("RELU", [0], [1])]))
    assert main(["mcu", str(path), "--json"]) == 0
    (finding,) = [f for f in json.loads(capsys.readouterr().out)["findings"]]
    assert finding["rule"] == "float_model"
    assert "Keras model or SavedModel this .tflite came from" in finding["fix"]
    assert "tfcompress quantize MODEL.keras --target mcu --data CALIB.npz" in finding["fix"]
    # ... because quantizing the .tflite itself for the target is refused, saying the same
    argv = ["quantize", str(path), "--target", "mcu", "--out", str(tmp_path / "q.tflite")]
    assert main(argv) == 2
    line = _one_line(capsys)
    assert "quantize the Keras model or SavedModel the .tflite came from" in line
    assert "--target mcu --data CALIB.npz" in line and not (tmp_path / "q.tflite").exists()


def test_select_takes_the_arena_as_mcu_does_and_names_the_renamed_flag(capsys):
    assert main(["mcu", "--help"]) == 0
    assert "--max-arena SIZE" in capsys.readouterr().out
    assert main(["select", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--max-arena SIZE" in text and "--max-flash SIZE" in text
    assert "--max-arena-kib" not in text
    for old, new in (("--max-arena-kib", "--max-arena"), ("--max-flash-kib", "--max-flash")):
        argv = ["select", "--train", "t.npz", "--eval", "e.npz", "--target", "mcu", old, "64"]
        assert main(argv) == 2
        line = _one_line(capsys)
        assert f"{old} was renamed {new} SIZE" in line


def test_select_shows_the_arena_and_flash_of_every_candidate():
    from tfcompress.selection.budgets import Budgets
    from tfcompress.selection.report import header, summary, table_rows
    from tfcompress.selection.result import CandidateRecord, SelectionResult
    from tfcompress.selection.verdicts import cost_misses

    budgets = Budgets(target="mcu", target_limits={"max_arena": 65536})
    measured = {"max_arena": 34912.0, "max_flash": 236227.0}
    fits = CandidateRecord("a", "mobilenet_v2", 0.35, 32, "trained", target_measures=measured)
    never = CandidateRecord(
        "b", "mobilenet_v2", 0.5, 32, "over budget",
        target_measures={"max_arena": float("inf"), "max_flash": 9e5},
    )  # fmt: skip
    result = SelectionResult(
        candidates=(fits, never), pareto=(), best=None, budgets=budgets, objective="accuracy"
    )
    columns = header(result)
    assert columns[columns.index("size") + 1 : columns.index("size") + 3] == [
        "TFLM arena",
        "flash",
    ]
    rows = table_rows(result)
    at = columns.index("TFLM arena")
    assert rows[0][at : at + 2] == ["34,912 B", "236,227 B"]
    assert rows[1][at] == "none fits"
    assert "TFLM arena <= 65,536 B" in str(budgets) and "TFLM arena" in summary(result)
    over = {"ok": True, "size_bytes": 10, "target_measures": {"max_arena": 70000.0}}
    assert cost_misses(over, budgets) == ["TFLM arena 70,000 B > 65,536 B"]
