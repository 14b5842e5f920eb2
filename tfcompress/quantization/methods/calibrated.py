"""The calibrated float ``.tflite`` run once over the samples, for every method that edits it.

The converter's calibrate-only output is the float model with each activation tensor's
min/max recorded. The methods that edit it before the quantizer (the range methods,
bias correction) need statistics of its tensors over the calibration samples: it runs here
once, in float, every intermediate tensor kept, and the statistics of all of them are
gathered in that one pass (:func:`float_statistics`, cached in
:attr:`~.registry.RangeContext.shared`, so candidates that edit the same calibrated model
share the run):

* each activation tensor's histogram over its calibrated range (the range methods);
* the mean input *patch* of every CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED: the
  values each kernel tap reads, averaged over the output positions and samples, zero padding
  included as the op pads (bias correction).

Only the first subgraph is read (the converter writes one for these models).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tfcompress._compat.litert import flatbuffer_utils, interpreter_module
from tfcompress.data import Dataset
from tfcompress.errors import ConversionError, InvalidDataError
from tfcompress.quantization.methods.stats import Update, tap_windows

#: Bins of each tensor's histogram over its calibrated range.
BINS = 2048
#: Samples per interpreter call when the model's batch dimension can be resized.
BATCH = 32
#: The ops whose weights the converter quantizes per output channel, by builtin code.
LINEAR_OPS = {3: "conv", 4: "depthwise", 9: "dense"}  # CONV_2D, DEPTHWISE_CONV_2D, FC
#: ``Padding`` of the conv options: SAME is 0, VALID 1.
_SAME = 0


@dataclass
class Histogram:
    """One activation tensor's values binned over its calibrated range (exact zeros apart).

    Folded in batch by batch (:meth:`add`): the counts after any split of the samples into
    batches are the counts of all of them at once.
    """

    low: float
    high: float
    counts: np.ndarray
    zeros: int = 0

    def add(self, values: np.ndarray) -> None:
        """Fold one batch of the tensor in (float32 arithmetic, no copy of the values kept)."""
        flat = np.asarray(values, np.float32).ravel()
        zeros = int(np.count_nonzero(flat == 0.0))
        self.zeros += zeros
        self.counts += np.bincount(self._bins(flat), minlength=BINS)
        self.counts[int(self._bins(np.zeros(1, np.float32))[0])] -= zeros  # counted apart

    def _bins(self, flat: np.ndarray) -> np.ndarray:
        width = self.high - self.low
        if width <= 0:
            return np.zeros(flat.shape, np.int64)
        index = ((flat - np.float32(self.low)) * np.float32(BINS / width)).astype(np.int64)
        return np.clip(index, 0, BINS - 1, out=index)

    def centers(self) -> np.ndarray:
        """The centre of every bin."""
        edges = np.linspace(self.low, self.high, BINS + 1)
        return (edges[:-1] + edges[1:]) / 2


@dataclass(frozen=True)
class LinearOp:
    """A CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED op (``kind`` conv, depthwise, dense).

    ``index`` is its position in the subgraph; ``input``, ``weights`` (constant float32),
    ``bias`` (-1: none) and ``output`` are tensor indices; ``name`` is its output tensor's
    name (how reports name the op); FULLY_CONNECTED reads its input as
    ``(-1, in_channels)``; the geometry is ``(h, w)`` pairs (``(1, 1)`` for dense).
    """

    index: int
    kind: str
    input: int
    weights: int
    bias: int
    output: int
    name: str
    in_channels: int
    kernel: tuple[int, int] = (1, 1)
    strides: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    padding: str = "valid"


def linear_ops(model: Any) -> list[LinearOp]:
    """The linear ops of ``model`` (a flatbuffer object model) whose weights are float constants."""
    graph = model.subgraphs[0]
    found = []
    for position, op in enumerate(graph.operators):
        code = model.operatorCodes[op.opcodeIndex]
        kind = LINEAR_OPS.get(max(int(code.builtinCode), int(code.deprecatedBuiltinCode)))
        if kind is None or len(op.inputs) < 2:
            continue
        weights = int(op.inputs[1])
        if not _float_constant(model, weights):
            continue
        bias = int(op.inputs[2]) if len(op.inputs) > 2 else -1
        if bias >= 0 and not _float_constant(model, bias):
            continue  # a bias that is not a float constant: not ours to edit
        shape = [int(d) for d in graph.tensors[weights].shape]
        # conv (cout, kh, kw, cin), dense (cout, cin); depthwise (1, kh, kw, cin * mult):
        # its input says cin.
        in_channels = shape[-1]
        if kind == "depthwise":
            given = graph.tensors[int(op.inputs[0])].shape
            if given is not None and len(given) and int(given[-1]) > 0:
                in_channels = int(given[-1])
            else:  # no static input shape: the options' multiplier
                in_channels = shape[-1] // max(int(op.builtinOptions.depthMultiplier), 1)
        geometry: dict[str, Any] = {}
        if kind != "dense":
            options = op.builtinOptions
            geometry = {
                "kernel": (shape[1], shape[2]),
                "strides": (int(options.strideH), int(options.strideW)),
                "dilation": (int(options.dilationHFactor), int(options.dilationWFactor)),
                "padding": "same" if int(options.padding) == _SAME else "valid",
            }
        output = int(op.outputs[0])
        found.append(
            LinearOp(
                position,
                kind,
                int(op.inputs[0]),
                weights,
                bias,
                output,
                tensor_name(graph.tensors[output]),
                in_channels,
                **geometry,
            )
        )
    return found


def tensor_array(model: Any, index: int) -> np.ndarray:
    """The value of a constant float32 tensor, in its shape (a copy)."""
    tensor = model.subgraphs[0].tensors[index]
    data = np.asarray(model.buffers[tensor.buffer].data, np.uint8)
    return np.frombuffer(data.tobytes(), np.float32).reshape([int(d) for d in tensor.shape])


class PatchMean:
    """Running mean of one linear op's input patches, per kernel tap and input channel."""

    def __init__(self, op: LinearOp) -> None:
        self.op = op
        self.count = 0
        self.total = np.zeros((op.kernel[0] * op.kernel[1], op.in_channels), np.float64)

    def update(self, values: np.ndarray) -> None:
        """Fold one batch of the op's input in (channels last)."""
        x = np.asarray(values, np.float32)
        if self.op.kind == "dense":  # FULLY_CONNECTED reads its input as (-1, cin)
            flat = x.reshape(-1, self.op.in_channels)
            self.count += flat.shape[0]
            self.total[0] += flat.sum(axis=0, dtype=np.float64)
            return
        op = self.op
        # Every tap sums the same positions of every sample: add the samples up first, then
        # pad and slice one (H, W, C) image per tap instead of the whole batch.
        summed = x.sum(axis=0, dtype=np.float64)[None]
        geometry = (op.kernel, op.strides, op.dilation, op.padding)
        windows, (ho, wo) = tap_windows(summed, *geometry)
        self.count += x.shape[0] * ho * wo
        for tap, window in enumerate(windows):
            self.total[tap] += window.sum(axis=(0, 1, 2))

    @property
    def mean(self) -> np.ndarray:
        """``E[patch]``, ``(taps, cin)``: tap ``t`` is kernel position ``(t // kw, t % kw)``."""
        return self.total / max(self.count, 1)


