"""Build the files benchmarks/gpu_check.py carries to a GPU machine (needs TensorFlow).

MobileNetV2 1.0 at 224x224 (``weights=None``, seed 0: latency does not depend on the
weights), made for the ``gpu`` target as float32, float16 and int8 at a static batch of 1:
``out/gpu_models/mobilenet_v2_{float32,float16,int8}.tflite`` (about 25 MB together, under
the device machine's 64 MiB carry limit; the batches 8 and 32 would triple it), and
``manifest.json``.

The GPU machine makes the static batches 8 and 32 with ``gpu_check.restatic`` (no
TensorFlow there). This script checks that rewrite first, for each recipe at batch 8: the
converter's own file at ``static_batch=8`` and the rewritten one hold the same ops, and on
the CPU they compute the same outputs (the largest difference is recorded in the manifest
and in docs/benchmarks.md); and the rewritten file computes what the batch-1 file computes
sample by sample.

Run: .venv/bin/python benchmarks/gpu_models.py [--out out/gpu_models]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from gpu_check import MODELS, NAME, RECIPES, restatic

import tfcompress
from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress.models import TFLiteModel
from tfcompress.runtime import create_runner

CHECK_BATCH = 8


def build(out: Path) -> dict:
    keras = keras_module(KerasFlavour.KERAS3)
    keras.utils.set_random_seed(0)
    model = keras.applications.MobileNetV2(alpha=1.0, input_shape=(224, 224, 3), weights=None)
    rng = np.random.default_rng(0)
    calibration = rng.random((16, 224, 224, 3), dtype=np.float32)
    samples = rng.random((CHECK_BATCH, 224, 224, 3), dtype=np.float32)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"model": "MobileNetV2 1.0 224 (weights=None, seed 0)", "files": {}}
    checks = []
    for recipe in RECIPES:
        made = tfcompress.quantize(
            model, target="gpu", recipe=recipe, static_batch=1, representative_data=calibration
        )
        path = out / f"{NAME}_{recipe}.tflite"
        path.write_bytes(made.model_content)
        manifest["files"][path.name] = {
            "bytes": len(made.model_content),
            "recipe": made.recipe.to_dict(),
            "gpu_check": made.target_verdict.to_dict(),
        }
        converter = tfcompress.quantize(
            model,
            target="gpu",
            recipe=recipe,
            static_batch=CHECK_BATCH,
            representative_data=calibration,
        ).model_content
        rewritten = restatic(made.model_content, CHECK_BATCH)
        checks.append(_compare(recipe, made.model_content, converter, rewritten, samples))
        print(checks[-1], file=sys.stderr)
    manifest["restatic_checks"] = checks
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def _compare(recipe: str, one: bytes, converter: bytes, rewritten: bytes, x: np.ndarray) -> dict:
    """The rewritten batch against the converter's, and against the batch-1 file per sample."""
    ops = [Counter(tfcompress.inspect_model(c).op_histogram) for c in (converter, rewritten)]
    outputs = {}
    for label, content in (("converter", converter), ("rewritten", rewritten), ("b1", one)):
        model = TFLiteModel(content, label=f"{recipe}_{label}", verified=True)
        with create_runner(model, backend="cpu") as runner:
            outputs[label] = runner.predict(x)
    return {
        "recipe": recipe,
        "batch": CHECK_BATCH,
        "same_ops": ops[0] == ops[1],
        "max_abs_diff": float(np.max(np.abs(outputs["converter"] - outputs["rewritten"]))),
        "max_abs_diff_vs_batch_1": float(np.max(np.abs(outputs["b1"] - outputs["rewritten"]))),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=MODELS)
    args = parser.parse_args()
    manifest = build(args.out)
    bad = [c for c in manifest["restatic_checks"] if not c["same_ops"]]
    print(f"wrote {args.out} ({sum(f['bytes'] for f in manifest['files'].values()):,} bytes)")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
