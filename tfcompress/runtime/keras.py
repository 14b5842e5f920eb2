"""TensorFlow backends: the original Keras model, or a plain SavedModel signature."""

from __future__ import annotations

from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of
from tfcompress._compat.tf import tensorflow
from tfcompress.errors import UnsupportedModelError
from tfcompress.models.loading import SavedModelDir, TFLiteModel, saved_model_errors
from tfcompress.runtime.base import Runner, register_backend


@register_backend("keras")
class KerasRunner(Runner):
    """Runs a Keras model (Keras 3 or tf-keras) in inference mode, or a SavedModel signature.

    Args:
        model: A Keras model or a :class:`~tfcompress.models.SavedModelDir`.

    Example:
        >>> with KerasRunner(model) as runner:  # doctest: +SKIP
        ...     logits = runner.predict(x_test)
    """

    @classmethod
    def accepts(cls, model: object) -> bool:
        """Keras models (either flavour) and SavedModel directories."""
        return isinstance(model, SavedModelDir) or flavour_of(model) is not None

    def __init__(self, model: Any, **_: Any) -> None:
        if isinstance(model, TFLiteModel):
            raise UnsupportedModelError(
                "the 'keras' backend runs Keras and SavedModel models; use backend='cpu' for "
                ".tflite files."
            )
        self.model = model
        if isinstance(model, SavedModelDir):
            with saved_model_errors(model.path):
                loaded = tensorflow().saved_model.load(str(model.path))
            self._signature = loaded.signatures[model.signature_key]
            self._keep_alive = loaded  # the signature's variables live on this object
        else:
            self._signature = None

    def predict_batch(self, x: np.ndarray) -> np.ndarray:
        """Run one batch in inference mode (dropout off, batch-norm statistics frozen)."""
        if self._signature is None:
            return np.asarray(self.model(x, training=False), dtype=np.float32)
        outputs = self._signature(tensorflow().constant(x))
        return np.asarray(next(iter(outputs.values())), dtype=np.float32)