@dataclass
class FloatStatistics:
    """One float run's activation histograms (by tensor index) and mean patches (by op)."""

    histograms: dict[int, Histogram]
    patches: dict[int, PatchMean]


#: The key of :func:`float_statistics` in a range context's shared cache.
SHARED_KEY = "float statistics"
#: Keys a caller may set in that cache before the first run: the seconds the run may take
#: (past them, projected from the batches done, it stops with :class:`OverBudget`), and
#: which statistics to gather (``{"histograms", "patches"}``).
SECONDS_LEFT_KEY, WANTED_KEY = "seconds left", "wanted"
#: And where the run leaves its own seconds (for the caller's estimates).
RUN_SECONDS_KEY = "run seconds"
#: Share of the per-child memory limit (:data:`tfcompress._limits.CHILD_MEMORY`) that one
#: batch of the float run may hold: every tensor of the batch (the run keeps them all) and
#: the working copies of the largest one while its statistics are folded in.
MEMORY_SHARE = 0.25
#: Bytes of working copies per value of a tensor folded into a histogram (float32 shifted,
#: int64 bin index, zero mask).
_WORK_BYTES = 13


class OverBudget(Exception):
    """The float run would pass its time or its memory bound: it was stopped (or not begun)."""


def float_statistics(
    calibrated: bytes,
    samples: Dataset,
    shared: dict[str, Any] | None = None,
    *,
    max_batch: int = BATCH,
) -> FloatStatistics:
    """The statistics the methods read, from one float run of ``calibrated`` (cached).

    Only statistics are held, folded in batch by batch (a histogram per activation tensor, a
    running sum per linear op's input patch); no tensor of the calibration set is kept past
    its batch, and a batch is as large as :data:`MEMORY_SHARE` of the memory limit allows.

    Args:
        calibrated: The converter's calibrate-only output (float, with min/max statistics).
        samples: The calibration samples (one array or a dict by input name).
        shared: The candidates' shared cache (``RangeContext.shared``): the statistics are
            kept there, and a later call with the same cache returns them without a run.
            Every method that edits a calibrated model reads the *unedited* model's
            statistics this way: its tensors keep their indices through the edits. Its
            :data:`SECONDS_LEFT_KEY` and :data:`WANTED_KEY` bound and narrow the run.
        max_batch: Samples per interpreter call at most.

    Raises:
        InvalidDataError: The samples cannot be matched to the model's inputs.
        OverBudget: The run would pass its seconds, or one sample's tensors the memory bound.
    """
    shared = {} if shared is None else shared
    if SHARED_KEY in shared:
        return shared[SHARED_KEY]
    wanted = shared.get(WANTED_KEY, {"histograms", "patches"})
    model = flatbuffer_utils().read_model_from_bytearray(bytearray(calibrated))
    graph = model.subgraphs[0]
    histograms = {}
    for index, tensor in enumerate(graph.tensors):
        q = tensor.quantization
        if "histograms" not in wanted or q is None or q.min is None or q.max is None:
            continue
        if len(q.min) != 1 or model.buffers[tensor.buffer].data is not None:  # a constant
            continue
        low, high = min(float(q.min[0]), 0.0), max(float(q.max[0]), 0.0)
        histograms[index] = Histogram(low, high, np.zeros(BINS, np.int64))
    patches = {op.index: PatchMean(op) for op in linear_ops(model)} if "patches" in wanted else {}
    requests: list[tuple[int, Update]] = [(i, h.add) for i, h in histograms.items()]
    requests += [(p.op.input, p.update) for p in patches.values()]
    constants = {i for i, t in enumerate(graph.tensors) if model.buffers[t.buffer].data is not None}
    start = time.perf_counter()
    run_float(
        calibrated,
        samples,
        requests,
        seconds=shared.get(SECONDS_LEFT_KEY),
        max_batch=max_batch,
        constants=constants,
    )
    statistics = FloatStatistics(histograms, patches)
    shared[SHARED_KEY] = statistics
    shared[RUN_SECONDS_KEY] = time.perf_counter() - start
    return statistics


