"""Ratios to the reference artifact, and what the int8-vs-float numbers mean on this CPU."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import replace

import numpy as np

from tfcompress.bench.environment import Environment
from tfcompress.bench.result import BenchmarkRow
from tfcompress.bench.size import precision_family

CPU_BACKENDS = frozenset({"cpu", "onnxruntime"})
FASTER = 1.05  # int8 counts as faster when its median latency is at least 5% lower


def pick_reference(rows: list[BenchmarkRow], requested: str | None) -> str | None:
    """The artifact ratios compare to: ``requested``, else the first float32 one, else the first."""
    names = list(dict.fromkeys(r.artifact for r in rows))
    if requested is not None:
        return requested
    for row in rows:
        if row.ok and row.size is not None and row.size.precision == "float32":
            return row.artifact
    return names[0] if names else None


def with_ratios(rows: list[BenchmarkRow], reference: str | None) -> list[BenchmarkRow]:
    """Rows with ``size_ratio`` and ``speedup`` against ``reference`` filled in.

    ``speedup`` is the reference's median latency per sample / the row's, at the same
    threads and batch (a static-batch row: at the batch that was asked of it, so a file fixed
    at 8 samples per call is compared per sample with the reference's batch of 1), on the
    same backend when the reference ran there, else on its first backend, and on the same
    device (``benchmark --on``: a Pi's int8 row compares with the Pi's float row).
    """
    refs = [r for r in rows if r.artifact == reference and r.ok]
    if not refs:
        return rows
    ref_size = next((r.size.file_bytes for r in refs if r.size), None)
    out = []
    for row in rows:
        size_ratio = row.size.file_bytes / ref_size if row.size and ref_size else None
        speedup = None
        mine = row.latency_per_sample_ms if row.ok else None
        if mine:
            match = _match([r for r in refs if r.device == row.device], row)
            theirs = None if match is None else match.latency_per_sample_ms
            if theirs is not None:
                speedup = theirs / mine
        out.append(replace(row, size_ratio=size_ratio, speedup=speedup))
    return out


def _match(refs: list[BenchmarkRow], row: BenchmarkRow) -> BenchmarkRow | None:
    """The reference row measured like ``row``: same threads and batch, or the asked batch."""
    same = [r for r in refs if (r.threads, r.batch) == (row.threads, row.batch)]
    if not same:  # a static batch on one side: the batch asked of it stands for it
        same = [
            r
            for r in refs
            if r.threads == row.threads and (r.batch in _asked(row) or row.batch in _asked(r))
        ]
    for candidate in same:
        if candidate.backend == row.backend:
            return candidate
    return same[0] if same else None


def _asked(row: BenchmarkRow) -> list[int]:
    asked = row.details.get("batch_asked")
    return [int(b) for b in asked] if isinstance(asked, list) else []


def int8_notes(
    rows: list[BenchmarkRow], environment: Environment, *, on_device: bool = False
) -> list[str]:
    """One sentence per int8 artifact and CPU backend: faster than float32 here or not, and why.

    The comparison pairs each int8 row with the float32 artifact on the same backend,
    threads and batch (the one with the same MAC count when there are several), and
    explains the outcome with the CPU's int8 dot-product extensions (VNNI, AMX, dotprod)
    when the environment knows them; when it does not, the sentence says so. Rows measured
    ``on_device`` (``benchmark --on``) get no advice to measure on the device.
    """
    return [
        _sentence(int8, fp32, backend, [r for r, _ in pairs], environment, on_device=on_device)
        for (int8, fp32, backend, _), pairs in _float_pairs(rows, {"int8"}).items()
    ]


def _float_pairs(
    rows: list[BenchmarkRow], precisions: Collection[str]
) -> dict[tuple[str, str, str, str], list[tuple[float, BenchmarkRow]]]:
    """CPU rows in ``precisions`` by (artifact, float32 peer, backend, precision), with ratios.

    A row's peer is the float32 row of its backend, threads and batch (same MACs first).
    """
    measured = [r for r in rows if r.ok and r.latency is not None and r.size is not None]
    floats = [r for r in measured if r.size.precision == "float32"]
    pairs: dict[tuple[str, str, str, str], list[tuple[float, BenchmarkRow]]] = defaultdict(list)
    for row in measured:
        precision = precision_family(row.size.precision)
        if precision not in precisions or row.backend not in CPU_BACKENDS:
            continue
        setting = (row.backend, row.threads, row.batch)
        peers = [f for f in floats if (f.backend, f.threads, f.batch) == setting]
        peers.sort(key=lambda f: f.size.macs != row.size.macs)
        if peers:
            key = (row.artifact, peers[0].artifact, row.backend, precision)
            pairs[key].append((peers[0].latency.p50 / row.latency.p50, row))
    return pairs


def _spread(ratios: list[float]) -> tuple[float, str, str]:
    """The median ratio, the ratios as shown (``0.91-1.30x`` or ``1.12x``), their count."""
    median = float(np.median(ratios))
    shown = f"{min(ratios):.2f}-{max(ratios):.2f}x" if len(ratios) > 1 else f"{median:.2f}x"
    return median, shown, f"{len(ratios)} thread/batch setting{'s' if len(ratios) > 1 else ''}"


def _sentence(
    int8: str,
    fp32: str,
    backend: str,
    ratios: list[float],
    environment: Environment,
    *,
    on_device: bool = False,
) -> str:
    """One finding: what was measured, then what the CPU's flags say about it (if known).

    The verdict comes from the measurements alone; the explanation names the CPU's int8
    dot-product instructions only when a source listed them, and says "unknown" otherwise
    (no flags read, e.g. a platform py-cpuinfo cannot read, or a source blind to some).
    """
    advice = "" if on_device else " Measure on the target device before deciding."
    median, spread, settings = _spread(ratios)
    head = f"{int8} vs {fp32} on {backend}: "
    dots = environment.int8_dot_product
    faster = median >= FASTER
    if faster:
        verdict = f"int8 is faster ({spread} of float32 speed over {settings})"
    else:
        word = "slower" if median < 1 / FASTER else "not faster"
        verdict = f"int8 is {word} than float32 ({spread} of float32 speed over {settings})"
    if dots is None:
        # Unknown flags must read as unknown: no claim about what the CPU lacks.
        why = (
            "; whether this CPU has int8 dot-product instructions is unknown "
            f"({environment.int8_dot_product_unknown_because})"
            + ("" if faster else ", so the cause cannot be told from here")
        )
        return f"{head}{verdict}{why}.{advice}"
    have = ", ".join(dots)
    if faster:
        why = (
            f"consistent with this CPU's int8 dot-product instructions ({have})"
            if dots
            else "even without int8 dot-product instructions on this CPU (smaller weights "
            "ease memory traffic)"
        )
    else:
        why = (
            f"even though this CPU has int8 dot-product instructions ({have}): the kernels "
            "in use did not turn them into a speed-up for this model (quantize/requantize "
            "overhead, small layers, or int8 kernels without paths for these instructions)"
            if dots
            else "because this CPU has no int8 dot-product instructions (no VNNI/AMX on x86, "
            "no dotprod/i8mm on ARM), so int8 kernels widen to 16 bits and lose to float32 "
            "SIMD; on such CPUs int8 buys size, not speed"
        )
    return f"{head}{verdict}, {why}.{advice}"


# What each recipe's kernels do on a CPU: facts about LiteRT/XNNPACK, not about a machine.
_HOW_IT_RUNS = {
    "float16": "float16 weights are expanded to float32 when the model loads, so the math is "
    "float32's",
    "dynamic": "dynamic-range ops quantize their activations on the fly at every call",
    "int16x8": "XNNPACK has no kernels for 16-bit activations",
    "mixed": "the model mixes integer and float ops, with conversions between them",
}


def recipe_notes(rows: list[BenchmarkRow]) -> list[str]:
    """One sentence per non-int8 quantized artifact and CPU backend: its speed vs float32.

    int8 has :func:`int8_notes`; float16, dynamic, int16x8 and mixed artifacts are compared
    here with the float32 artifact on the same backend, threads and batch. The sentence
    states the measured ratio and, from the row's own ``delegated_ops`` detail, how many of
    the model's ops the delegate (XNNPACK) ran: an int16x8 model that runs 37x slower shows
    why, in its own numbers.
    """
    pairs = _float_pairs(rows, _HOW_IT_RUNS.keys())
    return [_recipe_sentence(*key, measured) for key, measured in pairs.items()]


def _recipe_sentence(
    artifact: str,
    fp32: str,
    backend: str,
    precision: str,
    measured: list[tuple[float, BenchmarkRow]],
) -> str:
    ratios = [ratio for ratio, _ in measured]
    median, spread, settings = _spread(ratios)
    if median >= FASTER:
        verdict = f"faster than float32 ({spread} of its speed)"
    elif median < 1 / FASTER:
        verdict = f"slower than float32 ({spread} of its speed; {1 / median:.1f}x the time)"
    else:
        verdict = f"as fast as float32 ({spread} of its speed)"
    details = measured[0][1].details or {}
    ops, delegated = details.get("ops"), details.get("delegated_ops")
    coverage = (
        f"; the delegate ran {delegated} of its {ops} ops, the rest ran on LiteRT's built-in "
        "kernels"
        if isinstance(ops, int) and isinstance(delegated, int) and delegated < ops
        else ""
    )
    return (
        f"{artifact} ({precision}) vs {fp32} on {backend}: {verdict}, over {settings}; "
        f"{_HOW_IT_RUNS[precision]}{coverage}."
    )


def latency_notes(rows: list[BenchmarkRow]) -> list[str]:
    """What a backend's latency is, where its rows say (``backend_details["latency_is"]``).

    The ``tflm`` backend times TFLite Micro's reference kernels on this host: its rows say
    that this is not a device latency, and so does the report.
    """
    said: dict[str, str] = {}
    for row in rows:
        if row.ok and "latency_is" in row.details:
            said.setdefault(row.backend, str(row.details["latency_is"]))
    return [f"{backend} rows: latency is {what}" for backend, what in sorted(said.items())]


def isolation_notes(rows: list[BenchmarkRow]) -> list[str]:
    """Where the rows ran: worker processes (native runtimes) or this process (TensorFlow).

    Computed from each measured row's ``backend_details["process"]``; empty when no row was
    measured.
    """
    places = defaultdict(list)
    for row in rows:
        if row.ok and "process" in row.details:
            places[str(row.details["process"])].append(row)
    notes = []
    if places.get("worker"):
        count = len(places["worker"])
        notes.append(
            f"{count} row(s) ran in worker processes, one per runner, so a native crash or a "
            "measurement past the time limit is an error row and the others go on"
        )
    if places.get("in-process"):
        backends = sorted({r.backend for r in places["in-process"]})
        notes.append(
            f"{len(places['in-process'])} row(s) ran in this process ({', '.join(backends)}): "
            "no crash containment or time limit applies to them"
        )
    return notes
