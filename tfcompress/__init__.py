"""tfcompress: make trained TensorFlow/Keras models fit edge devices, and prove it.

Importing this package never imports TensorFlow: the public functions below are loaded
on first use (PEP 562), and they import TensorFlow only when they run.

Example:
    >>> import tfcompress
    >>> result = tfcompress.quantize(model, recipe="int8", representative_data=x_train)
    >>> tfcompress.evaluate({"float": model, "int8": result.model}, (x_test, y_test))
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from tfcompress._lazy import declared_imports
from tfcompress.errors import (
    BackendUnavailableError,
    ConversionError,
    GateFailedError,
    InvalidDataError,
    InvalidInputError,
    MissingDependencyError,
    ModelLoadError,
    OutputExistsError,
    TFCompressError,
    UnsupportedModelError,
)

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

# public name -> the module that defines it, loaded by __getattr__: the TYPE_CHECKING imports
_LAZY = declared_imports(__name__)

__all__ = [
    "BackendUnavailableError",
    "ConversionError",
    "GateFailedError",
    "InvalidDataError",
    "InvalidInputError",
    "MissingDependencyError",
    "ModelLoadError",
    "OutputExistsError",
    "TFCompressError",
    "UnsupportedModelError",
    "BenchmarkResult",
    "BenchmarkConfig",
    "Dataset",
    "Evaluation",
    "OnnxExport",
    "OnnxQuantizationResult",
    "OnnxRecipe",
    "LayerSensitivity",
    "QuantizationResult",
    "PTQConfig",
    "Recipe",
    "TFLiteModel",
    "TrainingResult",
    "QATConfig",
    "PruneConfig",
    "ClusterConfig",
    "__version__",
    "assert_accuracy_drop",
    "assert_gate",
    "benchmark",
    "check_gate",
    "GateConfig",
    "cluster",
    "compress",
    "CompressionResult",
    "CompressConfig",
    "create_runner",
    "evaluate",
    "export_onnx",
    "inspect_model",
    "list_backends",
    "list_recipes",
    "load_data",
    "load_model",
    "prune",
    "qat",
    "quantize",
    "rank_layers",
    "ZooModelInfo",
    "create_model",
    "list_models",
    "model_info",
    "Budgets",
    "SelectionResult",
    "select_model",
    "SelectionConfig",
]

if TYPE_CHECKING:
    from tfcompress.bench.accuracy import Evaluation, evaluate
    from tfcompress.bench.config import BenchmarkConfig
    from tfcompress.bench.harness import benchmark
    from tfcompress.bench.result import BenchmarkResult
    from tfcompress.compression import CompressConfig, CompressionResult, compress
    from tfcompress.data import Dataset, load_data
    from tfcompress.inspection import inspect_model
    from tfcompress.models import TFLiteModel, load_model
    from tfcompress.quantization import (
        PTQConfig,
        QuantizationResult,
        Recipe,
        list_recipes,
        quantize,
    )
    from tfcompress.quantization.onnx_ptq import OnnxQuantizationResult, OnnxRecipe
    from tfcompress.quantization.selective import LayerSensitivity, rank_layers
    from tfcompress.runtime import create_runner, list_backends
    from tfcompress.selection import Budgets, SelectionConfig, SelectionResult, select_model
    from tfcompress.targets.onnx import OnnxExport, export_onnx
    from tfcompress.testing.config import GateConfig
    from tfcompress.testing.gates import assert_accuracy_drop
    from tfcompress.testing.output_gates import assert_gate, check_gate
    from tfcompress.training import TrainingResult, cluster, prune, qat
    from tfcompress.training.configs import ClusterConfig, PruneConfig, QATConfig
    from tfcompress.zoo import ZooModelInfo, create_model, list_models, model_info


_SUBMODULES = ("edgetpu", "gpu", "mcu", "samples")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:  # tfcompress.samples.mnist(), tfcompress.mcu.check(...)
        return importlib.import_module(f"tfcompress.{name}")
    raise AttributeError(f"module 'tfcompress' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, *_SUBMODULES])
