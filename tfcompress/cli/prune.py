"""``tfcompress prune MODEL --train T.npz --target-sparsity 0.75 --out OUT.tflite``."""

from __future__ import annotations

from tfcompress.cli._training import training_verb
from tfcompress.training.configs import PruneConfig

add_parser, run = training_verb(
    "prune",
    PruneConfig,
    "tfcompress.training.prune:prune",
    help="magnitude pruning (unstructured or M:N) to .tflite",
    description=(
        "Prune a Keras model's smallest weights while fine-tuning (tfmot), export a .tflite "
        "and measure sparsity on the exported file. Pruning shrinks the gzip size, not the "
        "raw file. Labels are optional, per output: outputs without labels are fitted to "
        "the float model's own outputs (self-distillation). "
        "A threshold (--max-drop with labels, --min-agreement or --min-snr without) "
        "gates the exported .tflite against the float model: it is written either way, "
        "and the command exits 1 when the gate fails."
    ),
)
