"""How a model is fed: which dimension of each tensor is the batch, scalars, static batches.

Real edge models are not all "batch first, batch free". A voice-activity model takes
``input (N, ?)``, a sample rate ``sr ()`` and a state ``h (2, N, 64)`` (layers, batch,
units); an RNN exported for a phone says ``(1, 40)``. The signature decides how such a model
is fed, with these rules (:func:`feed_layout`):

* a rank-0 input is a **scalar**: one value per call, never batched;
* a dimension the signature leaves unknown in the first position is the batch;
* when the model's batch is free (some input has an unknown first dimension), an input
  whose first dimension is fixed carries the batch in its first *unknown* dimension (the
  ``N`` of a ``(layers, N, units)`` state); fixed dimensions are always honoured;
* when every input fixes its first dimension, the model has a **static batch**: the
  smallest of those sizes, found in each input at its first dimension of that size;
* the user can say which dimension is the batch per input (``--batch-dim h=1``,
  ``batch_dims={"h": 1}``) when the signature cannot tell.

Outputs follow the same rules, so a ``(layers, N, units)`` state comes back per sample. An
output whose signature tells nothing (a state made inside an ``If`` subgraph comes out as
``(?, ?, ?)``) is placed by ``--batch-dim`` too (``--batch-dim stateN=1``), by the
reference's layout in a gate, or by the first call's arrays: the one unknown dimension
that holds the call's samples (:meth:`FeedLayout.fit_outputs`).

Inside tfcompress every array is batch first (a :class:`~tfcompress.data.Dataset` counts
samples along axis 0): :meth:`TensorLayout.to_samples` moves a tensor's batch to the front
and :meth:`TensorLayout.to_model` moves it back for the runtime. Data files keep the
model's own layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress.errors import InvalidDataError, InvalidInputError
from tfcompress.models.signature import ModelSignature, Shape, TensorSpec


@dataclass(frozen=True)
class TensorLayout:
    """One tensor of a model and where its batch is.

    Attributes:
        spec: The tensor as the signature declares it.
        batch_axis: The dimension that counts samples; None for a tensor that is not
            batched (a scalar input, or an output of one value per call).
        declared: True when the user named ``batch_axis`` (``--batch-dim``).
    """

    spec: TensorSpec
    batch_axis: int | None
    declared: bool = False

    @property
    def name(self) -> str:
        """The tensor's name."""
        return self.spec.name

    @property
    def shape(self) -> Shape:
        """The tensor's shape in the model's own layout (None = unknown)."""
        return self.spec.shape

    @property
    def is_scalar(self) -> bool:
        """Whether the tensor has rank 0 (one value per call)."""
        return len(self.spec.shape) == 0

    @property
    def batch_size(self) -> int | None:
        """The size the signature fixes at the batch dimension (None: any)."""
        return None if self.batch_axis is None else self.spec.shape[self.batch_axis]

    @property
    def sample_shape(self) -> Shape:
        """The shape of one sample: every dimension but the batch."""
        if self.batch_axis is None:
            return self.spec.shape
        return tuple(d for i, d in enumerate(self.spec.shape) if i != self.batch_axis)

    @property
    def is_dynamic(self) -> bool:
        """Whether a dimension other than the batch is unknown (an audio length)."""
        return any(d is None for d in self.sample_shape)

    def format_shape(self) -> str:
        """The shape with ``N`` at an unknown batch and ``?`` at other unknown dimensions."""
        dims = [
            str(d) if d is not None else "N" if i == self.batch_axis else "?"
            for i, d in enumerate(self.spec.shape)
        ]
        return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"

    def describe(self) -> str:
        """Shape and dtype, e.g. ``(2, N, 64) float32``; ``scalar`` for a rank-0 tensor."""
        return f"{self.format_shape()} {self.spec.dtype}" + (" scalar" if self.is_scalar else "")

    def how_fed(self) -> str | None:
        """Words for what is not "batch first": a scalar, a batch elsewhere, a declared one."""
        if self.is_scalar:
            return "scalar: one value per call, never batched"
        if self.batch_axis is None:
            return "one value per call, not per sample"
        words = []
        if self.batch_axis != 0:
            words.append(f"batch at dimension {self.batch_axis}")
        if self.declared:
            words.append("declared with --batch-dim")
        return ", ".join(words) or None

    def to_samples(self, array: np.ndarray, count: int | None = None) -> np.ndarray:
        """An array in the model's layout, batch moved first (tfcompress's own layout).

        A tensor without a batch dimension is repeated for each of the ``count`` samples
        of the call it came from (a read-only view, no copy).
        """
        if self.batch_axis is None:
            return np.broadcast_to(array, (1 if count is None else count, *np.shape(array)))
        return array if self.batch_axis == 0 else np.moveaxis(array, self.batch_axis, 0)

    def to_model(self, array: np.ndarray) -> np.ndarray:
        """A batch-first array in the model's layout; a scalar's one value as a 0-d array."""
        if self.batch_axis is None:
            if array.strides[:1] != (0,) and len(array) > 1 and not (array == array[0]).all():
                raise InvalidDataError(
                    f"input {self.name!r} takes one value per call, but the samples of one "
                    "call carry different values; give it one value (a 0-d array)."
                )
            return np.array(array[0])  # a 0-d array (ascontiguousarray would make it 1-d)
        if self.batch_axis == 0:
            return array
        return np.ascontiguousarray(np.moveaxis(array, 0, self.batch_axis))


