"""Where a ``.tflite``'s time goes: each op, and each delegated partition, timed on its own.

``benchmark --profile-ops`` (``BenchmarkConfig(profile_ops=True)``) adds this to every
measured row of LiteRT's ``cpu`` backend. The Python interpreter of ai-edge-litert 2.3 has
no op profiler (the C++ ``benchmark_model --enable_op_profiling`` has one; the wheel's
``benchmark_litert_model`` and its CompiledModel expose none), so each op is measured the
way the harness measures a model: the op alone, as a one-op model cut from the file (same
weights, same options), on the real values it gets inside the model (read from one run of
the whole model that keeps every intermediate tensor), timed by the same loop
(:func:`tfcompress.bench.stats.measure`) with the row's threads and XNNPACK setting, in the
row's own worker process.

A call's fixed cost (the Python call, the interpreter's invoke with nothing to run) is timed
on a model with no op, and taken off each op's time once: the whole model pays it once, not
once per op. Each delegated partition (one ``DELEGATE`` node: the ops XNNPACK took together)
is timed the same way as one model of its ops. An op is ``"delegated"`` when the whole
model's delegate took it, ``"fell back"`` when XNNPACK was on but left it to LiteRT's
built-in kernels, ``"built-in"`` when no delegate was asked for (``--no-xnnpack``).

The check: the ops' medians plus one call's cost should be the whole model's median, within
the spread of the runs measured: the square root of the sum of the squared spreads (p90 -
p50) of the whole model, of every op and of the call. ``check.within`` says whether they
were; nothing here asserts it, since a machine shared with other work can move either side.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from typing import Any

import numpy as np

from tfcompress.bench.stats import LatencyStats, measure
from tfcompress.errors import UnsupportedModelError

#: What the profile is, in words (JSON ``op_profile.method``).
METHOD = (
    "each op (and each delegated partition) timed alone as a model cut from the file, on the "
    "values it gets in the model, minus the cost of a call with no op"
)


class OpProfileUnavailable(UnsupportedModelError):
    """The backend or the model has no per-op profile here (said on the row, not raised out)."""


def profile_runner(
    runner: Any, feed: Mapping[str, np.ndarray], timing: Mapping[str, float], whole: LatencyStats
) -> dict[str, Any]:
    """The per-op profile of a row's runner on its batch (named, batch first).

    A static-batch model that ran the batch as several calls is profiled on its first call
    and compared with the row's latency per call.

    Raises:
        OpProfileUnavailable: Not LiteRT's ``cpu`` backend (ONNX Runtime, TensorFlow, the GPU
            and Edge TPU delegates have no per-op profile here), or a model it cannot cut.
    """
    from tfcompress.runtime.base import pad_feed, slice_feed
    from tfcompress.runtime.litert import LiteRTRunner

    if type(runner) is not LiteRTRunner:
        raise OpProfileUnavailable(
            f"no per-op profile on the {runner.backend} backend: only LiteRT's cpu backend "
            "is profiled op by op"
        )
    static = runner.layout.static_batch
    calls = runner.calls_for(len(next(iter(feed.values()))))
    if static is not None:
        feed = pad_feed(slice_feed(dict(feed), 0, static), static)
    per_call = LatencyStats(
        **{k: (v if k == "runs" else v / calls) for k, v in asdict(whole).items()}
    )
    return profile_litert(runner, runner.layout.to_model(dict(feed)), timing, per_call)


def profile_litert(
    runner: Any, feed: Mapping[str, np.ndarray], timing: Mapping[str, float], whole: LatencyStats
) -> dict[str, Any]:
    """The per-op profile of a row's allocated LiteRT ``cpu`` runner on one call's ``feed``.

    ``feed`` is in the model's layout, by input name. Each op gets the row's ``timing``
    ``runs`` and its share of ``min_seconds``/``warmup_seconds``; ``whole`` is the row's
    latency of one call, which the check compares the sum with.

    Raises:
        OpProfileUnavailable: Control flow (ops that call subgraphs) or a model LiteRT
            cannot cut into ops.
    """
    from tfcompress.runtime.litert import delegated_partitions

    cutter = _Cutter(runner.model.content)
    runner.bind_call(feed)  # the row's inputs set (quantized, resized) on its interpreter
    values = _all_values(runner)
    partitions = delegated_partitions(runner.interpreter) if runner.use_xnnpack else []
    delegated = {op for ops in partitions for op in ops}
    count = len(cutter.ops)
    units = count + len(partitions) + 1
    each = {
        "runs": int(timing.get("runs", 50)),
        "warmup_runs": int(timing.get("warmup_runs", 1)),
        "min_seconds": float(timing.get("min_seconds", 1.0)) / units,
        "warmup_seconds": float(timing.get("warmup_seconds", 0.5)) / units,
    }

    def timed(ops: Iterable[int]) -> LatencyStats | str:
        """The cut's timing, or why LiteRT would not run it alone (a string)."""
        try:
            return _time_cut(cutter, list(ops), values, runner, each)
        except (RuntimeError, ValueError) as error:
            return " ".join(str(error).split())[:200] or type(error).__name__

    overhead = timed([])
    if isinstance(overhead, str):
        raise OpProfileUnavailable(f"LiteRT cannot run a call with no op here: {overhead}")
    rows: list[tuple[int, LatencyStats | str | None, str]] = []
    for index in range(count):
        if cutter.reads_constants_only(index):
            # A float16 file's DEQUANTIZE of its weights: LiteRT computes it once when it
            # prepares the model (XNNPACK when it packs the weights), never per call, and a
            # cut holding it alone leaves the delegate nothing to run.
            rows.append((index, None, "at load"))
            continue
        if not runner.use_xnnpack:
            placement = "built-in"
        else:
            placement = "delegated" if index in delegated else "fell back"
        rows.append((index, timed([index]), placement))
    spent = {
        index: 0.0 if stats is None else max(0.0, stats.p50 - overhead.p50)
        for index, stats, _ in rows
        if not isinstance(stats, str)
    }
    total = sum(spent.values())
    ops = []
    for index, stats, placement in rows:
        ms = spent.get(index)
        op = {
            "index": index,
            "op": cutter.op_name(index),
            "output": cutter.output_name(index),
            "ms": None if ms is None else round(ms, 6),
            # The median's interval: how far it lies above the fastest run (load only adds).
            "spread_ms": (
                round(stats.p50 - stats.min, 6) if isinstance(stats, LatencyStats) else ms
            ),  # None when not timed alone, 0.0 at load
            "share": None if ms is None else round(ms / total, 6) if total > 0 else 0.0,
            "placement": placement,
        }
        ops.append(op if ms is not None else {**op, "error": f"not timed alone: {stats}"})
    timed_partitions = []
    for part in partitions:
        stats = timed(sorted(part))
        ms = None if isinstance(stats, str) else round(max(0.0, stats.p50 - overhead.p50), 6)
        timed_partitions.append({"ops": sorted(part), "ms": ms})
    measured = [whole, overhead, *(r[1] for r in rows if isinstance(r[1], LatencyStats))]
    spread = math.sqrt(sum(_spread(stats) ** 2 for stats in measured))
    check: dict[str, Any] = {
        "sum_ms": round(total, 6),
        "call_ms": round(overhead.p50, 6),
        "whole_ms": round(whole.p50, 6),
        "tolerance_ms": round(spread, 6),
    }
    estimate = check["sum_ms"] + check["call_ms"]
    untimed = count - len(spent)
    # An op that could not be timed alone leaves the sum short: no verdict, and it says so.
    check["within"] = (
        None if untimed else abs(estimate - check["whole_ms"]) <= check["tolerance_ms"]
    )
    check["untimed_ops"] = untimed
    return {"method": METHOD, "ops": ops, "partitions": timed_partitions, "check": check}


