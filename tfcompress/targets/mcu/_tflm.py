"""What runs inside the child process: TFLM's interpreter, and LiteRT's reference kernels.

Nothing here is called in the caller's process: :mod:`.probe` calls these functions through
:func:`tfcompress._child.call`, so a segfault (a too-small arena) or a hang ends the child,
never the caller. TFLM writes its messages and its allocation breakdown on the C standard
error; each function sends that file descriptor to ``log`` (a file the caller named, which
survives a crash) for its duration.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def _stderr_to(log: str) -> Iterator[None]:
    """Send file descriptor 2 (where TFLM's C code prints) to ``log``, appending."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(target, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def _interpreter(content: bytes, arena_size: int, *, keep_all: bool = False) -> Any:
    """TFLM's interpreter with its tensors allocated, or None when it could not allocate."""
    from tfcompress._compat.tflm import tflm_runtime

    runtime = tflm_runtime()
    keep = {"intrepreter_config": runtime.InterpreterConfig.kPreserveAllTensors} if keep_all else {}
    try:  # (sic: tflite-micro's keyword is spelled so)
        return runtime.Interpreter.from_bytes(content, arena_size=int(arena_size), **keep)
    except RuntimeError:  # 'TFLM failed to allocate tensors': why is in the log
        return None


def first_allocating(
    content: bytes, size: int, most: int, factor: int, *, keep_all: bool = False
) -> tuple[int | None, Any]:
    """The first arena from ``size`` on, times ``factor``, up to ``most`` that allocates.

    With its interpreter; ``(None, None)`` when none does.
    """
    while size <= most:
        interpreter = _interpreter(content, size, keep_all=keep_all)
        if interpreter is not None:
            return size, interpreter
        size *= factor
    return None, None


def load(
    content: bytes,
    arena_size: int,
    *,
    log: str,
    samples: Sequence[Any] | None = None,
    outputs: int = 1,
    allocations: bool = False,
) -> dict[str, Any]:
    """Allocate ``content`` in an arena of ``arena_size`` bytes; run samples; print the arena.

    ``log`` receives TFLM's standard error (and ``print_allocations()`` with
    ``allocations``); ``samples``: one array per input (in the subgraph's input order), each
    ``(N, ...)`` in the input's own dtype, each sample run through ``invoke`` and all
    ``outputs`` read. Returns ``{"allocated": bool, "outputs": [array per output] or None}``.
    """
    with _stderr_to(log):
        interpreter = _interpreter(content, arena_size)
        if interpreter is None:
            return {"allocated": False, "outputs": None}
        results = None if samples is None else _run_tflm(interpreter, samples, outputs)
        if allocations:
            interpreter.print_allocations()
    return {"allocated": True, "outputs": results}


#: A builtin code past every real one: TFLM says ``Op builtin_code out of range`` on it.
_SENTINEL = 32767
_PAST_THE_SENTINEL = f"builtin_code out of range: {_SENTINEL}"
_PROBE_ARENA = 64 * 1024


def kernels(codes: Sequence[tuple[int, str | None]], *, log: str) -> list[bool | None]:
    """Whether TFLM has a kernel for each ``(builtin code, custom code)``: one pass.

    Each code is looked up in a model of two ops made here: the op itself (no tensors, no
    options) and an op of a builtin code past every real one. TFLM looks every op's kernel
    up, in order, before it initializes or prepares any, and stops at the first it lacks:
    when it reaches the second op, the first had a kernel; nothing is ever prepared or run.
    One answer per code: True (a kernel), False (none), None (TFLM said neither, or its
    Python side refused the probe).
    """
    found: list[bool | None] = []
    with _stderr_to(log):
        for builtin, custom in codes:
            start = os.path.getsize(log)
            try:
                _interpreter(_lookup_model(builtin, custom), _PROBE_ARENA)
            except Exception:  # TFLM's Python side refused the probe (VAR_HANDLE without
                found.append(None)  # options): this code is not known to be missing
                continue
            sys.stderr.flush()
            with open(log, "rb") as handle:
                handle.seek(start)
                said = handle.read(64 * 1024).decode("utf-8", errors="replace")
            if _PAST_THE_SENTINEL in said:
                found.append(True)
            else:
                found.append(False if "find op" in said or "registration" in said else None)
    return found


def _lookup_model(builtin: int, custom: str | None) -> bytes:
    import flatbuffers
    import numpy as np

    from tfcompress._compat.tflm import tflm_schema

    schema = tflm_schema()
    model = schema.ModelT()
    model.version = 3
    model.buffers = [schema.BufferT()]
    model.operatorCodes = []
    graph = schema.SubGraphT()
    graph.tensors, graph.operators = [], []
    graph.inputs = graph.outputs = np.array([], np.int32)
    for index, (code, text) in enumerate(((builtin, custom), (_SENTINEL, None))):
        entry = schema.OperatorCodeT()
        entry.builtinCode, entry.deprecatedBuiltinCode = code, min(code, 127)
        entry.customCode, entry.version = text, 1
        model.operatorCodes.append(entry)
        op = schema.OperatorT()
        op.opcodeIndex = index
        op.inputs = op.outputs = np.array([], np.int32)
        graph.operators.append(op)
    model.subgraphs = [graph]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _each_sample(samples: Sequence[Any], feed: Any, invoke: Any, read: Any) -> dict[Any, Any]:
    """Feed each sample (``feed(input, value)``), invoke, ``read()`` a dict; stack the reads."""
    import numpy as np

    rows = []
    for n in range(len(samples[0])):
        for i, array in enumerate(samples):
            feed(i, np.ascontiguousarray(array[n]))
        invoke()
        rows.append(read())
    return {key: np.stack([row[key] for row in rows]) for key in rows[0]} if rows else {}


def _tflm_feed(interpreter: Any, count: int) -> Any:
    shapes = [tuple(interpreter.get_input_details(i)["shape"]) for i in range(count)]
    return lambda i, value: interpreter.set_input(value.reshape(shapes[i]), i)


def _run_tflm(interpreter: Any, samples: Sequence[Any], count: int) -> list[Any]:
    import numpy as np

    read = lambda: {j: np.array(interpreter.get_output(j)) for j in range(count)}  # noqa: E731
    feed = _tflm_feed(interpreter, len(samples))
    return list(_each_sample(samples, feed, interpreter.invoke, read).values())


def smallest_arena(
    content: bytes, low: int, high: int, *, log: str, progress: str
) -> dict[str, int]:
    """Bisect the smallest arena that allocates, between ``low`` (fails) and ``high`` (allocates).

    Before each probe the bracket and the size about to be tried are appended to
    ``progress`` (``LOW HIGH TRYING``): when a probe crashes the child, the caller reads the
    last line and goes on with ``TRYING`` counted as a failure.
    """
    probes = 0
    with _stderr_to(log), open(progress, "a", buffering=1, encoding="ascii") as steps:
        while high - low > 1:
            middle = (low + high) // 2
            steps.write(f"{low} {high} {middle}\n")
            steps.flush()
            probes += 1
            if _interpreter(content, middle) is None:
                low = middle
            else:
                high = middle
    return {"low": low, "high": high, "probes": probes}


def reference_outputs(content: bytes, samples: Sequence[Any], *, log: str) -> list[Any]:
    """Every sample (as :func:`load` takes them) through LiteRT's reference kernels.

    One array per output (in the subgraph's output order), ``(N, ...)`` in its dtype;
    LiteRT's standard error goes to ``log``.
    """
    with _stderr_to(log):
        return _run_litert(content, samples)


def _run_litert(content: bytes, samples: Sequence[Any]) -> list[Any]:
    import numpy as np

    interpreter, feed = _reference(content)
    outputs = interpreter.get_output_details()
    read = lambda: {j: np.array(interpreter.get_tensor(d["index"])) for j, d in enumerate(outputs)}  # noqa: E731
    return list(_each_sample(samples, feed, interpreter.invoke, read).values())


def _reference(content: bytes, *, keep_all: bool = False) -> tuple[Any, Any]:
    """LiteRT's interpreter on its reference kernels (``BUILTIN_REF``), allocated, and its feed."""
    from tfcompress._compat.litert import interpreter_module

    module, _ = interpreter_module()
    interpreter = module.Interpreter(
        model_content=content,
        experimental_op_resolver_type=module.OpResolverType.BUILTIN_REF,
        experimental_preserve_all_tensors=keep_all,
    )
    interpreter.allocate_tensors()
    inputs = interpreter.get_input_details()

    def feed(i: int, value: Any) -> None:
        interpreter.set_tensor(inputs[i]["index"], value.reshape(inputs[i]["shape"]))

    return interpreter, feed


def tflm_tensors(
    content: bytes, arena_size: int, samples: Sequence[Any], tensors: Sequence[int], *, log: str
) -> dict[int, Any] | None:
    """Every listed tensor of subgraph 0 after each sample, TFLM keeping all tensors.

    The arena grows (x4, up to 256 MiB) until it holds every tensor at once; None when none
    does.
    """
    import numpy as np

    with _stderr_to(log):
        _, interpreter = first_allocating(content, int(arena_size), 256 * 2**20, 4, keep_all=True)
        if interpreter is None:
            return None
        read = lambda: {t: np.array(interpreter.GetTensor(t, 0)["tensor_data"]) for t in tensors}  # noqa: E731
        feed = _tflm_feed(interpreter, len(samples))
        return _each_sample(samples, feed, interpreter.invoke, read)


def reference_tensors(
    content: bytes, samples: Sequence[Any], tensors: Sequence[int], *, log: str
) -> dict[int, Any]:
    """Every listed tensor after each sample, on LiteRT's reference kernels (all kept)."""
    import numpy as np

    with _stderr_to(log):
        interpreter, feed = _reference(content, keep_all=True)
        read = lambda: {t: np.array(interpreter.get_tensor(t)) for t in tensors}  # noqa: E731
        return _each_sample(samples, feed, interpreter.invoke, read)
