"""``--custom-objects`` for the commands that load several models (``gate``, ``benchmark``).

The classes go to the Keras models among them; a ``.tflite`` or ``.onnx`` beside them is
loaded without; given where none is a Keras model, the flag is refused in one line. A module
of its own: only the commands that have the flag reach its message.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from tfcompress.cli.common import load_cli_model


def load_cli_models(
    args: argparse.Namespace, paths: Sequence[str], refused: dict[str, Any] | None = None
) -> list[Any]:
    """Each of ``paths`` loaded with ``--unsafe``, and ``--custom-objects`` where Keras.

    With ``refused`` (a dict), a file its runtime cannot run (it crashed, hung or refused
    at the load probe) is None in the list and its error goes to ``refused[path]``: the
    caller reports it as that file's row and goes on with the others.

    Raises:
        InvalidInputError: ``--custom-objects`` given and none of ``paths`` is a Keras model.
        ModelLoadError: A model cannot be loaded.
    """
    load = load_cli_model if refused is None else partial(_load_or_refuse, refused=refused)
    if not getattr(args, "custom_objects", None):
        return [load(args, path) for path in paths]
    if not any(may_be_keras(path) for path in paths):
        from tfcompress.errors import InvalidInputError

        raise InvalidInputError(
            f"--custom-objects names the custom classes of a Keras model; none of "
            f"{', '.join(map(str, paths))} is one: drop it."
        )
    plain = argparse.Namespace(**{**vars(args), "custom_objects": None})
    return [load(args if may_be_keras(p) else plain, p) for p in paths]


def _load_or_refuse(args: argparse.Namespace, path: str, *, refused: dict[str, Any]) -> Any:
    from tfcompress.errors import RuntimeRefusedError

    try:
        return load_cli_model(args, path)
    except RuntimeRefusedError as error:
        refused[path] = error
        return None


def may_be_keras(path: str) -> bool:
    """Not a ``.tflite``/``.onnx`` by name (a Keras file or SavedModel: the loader tells)."""
    return Path(path).suffix.lower() not in {".tflite", ".onnx"}
