"""Check data against a model's input signature before it reaches a converter or runtime."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from tfcompress.data.dataset import Dataset
from tfcompress.errors import InvalidArgumentTypeError, InvalidDataError, InvalidInputError
from tfcompress.models.signature import ModelSignature, TensorSpec

if TYPE_CHECKING:
    from tfcompress.models.feeding import FeedLayout, TensorLayout

logger = logging.getLogger(__name__)

_NAN, _NAN_FIX = "holds NaN or Inf values", "clean or drop them"


def validate_for_model(
    dataset: Dataset,
    spec: TensorSpec,
    *,
    require_labels: bool = False,
    num_classes: int | None = None,
    what: str = "data",
) -> Dataset:
    """Return ``dataset`` in the model's dtype and shape, or explain precisely why it won't fit.

    Integer samples are cast to the model's float dtype, as Keras does. A missing trailing
    channel axis of size 1 (``(N, 28, 28)`` for a ``(N, 28, 28, 1)`` model) is added.
    One-hot labels become class indices. Values are checked *after* the cast: float64 data
    beyond float32's range would become Inf there (and crash the TFLite converter), and
    integers cast to a narrower integer dtype would silently wrap. With ``num_classes``,
    labels must lie in ``[0, num_classes)``; ``what`` names the data in messages
    ("calibration data", "--eval data"...).

    Raises:
        InvalidDataError: Empty data, wrong shape or dtype, NaN/Inf, values the model's
            dtype cannot hold, or bad/missing labels.

    Example:
        >>> spec = TensorSpec(shape=(None, 2), dtype="float32")
        >>> validate_for_model(Dataset(np.ones((3, 2), np.int64)), spec).x.dtype
        dtype('float32')
    """
    x = dataset.x
    if isinstance(x, dict):  # a one-input model fed by name ({"image": ...} or {"x0": ...})
        x = _match_inputs(dataset, ModelSignature((spec,), ()), what)[spec.name]
    labels = dataset.y
    if isinstance(labels, dict):
        if len(labels) != 1:
            raise InvalidDataError(
                f"{what} has labels for {len(labels)} outputs ({', '.join(labels)}); this step "
                "reads one label array: save it as 'y'."
            )
        labels = next(iter(labels.values()))
    expected = spec.describe()
    if len(dataset) == 0:
        raise InvalidDataError(f"{what} is empty; the model expects samples of shape {expected}.")
    if x.dtype.kind not in "fiu":
        raise InvalidDataError(
            f"{what} has dtype {x.dtype}; the model expects {spec.dtype} numbers of shape "
            f"{expected}."
        )
    x = _fit_shape(x, spec, what)
    x = cast_samples(x, np.dtype(spec.dtype), what)
    y = _check_labels(labels, len(x), require_labels, num_classes, what)
    return Dataset(x, y)


def validate_for_signature(
    dataset: Dataset,
    signature: ModelSignature,
    *,
    what: str = "data",
    layout: FeedLayout | None = None,
    values: Mapping[str, float] | None = None,
    batch_first: bool = False,
) -> Dataset:
    """Match ``dataset`` to every input (and labels to outputs) of a model, by name.

    Samples: one array for a single-input model, else a dict keyed by input name or by
    ``x0``, ``x1``, ... in input order. Each array is in the model's own layout (a
    ``(layers, N, units)`` state keeps its batch in the middle; a scalar input is one 0-d
    value) and is checked as :func:`validate_for_model` checks a single input (shape, dtype,
    NaN/Inf, range after the cast); the error names the input and its expected shape.
    Labels: one array for a single-output model, else a dict keyed by output name; their
    content is checked by the metric that reads them. ``layout`` says where each tensor's
    batch is (default: :func:`feed_layout` of the signature); ``values`` are the
    ``--input-value`` ones; ``batch_first`` data is already as this function returns it
    (validated for one variant, fed to another).

    The result's ``x`` is a dict keyed by input name, in the model's input order, each array
    batch first (a scalar repeated per sample as a read-only view); its ``y`` is None or a
    dict keyed by output name, batch first.

    Raises:
        InvalidDataError: Missing or unknown input names, arrays that do not fit an input,
            a scalar input given samples, labels for outputs the model does not have.
        InvalidInputError: A value for an input the data also holds.

    Example:
        >>> a, b = TensorSpec((None, 2), name="a"), TensorSpec((None, 1), name="b")
        >>> data = Dataset({"x0": np.ones((3, 2)), "x1": np.ones((3, 1))})
        >>> checked = validate_for_signature(data, ModelSignature((a, b), ()))
        >>> sorted(checked.x)
        ['a', 'b']
    """
    from tfcompress.models.feeding import feed_layout

    if len(dataset) == 0:
        raise InvalidDataError(f"{what} is empty; the model expects {_expected(signature)}.")
    layout = layout or feed_layout(signature)
    values = dict(values or {})
    arrays = _match_inputs(dataset, signature, what, given=set(values))
    both = [name for name in values if name in arrays]
    if both:
        raise InvalidInputError(
            f"input {both[0]!r} has both an array in {what} and a value (--input-value); "
            "drop one of them."
        )
    checked = {}
    batched = [t for t in layout.inputs if not t.is_scalar and t.name not in values]
    for tensor in batched:  # first: they tell how many samples there are
        where = _input_what(what, tensor.name, signature)
        checked[tensor.name] = _batched(tensor, arrays[tensor.name], where, batch_first)
    counts = {name: len(array) for name, array in checked.items()}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{name!r}: {count}" for name, count in counts.items())
        raise InvalidDataError(
            f"{what} holds different numbers of samples per input ({listed}, counted along "
            "each input's batch dimension); give every input the same number of samples."
        )
    count = next(iter(counts.values()), len(dataset))
    for tensor in layout.inputs:
        where = _input_what(what, tensor.name, signature)
        if tensor.name in values:
            checked[tensor.name] = _filled(tensor, values[tensor.name], count, where)
        elif tensor.is_scalar:
            array = arrays[tensor.name]
            if batch_first and array.ndim == 1:
                array = array[0]  # repeated per sample: check its one value
            checked[tensor.name] = _scalar(tensor, np.asarray(array), count, where)
    ordered = {t.name: checked[t.name] for t in layout.inputs}
    return Dataset(ordered, _match_labels(dataset.y, signature, count, what, layout))


def _batched(
    tensor: TensorLayout, array: np.ndarray, what: str, batch_first: bool = False
) -> np.ndarray:
    """Check one input's samples in the model's layout; return them batch first."""
    if array.ndim == 0:
        raise InvalidDataError(
            f"{what} is a single value but the model expects {tensor.describe()}; give one "
            "sample per row (the N dimension), or a value for every call with --input-value "
            f"{tensor.name}=V."
        )
    axis = 0 if batch_first else tensor.batch_axis or 0
    spec = TensorSpec((None, *tensor.sample_shape), tensor.spec.dtype, tensor.name)
    if axis and array.ndim == len(tensor.shape):
        array = np.moveaxis(array, axis, 0)
    elif axis:
        raise InvalidDataError(
            f"{what} has shape {tuple(array.shape)} but the model expects {tensor.describe()} "
            f"(the batch N is dimension {axis}); save the array in the model's layout."
        )
    try:
        return validate_for_model(Dataset(array), spec, what=what).x
    except InvalidDataError as error:
        if not axis:
            raise
        raise InvalidDataError(
            f"{what} has shape {tuple(np.moveaxis(array, 0, axis).shape)} but the model "
            f"expects {tensor.describe()} (the batch N is dimension {axis}); save the array "
            "in the model's layout."
        ) from error


def _scalar(tensor: TensorLayout, array: np.ndarray, count: int, what: str) -> np.ndarray:
    """Check a scalar input's one value; return it repeated per sample (a view)."""
    if array.ndim != 0:
        raise InvalidDataError(
            f"{what} has shape {tuple(array.shape)} but input {tensor.name!r} is a scalar "
            f"(shape ()): the model takes one value per call; save one value, e.g. "
            f"np.savez(..., {tensor.name}=np.float32(16000)), or pass --input-value "
            f"{tensor.name}=V."
        )
    if array.dtype.kind not in "fiub":
        raise InvalidDataError(f"{what} has dtype {array.dtype}; give a number.")
    value = cast_samples(array.reshape(1), np.dtype(tensor.spec.dtype), what)
    return np.broadcast_to(value, (count,))


