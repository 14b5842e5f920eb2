"""``--custom-objects FILE.py`` on every command that loads a Keras model.

The file a package ships for its custom layers was written for TF 2's ``tf.keras``; a model
saved by tf-keras as ``.h5`` loads with ``tf_keras.models.load_model(custom_objects=...)``,
so it loads through tfcompress too: the file is imported with ``tf.keras`` meaning tf-keras.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfcompress.cli import build_parser, main
from tfcompress.errors import ModelLoadError

LAYER_FILE = """
import tensorflow as tf
from tensorflow import keras


class Scale(keras.layers.Layer):
    def __init__(self, factor=2.0, **kwargs):
        super().__init__(**kwargs)
        self.factor = factor

    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=(input_shape[-1],), initializer="ones")
        super().build(input_shape)

    def call(self, x):
        return x * self.w * self.factor

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}
"""

# Every command that loads a Keras model (edgetpu, mcu and export-c read .tflite only).
KERAS_COMMANDS = ("quantize", "compress", "inspect", "benchmark", "gate", "export-onnx", "qat",
                  "prune", "cluster")  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import tf_keras

    root = tmp_path_factory.mktemp("custom_objects")
    (root / "layers.py").write_text(LAYER_FILE)
    legacy = LAYER_FILE.replace("import tensorflow as tf\nfrom tensorflow import keras",
                                "import tf_keras as keras")  # fmt: skip
    namespace: dict = {}
    exec(compile(legacy, "legacy_layers", "exec"), namespace)
    tf_keras.utils.set_random_seed(0)
    model = tf_keras.Sequential([tf_keras.layers.Input((4,)), tf_keras.layers.Dense(3),
                                 namespace["Scale"](3.0), tf_keras.layers.Dense(2)])  # fmt: skip
    model.save(root / "custom.h5")
    x = np.random.default_rng(0).random((16, 4), dtype=np.float32)
    np.savez(root / "eval.npz", x=x)
    return root


def test_every_command_that_loads_keras_has_the_flag() -> None:
    actions = build_parser()._actions
    parsers = next(a for a in actions if a.__class__.__name__ == "_SubParsersAction")
    lacking = [c for c in KERAS_COMMANDS
               if "--custom-objects" not in parsers.choices[c].format_usage()]  # fmt: skip
    assert not lacking


def test_a_tf_keras_h5_loads_with_its_tf2_layer_file(files, capsys) -> None:
    h5, layers = str(files / "custom.h5"), str(files / "layers.py")
    # Without the file: the message advises the flag, which inspect has.
    assert main(["inspect", h5]) == 2
    assert "--custom-objects FILE.py" in capsys.readouterr().err
    assert main(["inspect", h5, "--custom-objects", layers]) == 0
    assert "Scale" in capsys.readouterr().out
    code = main(["gate", h5, h5, "--eval", str(files / "eval.npz"), "--custom-objects", layers])
    assert code == 0, capsys.readouterr().err


def test_a_keras3_class_for_a_tf_keras_model_is_named(files) -> None:
    import keras

    from tfcompress.models import load_model

    class Scale(keras.layers.Layer):
        pass

    with pytest.raises(ModelLoadError, match=r"Scale subclass Keras 3.*import tf_keras"):
        load_model(files / "custom.h5", custom_objects={"Scale": Scale})


def test_benchmark_runs_the_keras_rows_of_a_model_loaded_with_its_layer_file(files) -> None:
    # The CLI loads the model (TensorFlow starts) before benchmark() pins TensorFlow's threads:
    # every keras row was "unavailable" (1 thread asked, 2 running). A fresh process, as typed.
    import json
    import subprocess
    import sys

    fast = ["--runs", "2", "--min-seconds", "0", "--warmup-seconds", "0", "--json"]
    argv = [sys.executable, "-m", "tfcompress", "benchmark", str(files / "custom.h5"),
            "--custom-objects", str(files / "layers.py"), "--backends", "keras", "--threads",
            "1", *fast]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert [(row["backend"], row["threads"], row["status"]) for row in rows] == [("keras", 1, "ok")]
