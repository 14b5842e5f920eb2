"""PTQ on models shaped like the ones people ship: plain int8, the methods, mixed precision.

Run: .venv/bin/python benchmarks/ptq_real_models.py [--render]
(writes the `ptq_real_models` section of docs/benchmarks.md; the raw record goes to
benchmarks/results/ptq_real_models.json; --render writes the section again from it)

Not the stress models built to show the converter's weak spots (benchmarks/ptq_methods.py):
models with the shapes of the files users brought, trained here in seconds on the real
scikit-learn digits:

* a mini-Xception classifier (oarriaga's FER model layer for layer: depthwise-separable
  residual modules with BatchNorm), at 48x48 (the digits upscaled);
* a face-network-shaped model with three heads (classes, a box and landmarks: small-magnitude
  regressions, as MTCNN's O-Net), given as Keras;
* the same three-head model given only as a SavedModel (as basic-pitch and HED ship), where no
  Keras rewrite is possible;
* a stateful streaming ONNX model (a VAD: audio frames, a scalar sample rate and a recurrent
  state whose batch is its second dimension), through ONNX Runtime's quantizer.

For each .tflite model: the converter's plain int8; ``methods="auto"`` (every candidate that
can run on the model, scored on the eval samples, the best worst output kept, never worse than
plain int8); the gate-driven default (``gate=`` with eval data: plain int8 judged first, the
methods only if it fails); and ``compress`` at the same gate, whose ladder holds the
per-op rung (int8 with the ops slower in int8, then the worst-error ones, kept float) and
refuses anything slower than float32. Every artifact is scored per output against the float32
``.tflite`` on the same held-out samples (SNR in dB; top-1 agreement for class outputs), its
size is the file's, its latency the median per sample on LiteRT's CPU backend at one thread,
and its time the wall time of the call that made it. Every sentence of the section is
computed from these runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Training the mini-Xception with oneDNN's custom ops on died natively ("double free or
# corruption") on this machine once; the measurements do not depend on it.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _markdown import machine_line, write_section

import tfcompress
from tfcompress.report.table import format_table

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "ptq_real_models.json"
#: The gate of the gate-driven rows and of compress: every output's SNR at least this (dB).
GATE_SNR = 30.0
CALIBRATION_SAMPLES = 200
UPSCALE = 6  # 8x8 digits -> 48x48, the mini-Xception's input


def _fidelity(reference: bytes, content: bytes, data: Any) -> dict[str, dict[str, float]]:
    """Each output of ``content`` against the float32 ``reference`` on ``data``."""
    from tfcompress.data import Dataset
    from tfcompress.quantization.methods.selection import score

    ((scored, _margins),) = score(reference, [content], Dataset(data), source="model")
    return {
        f.output: {"snr_db": round(float(f.snr_db), 2)}
        | ({} if f.agreement is None else {"agreement": round(float(f.agreement), 4)})
        for f in scored
    }


def _latency(content: bytes, name: str) -> float:
    from tfcompress.quantization.methods.slow_ops import measure_latency

    return round(measure_latency(content, backend="cpu", threads=1, name=name), 4)


def _cpu_seconds() -> float:
    """User + system seconds of this process, its reaped children and its living ones.

    The converter, calibration and measurement run in warm child processes that outlive a
    call: their own times are read while they live.
    """
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:4])
    for child in me.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it ended since it was listed
            total += sum(child.cpu_times()[:2])
    return total


def _timed(call: Any) -> tuple[Any, dict[str, float]]:
    """``call()`` with its wall and CPU seconds and the one-minute load average around it."""
    start, cpu, load = time.perf_counter(), _cpu_seconds(), os.getloadavg()[0]
    result = call()
    cost = {
        "seconds": round(time.perf_counter() - start, 2),
        "cpu_seconds": round(_cpu_seconds() - cpu, 2),
        "load": round((load + os.getloadavg()[0]) / 2, 1),
    }
    return result, cost


def _row(
    variant: str, content: bytes, cost: dict[str, float], reference: bytes, data: Any, **extra: Any
) -> dict[str, Any]:
    return {
        "variant": variant,
        "size_bytes": len(content),
        **cost,
        "latency_ms": _latency(content, variant),
        "fidelity": {} if content == reference else _fidelity(reference, content, data),
        **extra,
    }


def tflite_model(
    name: str, model: Any, calib: Any, test: Any, *, searches: bool = True
) -> dict[str, Any]:
    """Every variant of one Keras or SavedModel model, scored against its float32 file.

    ``searches``: also the gate-driven default and compress (the per-op stand-ins, whose
    compress runs are in the per-op section, leave them out).
    """
    from tfcompress.testing import GateConfig

    float32, float_seconds = _timed(lambda: tfcompress.quantize(model, recipe="float32"))
    reference = float32.model_content
    rows = [_row("float32", reference, float_seconds, reference, test)]
    plain, seconds = _timed(
        lambda: tfcompress.quantize(model, recipe="int8", representative_data=calib)
    )
    rows.append(_row("int8 (converter)", plain.model_content, seconds, reference, test))
    per_op, seconds = _timed(
        lambda: tfcompress.quantize(
            model, recipe="int8", representative_data=calib, eval_data=test, methods="per-op"
        )
    )
    kept = per_op.methods.kept_candidate
    rows.append(
        _row(
            "int8, method per-op",
            per_op.model_content,
            seconds,
            reference,
            test,
            kept=kept.label,
            reason=per_op.methods.reason,
            steps=[
                {"label": c.label, "size_bytes": c.size_bytes, "latency_ms": c.latency_ms}
                for c in (per_op.methods.plain, *per_op.methods.candidates)
            ],
        )
    )
    half, seconds = _timed(lambda: tfcompress.quantize(model, recipe="float16"))
    rows.append(_row("float16", half.model_content, seconds, reference, test))
    auto, seconds = _timed(
        lambda: tfcompress.quantize(
            model, recipe="int8", representative_data=calib, eval_data=test, methods="auto"
        )
    )
    report = auto.methods
    rows.append(
        _row(
            "int8, methods=auto",
            auto.model_content,
            seconds,
            reference,
            test,
            kept="+".join(report.kept) or "plain int8",
            reason=report.reason,
            tried=[
                {
                    "methods": "+".join(c.methods),
                    "seconds": None if c.seconds is None else round(c.seconds, 2),
                    "error": c.error,
                }
                for c in report.candidates
            ],
            skipped=[list(s) for s in report.skipped],
        )
    )
    if not searches:
        return {"model": name, "rows": rows}
    gate = GateConfig.from_options(min_snr=GATE_SNR)
    gated, seconds = _timed(
        lambda: tfcompress.quantize(
            model, recipe="int8", representative_data=calib, eval_data=test, gate=gate
        )
    )
    rows.append(
        _row(
            f"int8, gate min_snr={GATE_SNR:g}",
            gated.model_content,
            seconds,
            reference,
            test,
            kept="+".join(gated.methods.kept) or "plain int8",
            reason=gated.methods.reason,
            why_run=gated.methods.why_run,
        )
    )
    compressed, seconds = _timed(
        lambda: tfcompress.compress(
            model, representative_data=calib, eval_data=test, min_snr=GATE_SNR
        )
    )
    attempts = [
        {
            "name": a.name,
            "status": a.status,
            "size_bytes": a.size_bytes,
            "latency_ms": a.latency_ms,
            "value": a.value,
            "why": a.why,
        }
        for a in compressed.attempts
    ]
    if compressed.model_content is not None:
        rows.append(
            _row(
                f"compress, min_snr={GATE_SNR:g}",
                compressed.model_content,
                seconds,
                reference,
                test,
                chosen=compressed.chosen.name,
                attempts=attempts,
            )
        )
    else:
        rows.append(
            {
                "variant": f"compress, min_snr={GATE_SNR:g}",
                **seconds,
                "chosen": None,
                "stop_reason": compressed.stop_reason,
                "attempts": attempts,
            }
        )
    return {"model": name, "rows": rows}


def onnx_model(name: str, path: Path, data: dict[str, np.ndarray]) -> dict[str, Any]:
    """The stateful ONNX model: ONNX Runtime's int8 and dynamic recipes, per output."""
    batch_dims = {"h": 1, "hn": 1}
    evaluation_rows = []
    for variant, recipe, calibration in (
        ("int8 static (minmax)", "int8", "minmax"),
        ("int8 static (entropy)", "int8", "entropy"),
        ("dynamic", "dynamic", None),
    ):
        options: dict[str, Any] = {"batch_dims": batch_dims}
        if calibration is not None:
            options["calibration_method"] = calibration
            options["representative_data"] = data
        result, seconds = _timed(
            lambda recipe=recipe, options=options: tfcompress.quantize(
                str(path), format="onnx", recipe=recipe, **options
            )
        )
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "q.onnx"
            out.write_bytes(result.model_content)
            report = tfcompress.check_gate(
                str(path), str(out), data, metrics="snr", min_snr=0.0, batch_dims=batch_dims
            )
        evaluation_rows.append(
            {
                "variant": variant,
                "size_bytes": len(result.model_content),
                **seconds,
                "fidelity": {
                    v.output: {"snr_db": round(float(v.value), 2)} for v in report.verdicts
                },
                "warnings": list(result.warnings),
            }
        )
    return {
        "model": name,
        "float_bytes": path.stat().st_size,
        "rows": evaluation_rows,
    }


