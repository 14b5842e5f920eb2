"""Every registered deployment target keeps the same contract (a new target is one module).

The template runs each target in :func:`tfcompress.targets.base.list_targets` through what
quantize, compress, select and the CLI ask of it, on a tiny integer-friendly model: its recipe
rules give options a Recipe accepts, the ladder keeps only rungs it admits, its backends are
registered runtime backends, its check (where it has one) judges a real int8 file, its
budget fields measure one, and the CLI offers it by name.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tfcompress.errors import InvalidInputError
from tfcompress.targets.base import get_target, list_targets, resolve_target

TARGETS = list_targets()


@pytest.fixture(scope="module")
def int8_file() -> bytes:
    import keras

    import tfcompress

    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            keras.layers.Conv2D(4, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    x = np.random.default_rng(0).random((16, 8, 8, 1), dtype=np.float32)
    return tfcompress.quantize(model, recipe="int8", representative_data=x).model_content


def test_the_registry_holds_the_targets_the_source_declares():
    from tfcompress._declared import declared_targets
    from tfcompress.targets.base import builtin_targets

    assert builtin_targets() == [t.name for t in declared_targets()]  # what --target offers
    assert set(builtin_targets()) <= set(TARGETS)


@pytest.mark.parametrize("name", TARGETS)
def test_the_cli_offers_it_with_its_option_flags(name, capsys):
    from tfcompress.cli import main

    assert main(["quantize", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert name in text.split("--target {")[1].split("}")[0].split(",")
    assert all(option.flag in text for option in get_target(name).options)


@pytest.mark.parametrize("name", TARGETS)
def test_recipe_rules_give_options_a_recipe_accepts(name):
    from tfcompress.quantization.recipes import Recipe, list_recipes

    target = get_target(name)
    admitted = [r for r in list_recipes(include_float=True) if target.admits_recipe(r)]
    assert admitted, f"{name} admits no recipe"
    for recipe in admitted:
        options = target.recipe_options(recipe, input_type=None, output_type=None)
        made = Recipe(recipe).with_options(**options)
        if target.rules.static_batch is not None:
            assert made.static_batch == target.rules.static_batch
        if target.rules.io_types is not None:
            assert {made.input_type, made.output_type} <= set(target.rules.io_types)
    for refused in sorted(set(list_recipes(include_float=True)) - set(admitted)):
        with pytest.raises(InvalidInputError, match=refused):
            target.recipe_options(refused, input_type=None, output_type=None)


@pytest.mark.parametrize("name", TARGETS)
def test_backends_are_registered_runtime_backends(name):
    from tfcompress.runtime import list_backends

    target = get_target(name)
    assert {target.latency_backend, target.gate_backend} <= set(list_backends())


@pytest.mark.parametrize("name", TARGETS)
@pytest.mark.parametrize("objective", ["size", "latency"])
def test_the_ladder_holds_only_rungs_the_target_admits(name, objective):
    from tfcompress.compression.candidates import plan_ladder, rung_recipe

    target = get_target(name)
    ladder = plan_ladder(objective=objective, target=name, calibration_available=500, training=True)
    assert ladder and all(target.admits_recipe(rung_recipe(r)) for r in ladder)
    assert any(r.name == "int8" for r in ladder)


@pytest.mark.parametrize("name", TARGETS)
def test_check_summary_rank_and_refusal_work_on_a_real_int8_file(name, int8_file):
    target = get_target(name)
    if not target.checks:  # the default hooks: no verdict, nothing refused, all ranked alike
        assert target.check(int8_file) is None and target.summarize(None) is None
        assert target.verdict_key is None and target.rank(object()) == 0
        return
    verdict = target.check(int8_file)
    assert isinstance(verdict.compatible, bool)
    json.dumps(verdict.to_dict())  # plain data
    assert target.verdict_key is not None
    summary = target.summarize(verdict)
    json.dumps(summary)
    refusal = target.refusal(summary, ("some/float/node",))
    assert refusal is None or isinstance(refusal, str)

    class _Attempt:
        target_verdict = summary

    rank = target.rank(_Attempt())  # an order, 0 best (mcu: arena then flash, in bytes)
    assert isinstance(rank, int) and rank >= 0


@pytest.mark.parametrize("name", TARGETS)
def test_budget_fields_measure_an_int8_file_and_have_a_flag(name, int8_file, capsys):
    from tfcompress.cli import main

    assert main(["select", "--help"]) == 0
    help_text = capsys.readouterr().out
    for budget in get_target(name).budget_fields:
        assert budget.flag in help_text and budget.name.startswith("max_")
        value = budget.measure(int8_file)
        assert isinstance(value, float) and value >= 0


def test_options_a_target_does_not_take_are_refused():
    with pytest.raises(InvalidInputError, match="applies to --target edgetpu only"):
        resolve_target("cpu", compiler="/bin/true")
    with pytest.raises(InvalidInputError, match="applies to --target edgetpu only"):
        resolve_target(None, compiler="/bin/true")
    with pytest.raises(InvalidInputError, match="unknown target 'tpu'; choose one of cpu"):
        resolve_target("tpu")


def test_a_target_budget_belongs_to_its_backend():
    from tfcompress.selection import Budgets

    budgets = Budgets(target="edgetpu", target_limits={"max_edgetpu_segments": 1})
    assert "Edge TPU segments <= 1" in str(budgets)
    assert Budgets.from_dict(budgets.to_dict()) == budgets
    with pytest.raises(InvalidInputError, match="applies to target 'edgetpu'"):
        Budgets(target="cpu", target_limits={"max_edgetpu_segments": 1})
    with pytest.raises(InvalidInputError, match="must be a positive number"):
        Budgets(target="edgetpu", target_limits={"max_edgetpu_segments": 0})


def test_an_edgetpu_segment_budget_marks_a_split_candidate_over_budget():
    from tfcompress.selection import Budgets
    from tfcompress.selection.verdicts import cost_misses

    budgets = Budgets(target="edgetpu", target_limits={"max_edgetpu_segments": 1})
    split = {"ok": True, "size_bytes": 10, "target_measures": {"max_edgetpu_segments": 3.0}}
    whole = {"ok": True, "size_bytes": 10, "target_measures": {"max_edgetpu_segments": 1.0}}
    assert cost_misses(split, budgets) == ["Edge TPU segments 3 > 1"]
    assert cost_misses(whole, budgets) == []


def test_select_refuses_a_budget_flag_of_another_backend(tmp_path: Path, capsys):
    from tfcompress.cli import main

    code = main(["select", "--train", "t.npz", "--eval", "v.npz", "--max-edgetpu-segments", "1"])
    assert code == 2
    assert (
        "budget --max-edgetpu-segments applies to target 'edgetpu' (--target edgetpu), not 'cpu'"
        in (capsys.readouterr().err)
    )
