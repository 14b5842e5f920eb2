"""A new deployment target is one file: quantize, compress, select and the CLI offer it.

The target below (``tiny``: int8 only, files up to a size its ``--tiny-max-kb`` flag sets) is
written to a module of its own in a temporary folder and declared the way a third-party
package declares one, as a ``tfcompress.targets`` entry point; nothing in tfcompress is
edited. Copy ``TEMPLATE`` to start a real target (in ``tfcompress/targets/NAME.py`` or a
``NAME/target.py`` folder the registry finds it with no entry point).
"""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

from tfcompress.errors import InvalidInputError

TEMPLATE = textwrap.dedent(
    '''
    """The ``tiny`` target: int8 only, files up to a size (a template for new targets)."""

    from tfcompress.targets.base import (
        BudgetField,
        RecipeRules,
        Target,
        TargetOption,
        Verdict,
        register_target,
    )


    def _kib(content: bytes) -> float:
        return len(content) / 1024


    @register_target
    class TinyTarget(Target):
        name = "tiny"
        summary = "a tiny device: full int8, files up to --tiny-max-kb"
        display_name = "the tiny device"
        rules = RecipeRules(recipes=("int8",), integer_only=True)
        latency_backend = "cpu"
        gate_backend = "cpu"
        options = (
            TargetOption(
                "max_kb", "--tiny-max-kb", "largest file the device takes, in KiB",
                type=float, metavar="KIB",
            ),
        )
        budget_fields = (
            BudgetField(
                "max_tiny_kib", "--max-tiny-kib", "tiny KiB",
                "largest int8 file of a candidate, in KiB", measure=_kib,
            ),
        )

        def check(self, content, *, max_kb=64.0):
            return Verdict(_kib(content) <= max_kb, {"kib": round(_kib(content), 3)})

        def rank(self, attempt):
            return 0 if (attempt.target_verdict or {}).get("compatible") else 1
    '''
)


@pytest.fixture
def tiny(tmp_path_factory, monkeypatch):
    """The template installed as a package with an entry point, then removed again."""
    from tfcompress.targets import base

    site = tmp_path_factory.mktemp("site")
    (site / "tiny_target.py").write_text(TEMPLATE, encoding="utf-8")
    info = site / "tiny_target-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-target\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tfcompress.targets]\ntiny = tiny_target:TinyTarget\n")
    monkeypatch.syspath_prepend(str(site))
    # The entry points are read again on the next lookup; as before once the test is done.
    monkeypatch.setattr(base, "_entry_points_loaded", False)
    monkeypatch.setattr(base, "_BROKEN", {})
    yield "tiny"
    base.TARGETS.unregister("tiny")
    sys.modules.pop("tiny_target", None)


@pytest.fixture(scope="module")
def model_and_data():
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    x = np.random.default_rng(0).random((32, 8, 8, 1), dtype=np.float32)
    return model, x


def test_the_registry_finds_it(tiny):
    from tfcompress.targets.base import builtin_targets, get_target, list_targets

    assert tiny in list_targets() and tiny not in builtin_targets()
    target = get_target(tiny)
    assert target.checks and target.verdict_key == "tiny"
    assert target.display_name == "the tiny device"


def test_quantize_applies_its_rules_options_and_check(tiny, model_and_data):
    import tfcompress

    model, x = model_and_data
    result = tfcompress.quantize(
        model, representative_data=x, target=tiny, target_options={"max_kb": 64.0}
    )
    assert result.recipe.integer_only and result.target_verdict.compatible
    assert result.to_dict()["tiny"]["kib"] == pytest.approx(result.size_bytes / 1024, abs=1e-3)
    tight = tfcompress.quantize(
        model, representative_data=x, target=tiny, target_options={"max_kb": 0.01}
    )
    assert tight.target_verdict.compatible is False
    with pytest.raises(InvalidInputError, match="the tiny device runs full-integer models"):
        tfcompress.quantize(model, recipe="float16", target=tiny)
    with pytest.raises(InvalidInputError, match="applies to --target edgetpu only"):
        tfcompress.quantize(model, representative_data=x, target=tiny, compiler="/bin/true")


def test_compress_keeps_its_rungs_and_files_its_verdict(tiny, model_and_data):
    import tfcompress
    from tfcompress.compression import Attempt, plan_ladder

    model, x = model_and_data
    ladder = plan_ladder(objective="size", target=tiny, calibration_available=32, training=False)
    assert ladder and all(r.technique in ("ptq", "selective") for r in ladder)
    assert "float16" not in [r.name for r in ladder]
    # Not timed: the subject is the target's rungs and verdicts, and this model runs in 2
    # microseconds, where int8's quantize/dequantize ops put it 1.0-1.2x float32 by the moment.
    result = tfcompress.compress(
        model, representative_data=x, eval_data=x, target=tiny, min_agreement=0.0,
        time_budget=1, measure_latency=False,
    )  # fmt: skip
    made = [a for a in result.attempts if a.size_bytes]
    assert made and all(a.verdict_of == "tiny" for a in made)
    first = made[0].to_dict()
    assert first["tiny"]["compatible"] is True and first["edgetpu"] is None
    back = Attempt.from_dict(json.loads(json.dumps(first)))  # a report read back (replay)
    assert (back.verdict_of, back.target_verdict) == ("tiny", made[0].target_verdict)
    assert result.chosen is not None and result.target == "tiny"


def test_select_takes_its_budget(tiny, model_and_data):
    from tfcompress.selection import Budgets
    from tfcompress.selection.verdicts import cost_misses
    from tfcompress.targets.base import get_target

    (budget,) = get_target(tiny).budget_fields
    assert budget.measure(b"\0" * 2048) == 2.0
    budgets = Budgets(target=tiny, target_limits={"max_tiny_kib": 1})
    assert Budgets.from_dict(budgets.to_dict()) == budgets
    over = {"ok": True, "size_bytes": 10, "target_measures": {"max_tiny_kib": 2.0}}
    assert cost_misses(over, budgets) == ["tiny KiB 2 > 1"]
    with pytest.raises(InvalidInputError, match="applies to target 'tiny'"):
        Budgets(target="cpu", target_limits={"max_tiny_kib": 1})


def test_the_cli_offers_it_and_its_flags(tiny, model_and_data, tmp_path, capsys):
    from tfcompress.cli import main

    for verb, flags in (
        ("quantize", ["--tiny-max-kb", "--compiler"]),
        ("compress", []),
        ("select", ["--max-tiny-kib", "--max-edgetpu-segments"]),
    ):
        assert main([verb, "--help"]) == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "tiny" in text.split("--target {")[1]
        assert all(flag in text for flag in flags), (verb, flags)
    model, x = model_and_data
    model.save(tmp_path / "m.keras")
    np.savez(tmp_path / "calib.npz", x=x)
    out = tmp_path / "m_tiny.tflite"
    argv = [str(tmp_path / "m.keras"), "--data", str(tmp_path / "calib.npz"), "--out", str(out)]
    code = main(["quantize", *argv, "--target", "tiny", "--tiny-max-kb", "64", "--json"])
    assert code == 0, capsys.readouterr().err
    payload = json.loads(capsys.readouterr().out)
    assert payload["tiny"]["compatible"] is True and payload["recipe"]["input_type"] == "float32"
    code = main(["quantize", *argv, "--tiny-max-kb", "64", "--force"])
    # Its declared flag, not one made from the option's name (--max-kb does not exist).
    assert code == 2 and "--tiny-max-kb applies to --target tiny only" in (capsys.readouterr().err)
