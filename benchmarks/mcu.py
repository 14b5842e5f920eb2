"""TFLite Micro on the int8 models tfcompress ships and on the smallest zoo members.

Run: .venv/bin/python benchmarks/mcu.py
     (writes the `mcu` section of docs/benchmarks.md and benchmarks/results/mcu.json)

The demo's MNIST CNN (``small_cnn`` trained 3 epochs on the 3,750 training digits of
``tfcompress.samples.mnist()``) is quantized with ``quantize(target="mcu")`` (full int8,
int8 I/O) and checked by ``tfcompress.mcu.check`` on 1,000 test digits, timed; its accuracy
through TFLM (the ``tflm`` backend) is set beside LiteRT's int8 on all 1,250 test digits.
The other rows: the sample models the tests build (random weights: arena and flash do not
depend on them) and the smallest MobileNet and MixNet widths at 96x96x3, 10 classes, each
quantized the same way and checked with its default 8 random inputs (the zoo models' last
classifier redrawn N(0, 1) first: see ``zoo_members``). Every number in the
section is computed from the checks; the sentences say what was measured.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table

RESULTS = Path(__file__).resolve().parent / "results" / "mcu.json"
ZOO = (  # (name, width): the smallest widths of each family the zoo builds
    ("mobilenet_v1", 0.25),
    ("mobilenet_v2", 0.35),
    ("mobilenet_v3_small_minimalistic", 0.35),
    ("mixnet_s", 0.35),
)
ZOO_SHAPE = (96, 96, 3)
EXACT_SAMPLES = 1000


def _row(name: str, report: Any, seconds: float) -> dict[str, Any]:
    arena = report.arena
    return {
        "model": name,
        "compatible": report.compatible,
        "precision": report.precision,
        "ops": len(report.ops),
        "model_bytes": report.model_bytes,
        "flash_bytes": report.flash_bytes,
        "arena_smallest": None if arena is None else arena.smallest,
        "arena_tflm_recorded": None if arena is None or arena.recorded is None
        else arena.recorded.total,
        "arena_recommended": None if arena is None else arena.recommended,
        "probes": None if arena is None else arena.probes,
        "bit_exact": None if report.exactness is None else report.exactness.bit_exact,
        "max_diff": None if report.exactness is None
        else max(o.max_abs_difference for o in report.exactness.outputs),
        "samples": None if report.exactness is None else report.exactness.samples,
        "unsupported": sorted({f.op for f in report.unsupported if f.op}),
        "check_seconds": round(seconds, 2),
    }  # fmt: skip


def _checked(name: str, model: Any, data: Any, **check: Any) -> dict[str, Any]:
    from tfcompress.mcu import check as mcu_check

    result = tfcompress.quantize(model, representative_data=data, target="mcu")
    start = time.perf_counter()
    report = mcu_check(result.model_content, **check)
    return _row(name, report, time.perf_counter() - start)


def mnist_cnn() -> tuple[dict[str, Any], dict[str, Any]]:
    """The demo's CNN: the check on 1,000 digits, timed, and TFLM's accuracy vs LiteRT's."""
    from tfcompress.mcu import check as mcu_check
    from tfcompress.samples import mnist, small_cnn, train_classifier

    split = mnist()
    model = train_classifier(small_cnn(), split.train, epochs=3)
    result = tfcompress.quantize(model, representative_data=split.train, target="mcu")
    content = result.model_content
    start = time.perf_counter()
    report = mcu_check(content, sample_data=split.test.x[:EXACT_SAMPLES], max_samples=EXACT_SAMPLES)
    row = _row("MNIST CNN (demo, trained)", report, time.perf_counter() - start)
    start = time.perf_counter()
    mcu_check(content)  # what quantize(target="mcu") runs: 8 random inputs
    row["default_check_seconds"] = round(time.perf_counter() - start, 2)
    bench = tfcompress.benchmark(
        {"mnist_cnn_int8": content}, data=split.test, backends=["cpu", "tflm"], batch_sizes=[1]
    )
    rows = {r.backend: r for r in bench.rows}
    accuracy = {
        "digits": len(split.test),
        "litert_int8": rows["cpu"].accuracy,
        "tflm": rows["tflm"].accuracy,
        "litert_p50_ms": rows["cpu"].latency.p50 if rows["cpu"].latency else None,
        "tflm_p50_ms": rows["tflm"].latency.p50 if rows["tflm"].latency else None,
    }
    return row, accuracy


def shipped_samples() -> list[dict[str, Any]]:
    """The other sample models the tests build, random weights, random calibration."""
    from tfcompress.samples import residual_cnn
    from tfcompress.samples.tasks import ink_segmenter, two_head_cnn

    rng = np.random.default_rng(0)
    digits = rng.random((32, 28, 28, 1), dtype=np.float32)
    small = rng.random((32, 8, 8, 1), dtype=np.float32)
    gain = rng.uniform(0.5, 1.5, (32, 1)).astype(np.float32)
    return [
        _checked("residual CNN (MNIST)", residual_cnn(), digits),
        _checked("two-head detector (8x8 + gain)", two_head_cnn(), {"image": small, "gain": gain}),
        _checked("ink segmenter (8x8)", ink_segmenter(), small),
    ]


