"""Custom Keras classes from a Python file the user names (``--custom-objects FILE.py``).

A model with a custom layer names its class in the config; Keras needs the class itself to
load it. From Python, users pass ``custom_objects={...}`` (or register the class with
``@keras.saving.register_keras_serializable``); from the command line the only way to give
Keras a class is to run the code that defines it. Naming the file is the consent to run it,
as ``--unsafe`` is for Lambda layers: tfcompress imports it once, as a module of its own.

What the file gives Keras: its ``CUSTOM_OBJECTS`` dict when it defines one, else every
public class and function defined in the file itself (not those it imports), by name.
Classes it registers with ``register_keras_serializable`` are found by Keras either way.

The file is imported for the Keras that saved the model: for a tf-keras file (an ``.h5``, a
tf-keras SavedModel) its ``tf.keras`` / ``from tensorflow import keras`` mean tf-keras while it
is imported (:func:`tfcompress._compat.keras.tensorflow_keras_is_tf_keras`), since a package's
layer file written for TF 2 subclasses ``tf.keras.layers.Layer``, which TensorFlow 2.16+
resolves to Keras 3, whose layers a tf-keras model cannot hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path
from typing import Any

from tfcompress.errors import InvalidInputError


def import_custom_objects(
    path: str | os.PathLike[str], *, tf_keras: bool = False
) -> dict[str, Any]:
    """Import the Python file ``path`` and return the custom objects it defines.

    Args:
        path: A ``.py`` file defining the model's custom classes (running it is the consent).
        tf_keras: The model was saved by tf-keras: ``tf.keras`` means tf-keras while the file
            is imported.

    Raises:
        InvalidInputError: Not a ``.py`` file, the file fails to import (the message names
            its error), ``CUSTOM_OBJECTS`` is not a dict of names, or it defines nothing.
    """
    file = Path(path)
    if file.suffix != ".py" or not file.is_file():
        raise InvalidInputError(
            f"--custom-objects {file}: expected a Python file (.py) that defines the model's "
            "custom classes."
        )
    key = f"{file.resolve()}|{'tf_keras' if tf_keras else 'keras'}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    name = f"tfcompress_custom_objects_{digest}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
        raise InvalidInputError(f"--custom-objects {file}: Python cannot import this file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look classes up by module
    from tfcompress._compat.keras import tensorflow_keras_is_tf_keras

    try:
        with tensorflow_keras_is_tf_keras() if tf_keras else contextlib.nullcontext():
            spec.loader.exec_module(module)
    # The user's code may raise anything while it runs; it is reported as their file's error.
    except Exception as error:
        del sys.modules[name]
        raise InvalidInputError(
            f"--custom-objects {file}: importing it failed ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:200]}); fix the file."
        ) from error
    return _objects(module, name, file)


def _objects(module: Any, name: str, file: Path) -> dict[str, Any]:
    declared = getattr(module, "CUSTOM_OBJECTS", None)
    if declared is not None:
        if not isinstance(declared, dict) or not all(isinstance(k, str) for k in declared):
            raise InvalidInputError(
                f"--custom-objects {file}: CUSTOM_OBJECTS must be a dict of name -> class."
            )
        return dict(declared)
    found = {
        key: value
        for key, value in vars(module).items()
        if not key.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == name
    }
    if not found:
        raise InvalidInputError(
            f"--custom-objects {file}: the file defines no public class or function; define "
            "the model's custom classes there (or a CUSTOM_OBJECTS dict)."
        )
    return found
