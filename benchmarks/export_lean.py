"""What a conversion's export and its SavedModel loads cost, before and after issue 21's changes.

Every conversion of a Keras model goes through a temporary SavedModel. Two things made that
slower than it needs to be, both measured here in one process, on the same models:

* the export: ``model.export`` (Keras 3) and ``tf.saved_model.save(model)`` (the tf-keras
  model a fine-tune exports) save the model object, so TensorFlow walks, and tf-keras traces,
  every layer for an object graph the converter never reads. ``save_serving_function``
  (tfcompress/quantization/converter.py) saves the serving function and the variables only.
* the loads: TensorFlow's converter loads the SavedModel in ``from_saved_model`` and again in
  every ``convert()``, only to read its debug info; ``loads_shared``
  (tfcompress/_compat/tflite_loads.py) hands a converter's later loads its first.

``quantize(recipe="int8")`` (the float32 reference and the int8 file) runs ``CALLS`` times per
model with both changes off, the shared loads only, and both on; a QAT fine-tune of the MNIST
CNN runs with the old and the new export. Each row checks the files against the first
setting's: the same signatures, tensors and outputs (two internal tensor names differ).

Run: .venv/bin/python benchmarks/export_lean.py  (writes the export-lean section of
docs/benchmarks.md; about two and a half minutes on two cores)
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Iterator

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress._compat.litert import make_interpreter
from tfcompress.quantization import converter
from tfcompress.report.table import format_table
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist
from tfcompress.training import export as training_export
from tfcompress.zoo import create_model

CALLS = 3


@contextlib.contextmanager
def _setting(*, lean: bool, shared: bool) -> Iterator[None]:
    """Switch the serving-only export and the shared loads off where asked."""
    saved = converter.save_serving_function, converter.loads_shared
    saved_training = training_export.save_serving_function
    if not lean:
        converter.save_serving_function = training_export.save_serving_function = lambda *args: (
            False
        )
    if not shared:
        converter.loads_shared = lambda loads: contextlib.nullcontext()
    try:
        yield
    finally:
        converter.save_serving_function, converter.loads_shared = saved
        training_export.save_serving_function = saved_training


def _behaviour(content: bytes, x: np.ndarray) -> tuple[object, ...]:
    """What a .tflite does, without its tensor names: signatures, tensors, outputs on ``x``."""
    interpreter = make_interpreter(content, num_threads=1, use_xnnpack=False)
    tensors = [
        (t["index"], tuple(t["shape"]), str(t["dtype"]), t["quantization"])
        for t in interpreter.get_tensor_details()
    ]
    run = interpreter.get_signature_runner()
    (name,) = run.get_input_details()
    outputs = [np.asarray(v).tobytes() for v in run(**{name: x}).values()]
    return str(interpreter.get_signature_list()), tuple(tensors), tuple(outputs)


SETTINGS = (  # "a load per convert()": TensorFlow's own count, one more per converter
    ("whole model, a load per convert()", {"lean": False, "shared": False}),
    ("whole model, one load", {"lean": False, "shared": True}),
    ("serving function, one load", {"lean": True, "shared": True}),
)


def main() -> None:
    started = time.perf_counter()
    split = mnist()
    pad = ((0, 0), (2, 2), (2, 2), (0, 0))
    models = {
        "MNIST CNN (28x28)": (small_cnn(), split.train.x[:200]),
        "MobileNetV2 0.35 (32x32)": (
            create_model(
                "mobilenet_v2", input_shape=(32, 32, 1), num_classes=10, width_multiplier=0.35
            ),
            np.pad(split.train.x[:200], pad),
        ),
    }
    model, data = models["MNIST CNN (28x28)"]
    tfcompress.quantize(model, recipe="int8", representative_data=data)  # imports, not timed
    rows, same = [], True
    for name, (model, data) in models.items():
        first: tuple[object, ...] | None = None
        for label, setting in SETTINGS:
            walls = []
            with _setting(**setting):
                for _ in range(CALLS):
                    start = time.perf_counter()
                    result = tfcompress.quantize(model, recipe="int8", representative_data=data)
                    walls.append(time.perf_counter() - start)
            files = (result.model_content, result.reference_content)
            behaviour = tuple(_behaviour(content, data[:8]) for content in files)
            first = first or behaviour
            same = same and behaviour == first
            rows.append([name, "quantize int8", label, f"{statistics.median(walls):.2f}s"])
    trained = train_classifier(small_cnn(), split.train.take(1_000), epochs=1)
    train = split.train.take(640)
    tfcompress.qat(trained, train_data=train, epochs=1)  # tfmot's import and first traces
    first = None
    for label, setting in (SETTINGS[0], SETTINGS[2]):
        with _setting(**setting):
            start = time.perf_counter()
            tuned = tfcompress.qat(trained, train_data=train, epochs=1)
            seconds = time.perf_counter() - start
        behaviour = _behaviour(tuned.model_content, split.test.x[:8])
        first = first or behaviour
        same = same and behaviour == first
        rows.append(["MNIST CNN (28x28)", "QAT, 1 epoch", label, f"{seconds:.2f}s"])
    body = "\n".join(
        [
            "## A conversion's export and loads (issue 21)",
            "",
            f"Measured by `benchmarks/export_lean.py` on {machine_line()} in "
            f'{time.perf_counter() - started:.0f}s: `quantize(recipe="int8")` {CALLS} times '
            "per model and setting in one process (medians), and one QAT fine-tune per "
            "setting after an untimed one (its export is the fine-tuned tf-keras model's).",
            "",
            format_table(["model", "call", "export; SavedModel loads per converter", "wall"], rows),
            "",
            "* The files made in every setting have "
            f"{'the same' if same else 'NOT the same'} signatures, tensors (names aside) and "
            "outputs on 8 digits.",
        ]
    )
    print(body)
    write_section("export_lean", body)


if __name__ == "__main__":
    main()