def measure() -> dict[str, Any]:
    import keras
    import tensorflow as tf

    from tfcompress.samples.troublemakers import digits_split, three_heads
    from tfcompress.samples.xception import mini_xception

    start = time.perf_counter()
    split = digits_split()
    calib = split.train.x[:CALIBRATION_SAMPLES]
    test = split.test.x
    models = []

    big_train = np.kron(split.train.x, np.ones((1, UPSCALE, UPSCALE, 1), np.float32))
    big_test = np.kron(test, np.ones((1, UPSCALE, UPSCALE, 1), np.float32))
    keras.utils.set_random_seed(0)
    xception = mini_xception(input_shape=(48, 48, 1), num_classes=10)
    xception.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy")
    xception.fit(big_train, split.train.y, epochs=4, batch_size=32, verbose=0)
    models.append(
        tflite_model(
            "mini-Xception (BatchNorm, separable convs), 48x48",
            xception,
            big_train[:CALIBRATION_SAMPLES],
            big_test,
        )
    )

    heads = three_heads(split.train)
    models.append(tflite_model("three heads (cls, box, landmarks), Keras", heads, calib, test))
    with tempfile.TemporaryDirectory() as folder:
        saved = Path(folder) / "three_heads_saved_model"
        heads.export(str(saved))  # Keras 3: a SavedModel that holds its weights
        models.append(tflite_model("three heads, SavedModel only", str(saved), calib, test))

    from tfcompress.data import Dataset
    from tfcompress.samples.face_nets import onet_data, trained_onet
    from tfcompress.samples.troublemakers import layer_norm_classifier

    keras.utils.set_random_seed(0)
    faces = onet_data(Dataset(split.train.x[:400], split.train.y[:400]))
    onet = trained_onet(faces, epochs=1)
    onet_test = onet_data(Dataset(split.test.x[:100], split.test.y[:100])).x
    models.append(
        tflite_model(
            "O-Net-shaped (conv + PReLU, 3 heads), 48x48x3 (stand-in)",
            onet,
            faces.x[:64],
            onet_test,
            searches=False,
        )
    )
    keras.utils.set_random_seed(0)
    normed = layer_norm_classifier(split.train, epochs=4)
    models.append(
        tflite_model(
            "8x8 digits with a LayerNormalization (stand-in)",
            normed,
            calib,
            test,
            searches=False,
        )
    )

    from stateful_vad import vad_data, vad_onnx

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "vad.onnx"
        path.write_bytes(vad_onnx())
        models.append(
            onnx_model("stateful VAD (ONNX: state (2, N, 128), scalar sr)", path, vad_data(256))
        )
    return {
        "machine": machine_line(),
        "tensorflow": tf.__version__,
        "gate_snr_db": GATE_SNR,
        "models": models,
        "seconds": round(time.perf_counter() - start, 1),
    }


