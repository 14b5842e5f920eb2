"""Post-training methods beyond the converter's min/max int8, applied before it quantizes.

Weight methods rewrite a copy of the float Keras model (BatchNorm folding, cross-layer
equalization, AdaRound); the others edit the calibrate-only conversion before the
converter's quantizer runs, so they work on SavedModels too: bias correction its biases,
the range methods its activation ranges. The artifact
is an ordinary full-int8 ``.tflite``: same ops, same inputs and outputs as converter int8
(``per-op`` alone keeps the ops it measured slower or worse float: :mod:`.per_op`).
See ``docs/quantization.md#beyond-minmax-int8`` and :mod:`.catalog` for the names; each
method is a class registered in :mod:`.registry` (``docs/architecture.md``: add a PTQ method).
"""

from tfcompress.quantization.methods.catalog import (
    AUTO_CANDIDATES,
    METHODS,
    RANGE_METHODS,
    WEIGHT_METHODS,
    canonical_methods,
    parse_methods,
)
from tfcompress.quantization.methods.registry import (
    GraphMethod,
    PrecisionMethod,
    PTQMethod,
    RangeMethod,
    WeightMethod,
    register_method,
)

__all__ = [
    "AUTO_CANDIDATES",
    "METHODS",
    "RANGE_METHODS",
    "WEIGHT_METHODS",
    "GraphMethod",
    "PTQMethod",
    "PrecisionMethod",
    "RangeMethod",
    "WeightMethod",
    "canonical_methods",
    "parse_methods",
    "register_method",
]
