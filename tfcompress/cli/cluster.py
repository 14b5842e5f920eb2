"""``tfcompress cluster MODEL --train T.npz [--eval E.npz] --clusters 16 --out OUT.tflite``."""

from __future__ import annotations

from tfcompress.cli._training import training_verb
from tfcompress.training.configs import ClusterConfig

add_parser, run = training_verb(
    "cluster",
    ClusterConfig,
    "tfcompress.training.cluster:cluster",
    help="weight clustering (N shared values per kernel) to .tflite",
    description=(
        "Cluster each kernel of a Keras model into N shared values while fine-tuning "
        "(tfmot) and export a .tflite. Clustering shrinks the gzip size, not the raw file. "
        "Labels are optional, per output: outputs without labels are fitted to the float "
        "model's own outputs (self-distillation). "
        "A threshold (--max-drop with labels, --min-agreement or --min-snr without) "
        "gates the exported .tflite against the float model: it is written either way, "
        "and the command exits 1 when the gate fails."
    ),
)
