"""The names the parser offers, as plain data: building it imports none of the registries.

``tfcompress --help`` (and every ``tfcompress VERB --help``) builds the whole parser, whose
choices and help lists come from registries that live beside what they register: recipes
beside the converter, backends beside the runtimes, targets beside the Edge TPU linter.
Importing those costs numpy and most of the library (a second on two cores); these copies
cost nothing. ``tests/test_cli_help.py`` compares every one with its registry, order
included, so a name added there and not here fails the tests, never the user.
"""

from __future__ import annotations

# tfcompress.bench.metrics.metric_names()
METRICS = (
    "accuracy",
    "topK",
    "binary_accuracy",
    "mse",
    "mae",
    "rmse",
    "miou",
    "snr",
    "cosine",
    "max_abs",
    "agreement",
)
# tfcompress.runtime.list_backends()
BACKENDS = ("cpu", "cpu-compiled", "edgetpu", "gpu", "keras", "onnxruntime")
# tfcompress.targets.base.builtin_targets(): the targets this package defines (others, from
# entry points or registered in-process, are added by cli/_targets.py)
TARGETS = ("cpu", "edgetpu", "gpu")
# tfcompress.targets.base.ENTRY_POINT_GROUP
TARGET_ENTRY_POINT_GROUP = "tfcompress.targets"
# (target, name, flag, help, type, metavar) of each built-in target's options
TARGET_OPTIONS = (
    (
        "edgetpu",
        "compiler",
        "--compiler",
        "the edgetpu_compiler to run (default: the one on PATH, if any)",
        str,
        "PATH",
    ),
)
# (target, name, flag, help, type) of each built-in target's budget_fields
TARGET_BUDGETS = (
    (
        "edgetpu",
        "max_edgetpu_segments",
        "--max-edgetpu-segments",
        "most Edge TPU segments the linter may predict for a candidate's int8 file "
        "(1: the whole model on the Edge TPU)",
        float,
    ),
)
# tfcompress.quantization.recipes: list_recipes(include_float=True), list_io_types(),
# FORMATS, ENGINES
RECIPES = ("float32", "dynamic", "float16", "int8", "int16x8", "int4-weights", "int4-dynamic")
IO_TYPES = ("float32", "int8", "uint8", "int16")
FORMATS = ("tflite", "onnx")
ENGINES = ("converter", "litert-quantizer")
# tfcompress.data.calibration.DEFAULT_CALIBRATION_SAMPLES
DEFAULT_CALIBRATION_SAMPLES = 200
# the keys of tfcompress.quantization.methods.catalog.METHODS
METHODS = ("equalize", "adaround", "bias-correction", "percentile-ranges", "mse-ranges")
# the keys of tfcompress.targets.onnx.ort_quantize.CALIBRATION_METHODS
CALIBRATION_METHODS = ("minmax", "entropy", "percentile")
# tfcompress.testing.settings.GATE_MODES, tfcompress.testing.stats.INTERVAL_METHODS
GATE_MODES = ("strict", "tolerant", "proven")
INTERVAL_METHODS = ("mcnemar", "bootstrap")
# tfcompress.compression.candidates.OBJECTIVES, tfcompress.selection.verdicts.OBJECTIVES
COMPRESS_OBJECTIVES = ("size", "latency")
SELECT_OBJECTIVES = ("accuracy", "reward")
# tfcompress.training.configs: SCHEDULES, PRESERVE, EXPORT_RECIPES
SCHEDULES = ("polynomial", "constant")
PRESERVE = ("sparsity", "clusters")
EXPORT_RECIPES = ("float32", "float16", "dynamic", "int8")