def _spread(stats: LatencyStats) -> float:
    """How far a run lands above the median: p90 - p50.

    Timing noise only adds time, and a standard deviation is dominated by the odd run that a
    busy machine stretches a thousandfold.
    """
    return stats.p90 - stats.p50


def _all_values(runner: Any) -> dict[int, np.ndarray]:
    """Every tensor's value in one run of the whole model on its inputs (built-in kernels).

    A delegate keeps its partition's intermediates to itself, so this run has none; the
    values are the same up to rounding, and only feed the timing of each op.
    """
    from tfcompress._compat.litert import interpreter_module

    module, _ = interpreter_module()
    keeper = module.Interpreter(
        model_content=runner.model.content,
        num_threads=1,
        experimental_op_resolver_type=module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        experimental_preserve_all_tensors=True,
    )
    given = runner.interpreter
    for detail in given.get_input_details():
        keeper.resize_tensor_input(detail["index"], list(detail["shape"]), strict=False)
    keeper.allocate_tensors()
    for detail in given.get_input_details():
        keeper.set_tensor(detail["index"], given.get_tensor(detail["index"]))
    keeper.invoke()
    values = {}
    for node in keeper._get_ops_details():  # the public API has no per-node view
        for tensor in node["inputs"]:
            tensor = int(tensor)
            if tensor >= 0 and tensor not in values:
                try:
                    values[tensor] = keeper.get_tensor(tensor)
                except ValueError:  # a tensor without data (an unused optional input)
                    continue
    return values


