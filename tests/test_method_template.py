"""Template for a new post-training method: copy it when you add one (docs/architecture.md).

A method is a class registered next to its code (``@register_method`` in its own module under
tfcompress/quantization/methods/, found there by the registry). Every registered method runs
the contract below (nothing lists them). Then two trivial methods are defined in the test and
registered for the test only (the fixture takes them out again, through the registry's public
``unregister``): a weight rewrite that changes nothing and a range edit that keeps every
calibrated range. The checks are what a new method gets for free from the registry: a name
``--methods`` and ``methods=[...]`` accept, a place in the order, and a candidate made, scored
and kept by ``apply.py``. A real method's test then checks what the method itself does.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import build_parser, main
from tfcompress.errors import InvalidInputError
from tfcompress.quantization import Recipe
from tfcompress.quantization.methods import (
    METHODS,
    WEIGHT_METHODS,
    PrecisionMethod,
    RangeMethod,
    WeightMethod,
    canonical_methods,
    register_method,
)
from tfcompress.quantization.methods.catalog import parse_methods, plan_candidates
from tfcompress.quantization.methods.registry import (
    CALIBRATED_FLATBUFFER,
    KERAS_MODEL,
    RangeContext,
    RewriteContext,
    methods,
)
from tfcompress.quantization.methods.registry import PTQ_METHODS as REGISTRY

BUILT_IN = [m.name for m in methods()]


class TouchNothing(WeightMethod):
    """A weight rewrite that keeps every weight: one report item per linear layer seen."""

    name = "touch-nothing"
    summary = "a weight method that changes nothing (tests/test_method_template.py)"
    kind = "weight rewrite"
    order = 35  # after adaround: the place decides the order of a recipe's methods
    keeps_function = True  # the float check runs after it, as after equalize
    report_key = "untouched"
    calls = 0

    def rewrite(self, context: RewriteContext) -> tuple[Any, ...]:
        type(self).calls += 1
        return tuple(_Seen(node.name) for node in context.graph.linear_nodes())


class KeepRanges(RangeMethod):
    """A range edit that keeps every calibrated range (the converter's min/max)."""

    name = "keep-ranges"
    summary = "activation ranges as calibrated (tests/test_method_template.py)"
    order = 60
    exclusive = None  # combines with percentile-ranges or mse-ranges
    calls = 0

    def edit_ranges(self, calibrated: bytes, context: RangeContext) -> tuple[bytes, tuple]:
        type(self).calls += 1
        assert context.recipe.methods and len(context.calibration) > 0
        return calibrated, ()


class _Seen:
    def __init__(self, layer: str) -> None:
        self.layer = layer

    def to_dict(self) -> dict[str, Any]:
        return {"layer": self.layer}


@pytest.fixture
def registered():
    """The two methods registered for one test, then taken out again."""
    for method in (TouchNothing, KeepRanges):
        method.calls = 0
        register_method(method)
    try:
        yield
    finally:
        for method in (TouchNothing, KeepRanges):
            REGISTRY.unregister(method.name)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """An untrained (seeded) depthwise classifier on 8x8 digits, saved, and its samples."""
    from tfcompress._compat.keras import KerasFlavour, keras_module
    from tfcompress.samples.ptq_stress import depthwise_classifier, digits_split

    keras_module(KerasFlavour.KERAS3).utils.set_random_seed(0)
    model = depthwise_classifier()
    x = digits_split().train.x[:48]
    root = tmp_path_factory.mktemp("template")
    model.save(root / "small.keras")
    np.savez(root / "calib.npz", x=x)
    return model, x, root


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_registered_method_keeps_the_contract(name):
    """What the registry, recipes, --methods and the candidates ask of every method."""
    from tfcompress._declared import declared_methods

    method = REGISTRY.get(name)
    assert method.name == name and method.summary and method.kind
    assert method.needs in (KERAS_MODEL, CALIBRATED_FLATBUFFER)
    assert isinstance(method, WeightMethod | RangeMethod | PrecisionMethod)
    if isinstance(method, WeightMethod) or getattr(type(method), "report_key", None):
        assert method.report_key
    assert [m.order for m in methods()].count(method.order) == 1  # its own place
    fields = {f.name for f in dataclasses.fields(Recipe)}
    assert set(method.options) <= fields, "options must be Recipe fields"
    assert name in declared_methods()  # --methods's choices, read from the source
    assert canonical_methods([name]) == (name,) and parse_methods(name) == ((name,),)
    assert Recipe("int8", methods=[name]).methods == (name,)
    assert plan_candidates("int8", (), name, has_eval=False) == (((name,),), True)


def test_the_registry_places_and_validates_a_new_method(registered):
    # Weight rewrites first (the rewritten copy is what gets calibrated), then the edits of
    # the calibrated flatbuffer (bias-correction, the ranges), each stage by order.
    weights = [m for m in methods() if m.needs == KERAS_MODEL]
    assert tuple(METHODS) == tuple(m.name for m in methods())
    assert list(METHODS)[: len(weights)] == [m.name for m in weights]
    for stage in (weights, [m for m in methods() if m.needs != KERAS_MODEL]):
        assert [m.order for m in stage] == sorted(m.order for m in stage)
    assert list(METHODS)[-1] == "keep-ranges"  # order 60, after every built-in method
    assert "touch-nothing" in WEIGHT_METHODS and METHODS["keep-ranges"] == KeepRanges.summary
    assert canonical_methods(["keep-ranges", "touch-nothing", "equalize"]) == (
        "equalize",
        "touch-nothing",
        "keep-ranges",
    )
    assert parse_methods("keep-ranges,mse-ranges") == (("mse-ranges", "keep-ranges"),)
    assert Recipe("int8", methods=["keep-ranges"]).methods == ("keep-ranges",)
    with pytest.raises(InvalidInputError, match=r"choose one of .*touch-nothing"):
        canonical_methods(["touch-everything"])
    with pytest.raises(ValueError, match="taken"):
        register_method(KeepRanges)


def test_a_method_is_gone_once_unregistered():
    assert "keep-ranges" not in METHODS and "touch-nothing" not in METHODS
    with pytest.raises(InvalidInputError, match="unknown method 'keep-ranges'"):
        Recipe("int8", methods=["keep-ranges"])


def test_method_flag_runs_the_new_method_through_the_candidates(registered, small, tmp_path, capfd):
    """``--methods NAME``: parsed, planned, made by apply.py, scored against plain int8."""
    _, _, root = small
    argv = ["quantize", str(root / "small.keras"), "--data", str(root / "calib.npz")]
    argv += ["--methods", "keep-ranges", "--out", str(tmp_path / "small.tflite"), "--json"]
    args = build_parser().parse_args(argv)
    assert plan_candidates("int8", (), args.methods, has_eval=False) == ((("keep-ranges",),), True)
    assert main(argv) == 0, capfd.readouterr().err
    report = json.loads(capfd.readouterr().out)["methods"]
    (candidate,) = report["candidates"]
    assert candidate["methods"] == ["keep-ranges"] and candidate["error"] is None
    assert candidate["fidelity"] and candidate["size_bytes"] > 0
    assert KeepRanges.calls == 1


def test_api_runs_a_weight_and_a_range_method_together(registered, small):
    """``methods=[...]`` in the API: the copy is rewritten, its ranges edited, the recipe kept."""
    model, x, _ = small
    recipe = Recipe("int8", methods=("touch-nothing", "keep-ranges"))
    result = tfcompress.quantize(model, recipe=recipe, representative_data=x)
    report = result.methods
    assert report is not None and not report.searched
    assert report.kept == ("touch-nothing", "keep-ranges") == result.recipe.methods
    rewrite = report.kept_candidate.rewrite
    assert rewrite is not None and rewrite.methods == ("touch-nothing",)
    assert {e.layer for e in rewrite.changed("untouched")} >= {"bottleneck", "expand"}
    assert rewrite.to_dict()["untouched"] and rewrite.equalized == ()
    assert rewrite.float_max_difference <= 1e-6 * max(rewrite.float_output_peak, 1.0)
    assert TouchNothing.calls == 1 and KeepRanges.calls == 1
