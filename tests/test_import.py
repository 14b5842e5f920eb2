"""`import tfcompress` stays light and never touches TF_USE_LEGACY_KERAS."""

import subprocess
import sys

HEAVY = ("tensorflow", "keras", "tf_keras", "onnxruntime", "tf2onnx", "matplotlib")


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def test_import_does_not_load_heavy_modules():
    code = (
        "import sys, tfcompress, tfcompress.cli, tfcompress.testing.plugin;"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    assert _run(code) == ""


def test_public_api_resolves_lazily():
    code = "import tfcompress; print(callable(tfcompress.quantize), callable(tfcompress.evaluate))"
    assert _run(code) == "True True"


def test_quantizing_never_flips_legacy_keras_switch():
    code = (
        "import os, numpy as np, tfcompress\n"
        "from tfcompress.models.reference import small_cnn\n"
        "before = os.environ.get('TF_USE_LEGACY_KERAS')\n"
        "tfcompress.quantize(small_cnn(), recipe='dynamic')\n"
        "import tensorflow as tf\n"
        "unchanged = before == os.environ.get('TF_USE_LEGACY_KERAS')\n"
        "print(unchanged, tf.keras.__name__.startswith('keras'))"
    )
    assert _run(code).splitlines()[-1] == "True True"