def _filled(tensor: TensorLayout, value: float, count: int, what: str) -> np.ndarray:
    """``value`` in every element of the input, for every sample (a read-only view)."""
    if tensor.is_dynamic:
        raise InvalidDataError(
            f"{what}: --input-value {tensor.name}={value:g} cannot fill {tensor.describe()}, "
            "whose size is unknown; give the input's arrays in the data instead."
        )
    sample = tuple(int(d) for d in tensor.sample_shape if d is not None)
    cast = cast_samples(np.asarray([value]), np.dtype(tensor.spec.dtype), what)
    return np.broadcast_to(cast.reshape((1,) * (len(sample) + 1)), (count, *sample))


def _input_what(what: str, name: str, signature: ModelSignature) -> str:
    return what if len(signature.inputs) == 1 else f"{what} for input {name!r}"


def _expected(signature: ModelSignature) -> str:
    return "; ".join(f"{spec.name} {spec.describe()}" for spec in signature.inputs)


def _match_inputs(
    dataset: Dataset, signature: ModelSignature, what: str, given: set[str] | None = None
) -> dict[str, np.ndarray]:
    """The data's arrays by input name; inputs in ``given`` (filled by value) may be absent."""
    given = given or set()
    names = signature.input_names
    needed = [n for n in names if n not in given]
    if not isinstance(dataset.x, dict):
        if len(needed) == 1:
            return {needed[0]: dataset.x}
        if len(names) == 1:
            return {names[0]: dataset.x}
        raise InvalidDataError(
            f"{what} is one array but the model has {len(names)} inputs ({_expected(signature)}); "
            "pass a dict (or an .npz) with one array per input name, or x0, x1, ... in order."
        )
    keys = list(dataset.x)
    if set(keys) == set(names) or (set(keys) == set(needed) and needed):
        return dict(dataset.x)
    positional = [f"x{i}" for i in range(len(names))]
    if set(keys) == set(positional):
        return {name: dataset.x[key] for name, key in zip(names, positional, strict=True)}
    if len(needed) == 1 and keys == ["x"]:
        return {needed[0]: dataset.x["x"]}
    missing = [n for n in needed if n not in keys]
    unknown = [k for k in keys if k not in names]
    scalars = [s.name for s in signature.inputs if not s.shape and s.name in missing]
    raise InvalidDataError(
        f"{what} has arrays {', '.join(map(repr, keys))} but the model's inputs are "
        f"{_expected(signature)}"
        + (f"; missing {', '.join(map(repr, missing))}" if missing else "")
        + (f"; no input is called {', '.join(map(repr, unknown))}" if unknown else "")
        + f"; name the arrays after the inputs, or x0..x{len(names) - 1} in input order"
        + (
            f" (a scalar such as {scalars[0]!r} can instead get one value for every call: "
            f"--input-value {scalars[0]}=V)"
            if scalars
            else ""
        )
        + "."
    )


