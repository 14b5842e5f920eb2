"""Refuse a conversion that lost the model's weights (variables read but never set).

A ``tf.Module`` that holds a Keras 3 model as an attribute does not track the model's
variables (Keras 3 layers are not ``tf.Module`` trackables), so ``tf.saved_model.save`` of
such a module writes a serving function that *reads* variables the SavedModel's object
graph does not restore. The converter cannot freeze them: it keeps them as resource
variables (``VAR_HANDLE`` + ``READ_VARIABLE``) that nothing initialises, gives a small
float file, and LiteRT then fails (``READ_VARIABLE failed to invoke``) or returns garbage.
A genuinely stateful model initialises its variables in a ``CALL_ONCE`` subgraph with
``ASSIGN_VARIABLE``; a weightless one has reads and no writes. That is what is checked here,
on the float32 conversion every :func:`tfcompress.quantize` makes (or on the quantized
file alone, where no reference is converted: it reads the same variables).
"""

from __future__ import annotations

from typing import Any

from tfcompress.errors import ConversionError
from tfcompress.models.loading import SavedModelDir, model_name
from tfcompress.models.tflite_file import read_tflite

_READS = "READ_VARIABLE"
_WRITES = frozenset({"ASSIGN_VARIABLE", "CALL_ONCE"})


def uninitialised_variables(content: bytes) -> tuple[str, ...]:
    """Names of the resource variables a ``.tflite`` reads without ever setting them.

    The ``VAR_HANDLE`` tensors read by ``READ_VARIABLE`` ops, in graph order; empty when the
    file reads no variable or initialises its variables.
    """
    parsed = read_tflite(content)
    opcodes = {op.opcode for graph in parsed.subgraphs for op in graph.operators}
    if _READS not in opcodes or opcodes & _WRITES:
        return ()
    return tuple(
        graph.tensors[op.inputs[0]].name
        for graph in parsed.subgraphs
        for op in graph.operators
        if op.opcode == _READS and op.inputs and 0 <= op.inputs[0] < len(graph.tensors)
    )


def check_weights_captured(content: bytes, model: Any) -> None:
    """Raise when ``content``, a conversion of ``model``, reads variables it never sets.

    ``content`` is the float32 reference, or the quantized file where none was converted.

    Raises:
        ConversionError: The file reads variables nothing initialises; the message says how
            to export the model so that its weights are captured.
    """
    names = uninitialised_variables(content)
    if not names:
        return
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    where = (
        "the SavedModel's serving function reads variables its object graph does not "
        "restore (a tf.Module holding a Keras 3 model, saved with tf.saved_model.save, does "
        "not track the model's variables)"
        if isinstance(model, SavedModelDir)
        else "the model's serving function reads variables the export did not capture"
    )
    raise ConversionError(
        f"{model_name(model)!r} converted without its weights: {where}, so the .tflite reads "
        f"{len(names)} uninitialised variable(s) ({shown}); export the Keras model itself "
        "with model.export(path) (Keras 3) or tf.saved_model.save(model, path) (tf-keras) "
        "and quantize that."
    )
