"""Keras 3 (``import keras``) vs tf-keras (``import tf_keras``): the one place that knows.

Both flavours are accepted everywhere. tfcompress never changes ``TF_USE_LEGACY_KERAS``
after TensorFlow has been imported: ``tf.keras`` keeps meaning what the user chose.
"""

from __future__ import annotations

import contextlib
import enum
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from tfcompress._compat.tf import import_heavy, tensorflow


class KerasFlavour(enum.StrEnum):
    """Which Keras implementation built a model."""

    KERAS3 = "keras3"
    TF_KERAS = "tf_keras"


def flavour_of(obj: Any) -> KerasFlavour | None:
    """Tell which Keras built ``obj`` without importing anything.

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


def layer_name(tensor: Any) -> str | None:
    """The name of the layer that made ``tensor`` (Keras 3: its operation; tf-keras: its layer)."""
    history = getattr(tensor, "_keras_history", None)
    layer = getattr(history, "operation", None) or getattr(history, "layer", None)
    return getattr(layer, "name", None)


def input_name(tensor: Any, index: int) -> str:
    """The name of the Input layer behind input ``index``'s ``tensor`` (what data is keyed by).

    tf-keras's graph tensors carry a ``:0`` suffix, which is dropped.
    """
    name = layer_name(tensor) or getattr(tensor, "name", None) or f"x{index}"
    return str(name).split(":")[0]


def keras_module(flavour: KerasFlavour) -> ModuleType:
    """Import the Keras package of ``flavour`` (TensorFlow first, quietly)."""
    tensorflow()
    return import_heavy("keras" if flavour is KerasFlavour.KERAS3 else "tf_keras")


@contextlib.contextmanager
def tensorflow_keras_is_tf_keras() -> Iterator[None]:
    """Inside: ``tf.keras`` and ``tensorflow.keras`` (and its loaded submodules) are tf-keras.

    For code written for TF 2's ``tf.keras`` (a package's custom layers) that must define
    classes a tf-keras model can hold: TensorFlow 2.16+ resolves ``tf.keras`` to Keras 3,
    whose layers a tf-keras model refuses ("The added layer must be an instance of class
    Layer", or an IndexError deeper in). ``TF_USE_LEGACY_KERAS`` cannot change that once
    ``tf.keras`` has been touched, so the names are pointed at tf-keras while the code is
    imported, and put back after. Classes defined meanwhile keep their tf-keras bases.
    """
    tf = tensorflow()
    legacy = import_heavy("tf_keras")
    aliases = {"tensorflow.keras": legacy}
    for name, module in list(sys.modules.items()):
        if name.startswith("tf_keras.") and not name.startswith("tf_keras.src"):
            aliases["tensorflow.keras." + name[len("tf_keras.") :]] = module
    saved = {name: sys.modules.get(name) for name in aliases}
    missing = object()
    attribute = tf.__dict__.get("keras", missing)
    sys.modules.update(aliases)
    tf.keras = legacy
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if attribute is missing:
            tf.__dict__.pop("keras", None)
        else:
            tf.keras = attribute


def saved_metadata_message() -> Any:
    """An empty ``SavedMetadata`` protobuf: the schema of a tf-keras SavedModel's metadata.

    Only tf-keras writes ``keras_metadata.pb``; its schema ships with tf-keras, and parsing it
    runs no Keras code (it is plain protobuf), so untrusted files can be read with it.
    """
    from tf_keras.protobuf import saved_metadata_pb2

    return saved_metadata_pb2.SavedMetadata()
