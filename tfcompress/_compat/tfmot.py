"""tensorflow-model-optimization (tfmot), imported without changing what ``tf.keras`` means.

tfmot 0.8.1 sets ``os.environ["TF_USE_LEGACY_KERAS"] = "1"`` when it is imported and then
works on tf-keras. Setting that variable after TensorFlow was imported would silently turn
``tf.keras`` into tf-keras for the rest of the process if ``tf.keras`` had not been touched
yet. :func:`tfmot` therefore resolves ``tf.keras`` first (with the user's setting), imports
tfmot, and restores the variable exactly as it was.
"""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType

from tfcompress._compat.keras import KerasFlavour, keras_module
from tfcompress._compat.tf import tensorflow
from tfcompress.errors import MissingDependencyError

_ENV = "TF_USE_LEGACY_KERAS"


@functools.cache
def tfmot() -> ModuleType:
    """Import ``tensorflow_model_optimization`` once, leaving ``TF_USE_LEGACY_KERAS`` as it was.

    Returns:
        The ``tensorflow_model_optimization`` package.

    Raises:
        MissingDependencyError: tfmot or tf-keras is not installed.

    Example:
        >>> tfmot().sparsity.keras.prune_low_magnitude  # doctest: +SKIP
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