def _match_labels(
    labels: np.ndarray | dict[str, np.ndarray] | None,
    signature: ModelSignature,
    count: int,
    what: str,
    layout: FeedLayout | None = None,
) -> dict[str, np.ndarray] | None:
    if labels is None:
        return None
    names = signature.output_names
    if not isinstance(labels, dict):
        if len(names) == 1:
            labels = {names[0]: labels}
        else:
            raise InvalidDataError(
                f"{what} has one label array 'y' but the model has {len(names)} outputs "
                f"({', '.join(names)}); save labels per output as y_<output name>."
            )
    if len(names) == 1 and len(labels) == 1:  # one output: its labels, whatever the key
        labels = {names[0]: next(iter(labels.values()))}
    unknown = [k for k in labels if k not in names]
    if unknown:
        raise InvalidDataError(
            f"{what} has labels for {', '.join(map(repr, unknown))}, which the model does not "
            f"output; its outputs are {', '.join(names)} (labels go in y_<output name>)."
        )
    matched = {name: labels[name] for name in names if name in labels}
    if layout is not None:  # labels in the output's own layout, its batch moved first
        for name, array in matched.items():
            axis = layout.output(name).batch_axis
            if axis and array.ndim == len(layout.output(name).shape):
                matched[name] = np.moveaxis(array, axis, 0)
    for name, array in matched.items():
        if array.ndim == 0 or len(array) != count:
            raise InvalidDataError(
                f"{what} has {count} samples but labels of shape {array.shape} for output "
                f"{name!r}; "
                "give one label per sample."
            )
    return matched


def cast_samples(x: np.ndarray, dtype: np.dtype, what: str = "data") -> np.ndarray:
    """Cast ``x`` to ``dtype`` and prove every value survived the cast.

    Raises:
        InvalidDataError: NaN/Inf in ``x``, floats that overflow ``dtype`` (1e300 to
            float32), or values outside an integer ``dtype``'s range or not whole.
    """
    if dtype.kind in "iu":
        if x.dtype.kind == "f":
            _check_finite(x, what, _NAN, _NAN_FIX)
        _check_integer_range(x, dtype, what)
    # Overflow to Inf is detected right below; numpy's warning would only repeat it.
    with np.errstate(over="ignore", invalid="ignore"):
        cast = x.astype(dtype, copy=False)
    if dtype.kind == "f" and not np.isfinite(cast).all():
        # One pass over the data when all is well; a second only to word the error.
        if x.dtype.kind == "f":
            _check_finite(x, what, _NAN, _NAN_FIX)
        limit = float(np.finfo(dtype).max)
        _check_finite(
            cast,
            what,
            f"holds values beyond {dtype}'s range (+/-{limit:.3g})",
            "rescale them as in training (e.g. to [0, 1])",
        )
    return cast


