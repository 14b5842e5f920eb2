"""Keras 3 (``import keras``) vs tf-keras (``import tf_keras``): the one place that knows.

Both flavours are accepted everywhere. tfcompress never changes ``TF_USE_LEGACY_KERAS``
after TensorFlow has been imported: ``tf.keras`` keeps meaning what the user chose.
"""

from __future__ import annotations

import enum
from types import ModuleType
from typing import Any

from tfcompress._compat.tf import import_heavy, tensorflow


class KerasFlavour(enum.StrEnum):
    """Which Keras implementation built a model."""

    KERAS3 = "keras3"
    TF_KERAS = "tf_keras"


def flavour_of(obj: Any) -> KerasFlavour | None:
    """Tell which Keras built ``obj`` without importing anything.

    Args:
        obj: Any object; typically a model.

    Returns:
        The flavour, or None when ``obj`` is not a Keras model.

    Example:
        >>> flavour_of(object()) is None
        True
    """
    for klass in type(obj).__mro__:
        module = klass.__module__
        if klass.__name__ not in {"Model", "Functional", "Sequential"}:
            continue
        if module.startswith("keras."):
            return KerasFlavour.KERAS3
        if module.startswith("tf_keras."):
            return KerasFlavour.TF_KERAS
    return None


def keras_module(flavour: KerasFlavour) -> ModuleType:
    """Import the Keras package of ``flavour`` (TensorFlow first, quietly)."""
    tensorflow()
    return import_heavy("keras" if flavour is KerasFlavour.KERAS3 else "tf_keras")


def saved_metadata_message() -> Any:
    """An empty ``SavedMetadata`` protobuf: the schema of a tf-keras SavedModel's metadata.

    Only tf-keras writes ``keras_metadata.pb``; its schema ships with tf-keras, and parsing it
    runs no Keras code (it is plain protobuf), so untrusted files can be read with it.

    Example:
        >>> message = saved_metadata_message()  # doctest: +SKIP
        >>> message.ParseFromString(Path("m/keras_metadata.pb").read_bytes())  # doctest: +SKIP
    """
    from tf_keras.protobuf import saved_metadata_pb2

    return saved_metadata_pb2.SavedMetadata()
