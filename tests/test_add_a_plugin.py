"""Each "Add a ..." recipe of docs/architecture.md, followed literally: one file, nothing else.

The tfcompress package is copied to a temporary folder and each recipe's file is written into
the folder its recipe names, registration included, with no other edit (no list, no threshold
row, no parser change). One fresh Python process importing that copy then runs the verb that
uses each plug-in through the CLI's ``main``: ``quantize --target``, ``benchmark --backends``,
``quantize --methods``, ``gate --metric`` with the metric's own threshold flag,
``quantize --recipe``, ``zoo`` and ``compress --replay``, after ``--help`` offers the new names
and flags (read from the copy's source, imported by nothing). The real package is not touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each recipe's one file: path under tfcompress/ -> its source.
PLUGINS = {
    "targets/tiny.py": '''
        """The ``tiny`` target: int8 only, files up to ``--tiny-max-kb``."""

        from tfcompress.targets.base import (
            RecipeRules,
            Target,
            TargetOption,
            Verdict,
            register_target,
        )


        @register_target
        class TinyTarget(Target):
            name = "tiny"
            summary = "a tiny device: full int8, files up to --tiny-max-kb"
            rules = RecipeRules(recipes=("int8",), integer_only=True)
            latency_backend = "cpu"
            gate_backend = "cpu"
            options = (
                TargetOption(
                    "max_kb", "--tiny-max-kb", "largest file it takes, in KiB",
                    type=float, metavar="KIB",
                ),
            )

            def check(self, content, *, max_kb=64.0):
                kib = len(content) / 1024
                return Verdict(kib <= max_kb, {"kib": round(kib, 3)})
    ''',
    "runtime/reference.py": '''
        """``cpu-reference``: LiteRT's built-in kernels only (no XNNPACK)."""

        from tfcompress.runtime.base import register_backend
        from tfcompress.runtime.litert import LiteRTRunner


        @register_backend("cpu-reference")
        class ReferenceRunner(LiteRTRunner):
            """LiteRT without the XNNPACK delegate: the reference kernels."""

            def __init__(self, model, *, threads=1):
                super().__init__(model, threads=threads, use_xnnpack=False)
    ''',
    "quantization/methods/keep_ranges.py": '''
        """``keep-ranges``: the calibrated activation ranges as they are."""

        from tfcompress.quantization.methods.registry import RangeMethod, register_method


        @register_method
        class KeepRanges(RangeMethod):
            name = "keep-ranges"
            summary = "activation ranges as calibrated"
            order = 60
            exclusive = None

            def edit_ranges(self, calibrated, context):
                return calibrated, ()
    ''',
    "bench/rms_error.py": '''
        """``rms_error``: root mean squared difference of the outputs (no labels)."""

        import numpy as np

        from tfcompress.bench.metric_def import MetricDef, register_metric
        from tfcompress.bench.thresholds import ThresholdDef


        @register_metric(
            "rms_error",
            threshold=ThresholdDef(
                "max_rms_error", "largest RMS difference", None, 0.0, metavar="E",
                suite_default=False,
            ),
        )
        def rms_error_metric():
            def prepare(reference, candidate, output):
                n = len(reference)
                return reference.reshape(n, -1) * 1.0, candidate.reshape(n, -1) * 1.0

            def per_sample(reference, candidate):
                squares = ((candidate - reference) ** 2).sum(axis=1)
                return np.stack([squares, np.full(len(squares), reference.shape[1])], axis=1)

            return MetricDef(
                "rms_error", "fidelity", "lower", "number", "RMS difference of the outputs",
                "max_rms_error", None, "bootstrap", prepare, per_sample,
                lambda rows: float(np.sqrt(rows[:, 0].sum() / rows[:, 1].sum())),
            )
    ''',
    "quantization/half.py": '''
        """``half``: float16 weights, converted by the TFLite converter."""

        from tfcompress.quantization.recipes import register_recipe


        @register_recipe(
            "half", summary="float16 weights", needs_calibration=False, io_types=("float32",)
        )
        def _half(converter, recipe, tf):
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.target_spec.supported_types = [tf.float16]
    ''',
    "zoo/tiny_cnn.py": '''
        """``tiny_cnn``: one convolution and a classifier."""

        from tfcompress.zoo.registry import register_model


        @register_model("tiny_cnn", family="custom", min_resolution=8)
        def tiny_cnn(*, input_shape, num_classes, width_multiplier, weights=None):
            import keras

            return keras.Sequential(
                [
                    keras.Input(input_shape),
                    keras.layers.Conv2D(max(1, int(8 * width_multiplier)), 3),
                    keras.layers.GlobalAveragePooling2D(),
                    keras.layers.Dense(num_classes, activation="softmax"),
                ],
                name="tiny_cnn",
            )
    ''',
    "compression/half_rung.py": '''
        """``half``: a compress technique that makes float16 whatever its rung asks."""

        from tfcompress.compression.handlers import PTQHandler, register_handler


        @register_handler("half")
        class HalfHandler(PTQHandler):
            def read(self, recipe, *, seed=0, target=None):
                return super().read({"name": "float16"}, seed=seed, target=target)
    ''',
}

# Runs in the fresh process, in the work folder, importing the copy: prints one JSON object.
DRIVER = """
import contextlib, io, json
import numpy as np
from tfcompress.cli import main

def run(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in argv])
    text = out.getvalue()
    return {"code": code, "json": json.loads(text) if "--json" in argv else text}

got = {verb: run(verb, "--help") for verb in ("quantize", "gate", "benchmark")}
import keras
keras.utils.set_random_seed(0)
model = keras.Sequential([
    keras.Input((8, 8, 1)), keras.layers.Conv2D(4, 3, activation="relu"),
    keras.layers.Flatten(), keras.layers.Dense(3, activation="softmax")])
x = np.random.default_rng(0).random((32, 8, 8, 1), dtype=np.float32)
model.save("m.keras")
np.savez("calib.npz", x=x)
np.savez("eval.npz", x=x, y=model.predict(x, verbose=0).argmax(1))
got["target"] = run("quantize", "m.keras", "--data", "calib.npz", "--target", "tiny",
                    "--tiny-max-kb", "64", "--out", "tiny.tflite", "--json")
got["backend"] = run("benchmark", "tiny.tflite", "--backends", "cpu-reference", "--runs", "2",
                     "--min-seconds", "0.01", "--warmup-seconds", "0.01", "--json")
got["method"] = run("quantize", "m.keras", "--data", "calib.npz", "--methods", "keep-ranges",
                    "--out", "kept.tflite", "--json")
got["metric"] = run("gate", "m.keras", "tiny.tflite", "--eval", "eval.npz", "--metric",
                    "rms_error", "--max-rms-error", "1", "--json")
got["recipe"] = run("quantize", "m.keras", "--recipe", "half", "--out", "half.tflite", "--json")
got["zoo"] = run("zoo", "tiny_cnn", "--input-shape", "16x16x1", "--num-classes", "3", "--json")
attempt = {"index": 1, "name": "half", "technique": "half", "recipe": {"name": "int8"},
           "status": "passed", "why": ""}
with open("compress.json", "w") as f:
    json.dump({"attempts": [attempt], "chosen": attempt}, f)
got["handler"] = run("compress", "m.keras", "--replay", "compress.json", "--data", "calib.npz",
                     "--out", "replayed.tflite", "--json")
got["replayed_size"] = len(open("replayed.tflite", "rb").read())
got["half_size"] = len(open("half.tflite", "rb").read())
print(json.dumps(got))
"""


@pytest.fixture(scope="module")
def followed(tmp_path_factory) -> dict:
    """What the verbs answered in a copy of the package with every recipe's file added."""
    root = tmp_path_factory.mktemp("plugins")
    shutil.copytree(ROOT / "tfcompress", root / "tfcompress")  # its bytecode too: no recompile
    for relative, source in PLUGINS.items():
        path = root / "tfcompress" / relative
        assert not path.exists(), f"{relative} exists: pick another name for the recipe's file"
        path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    work = root / "work"
    work.mkdir()
    # Native steps in this one process (TensorFlow starts once): the subject is registration.
    env = {**os.environ, "PYTHONPATH": str(root), "TFCOMPRESS_IN_PROCESS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_offers_every_new_name_and_flag(followed):
    # Without white space: --help wraps lines at hyphens.
    quantize = "".join(followed["quantize"]["json"].split())
    assert "tiny" in quantize.split("--target{")[1].split("}")[0].split(",")
    assert "--tiny-max-kb" in quantize and "half" in quantize.split("--recipe{")[1]
    assert "keep-ranges" in quantize
    gate = "".join(followed["gate"]["json"].split())
    assert "rms_error" in gate and "--max-rms-error" in gate
    assert "cpu-reference" in "".join(followed["benchmark"]["json"].split())


def test_a_target_is_one_file(followed):
    assert followed["target"]["code"] == 0
    made = followed["target"]["json"]
    assert made["tiny"]["compatible"] is True and made["recipe"]["integer_only"] is True


def test_a_backend_is_one_file(followed):
    assert followed["backend"]["code"] == 0
    (row,) = followed["backend"]["json"]["rows"]
    assert row["backend"] == "cpu-reference" and row["status"] == "ok"


def test_a_ptq_method_is_one_file(followed):
    assert followed["method"]["code"] == 0
    (candidate,) = followed["method"]["json"]["methods"]["candidates"]
    assert candidate["methods"] == ["keep-ranges"] and candidate["error"] is None


def test_a_metric_is_one_file_and_its_threshold_a_flag(followed):
    assert followed["metric"]["code"] in (0, 1)  # a verdict, never exit 2 or 3
    (check,) = followed["metric"]["json"]["checks"]
    assert check["metric"] == "rms_error" and check["threshold_name"] == "max_rms_error"
    assert check["threshold"] == 1.0 and check["passed"] is (check["value"] <= 1.0)


def test_a_recipe_is_one_file(followed):
    assert followed["recipe"]["code"] == 0
    assert followed["recipe"]["json"]["recipe"]["name"] == "half"


def test_a_zoo_model_is_one_file(followed):
    assert followed["zoo"]["code"] == 0
    (info,) = followed["zoo"]["json"]
    assert info["name"] == "tiny_cnn"
    assert info["params"] == (3 * 3 * 1 * 8 + 8) + (8 * 3 + 3)  # the convolution, the Dense


def test_a_compress_handler_is_one_file(followed):
    assert followed["handler"]["code"] == 0
    # The handler made the float16 file whatever the recorded recipe named (int8).
    assert followed["replayed_size"] == followed["half_size"]