def check_count(value: object, name: str, hint: str) -> None:
    """Refuse an argument that should be a positive integer (a count of samples, threads...).

    Raises:
        InvalidArgumentTypeError: ``value`` is not an int (``bool`` included).
        InvalidInputError: ``value`` is below 1.
    """
    if not isinstance(value, int | np.integer) or isinstance(value, bool | np.bool_):
        raise InvalidArgumentTypeError(
            f"{name} must be a positive integer, got {type(value).__name__} {value!r}; pass {hint}."
        )
    if value < 1:
        raise InvalidInputError(f"{name} must be at least 1, got {value}; pass {hint}.")


def _check_finite(x: np.ndarray, what: str, problem: str, fix: str) -> None:
    finite = np.isfinite(x)
    if not finite.all():
        bad = int(x.shape[0] - finite.reshape(len(x), -1).all(axis=1).sum())
        raise InvalidDataError(f"{what} {problem} in {bad} of {len(x)} samples; {fix}.")


def _check_integer_range(x: np.ndarray, dtype: np.dtype, what: str) -> None:
    if x.dtype.kind == "f" and not np.all(np.mod(x, 1) == 0):
        raise InvalidDataError(
            f"{what} holds fractional values but the model expects {dtype}; pass whole numbers."
        )
    info = np.iinfo(dtype)
    low, high = _number(x.min()), _number(x.max())
    if low < info.min or high > info.max:
        raise InvalidDataError(
            f"{what} ranges from {_show(low)} to {_show(high)}, outside {dtype}'s [{info.min}, "
            f"{info.max}]; the values would wrap: rescale or clip them as in training."
        )


def _show(value: int | float) -> str:
    """Integers in full (10000000, not 1e+07), floats short (1e+300)."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _number(value: np.generic) -> int | float:
    """A numpy scalar as a Python number, so comparisons never wrap or lose sign."""
    return int(value) if np.issubdtype(value.dtype, np.integer) else float(value)


def _fit_shape(x: np.ndarray, spec: TensorSpec, what: str) -> np.ndarray:
    sample = spec.sample_shape
    if _matches(x.shape[1:], sample):
        return x
    if len(sample) == x.ndim and sample[-1] == 1 and _matches(x.shape[1:], sample[:-1]):
        logger.info("adding a channel axis: %s -> %s", x.shape, (*x.shape, 1))
        return x[..., np.newaxis]
    raise InvalidDataError(
        f"{what} has shape {tuple(x.shape)} but the model expects {spec.describe()}; reshape "
        "the samples (batch dimension first)."
    )


def _matches(actual: tuple[int, ...], expected: tuple[int | None, ...]) -> bool:
    return len(actual) == len(expected) and all(
        e is None or a == e for a, e in zip(actual, expected, strict=True)
    )


def _check_labels(
    y: np.ndarray | None, count: int, required: bool, num_classes: int | None, what: str
) -> np.ndarray | None:
    if y is None:
        if required:
            raise InvalidDataError(
                f"{what} has no labels; accuracy needs them: save them as 'y' in the .npz "
                "or pass (x, y)."
            )
        return None
    if y.dtype.kind not in "fiu":
        raise InvalidDataError(
            f"{what} labels have dtype {y.dtype}; give integer class indices (or one-hot rows)."
        )
    if y.dtype.kind == "f" and y.size and not np.isfinite(y).all():
        bad = int(np.size(y) - np.isfinite(y).sum())
        raise InvalidDataError(
            f"{what} labels hold {bad} NaN or Inf values; give integer class indices."
        )
    if y.ndim == 2 and y.shape[1] > 1:
        y = y.argmax(axis=1)  # one-hot
    y = y.reshape(-1) if y.ndim == 2 else y
    if y.ndim != 1 or len(y) != count:
        raise InvalidDataError(
            f"{what} has {count} samples but labels of shape {tuple(y.shape)}; give one class "
            "index (or one-hot row) per sample."
        )
    if y.dtype.kind == "f" and not np.all(np.mod(y, 1) == 0):
        raise InvalidDataError(
            f"{what} labels must be whole class indices, got fractions in {y.dtype}; round "
            "them or pass integer labels."
        )
    # Range checks on the original values: casting 1e300 or a huge uint64 to int64 wraps.
    low, high = _number(y.min()), _number(y.max())
    if low < 0:
        raise InvalidDataError(f"{what} labels include {_show(low)}; class indices start at 0.")
    if num_classes is not None and high >= num_classes:
        raise InvalidDataError(
            f"{what} labels go up to {_show(high)} but the model has {num_classes} outputs; "
            "check that the data belongs to this model."
        )
    if high > np.iinfo(np.int64).max:
        raise InvalidDataError(
            f"{what} labels go up to {_show(high)}, too large for a class index; check that "
            "these are class labels."
        )
    return y.astype(np.int64)
