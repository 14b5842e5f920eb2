"""``tfcompress qat MODEL --train TRAIN.npz [--eval EVAL.npz] --epochs N --out OUT.tflite``."""

from __future__ import annotations

from tfcompress.cli._training import training_verb
from tfcompress.training.configs import QATConfig

add_parser, run = training_verb(
    "qat",
    QATConfig,
    "tfcompress.training.qat:qat",
    help="quantization-aware training to a full-int8 .tflite",
    description=(
        "Fine-tune a Keras model with fake-quant ops (tfmot) and export a full-int8 .tflite. "
        "Any number of inputs and outputs: each output is fitted to its labels (the loss "
        "follows them) or, without labels, to the float model's own outputs "
        "(self-distillation); the report names each output's loss. Layers tfmot cannot "
        "quantize stay float and are listed as skipped. "
        "A threshold (--max-drop with labels, --min-agreement or --min-snr without) "
        "gates the exported .tflite against the float model: it is written either way, "
        "and the command exits 1 when the gate fails."
    ),
)
