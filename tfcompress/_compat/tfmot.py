"""tensorflow-model-optimization (tfmot), imported without changing what ``tf.keras`` means.

tfmot 0.8.1 sets ``os.environ["TF_USE_LEGACY_KERAS"] = "1"`` when it is imported and then
works on tf-keras. Setting that variable after TensorFlow was imported would silently turn
``tf.keras`` into tf-keras for the rest of the process if ``tf.keras`` had not been touched
yet. :func:`tfmot` therefore resolves ``tf.keras`` first (with the user's setting), imports
tfmot, and restores the variable exactly as it was.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress._compat.tf import tensorflow
from tfcompress.errors import MissingDependencyError

_ENV = "TF_USE_LEGACY_KERAS"
_QUANT_OPS = "tensorflow_model_optimization.python.core.quantization.keras.quant_ops"


@functools.cache
def tfmot() -> ModuleType:
    """Import ``tensorflow_model_optimization`` once, leaving ``TF_USE_LEGACY_KERAS`` as it was.

    Raises:
        MissingDependencyError: tfmot or tf-keras is not installed.
    """
    tf = tensorflow()
    getattr(tf.keras, "__name__", None)  # resolve tf.keras with the user's setting, now
    saved = os.environ.get(_ENV)
    try:
        module = importlib.import_module("tensorflow_model_optimization")
        importlib.import_module("tensorflow_model_optimization.python.core.keras.compat")
    except ImportError as error:
        raise MissingDependencyError(
            f"QAT, pruning and clustering need tfmot and tf-keras ({error}); "
            "run: pip install 'tensorflow-model-optimization>=0.8.1,<0.9' 'tf-keras>=2.21,<2.22'"
        ) from error
    finally:
        if saved is None:
            os.environ.pop(_ENV, None)
        else:
            os.environ[_ENV] = saved
    return module


def tf_keras() -> ModuleType:
    """The tf-keras package tfmot works with (imported after :func:`tfmot`).

    Raises:
        MissingDependencyError: tfmot or tf-keras is not installed.
    """
    tfmot()
    try:
        return keras_module(KerasFlavour.TF_KERAS)
    except ImportError as error:
        raise MissingDependencyError(
            "tfmot needs tf-keras; run: pip install 'tf-keras>=2.21,<2.22'"
        ) from error


@contextlib.contextmanager
def tfmot_logs_to(target: logging.Logger) -> Iterator[None]:
    """While active, what tfmot logs on Python's root logger goes to ``target`` at DEBUG.

    tfmot 0.8.1 calls ``logging.warning(...)`` on the root logger (e.g. "Input layer does
    not contain zero weights, so apply CQAT instead." for each layer of a cluster-preserving
    QAT): that reached the user's stderr as ``WARNING:root:...``. The records are its
    internal choices, which tfcompress reports in its own words (coverage, sparsity).
    """
    root = logging.getLogger()

    def redirect(record: logging.LogRecord) -> bool:
        if "tensorflow_model_optimization" not in record.pathname:
            return True
        target.debug("tfmot: %s", record.getMessage())
        return False

    root.addFilter(redirect)
    try:
        yield
    finally:
        root.removeFilter(redirect)


@contextlib.contextmanager
def ranges_from_each_batch() -> Iterator[None]:
    """While active, tfmot's moving-average quantizers take each batch's range whole.

    tfmot 0.8.1's ``MovingAverageQuantizer`` (every activation and output range of its 8-bit
    QAT schemes) starts at [-6, 6] and moves 0.1% of the way to each training batch's range
    (EMA decay 0.999, hard-coded in the quantizer). A short fine-tune of a few hundred steps
    leaves the ranges near [-6, 6], so a ReLU output in [0, 1.5] gets a quarter of the int8
    steps. Inside this context the decay is 0: one training-mode call on a calibration batch
    sets every range to what that batch spans, as post-training calibration would. The
    quantizer looks ``quant_ops.MovingAvgQuantize`` up when it is called, so the original is
    restored on exit, whatever happens (not thread-safe: one QAT set-up at a time).

    Raises:
        MissingDependencyError: tfmot or tf-keras is not installed.
    """
    tfmot()
    quant_ops = importlib.import_module(_QUANT_OPS)
    original = quant_ops.MovingAvgQuantize

    def whole_batch(*args: Any, **kwargs: Any) -> Any:
        kwargs["ema_decay"] = 0.0
        return original(*args, **kwargs)

    quant_ops.MovingAvgQuantize = whole_batch
    try:
        yield
    finally:
        quant_ops.MovingAvgQuantize = original