def run_float(
    calibrated: bytes,
    samples: Dataset,
    requests: Sequence[tuple[int, Update]],
    *,
    seconds: float | None = None,
    max_batch: int = BATCH,
    constants: Collection[int] = (),
) -> None:
    """Run the float model with every tensor kept; hand each requested tensor to its update.

    Args:
        calibrated: A float ``.tflite``.
        samples: The samples (one array or a dict by input name).
        requests: ``(tensor index, update)`` pairs, called once per batch of samples.
        seconds: The seconds the run may take: checked after every batch against the time
            the whole would take at the pace so far.
        max_batch: Samples per call at most (fewer where the memory bound says so).
        constants: Indices of the constant tensors (not counted against the memory bound:
            they are the model's, whatever the batch).

    Raises:
        InvalidDataError: The samples cannot be matched to the model's inputs.
        OverBudget: ``seconds`` would be passed, or one batch's tensors the memory bound.
        ConversionError: LiteRT cannot prepare the model even for one sample (a batch
            too large for an op's own limits is halved until it can).
    """
    start = time.perf_counter()
    module, _ = interpreter_module()
    with warnings.catch_warnings():  # tf.lite.Interpreter's deprecation notice, if it is the one
        warnings.simplefilter("ignore", UserWarning)
        interpreter = module.Interpreter(
            model_content=calibrated,
            experimental_op_resolver_type=module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            experimental_preserve_all_tensors=True,
        )
    inputs = interpreter.get_input_details()
    x = samples.x
    keys = input_keys([str(d["name"]) for d in inputs], x) if isinstance(x, Mapping) else None
    arrays = [np.asarray(x)] if keys is None else [np.asarray(x[k]) for k in keys]
    resizable = all(-1 in list(d.get("shape_signature", [])[:1]) for d in inputs)
    count = len(samples)
    if resizable:
        for detail, array in zip(inputs, arrays, strict=True):
            interpreter.resize_tensor_input(detail["index"], [1, *array.shape[1:]])
    interpreter.allocate_tensors()
    most = max_batch if resizable else None
    batch = _batch_within_memory(interpreter, most, count, set(constants))
    shaped, begin = (1 if resizable else batch), 0
    while begin < count:
        stop = min(begin + batch, count)
        if resizable and shaped != stop - begin:
            try:
                for detail, array in zip(inputs, arrays, strict=True):
                    interpreter.resize_tensor_input(
                        detail["index"], [stop - begin, *array.shape[1:]]
                    )
                interpreter.allocate_tensors()
            except RuntimeError as error:  # an op's own limit (im2col past 2**31 values)
                if stop - begin == 1:
                    raise ConversionError(
                        f"LiteRT cannot run the calibrated float model one sample at a time "
                        f"for its statistics: {' '.join(str(error).split())[:300]}"
                    ) from error
                batch = max(1, (stop - begin) // 2)
                continue
            shaped = stop - begin
        if stop - begin != shaped:  # a static batch: the last rows that do not fill one
            break
        for detail, array in zip(inputs, arrays, strict=True):
            interpreter.set_tensor(detail["index"], array[begin:stop].astype(detail["dtype"]))
        interpreter.invoke()
        for index, update in requests:
            update(interpreter.get_tensor(index))
        begin = stop
        spent = time.perf_counter() - start
        if seconds is not None and stop < count and spent * count / stop > seconds:
            raise OverBudget(
                f"its float run over {count} samples would take about "
                f"{spent * count / stop:.1f} s (paced on {stop}, stopped there)"
            )


def _batch_within_memory(
    interpreter: Any, most: int | None, count: int, constants: set[int]
) -> int:
    """Samples per call whose tensors fit :data:`MEMORY_SHARE` of the memory limit.

    ``interpreter`` is allocated for one call of its current shape (one sample where
    ``most`` is given, else its own static batch, returned as it is).

    Raises:
        OverBudget: Even that call's tensors would pass the bound.
    """
    from tfcompress._limits import CHILD_MEMORY

    bound = int(MEMORY_SHARE * CHILD_MEMORY.value())
    sizes = [
        int(np.prod(d["shape"], dtype=np.int64)) * np.dtype(d["dtype"]).itemsize
        for d in interpreter.get_tensor_details()
        if d["index"] not in constants and d["dtype"] is not None
    ]
    one = sum(sizes) + _WORK_BYTES * max(sizes, default=0) // 4
    if one > bound:
        raise OverBudget(
            f"one call's tensors and their statistics' working copies would hold "
            f"{one / 2**30:.1f} GiB, over {MEMORY_SHARE:g} of the memory limit "
            f"({bound / 2**30:.1f} GiB; TFCOMPRESS_MEMORY_LIMIT raises it)"
        )
    if most is None:
        return max(int(interpreter.get_input_details()[0]["shape"][0]), 1)
    return max(1, min(most, count, bound // max(one, 1)))


def input_keys(names: Sequence[str], x: Mapping[str, Any]) -> list[str]:
    """The key of ``x`` that feeds each model input of ``names`` (a tensor's name, in order).

    Raises:
        InvalidDataError: An input no array (or more than one) is named after.
    """
    keys = []
    for name in names:
        found = [k for k in x if name in (k, f"serving_default_{k}:0")]
        if len(found) != 1:
            raise InvalidDataError(
                f"cannot tell which data array feeds model input {name!r} (arrays: "
                f"{', '.join(sorted(x))}); name the arrays after the model's inputs."
            )
        keys.append(found[0])
    return keys


def _float_constant(model: Any, index: int) -> bool:
    if index < 0:
        return False
    tensor = model.subgraphs[0].tensors[index]
    return tensor.type == 0 and model.buffers[tensor.buffer].data is not None  # FLOAT32


def tensor_name(tensor: Any) -> str:
    """A flatbuffer object model tensor's name, as text."""
    return tensor.name.decode() if isinstance(tensor.name, bytes) else str(tensor.name)