@dataclass(frozen=True)
class FeedLayout:
    """Every input and output of a model with its batch dimension, and the model's batch.

    Attributes:
        inputs: One layout per input, in signature order.
        outputs: One layout per output, in signature order.
        static_batch: The batch every call must have (1 for a model exported at batch 1);
            None when the batch is free.

    Example:
        >>> sig = ModelSignature((TensorSpec((1, 40), name="frames"),), ())
        >>> feed_layout(sig).static_batch
        1
    """

    inputs: tuple[TensorLayout, ...]
    outputs: tuple[TensorLayout, ...]
    static_batch: int | None

    def input(self, name: str) -> TensorLayout:
        """The layout of input ``name`` (KeyError when there is none)."""
        return {t.name: t for t in self.inputs}[name]

    def output(self, name: str) -> TensorLayout:
        """The layout of output ``name`` (KeyError when there is none)."""
        return {t.name: t for t in self.outputs}[name]

    @property
    def batch_first(self) -> bool:
        """True for the plain case: every tensor batched on its first dimension."""
        return all(t.batch_axis == 0 for t in (*self.inputs, *self.outputs))

    def to_model(self, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Batch-first arrays (one per input name) in the model's own layout."""
        return {t.name: t.to_model(feed[t.name]) for t in self.inputs if t.name in feed}

    def fit_outputs(self, outputs: Mapping[str, np.ndarray], count: int) -> FeedLayout:
        """This layout with each output's batch placed where a call's arrays show it.

        An output the signature cannot place (its guessed batch dimension is unknown) and
        whose array does not hold ``count`` samples there is placed at the one other unknown
        dimension that does; declared outputs and outputs the signature fixes stay. A runner
        keeps the fitted layout, so every later call is joined the same way.

        Example:
            >>> sig = ModelSignature((TensorSpec((None, 4), name="x"),),
            ...                      (TensorSpec((None, None, None), name="s"),))
            >>> feed_layout(sig).fit_outputs({"s": np.zeros((2, 5, 8))}, 5).output("s").batch_axis
            1
        """
        fitted = []
        for tensor in self.outputs:
            array = outputs.get(tensor.name)
            fitted.append(tensor if array is None else _fit_output(tensor, array, count))
        if all(a is b for a, b in zip(fitted, self.outputs, strict=True)):
            return self
        return FeedLayout(self.inputs, tuple(fitted), self.static_batch)

    def to_samples(self, outputs: Mapping[str, np.ndarray], count: int) -> dict[str, np.ndarray]:
        """A call's outputs (model layout) batch first; ``count`` samples were fed."""
        tensors = {t.name: t for t in self.outputs}
        return {
            name: tensors[name].to_samples(array, count) if name in tensors else array
            for name, array in outputs.items()
        }

    def explain(self) -> list[str]:
        """One line per tensor fed in a way that is not "batch first, batch free"."""
        lines = []
        if self.static_batch is not None:
            lines.append(
                f"static batch {self.static_batch}: any number of samples runs as calls of "
                f"{self.static_batch} sample(s)"
            )
        for kind, tensors in (("input", self.inputs), ("output", self.outputs)):
            for tensor in tensors:
                how = tensor.how_fed()
                if how is not None:
                    lines.append(f"{kind} {tensor.name} {tensor.format_shape()}: {how}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the static batch and each tensor's batch dimension (None: none)."""
        return {
            "static_batch": self.static_batch,
            "inputs": {t.name: t.batch_axis for t in self.inputs},
            "outputs": {t.name: t.batch_axis for t in self.outputs},
        }


def feed_layout(
    signature: ModelSignature,
    *,
    batch_dims: Mapping[str, int] | None = None,
    name: str = "the model",
) -> FeedLayout:
    """Decide where each tensor's batch is, from the signature and what the user declared.

    Args:
        signature: The model's inputs and outputs.
        batch_dims: Input name -> the dimension that is the batch, for inputs whose
            signature cannot tell (``--batch-dim h=1``).
        name: The model's name, for messages.

    Raises:
        InvalidInputError: A declared dimension for an input the model does not have, a
            scalar, or a dimension out of range; inputs that fix different batch sizes.
    """
    declared = _check_declared(signature, dict(batch_dims or {}), name)
    outputs_declared = {k: v for k, v in declared.items() if k not in signature.input_names}
    declared = {k: v for k, v in declared.items() if k in signature.input_names}
    # The batch is free when an input leaves it unknown: first dimension, or the declared one.
    candidates = [spec.shape[declared.get(spec.name, 0)] for spec in signature.inputs if spec.shape]
    free = any(size is None for size in candidates)
    static = None if free or not candidates else min(int(d) for d in candidates if d is not None)
    inputs = tuple(
        TensorLayout(spec, declared[spec.name], True)
        if spec.name in declared
        else TensorLayout(spec, _batch_axis(spec, static))
        for spec in signature.inputs
    )
    sizes = {t.name: t.batch_size for t in inputs if t.batch_size is not None}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{k} has {v}" for k, v in sizes.items())
        raise InvalidInputError(
            f"{name}'s inputs fix different batch sizes ({listed}); say which dimension is "
            "the batch of each with --batch-dim NAME=DIM (batch_dims= in Python)."
        )
    static = next(iter(sizes.values()), None)
    outputs = tuple(
        TensorLayout(spec, outputs_declared[spec.name], True)
        if spec.name in outputs_declared
        else TensorLayout(spec, _output_axis(spec, static))
        for spec in signature.outputs
    )
    return FeedLayout(inputs, outputs, static)


def parse_batch_dim(text: str) -> tuple[str, int]:
    """Parse ``NAME=DIM`` (the CLI's ``--batch-dim``) into an input name and a dimension.

    Raises:
        InvalidInputError: Not ``NAME=DIM`` with DIM a non-negative integer.
    """
    name, sep, dim = text.partition("=")
    if not name or not sep or not dim.strip().isdigit():
        raise InvalidInputError(
            f"--batch-dim {text!r} is not NAME=DIM; write e.g. h=1 (the batch is dimension 1 "
            "of input h, counting from 0)."
        )
    return name, int(dim)


def parse_input_value(text: str) -> tuple[str, float]:
    """Parse ``NAME=VALUE`` (the CLI's ``--input-value``) into an input name and a number.

    Raises:
        InvalidInputError: Not ``NAME=VALUE`` with a finite number.
    """
    name, sep, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not name or not sep or not np.isfinite(number):
        raise InvalidInputError(
            f"--input-value {text!r} is not NAME=VALUE; write e.g. sr=16000 (a finite number "
            "fed to input sr on every call)."
        )
    return name, number


def check_input_values(
    values: Mapping[str, float], signature: ModelSignature, name: str = "the model"
) -> dict[str, float]:
    """Refuse values for inputs the model does not have; return them as floats.

    Raises:
        InvalidInputError: An unknown input name or a value that is not a finite number.
    """
    checked = {}
    for key, value in values.items():
        if key not in signature.input_names:
            raise InvalidInputError(
                f"{name} has no input {key!r} to give a value to; its inputs are "
                f"{', '.join(signature.input_names)}."
            )
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if not np.isfinite(number):
            raise InvalidInputError(
                f"input_values[{key!r}] must be a finite number, got {value!r}."
            )
        checked[key] = number
    return checked


def _check_declared(
    signature: ModelSignature, declared: dict[str, int], name: str
) -> dict[str, int]:
    specs = {spec.name: spec for spec in signature.inputs}
    outputs = {spec.name: spec for spec in signature.outputs if spec.name not in specs}
    for key, axis in declared.items():
        spec = specs.get(key, outputs.get(key))
        if spec is None:
            raise InvalidInputError(
                f"--batch-dim names {key!r}, but {name} has no such input or output; its "
                f"inputs are {', '.join(specs)}; its outputs {', '.join(outputs) or 'none'}."
            )
        if not spec.shape:
            raise InvalidInputError(
                f"--batch-dim names {key!r}, a scalar (shape ()): it has no dimension to "
                "batch; a scalar gets one value per call (--input-value NAME=V)."
            )
        if (
            isinstance(axis, bool)
            or not isinstance(axis, int | np.integer)
            or not (0 <= axis < len(spec.shape))
        ):
            raise InvalidInputError(
                f"--batch-dim {key}={axis}: input {key!r} has {len(spec.shape)} dimension(s) "
                f"{_plain(spec.shape)}; give one from 0 to {len(spec.shape) - 1}."
            )
    return {key: int(axis) for key, axis in declared.items()}


def _batch_axis(spec: TensorSpec, static: int | None) -> int | None:
    shape = spec.shape
    if not shape:
        return None
    if shape[0] is None:
        return 0
    unknown = [i for i, d in enumerate(shape) if d is None]
    if static is None:  # the batch is free: this input follows it where it is unknown
        return unknown[0] if unknown else 0
    sized = [i for i, d in enumerate(shape) if d == static]
    return sized[0] if sized else unknown[0] if unknown else 0


def _fit_output(tensor: TensorLayout, array: np.ndarray, count: int) -> TensorLayout:
    """``tensor`` placed where ``array`` (one call of ``count`` samples) holds its batch."""
    axis, shape = tensor.batch_axis, np.shape(array)
    if tensor.declared or axis is None or len(shape) != len(tensor.shape):
        return tensor
    if shape[axis] == count or tensor.shape[axis] is not None:
        return tensor
    found = [i for i, d in enumerate(shape) if d == count and tensor.shape[i] is None]
    return TensorLayout(tensor.spec, found[0]) if len(found) == 1 else tensor


def _output_axis(spec: TensorSpec, static: int | None) -> int | None:
    shape = spec.shape
    if not shape:
        return None
    if static is None:
        if shape[0] is None:
            return 0
        unknown = [i for i, d in enumerate(shape) if d is None]
        if unknown:
            return unknown[0]
        # A fixed leading 1 next to a free batch is a batch written as 1: LiteRT Quantizer
        # and older converters leave output shape signatures at (1, ...), and the runtime
        # still returns one row per sample. Any other fixed shape is one value per call.
        return 0 if shape[0] == 1 else None
    sized = [i for i, d in enumerate(shape) if d == static]
    return sized[0] if sized else None


def _plain(shape: Sequence[int | None]) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def config_batch_dims(value: object) -> dict[str, int]:
    """``batch_dims`` of a config, checked without a model: names -> dimensions 0 or more.

    Raises:
        InvalidInputError: Not a mapping of names to non-negative integers.
    """

    def dimension(key: str, axis: object) -> int:
        if isinstance(axis, bool) or not isinstance(axis, int | np.integer) or axis < 0:
            raise InvalidInputError(
                f"batch_dims[{key!r}] must be a dimension (an integer 0 or more), got {axis!r:.60}."
            )
        return int(axis)

    return _by_input_name(value, "batch_dims", "dimensions ({'h': 1})", dimension)


def config_input_values(value: object) -> dict[str, float]:
    """``input_values`` of a config, checked without a model: names -> finite numbers.

    Raises:
        InvalidInputError: Not a mapping of names to finite numbers.
    """

    def number(key: str, given: object) -> float:
        numeric = not isinstance(given, bool) and isinstance(given, int | float | np.number)
        if not (numeric and np.isfinite(float(given))):  # type: ignore[arg-type]
            raise InvalidInputError(
                f"input_values[{key!r}] must be a finite number, got {given!r:.60}."
            )
        return float(given)  # type: ignore[arg-type]

    return _by_input_name(value, "input_values", "numbers ({'sr': 16000})", number)


def _by_input_name(value: object, field: str, values: str, check: Any) -> dict[str, Any]:
    """A config's mapping of input names, each value through ``check``, sorted by name."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{field} must map input names to {values}, got {value!r:.80}.")
    checked = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"{field}: {key!r:.60} is not an input name.")
        checked[key] = check(key, item)
    return dict(sorted(checked.items()))
