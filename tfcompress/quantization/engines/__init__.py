"""The two engines that make a quantized ``.tflite``, behind one choice.

- ``converter``: the TFLite converter (:mod:`tfcompress.quantization.ptq`,
  :mod:`tfcompress.quantization.converter`): Keras models and SavedModels; integer I/O, a
  static batch, the Edge TPU target; of the rules, ``float`` ones (through selective
  quantization).
- ``litert-quantizer``: LiteRT Quantizer
  (:mod:`~tfcompress.quantization.engines.litert_quantizer`): a float ``.tflite`` (a Keras
  model or SavedModel is converted to one first); every rule mode, int4 weights, blockwise
  scales, weight algorithms; float I/O.

:func:`choose_engine` picks the default (LiteRT Quantizer for a ``.tflite`` input or a
recipe only it makes, else the converter) and refuses a pairing that cannot work.
"""

from __future__ import annotations

from typing import Any

from tfcompress.errors import InvalidInputError
from tfcompress.models.loading import TFLiteModel
from tfcompress.quantization.recipes import ENGINES, Recipe

__all__ = ["ENGINES", "choose_engine", "converter_float_nodes"]


def choose_engine(engine: str | None, model: Any, recipe: Recipe) -> str:
    """The engine (``engine``, or the default for the input when None) that makes ``recipe``.

    Raises:
        InvalidInputError: An unknown engine, a ``.tflite`` for the converter, or a recipe
            (or rule) the engine does not make.
    """
    is_tflite = isinstance(model, TFLiteModel)
    if engine is None:
        converter_can = "converter" in recipe.spec.engines and not is_tflite
        engine = "converter" if converter_can else "litert-quantizer"
    if engine not in ENGINES:
        raise InvalidInputError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}.")
    if engine == "converter" and is_tflite:
        raise InvalidInputError(
            "the TFLite converter quantizes a Keras model or SavedModel, not a .tflite; "
            "quantize the .tflite with engine='litert-quantizer' (--engine litert-quantizer), "
            "or pass the source model."
        )
    if engine not in recipe.spec.engines:
        raise InvalidInputError(
            f"recipe {recipe.name!r} is made by {', '.join(recipe.spec.engines)}, not {engine}; "
            f"pass engine='{recipe.spec.engines[0]}' (--engine {recipe.spec.engines[0]})."
        )
    if engine == "converter":
        _check_converter_rules(recipe)
    return engine


def _check_converter_rules(recipe: Recipe) -> None:
    """The converter keeps chosen ops float (``int8`` only); every other mode is refused."""
    for number, rule in enumerate(recipe.rules, start=1):
        if rule.mode != "float":
            raise InvalidInputError(
                f"rule {number} ({rule.describe()}): the TFLite converter can only keep ops "
                "float; use engine='litert-quantizer' (--engine litert-quantizer) for "
                f"{rule.mode} rules."
            )
        if recipe.name != "int8":
            raise InvalidInputError(
                f"float rules with the converter apply to recipe 'int8' (its selective "
                f"quantization), not {recipe.name!r}; use --engine litert-quantizer."
            )


def converter_float_nodes(calibrated: bytes, recipe: Recipe, *, source: str) -> tuple[str, ...]:
    """The converter nodes ``recipe.float_nodes`` and its ``float`` rules keep float.

    ``calibrated`` is the calibrate-only conversion (the names ``denylisted_nodes`` takes);
    ``recipe`` an ``int8`` recipe whose rules are all ``float``. The node names come
    ``float_nodes`` first, each once.

    Raises:
        InvalidInputError: A rule matches no op of the model.
    """
    from tfcompress.models.tflite_file import read_tflite
    from tfcompress.quantization.engines.plan import plan_ops

    nodes = list(recipe.float_nodes)
    if recipe.rules:
        plan = plan_ops(read_tflite(calibrated, source=source), recipe, source=source)
        for op in plan:
            if op.mode == "float" and op.outputs and op.outputs[0] not in nodes:
                nodes.append(op.outputs[0])
    return tuple(nodes)