def zoo_members() -> list[dict[str, Any]]:
    """The smallest zoo widths at 96x96x3, their classifier's weights redrawn N(0, 1).

    Arena and flash do not depend on the weights, but an untrained zoo model's logits hardly
    vary, and TFLM's int8 softmax aborts on the tiny input scale that gives (the check names
    it): the last layer with a kernel (the classifier) gets weights whose logits vary, as a trained
    model's do.
    """
    from tfcompress.zoo import create_model

    rng = np.random.default_rng(0)
    calibration = rng.random((16, *ZOO_SHAPE), dtype=np.float32)
    rows = []
    for name, width in ZOO:
        model = create_model(name, input_shape=ZOO_SHAPE, num_classes=10, width_multiplier=width)
        last = [layer for layer in model.layers if getattr(layer, "kernel", None) is not None][-1]
        drawn = [rng.normal(0, 1, w.shape).astype(np.float32) for w in last.get_weights()]
        last.set_weights(drawn)
        rows.append(_checked(f"{name} {width} 96x96", model, calibration))
    return rows


def main() -> None:
    start = time.perf_counter()
    cnn, accuracy = mnist_cnn()
    rows = [cnn, *shipped_samples(), *zoo_members()]
    seconds = time.perf_counter() - start
    RESULTS.parent.mkdir(exist_ok=True)
    payload = {"machine": machine_line(), "rows": rows, "accuracy": accuracy}
    RESULTS.write_text(json.dumps(payload, indent=2) + "\n")
    text = section(rows, accuracy, seconds)
    write_section("mcu", text)
    print(text)


def _kib(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def section(rows: list[dict[str, Any]], accuracy: dict[str, Any], seconds: float) -> str:
    header = ["model", "ops", "flash B", "arena B (bisected)", "TFLM recorded B",
              "declare B (+10%)", "TFLM vs LiteRT", "check s"]  # fmt: skip
    table = format_table(
        header,
        [
            [
                r["model"] + ("" if r["compatible"] else " (not runnable: "
                              + ", ".join(r["unsupported"]) + ")"),
                str(r["ops"]),
                f"{r['flash_bytes']:,}",
                _kib(r["arena_smallest"]),
                _kib(r["arena_tflm_recorded"]),
                _kib(r["arena_recommended"]),
                "-" if r["max_diff"] is None else "bit-exact" if r["bit_exact"]
                else f"max {r['max_diff']:g} unit{'' if r['max_diff'] == 1 else 's'}",
                f"{r['check_seconds']:.1f}",
            ]
            for r in rows
        ],
        markdown=True,
    )  # fmt: skip
    cnn = rows[0]
    differences = [
        r["arena_smallest"] - r["arena_tflm_recorded"]
        for r in rows
        if r["arena_smallest"] is not None and r["arena_tflm_recorded"] is not None
    ]
    exact = [r for r in rows if r["bit_exact"]]
    lines = [
        "## TFLite Micro: arena, flash and exactness",
        "",
        f"Machine: {machine_line()}. Script: `benchmarks/mcu.py` ({seconds:.0f}s). Each model "
        'quantized with `quantize(target="mcu")` (full int8, int8 input and output) and checked '
        "by `tfcompress.mcu.check`: the smallest arena that allocates, bisected in child "
        "processes; TFLM's own `print_allocations` total at a generous arena; the recommended "
        "arena (+10%, 16-byte multiple); flash as a C array (model + 19 B). All arena numbers "
        "are host estimates (64-bit, reference kernels). Sample models have random weights, "
        "the zoo models' classifier (their last layer with a kernel) redrawn N(0, 1) so their "
        "logits vary (arena and "
        "flash do not depend on the weights). The MNIST CNN's outputs are compared "
        f"with LiteRT's reference kernels on {cnn['samples']} test digits, the others on 8 "
        "random inputs.",
        "",
        table,
        "",
        f"{len(exact)} of {len(rows)} models computed bit-exactly what LiteRT's reference "
        "kernels computed. The bisected arena minus TFLM's recorded total ranged from "
        f"{min(differences):+,} to {max(differences):+,} B. A check of the MNIST CNN took "
        f"{cnn['check_seconds']:.1f} s with {cnn['samples']} digits compared and "
        f"{cnn['default_check_seconds']:.1f} s with its default 8 random inputs "
        f"({cnn['probes']} arena probes).",
        "",
        f"Accuracy on the {accuracy['digits']:,} MNIST test digits: LiteRT int8 "
        f"{accuracy['litert_int8']:.2%}, TFLM (`--backends tflm`) {accuracy['tflm']:.2%}; p50 "
        f"{accuracy['litert_p50_ms']:.3f} ms on LiteRT (XNNPACK) against "
        f"{accuracy['tflm_p50_ms']:.3f} ms for TFLM's reference kernels on this host (not a "
        "device latency).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