def _time_cut(
    cutter: _Cutter,
    ops: list[int],
    values: Mapping[int, np.ndarray],
    runner: Any,
    timing: Mapping[str, float],
) -> LatencyStats:
    from tfcompress._compat.litert import make_interpreter

    content, inputs = cutter.cut(ops)
    interpreter = make_interpreter(
        content, num_threads=runner.threads, use_xnnpack=runner.use_xnnpack
    )
    for tensor in inputs:
        if tensor in values:
            interpreter.resize_tensor_input(tensor, list(values[tensor].shape), strict=False)
    interpreter.allocate_tensors()
    for tensor in inputs:
        if tensor in values:
            interpreter.set_tensor(tensor, values[tensor])
    return measure(interpreter.invoke, **timing).latency


class _Cutter:
    """Cuts one-op (or few-op) models out of a ``.tflite``, keeping its tensors' indices.

    The file is read by the project's one reader (``models.tflite_file.read_tflite``) and
    written through LiteRT's flatbuffer object API, as the other rewriters do.
    """

    def __init__(self, content: bytes) -> None:
        from tfcompress._compat.litert import flatbuffer_utils
        from tfcompress.models.tflite_file import read_tflite

        parsed = read_tflite(content)
        if len(parsed.subgraphs) != 1:
            raise OpProfileUnavailable(
                f"the model has {len(parsed.subgraphs)} subgraphs (control flow such as WHILE "
                "or IF): its ops cannot be timed one by one"
            )
        self.parsed = parsed.subgraphs[0]
        self.ops = self.parsed.operators
        self._constant = {t.index for t in self.parsed.tensors if parsed.is_constant(t)}
        self._outputs = {t for t in self.parsed.outputs if t >= 0}
        self._utils = flatbuffer_utils()
        self.model = self._utils.read_model_from_bytearray(bytearray(content))

    def op_name(self, index: int) -> str:
        return self.ops[index].opcode

    def reads_constants_only(self, index: int) -> bool:
        inputs = [t for t in self.ops[index].inputs if t >= 0]
        return bool(inputs) and all(t in self._constant for t in inputs)

    def output_name(self, index: int) -> str:
        outputs = [t for t in self.ops[index].outputs if t >= 0]
        return self.parsed.tensors[outputs[0]].name if outputs else ""

    def cut(self, ops: list[int]) -> tuple[bytes, list[int]]:
        """The model of ``ops`` alone (none: a model with no op) and its input tensors."""
        chosen = [self.ops[i] for i in ops]
        produced = {t for op in chosen for t in op.outputs if t >= 0}
        consumed = [t for op in chosen for t in op.inputs if t >= 0]
        inputs = list(
            dict.fromkeys(t for t in consumed if t not in produced and t not in self._constant)
        )
        outside = {t for op in self.ops if op.index not in ops for t in op.inputs if t >= 0}
        outside |= self._outputs
        outputs = [t for t in dict.fromkeys(produced) if t in outside] or sorted(produced)
        if not ops:  # no op: the graph's first input passed through, the cost of a call
            inputs = outputs = [self.parsed.inputs[0]]
        used = {t for op in chosen for t in (*op.inputs, *op.outputs, *op.intermediates)}
        graph, model = self.model.subgraphs[0], self.model
        kept = {int(graph.tensors[t].buffer) for t in used if t >= 0}
        fields = ("operators", "inputs", "outputs")
        saved = [getattr(graph, f) for f in fields]
        saved_model = (model.buffers, model.signatureDefs, model.metadata, model.metadataBuffer)
        empty = type(model.buffers[0])()
        try:
            graph.operators = [saved[0][i] for i in ops]
            graph.inputs, graph.outputs = list(inputs), list(outputs)
            model.buffers = [b if i in kept else empty for i, b in enumerate(saved_model[0])]
            model.signatureDefs, model.metadata, model.metadataBuffer = [], [], []
            content = bytes(self._utils.convert_object_to_bytearray(model))
        finally:
            for f, value in zip(fields, saved, strict=True):
                setattr(graph, f, value)
            model.buffers, model.signatureDefs, model.metadata, model.metadataBuffer = saved_model
        return content, inputs