def _fid(fidelity: dict[str, dict[str, float]]) -> str:
    if not fidelity:
        return "(the reference)"
    parts = []
    for output, values in fidelity.items():
        text = f"{output} {values['snr_db']:.1f} dB"
        if "agreement" in values:
            text += f" ({values['agreement']:.1%})"
        parts.append(text)
    return "; ".join(parts)


def render(record: dict[str, Any]) -> str:
    lines = [
        f"Machine: {record['machine']}; TensorFlow {record['tensorflow']}. "
        f"`benchmarks/ptq_real_models.py`, {record['seconds']:.0f} s in all. Fidelity: each "
        "output against the float32 `.tflite` on the held-out digits (SNR; top-1 agreement "
        "for class outputs). Latency: median per sample, LiteRT CPU (XNNPACK), 1 thread. "
        "Time: the wall time of the call that made the row's file, then its CPU seconds (user + "
        "system of this process and its child processes) and the one-minute load average "
        "around it: the machine is shared, so wall times move with the load, CPU seconds less. "
        "The stand-ins are built in code and trained here (tfcompress.samples); the real "
        "emotion classifier and O-Net files are measured in [Real third-party files (issue "
        "39)](#real-third-party-files-issue-39).",
        "",
    ]
    for model in record["models"]:
        lines.append(f"**{model['model']}**")
        lines.append("")
        if "float_bytes" in model:  # ONNX
            table = [
                [
                    r["variant"],
                    f"{r['size_bytes']:,}",
                    f"{r['size_bytes'] / model['float_bytes']:.2f}",
                    _cost(r),
                    _fid(r["fidelity"]),
                    "; ".join(r["warnings"]) or "-",
                ]
                for r in model["rows"]
            ]
            lines.append(
                format_table(
                    [
                        "variant",
                        "bytes",
                        "x float",
                        "wall s (CPU s, load)",
                        "fidelity per output",
                        "warnings",
                    ],
                    table,
                )
            )
            lines.append("")
            continue
        float_row = model["rows"][0]
        table = []
        for r in model["rows"]:
            if "size_bytes" not in r:
                table.append([r["variant"], "-", "-", _cost(r), "-", "-", "-", "nothing passed"])
                continue
            what = r.get("kept") or r.get("chosen") or ""
            table.append(
                [
                    r["variant"],
                    f"{r['size_bytes']:,}",
                    f"{r['size_bytes'] / float_row['size_bytes']:.2f}",
                    _cost(r),
                    f"{r['latency_ms']:.4f}",
                    f"{r['latency_ms'] / float_row['latency_ms']:.2f}",
                    _fid(r["fidelity"]),
                    what,
                ]
            )
        lines.append(
            format_table(
                [
                    "variant",
                    "bytes",
                    "x float32",
                    "wall s (CPU s, load)",
                    "ms/sample",
                    "x float32",
                    "fidelity per output",
                    "kept",
                ],
                table,
            )
        )
        lines.append("")
        lines += _sentences(model)
        lines.append("")
    return "\n".join(lines)


