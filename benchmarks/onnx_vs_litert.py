"""LiteRT int8 vs ONNX Runtime int8 of the same MNIST CNN: accuracy, drop, latency, size.

Run: .venv/bin/python benchmarks/onnx_vs_litert.py
     (writes the `onnx` section of docs/benchmarks.md and benchmarks/results/onnx_vs_litert.json)

One Keras model, two deployment paths, each against its own float32 reference: the TFLite
converter's int8 (run by LiteRT with XNNPACK) and tf2onnx + ONNX Runtime's static int8 (QDQ,
per-channel weights, min-max calibration, run by ONNX Runtime's CPU provider). Accuracy comes
from tfcompress.evaluate on the 1,250 held-out digits; latency and sizes from
tfcompress.benchmark at batch 1 and 1 and 2 threads. Every sentence of the section is
computed from these measurements.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table
from tfcompress.samples.cnn import small_cnn, train_classifier
from tfcompress.samples.datasets import mnist

RESULTS = Path(__file__).resolve().parent / "results" / "onnx_vs_litert.json"
THREADS = (1, 2)
RUNTIMES = {"LiteRT": ("tflite", "cpu"), "ONNX Runtime": ("onnx", "onnxruntime")}


def main() -> None:
    start = time.perf_counter()
    split = mnist()
    model = train_classifier(small_cnn(flavour="keras3"), split.train, epochs=3)
    litert = tfcompress.quantize(model, recipe="int8", representative_data=split.train)
    ort = tfcompress.quantize(model, format="onnx", recipe="int8", representative_data=split.train)
    artifacts = {
        "float32.tflite": litert.reference,
        "int8.tflite": litert.model,
        "float32.onnx": ort.reference,
        "int8.onnx": ort.model,
    }
    evaluation = tfcompress.evaluate(artifacts, split.test)
    bench = tfcompress.benchmark(
        artifacts,
        data=split.test,
        backends=("cpu", "onnxruntime"),
        threads=THREADS,
        batch_sizes=(1,),
        runs=200,
        min_seconds=1.5,
    )
    measured = measure(evaluation, bench)
    seconds = time.perf_counter() - start
    body = section(measured, bench, split, ort, seconds)
    report = {
        "machine": machine_line(),
        "environment": bench.environment.to_dict(),
        "model": f"small_cnn (Keras 3), 3 epochs on {split}",
        "recipes": {"LiteRT": litert.recipe.to_dict(), "ONNX Runtime": ort.recipe.to_dict()},
        "onnx_export_check": ort.export_check.to_dict() if ort.export_check else None,
        "measurements": measured,
        "verdict": verdict(measured, len(split.test)),
        "benchmark": bench.to_dict(),
        "seconds": round(seconds, 1),
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(body)
    print(f"wrote {write_section('onnx', body)} and {RESULTS}")


def measure(evaluation: Any, bench: Any) -> dict[str, Any]:
    """Per runtime: float32/int8 accuracy, drop, bytes and median latency per thread count."""
    out: dict[str, Any] = {}
    for runtime, (suffix, backend) in RUNTIMES.items():
        entry: dict[str, Any] = {"backend": backend}
        for precision in ("float32", "int8"):
            name = f"{precision}.{suffix}"
            rows = {r.threads: r for r in bench[name] if r.backend == backend and r.ok}
            entry[precision] = {
                "accuracy": evaluation[name].score,
                "bytes": artifacts_bytes(bench, name),
                "p50_ms": {t: rows[t].latency.p50 for t in THREADS if t in rows},
            }
        entry["drop"] = entry["float32"]["accuracy"] - entry["int8"]["accuracy"]
        entry["size_ratio"] = entry["int8"]["bytes"] / entry["float32"]["bytes"]
        out[runtime] = entry
    return out


def artifacts_bytes(bench: Any, name: str) -> int:
    row = next(r for r in bench[name] if r.size is not None)
    return int(row.size.file_bytes)


def section(measured: dict[str, Any], bench: Any, split: Any, ort: Any, seconds: float) -> str:
    header = ["runtime", "variant", "bytes", "int8 / float32", "accuracy", "drop"]
    header += [f"p50 ms, {t} thread{'s' if t > 1 else ''}" for t in THREADS]
    rows = []
    for runtime, entry in measured.items():
        for precision in ("float32", "int8"):
            data = entry[precision]
            rows.append(
                [
                    runtime,
                    precision,
                    f"{data['bytes']:,}",
                    "1.000" if precision == "float32" else f"{entry['size_ratio']:.3f}",
                    f"{data['accuracy']:.2%}",
                    "-" if precision == "float32" else f"{entry['drop'] * 100:+.2f} pt",
                    *(_ms(data["p50_ms"].get(t)) for t in THREADS),
                ]
            )
    table = format_table(header, rows, markdown=True)
    env = bench.environment
    dots = env.int8_dot_product
    flags = (
        f"int8 dot-product extensions: {', '.join(dots) if dots else 'none'}"
        if dots is not None
        else f"int8 dot-product extensions unknown ({env.int8_dot_product_unknown_because})"
    )
    versions = ", ".join(
        f"{k} {env.versions[k]}"
        for k in ("ai-edge-litert", "onnxruntime", "tf2onnx")
        if k in env.versions
    )
    check = ort.export_check
    lines = [
        "## LiteRT int8 vs ONNX Runtime int8 (same model)",
        "",
        f"Machine: {machine_line()}; {flags}. Script: `benchmarks/onnx_vs_litert.py` "
        f"({seconds:.0f}s){f'; {versions}' if versions else ''}. Model: the small MNIST CNN "
        f"(Keras 3), trained 3 epochs on {split}. LiteRT: the TFLite converter's int8 "
        "(float32 input/output), XNNPACK. ONNX Runtime: the tf2onnx export (opset "
        f"{ort.recipe.opset}; {check if check else 'not checked'}), then ONNX Runtime's "
        "static int8 (QDQ, per-channel weights, min-max calibration on the same 200 "
        "training digits), CPU provider. Accuracy: top-1 on the 1,250 held-out digits, each "
        "drop against its own runtime's float32 file. Latency: median of at least 200 calls "
        "at batch 1.",
        "",
        table,
        "",
        "Measured here:",
        "",
        *findings(measured, len(split.test)),
        "",
        f"**Verdict:** {verdict(measured, len(split.test))}",
        "",
        "How the ONNX path works and what each option does: [onnx.md](onnx.md).",
    ]
    return "\n".join(lines)


def findings(measured: dict[str, Any], samples: int) -> list[str]:
    """Computed sentences: int8 vs float32 per runtime, then the two int8 files compared."""
    lines = []
    for runtime, entry in measured.items():
        for t in THREADS:
            f32, i8 = entry["float32"]["p50_ms"].get(t), entry["int8"]["p50_ms"].get(t)
            if f32 and i8:
                faster = "faster" if i8 < f32 else "slower"
                lines.append(
                    f"- {runtime}, {t} thread{'s' if t > 1 else ''}: int8 {_ratio(f32, i8)} "
                    f"{faster} than float32 ({i8:.3f} vs {f32:.3f} ms)."
                )
    lite, onnx = measured["LiteRT"], measured["ONNX Runtime"]
    for t in THREADS:
        a, b = lite["int8"]["p50_ms"].get(t), onnx["int8"]["p50_ms"].get(t)
        if a and b:
            winner = "LiteRT" if a < b else "ONNX Runtime"
            lines.append(
                f"- int8 at {t} thread{'s' if t > 1 else ''}: {winner} is "
                f"{_ratio(a, b)} faster ({a:.3f} ms LiteRT, {b:.3f} ms ONNX Runtime)."
            )
    gap = (lite["drop"] - onnx["drop"]) * samples
    lines.append(
        f"- Accuracy drop: LiteRT {lite['drop'] * 100:+.2f} pt, ONNX Runtime "
        f"{onnx['drop'] * 100:+.2f} pt, a difference of {abs(gap):.0f} of {samples} digits."
    )
    lines.append(
        f"- Size: LiteRT int8 {lite['int8']['bytes']:,} bytes ({lite['size_ratio']:.1%} of its "
        f"float32), ONNX Runtime int8 {onnx['int8']['bytes']:,} bytes "
        f"({onnx['size_ratio']:.1%} of its float32)."
    )
    return lines


def verdict(measured: dict[str, Any], samples: int) -> str:
    """One sentence from the numbers: who is faster at how many thread counts, size, accuracy."""
    lite, onnx = measured["LiteRT"], measured["ONNX Runtime"]
    wins = {"LiteRT": 0, "ONNX Runtime": 0}
    compared = 0
    for t in THREADS:
        a, b = lite["int8"]["p50_ms"].get(t), onnx["int8"]["p50_ms"].get(t)
        if a and b:
            compared += 1
            wins["LiteRT" if a < b else "ONNX Runtime"] += 1
    if compared == 0:
        speed = "latency could not be compared (a row failed)"
    elif wins["LiteRT"] == compared or wins["ONNX Runtime"] == compared:
        leader = "LiteRT" if wins["LiteRT"] == compared else "ONNX Runtime"
        speed = f"{leader} int8 was faster at every thread count measured ({compared})"
    else:
        speed = "neither int8 runtime was faster at every thread count"
    smaller = "LiteRT" if lite["int8"]["bytes"] < onnx["int8"]["bytes"] else "ONNX Runtime"
    ratio = max(lite["int8"]["bytes"], onnx["int8"]["bytes"]) / min(
        lite["int8"]["bytes"], onnx["int8"]["bytes"]
    )
    gap = abs(lite["drop"] - onnx["drop"]) * samples
    both_within = max(lite["drop"], onnx["drop"]) <= 0.01
    accuracy = (
        f"both kept accuracy within 1 point of their float32 ({gap:.0f} digits apart)"
        if both_within
        else f"their accuracy drops differ by {gap:.0f} of {samples} digits"
    )
    return f"on this machine {speed}; {smaller}'s int8 file is {ratio:.2f}x smaller; {accuracy}."


def _ratio(a: float, b: float) -> str:
    return f"{max(a, b) / min(a, b):.2f}x"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    main()
