"""``check(model)``: will TFLite Micro run it, in how much RAM and flash, computing what?

The steps (docs/mcu.md, "What it checks"), each TFLM call in a child process (:mod:`.probe`)
under one time limit (a :class:`~.probe.Budget`): the file read without native code; TFLM
loads it in a generous arena, looking every missing op up in one pass (:mod:`.ops`); the
smallest arena is bisected (:mod:`.arena`); the samples run through TFLM and LiteRT's
reference kernels (:mod:`.exactness`). A crash, a hang or a refusal at any step is a finding;
the report is always returned.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from tfcompress._limits import CHILD_TIMEOUT
from tfcompress.targets.mcu.arena import (
    ALIGNMENT,
    MAX_ARENA,
    Arena,
    parse_allocations,
    recommended,
    smallest_arena,
)
from tfcompress.targets.mcu.exactness import (
    DEFAULT_SAMPLES,
    Exactness,
    against_litert,
    io_findings,
    sample_inputs,
)
from tfcompress.targets.mcu.export_c import flash_bytes
from tfcompress.targets.mcu.findings import Finding
from tfcompress.targets.mcu.ops import (
    REQUANTIZE,
    OpRef,
    arena_too_small,
    missing_finding,
    missing_op,
    op_refs,
    op_refusal,
    precision_findings,
    readable,
    softmax_findings,
    tflm_words,
)
from tfcompress.targets.mcu.probe import Budget, Failure, Outcome, in_child
from tfcompress.targets.mcu.report import McuReport

_MIN_FIRST_ARENA = 64 * 1024
#: What a model of another format is told (``check``, ``export_c``, ``lut_compress``).
TFLITE_ONLY = (
    "TFLite Micro runs .tflite files: convert it first with `tfcompress quantize MODEL "
    "--target mcu --data CALIB.npz --out model_int8.tflite`."
)


def check(
    model: Any,
    *,
    sample_data: Any = None,
    max_samples: int = DEFAULT_SAMPLES,
    max_arena: int | None = None,
    max_flash: int | None = None,
    timeout_s: float | None = None,
) -> McuReport:
    """Check a ``.tflite`` for TensorFlow Lite for Microcontrollers, on this host.

    Args:
        model: A ``.tflite`` path, its bytes or a :class:`~tfcompress.models.TFLiteModel`.
        sample_data: Float samples for the bit-exactness comparison (anything
            :func:`tfcompress.data.load_data` reads: an array, a ``.npz``...); None: 8
            seeded random inputs over each input's whole range.
        max_samples: At most this many samples are compared.
        max_arena: A budget for the arena, in bytes (checked against the recommended arena,
            margin included).
        max_flash: A budget for the flash, in bytes (model + C array overhead).
        timeout_s: Seconds the whole check may take, every TFLM and LiteRT call together
            (default: the one time limit, ``TFCOMPRESS_TIMEOUT``); a call the limit stops
            is a ``hang`` finding, and the calls after it are not made.

    Returns:
        The report: ops TFLM cannot run (by name and index, with what to do), the smallest
        arena (a host estimate, with TFLM's breakdown and a recommended size with a 10%
        margin), flash, TFLM against LiteRT's reference kernels, and the budgets.

    Raises:
        MissingDependencyError: ``tflite-micro`` is not installed (the message says what to
            run: ``pip install 'tfcompress[mcu]'``).
        ModelLoadError: A missing, corrupt or truncated ``.tflite``.
        UnsupportedModelError: Another model format.
        InvalidDataError: Sample data that does not fit the model's inputs.

    Example:
        >>> import tfcompress.mcu
        >>> report = tfcompress.mcu.check("mnist_int8.tflite", sample_data="digits.npz")
        ... # doctest: +SKIP
        >>> report.compatible, report.arena.smallest, report.exactness.bit_exact  # doctest: +SKIP
        (True, 31736, True)
    """
    from tfcompress._compat.tflm import tflm_version
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.signature import tflite_io_tensors

    start = time.perf_counter()
    budget, content, source, name, parsed = _opened(model, timeout_s)
    refs = op_refs(parsed)
    precision, findings = precision_findings(parsed, refs)
    findings += softmax_findings(content, parsed)
    inputs, outputs = tflite_io_tensors(TFLiteModel(content, label=name, verified=True))
    refused = io_findings(inputs, outputs)
    findings += refused
    samples, described = None, ""
    if not refused:
        samples, described = sample_inputs(content, source, sample_data, max_samples=max_samples)
    arena: Arena | None = None
    exactness: Exactness | None = None
    if not any(f.rule == "too_large" for f in refused):
        allocated_at, first, lookup_findings = _load(content, parsed, refs, name, budget)
        findings += lookup_findings
        if allocated_at is not None:
            arena, run, arena_findings = _measure(content, allocated_at, first, samples,
                                                  outputs, name, budget)  # fmt: skip
            findings += arena_findings
            if run is not None and samples is not None:
                exactness, compare_findings = against_litert(
                    content, samples, described, outputs, run.value["outputs"], parsed,
                    arena=allocated_at, name=name, timeout=budget,
                )  # fmt: skip
                findings += compare_findings
    findings = _explain_crashes(findings)
    report = McuReport(
        source=source,
        model_bytes=len(content),
        flash_bytes=flash_bytes(len(content)),
        precision=precision,
        ops=tuple(r.name for r in refs if r.subgraph == 0),
        findings=tuple(sorted(findings, key=_order)),
        arena=arena,
        exactness=exactness,
        tflm_version=tflm_version(),
        seconds=time.perf_counter() - start,
    )
    if max_arena is not None or max_flash is not None:
        report = report.with_budgets(max_arena=max_arena, max_flash=max_flash)
    return report


def measure_arena(model: Any, *, timeout_s: float | None = None) -> float:
    """The recommended arena in bytes (bisected, +10%), or ``inf`` when TFLM cannot run it.

    What model selection's ``--max-arena`` budget measures: the load and the bisection
    of :func:`check`, without the samples.
    """
    budget, content, _, name, parsed = _opened(model, timeout_s)
    allocated_at, _, _ = _load(content, parsed, op_refs(parsed), name, budget)
    if allocated_at is None:
        return math.inf
    bisection = smallest_arena(content, allocated_at, name=name, timeout=budget)
    if bisection.failure is not None:
        return math.inf
    return float(recommended(bisection.high))


def _opened(model: Any, timeout_s: float | None) -> tuple[Budget, bytes, str, str, Any]:
    """TFLM installed, the one time limit, the checked bytes, their name, the parsed file."""
    from tfcompress._compat.tflm import require
    from tfcompress.models.formats import read_tflite_input

    require()
    budget = Budget(CHILD_TIMEOUT.given(timeout_s, name="timeout_s"))
    content, source, parsed = read_tflite_input(model, TFLITE_ONLY)
    readable(content, source)
    name = Path(source).name if source != "<bytes>" else "the model"
    return budget, content, source, name, parsed


def _explain_crashes(findings: list[Finding]) -> list[Finding]:
    """A crash that a static finding explains (a SOFTMAX TFLM aborts on) says so."""
    from dataclasses import replace

    cause = next((f for f in findings if f.rule == "refused" and f.op == "SOFTMAX"), None)
    if cause is None:
        return findings
    return [
        replace(f, fix=f"TFLM aborted preparing SOFTMAX (op {cause.index}): see that finding")
        if f.rule == "crash" and f.signal == 6  # SIGABRT: a failed TFLITE_CHECK
        else f
        for f in findings
    ]


def _order(finding: Finding) -> tuple[int, int, int]:
    return (
        0 if finding.blocking else 1,
        finding.subgraph,
        -1 if finding.index is None else finding.index,
    )


# A call's failure -> the finding's rule and what to do (a crash for any other kind).
_FAILURES = {
    "memory": ("memory", "the model's tensors need more memory than this host lets a check "
               "use: no microcontroller holds it; make it smaller"),
    "timeout": ("hang", "find the op that loops (a WHILE whose condition never ends), or allow "
                "more time (--timeout) if the model is merely large"),
    "crash": ("crash", "on a board this is a hard fault: report the model and this line to "
              "tflite-micro, and bisect the model (fewer layers) to find the op at fault"),
}  # fmt: skip


def _failure_finding(failure: Failure, log: str = "") -> Finding:
    if failure.kind == "error":  # the runtime raised: TFLM's words say which op, if any
        if op_refusal(log) is not None:
            return _refusal_finding(log, 0, [])
        return Finding("refused", f"TFLM refused the model: {failure.message}", _GENERAL)
    rule, fix = _FAILURES.get(failure.kind, _FAILURES["crash"])
    return Finding(rule, failure.message, fix, signal=failure.signal)


def _load(
    content: bytes, parsed: Any, refs: list[OpRef], name: str, timeout: Budget
) -> tuple[int | None, Outcome | None, list[Finding]]:
    """Load in a generous arena (growing while TFLM says it is short); name every op it lacks."""
    size = max(_MIN_FIRST_ARENA, 10 * len(content))
    size = (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
    while True:
        outcome = in_child("load", content, size, what=f"loading {name} in TFLM",
                           timeout=timeout, allocations=True)  # fmt: skip
        lacking = missing_op(outcome.log)
        if lacking is not None:
            return None, None, _lacking(parsed, refs, lacking, name, timeout)
        if outcome.failure is not None:
            return None, None, [_failure_finding(outcome.failure, outcome.log)]
        if outcome.value["allocated"]:
            return size, outcome, []
        if arena_too_small(outcome.log) and size < MAX_ARENA:
            size *= 4
            continue
        return None, None, [_refusal_finding(outcome.log, size, refs)]


def _lacking(
    parsed: Any, refs: list[OpRef], lacking: str, name: str, timeout: Budget
) -> list[Finding]:
    """Every op TFLM has no kernel for: each distinct op code looked up once, in one child."""
    codes = sorted({r.opcode_index for r in refs})
    entries = [parsed.operator_codes[i] for i in codes]
    answer = in_child(
        "kernels",
        [(c.builtin_code, c.custom_code) for c in entries],
        what=f"looking up {name}'s {len(codes)} op code(s) in TFLM",
        timeout=timeout,
    )
    if answer.failure is not None:
        return [_failure_finding(answer.failure, answer.log)]
    missing = {i for i, has in zip(codes, answer.value, strict=True) if has is False}
    by_name: dict[str, list[OpRef]] = {}
    for ref in refs:
        if ref.opcode_index in missing:
            by_name.setdefault(ref.name, []).append(ref)
    if not by_name:  # nothing to blame on its own: TFLM's word stands
        return [Finding("no_kernel", f"TFLM has no kernel for {lacking}", _GENERAL, lacking)]
    return [missing_finding(n, sorted(rs, key=_where)) for n, rs in by_name.items()]


_GENERAL = "replace it with ops TFLM runs, or register a kernel for it in the firmware"


def _where(ref: OpRef) -> tuple[int, int]:
    return ref.subgraph, ref.index


def _refusal_finding(log: str, size: int, refs: list[OpRef]) -> Finding:
    words = tflm_words(log)
    if arena_too_small(log):
        return Finding(
            "no_arena",
            f"no arena up to {size:,} B allocated (TFLM: {words})",
            "the model needs more RAM than any microcontroller has: make it smaller",
        )
    refused = op_refusal(log)
    if refused is not None:
        op, index, stage = refused
        return Finding(
            "refused",
            f"TFLM has a kernel for {op} (op {index}) but failed to {stage} it: {words}",
            "TFLM's kernel does not support this op's types, options or subgraphs: change "
            f"the layer (another activation, padding or type), or {REQUANTIZE}",
            op=op,
            index=index,
        )
    return Finding(
        "refused",
        f"TFLM refused the model: {words or 'no reason given'}",
        "TFLM plans every tensor ahead: dynamic shapes and ops that size their output from "
        "the data cannot run; export with static shapes",
    )


def _measure(
    content: bytes,
    allocated_at: int,
    first: Outcome | None,
    samples: list[Any] | None,
    outputs: Any,
    name: str,
    timeout: Budget,
) -> tuple[Arena, Outcome | None, list[Finding]]:
    """Bisect the arena, then run the samples at it (with TFLM's breakdown)."""
    findings: list[Finding] = []
    bisection = smallest_arena(content, allocated_at, name=name, timeout=timeout)
    for size, signal in bisection.crashes:
        findings.append(
            Finding(
                "arena_crash",
                f"an arena of {size:,} B crashed TFLM (signal {signal}) instead of failing "
                "cleanly; counted as too small",
                "on a board, too small an arena may fault rather than return an error: "
                "declare at least the recommended size",
                signal=signal,
            )
        )
    if bisection.failure is not None:
        findings.append(_failure_finding(bisection.failure))
    smallest = bisection.high
    recorded = parse_allocations(first.log) if first is not None else None
    run = in_child(
        "load",
        content,
        smallest,
        what=f"running {name} in TFLM",
        timeout=timeout,
        samples=samples,
        outputs=len(outputs),
        allocations=True,
    )
    if run.failure is not None:
        findings.append(_failure_finding(run.failure, run.log))
        ran = None
    elif not run.value["allocated"]:
        findings.append(
            Finding(
                "arena_unstable",
                f"the smallest arena found ({smallest:,} B) did not allocate again in a new "
                "process: the host's allocator aligned it differently",
                "declare the recommended size, which leaves room for that",
            )
        )
        ran = None
    else:
        recorded = recorded or parse_allocations(run.log)
        ran = run
    arena = Arena(
        smallest=smallest,
        failed=bisection.low if bisection.converged else None,
        recommended=recommended(smallest),
        recorded=recorded,
        probes=bisection.probes + 1,
        crashes=bisection.crashes,
    )
    return arena, ran, findings