def _cost(row: dict[str, Any]) -> str:
    if "cpu_seconds" not in row:
        return f"{row['seconds']:.1f}"
    return f"{row['seconds']:.1f} ({row['cpu_seconds']:.1f}, {row['load']:.1f})"


def _sentences(model: dict[str, Any]) -> list[str]:
    """What the rows say, computed from them."""
    rows = {r["variant"]: r for r in model["rows"]}
    plain = rows["int8 (converter)"]
    auto = rows["int8, methods=auto"]
    out = []
    worst_plain = min(v["snr_db"] for v in plain["fidelity"].values())
    worst_auto = min(v["snr_db"] for v in auto["fidelity"].values())
    out.append(
        f"- auto kept {auto['kept']} ({auto['reason']}); weakest output {worst_auto:.1f} dB "
        f"against plain int8's {worst_plain:.1f} dB, at {auto['seconds'] / plain['seconds']:.1f}x "
        f"plain int8's wall time ({auto['seconds']:.1f} s against {plain['seconds']:.1f} s)"
        + (
            f" and {auto['cpu_seconds'] / plain['cpu_seconds']:.1f}x its CPU seconds "
            f"({auto['cpu_seconds']:.1f} s against {plain['cpu_seconds']:.1f} s)."
            if plain.get("cpu_seconds")
            else "."
        )
    )
    per_op = rows.get("int8, method per-op")
    if per_op is not None:
        out.append(f"- per-op kept {per_op['kept']}: {per_op['reason']}.")
    if auto.get("skipped"):
        out.append(
            "- not tried on this model: "
            + "; ".join(f"{label} ({why})" for label, why in auto["skipped"])
            + "."
        )
    gated = next((r for v, r in rows.items() if v.startswith("int8, gate")), None)
    if gated is None:  # a per-op stand-in: compress's runs are in the per-op section
        return out
    out.append(f"- with the gate: {gated['why_run']}; kept {gated['kept']}.")
    compressed = next(r for v, r in rows.items() if v.startswith("compress"))
    steps = [
        f"{a['name']} {a['status']}"
        + (f" {a['size_bytes']:,} B" if a["size_bytes"] else "")
        + (f" {a['latency_ms']:.3f} ms" if a["latency_ms"] is not None else "")
        for a in compressed["attempts"]
    ]
    out.append(
        f"- compress chose {compressed.get('chosen') or 'nothing'} "
        f"in {compressed['seconds']:.0f} s; "
        f"attempts: {', '.join(steps)}."
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--render", action="store_true", help="rewrite the section from the record")
    args = parser.parse_args()
    if args.render:
        record = json.loads(RESULTS.read_text())
    else:
        record = measure()
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(record, indent=2) + "\n")
    path = write_section(
        "ptq_real_models", "## PTQ on models shaped like users' models\n\n" + render(record)
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