def top_ops(rows: Iterable[Any], count: int = 5) -> list[str]:
    """The text report's lines: each profiled row's top ops (the JSON holds all of them)."""
    lines: list[str] = []
    for row in rows:
        profile = row.op_profile
        if not profile:
            continue
        where = f"{row.artifact} on {row.backend} ({row.threads} thr, batch {row.batch})"
        if "unavailable" in profile:
            lines.append(f"Per-op profile of {where}: unavailable: {profile['unavailable']}")
            continue
        check = profile["check"]
        verdict = {True: "within", False: "NOT within", None: "no verdict (ops not timed)"}
        verdict = verdict[check["within"]]
        lines.append(
            f"Per-op profile of {where}: ops sum {check['sum_ms']:.4f} ms + call "
            f"{check['call_ms']:.4f} ms vs whole {check['whole_ms']:.4f} ms, {verdict} "
            f"+-{check['tolerance_ms']:.4f} ms"
        )
        timed = [op for op in profile["ops"] if op["ms"] is not None]
        for op in sorted(timed, key=lambda op: -op["ms"])[:count]:
            lines.append(
                f"  #{op['index']:<4} {op['op']:<18} {op['ms']:.4f} ms {op['share']:6.1%}  "
                f"{op['placement']:<9}  {op['output'][:40]}"
            )
        for part in profile["partitions"]:
            ms = "not timed" if part["ms"] is None else f"{part['ms']:.4f} ms"
            lines.append(f"  delegate partition of {len(part['ops'])} op(s): {ms}")
        for op in (op for op in profile["ops"] if op["ms"] is None):
            lines.append(f"  #{op['index']:<4} {op['op']:<18} {op['error']}"[:160])
        fell = [op for op in profile["ops"] if op["placement"] == "fell back"]
        if fell:
            shown = ", ".join(f"#{op['index']} {op['op']}" for op in fell[:8])
            more = f" and {len(fell) - 8} more" if len(fell) > 8 else ""
            lines.append(f"  fell back from the delegate to built-in kernels: {shown}{more}")
    return lines
