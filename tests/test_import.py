"""`import tfcompress` stays light and never touches TF_USE_LEGACY_KERAS."""

import subprocess
import sys

import pytest

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


def _legacy_switch_after(import_line: str, before: str | None) -> list[str]:
    """Run ``import_line`` in a fresh process with TF_USE_LEGACY_KERAS at ``before``."""
    setup = "os.environ.pop(_ENV, None)" if before is None else f"os.environ[_ENV] = {before!r}"
    code = (
        "import os, sys\n"
        "_ENV = 'TF_USE_LEGACY_KERAS'\n"
        f"{setup}\n"
        f"{import_line}\n"
        "import tensorflow as tf\n"
        "print('tensorflow_model_optimization' in sys.modules)\n"
        "print(repr(os.environ.get(_ENV)))\n"
        "print(tf.keras.__name__)\n"
    )
    return _run(code).splitlines()[-3:]


# tfmot sets TF_USE_LEGACY_KERAS=1 when imported; this path really imports it (QAT, pruning
# and clustering all go through it) and must leave the switch as the user had it.
@pytest.mark.parametrize("before", [None, "0"])
def test_tfmot_import_never_flips_legacy_keras_switch(before):
    imported, after, keras_name = _legacy_switch_after(
        "from tfcompress._compat.tfmot import tfmot; tfmot()", before
    )
    assert imported == "True"  # the path under test did import tfmot
    assert after == repr(before)
    assert keras_name.startswith("keras")  # tf.keras is still Keras 3, not tf_keras


def test_bare_tfmot_import_does_flip_the_switch():
    """The control: without tfcompress's guard the switch flips, so the test above can fail."""
    imported, after, _ = _legacy_switch_after("import tensorflow_model_optimization", None)
    assert imported == "True" and after == "'1'"


def test_heavy_imports_are_frozen_only_in_processes_tfcompress_owns():
    # A user's process keeps its collector as it was; the CLI's and every child's
    # freeze what importing TensorFlow and Keras left (tfcompress/_compat/heap.py).
    code = (
        "import gc\n"
        "from tfcompress._compat import heap\n"
        "from tfcompress._compat.keras import KerasFlavour, keras_module\n"
        "with heap.settled_import(): pass\n"
        "print(gc.get_freeze_count())\n"
        "heap.own_this_process()\n"
        "keras_module(KerasFlavour.KERAS3)\n"
        "print(gc.get_freeze_count())\n"
    )
    user, owned = map(int, _run(code).splitlines()[-2:])
    assert user == 0 and owned > 100_000


def test_sparing_collections_freezes_only_for_the_block():
    # Collections inside walk only what the block made; nothing stays frozen afterwards, and
    # a heap someone froze already (an owned process, a user before forking) is left as is.
    code = (
        "import gc\n"
        "from tfcompress._compat.heap import sparing_collections\n"
        "class Node: pass\n"
        "held = [Node() for _ in range(1000)]\n"
        "with sparing_collections():\n"
        "    inside = gc.get_freeze_count()\n"
        "    cycle = Node(); cycle.me = cycle; del cycle\n"
        "    freed = gc.collect()\n"
        "after = gc.get_freeze_count()\n"
        "gc.freeze(); frozen = gc.get_freeze_count()\n"
        "with sparing_collections():\n"
        "    kept = gc.get_freeze_count()\n"
        "print(inside >= 1000, freed >= 1, after, kept == frozen == gc.get_freeze_count())\n"
    )
    assert _run(code) == "True True 0 True"
