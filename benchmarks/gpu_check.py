"""The GPU check of issue 31, carried to a machine with a GPU: MobileNetV2 on LiteRT's GPU and CPU.

Runs without TensorFlow and without a network, on Python 3.11, 3.12 or 3.13, with these
wheels, the complete list (tfcompress's base install; ``tests/test_gpu_check_script.py`` checks it
against what the run imports)::

    tfcompress ai-edge-litert numpy tqdm py-cpuinfo google-re2
    backports.strenum flatbuffers ml_dtypes protobuf typing-extensions

and LiteRT's GPU accelerator needs the Vulkan loader (``libvulkan.so.1``) and the driver's ICD
(``VK_DRIVER_FILES`` in an NVIDIA container; docs/benchmarking.md, "A fresh GPU machine").
On a machine with a network, for a GPU machine with Python 3.12 on x86_64::

    make wheel    # dist/tfcompress-0.1.0-py3-none-any.whl (not on the package index)
    pip download --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
        --platform manylinux2014_x86_64 -d wheelhouse dist/tfcompress-0.1.0-py3-none-any.whl
    apt-get download libvulkan1    # the Vulkan loader as a .deb (Debian, Ubuntu)

carry ``wheelhouse/``, the ``.deb``, ``benchmarks/`` and ``out/gpu_models/`` there, and::

    python3.12 -m venv venv
    venv/bin/pip install --no-index --find-links wheelhouse tfcompress
    dpkg -x libvulkan1_*.deb vulkan    # or: apt-get install libvulkan1, where apt reaches
    export LD_LIBRARY_PATH=$PWD/vulkan/usr/lib/x86_64-linux-gnu
    venv/bin/python benchmarks/gpu_check.py

Input: the three batch-1 files ``benchmarks/gpu_models.py`` builds where TensorFlow is
(``out/gpu_models/mobilenet_v2_{float32,float16,int8}.tflite``, about 25 MB together, and its
``manifest.json``). This script makes the static batches 8 and 32 from them with
:func:`restatic` (the batch dimension of every run-time tensor rewritten; ``gpu_models.py``
checked that such a file has the converter's own ops at that batch and computes the same
outputs), then measures the nine files:

- on the ``gpu`` backend (LiteRT ``CompiledModel``, GPU with CPU fallback, 1 CPU thread for
  what falls back): latency per call and per sample, samples per second, whether the file was
  fully accelerated and which ops ran on the CPU;
- on the ``cpu`` backend (LiteRT + XNNPACK) at 1 thread and at every core, beside them;
- the ``gpu`` target's check of each file (compiled here, or statically where LiteRT finds no
  GPU, which the verdict says);
- LiteRT's own ``benchmark_litert_model --use_gpu`` on the float32 batch-1 file, beside the
  harness's median for it.

It writes ``out/gpu_check/gpu_check.json`` (every row, the verdicts, the machine) and the
benchmark reports there, and prints the table. Where LiteRT finds no GPU the gpu rows say why
and the CPU rows are still measured. Then, on the workstation::

    .venv/bin/python benchmarks/gpu_check.py --write-docs out/gpu_check/gpu_check.json

writes the ``gpu`` section of docs/benchmarks.md from that file (the machine it names is the
one in the file).

Run (device): python benchmarks/gpu_check.py [--models out/gpu_models] [--out out/gpu_check]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "out" / "gpu_models"
OUT = ROOT / "out" / "gpu_check"
RECIPES = ("float32", "float16", "int8")
BATCHES = (1, 8, 32)
NAME = "mobilenet_v2"
GPU_TIMING = {"runs": 50, "min_seconds": 1.0, "warmup_runs": 5, "warmup_seconds": 0.5}
CPU_TIMING = {"runs": 10, "min_seconds": 1.0, "warmup_runs": 1, "warmup_seconds": 0.2}


def restatic(content: bytes, batch: int) -> bytes:
    """The same model with the batch dimension of every tensor computed from its inputs set.

    A file converted at a static batch of 1 stores that 1 as the first dimension of the
    inputs and of every tensor computed from them (weights, and what the graph computes from
    weights alone, such as a float16 file's dequantized weights, keep their shapes). Setting
    it to ``batch`` gives the file the converter writes at ``static_batch=batch`` for a model
    whose graph has no batch-dependent constant (MobileNetV2: no RESHAPE of the batch);
    ``benchmarks/gpu_models.py`` checks exactly that before the files travel.

    Raises:
        ValueError: A tensor computed from the inputs whose first dimension is not 1 (not a
            batch-1 file).
    """
    from tfcompress._compat.litert import flatbuffer_utils

    utils = flatbuffer_utils()
    model = utils.read_model_from_bytearray(bytearray(content))
    for graph in model.subgraphs:
        batched = {int(i) for i in graph.inputs}
        for op in graph.operators:  # graph order: producers before consumers
            if any(int(i) in batched for i in op.inputs if i >= 0):
                batched.update(int(o) for o in op.outputs if o >= 0)
        for index in sorted(batched):
            tensor = graph.tensors[index]
            if tensor.shape is None or len(tensor.shape) == 0:
                continue
            if int(tensor.shape[0]) != 1:
                raise ValueError(f"tensor {tensor.name!r} has batch {tensor.shape[0]}, not 1")
            tensor.shape[0] = batch
            if tensor.shapeSignature is not None and len(tensor.shapeSignature):
                tensor.shapeSignature[0] = batch
    return bytes(utils.convert_object_to_bytearray(model))


def files(models: Path, folder: Path) -> dict[str, Path]:
    """The nine files: the carried batch-1 ones, and their static batches 8 and 32."""
    made: dict[str, Path] = {}
    for recipe in RECIPES:
        source = models / f"{NAME}_{recipe}.tflite"
        if not source.is_file():
            raise FileNotFoundError(
                f"{source} is missing: run benchmarks/gpu_models.py (TensorFlow)"
            )
        for batch in BATCHES:
            path = source if batch == 1 else folder / f"{NAME}_{recipe}_b{batch}.tflite"
            if batch != 1:
                path.write_bytes(restatic(source.read_bytes(), batch))
            made[f"{NAME}_{recipe}_b{batch}"] = path
    return made


def litert_tool(model: Path, *, use_gpu: bool) -> float | None:
    """LiteRT's own median (ms) for ``model``, or None when the tool failed."""
    argv = [sys.executable, "-m", "ai_edge_litert.tools.benchmark_litert_model"]
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "result.json"
        argv += [f"--model={model}", "--num_runs=300", "--num_threads=1"]
        argv += [f"--result_json={report}", *(["--use_gpu"] if use_gpu else [])]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or not report.exists():
            print(f"benchmark_litert_model failed: {done.stderr[-400:]}", file=sys.stderr)
            return None
        return float(json.loads(report.read_text())["latency"]["median_ms"])


def preflight() -> None:
    """Import what the run needs before it starts, so a missing wheel is named at once.

    Raises:
        ImportError: A module of a listed wheel is missing (tfcompress's
            ``MissingDependencyError`` names the module LiteRT's GPU route lacked).
    """
    import tfcompress.bench.harness  # noqa: F401  (numpy, tqdm, the harness)
    from tfcompress._compat.litert import compiled_model_module, flatbuffer_utils
    from tfcompress.targets.gpu.target import gpu_verdict  # noqa: F401

    flatbuffer_utils()
    compiled_model_module()


def measure(models: Path, out: Path, *, quick: bool, note: str | None = None) -> dict:
    import tfcompress
    from tfcompress.bench.environment import capture_environment
    from tfcompress.targets.gpu.target import gpu_verdict

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    gpu_timing = {**GPU_TIMING, "runs": 10, "min_seconds": 0.2} if quick else GPU_TIMING
    cpu_timing = {**CPU_TIMING, "runs": 3, "min_seconds": 0.2} if quick else CPU_TIMING
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as folder:
        paths = files(models, Path(folder))
        named = {name: str(path) for name, path in paths.items()}
        verdicts = {name: gpu_verdict(path.read_bytes()).to_dict() for name, path in paths.items()}
        reference = f"{NAME}_float32_b1"
        gpu = tfcompress.benchmark(
            named, backends=("gpu",), threads=(1,), reference=reference, **gpu_timing
        )
        cpu = tfcompress.benchmark(
            named, backends=("cpu",), threads=tuple(sorted({1, cores})), reference=reference,
            **cpu_timing,
        )  # fmt: skip
        for label, result in (("gpu", gpu), ("cpu", cpu)):  # no matplotlib on the device
            result.save(out / label, formats=("json", "csv", "md"), overwrite=True)
        tool = {}
        if not quick:
            tool = {
                "model": paths[reference].name,
                "gpu_median_ms": litert_tool(paths[reference], use_gpu=True),
                "cpu_median_ms": litert_tool(paths[reference], use_gpu=False),
            }
    print(gpu, "\n", file=sys.stderr)
    print(cpu, file=sys.stderr)
    manifest = models / "manifest.json"
    report = {
        "environment": capture_environment().to_dict(),
        "seconds": round(time.perf_counter() - started, 1),
        "timing": {"gpu": gpu_timing, "cpu": cpu_timing, "quick": quick},
        "built": json.loads(manifest.read_text()) if manifest.exists() else None,
        "verdicts": verdicts,
        "rows": [*gpu.to_dict()["rows"], *cpu.to_dict()["rows"]],
        "notes": [*gpu.notes, *cpu.notes],
        "litert_tool": tool,
        "gpu_route": gpu_route(),
        "note": note,
    }
    path = out / "gpu_check.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"wrote {path}", file=sys.stderr)
    if not any(r["status"] == "ok" for r in report["rows"] if r["backend"] == "gpu"):
        print(f"gpu_check: the gpu rows: {found(report)}", file=sys.stderr)
    return report


def gpu_route() -> dict:
    """What LiteRT's GPU route (WebGPU over Vulkan) needs, as this machine has it.

    ``vulkan_loader``: the ``libvulkan.so.1`` this process loads (``LD_LIBRARY_PATH`` and
    the system's paths, as LiteRT's accelerator looks it up), or None; ``icd_files``: the
    driver ICD files the loader would read (``VK_DRIVER_FILES``/``VK_ICD_FILENAMES``, else
    the standard folders); ``gpu``: the GPU the driver's tools name (``nvidia-smi``, DRM).
    """
    import ctypes
    import glob

    from tfcompress.bench.environment import detect_gpu

    loader = None
    try:
        ctypes.CDLL("libvulkan.so.1")
        maps = Path("/proc/self/maps").read_text().splitlines()
        loader = next((line.split()[-1] for line in maps if "libvulkan.so" in line), "loaded")
    except OSError:
        pass
    named = os.environ.get("VK_DRIVER_FILES") or os.environ.get("VK_ICD_FILENAMES")
    folders = ("/etc/vulkan/icd.d", "/usr/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d")
    icd = named.split(os.pathsep) if named else sorted(
        path for folder in folders for path in glob.glob(f"{folder}/*.json")
    )  # fmt: skip
    return {"vulkan_loader": loader, "icd_files": icd, "gpu": detect_gpu()}


def found(report: dict) -> str:
    """Why the gpu rows were not measured, and what of the GPU route this machine has."""
    route = report.get("gpu_route") or {}
    status = next((r["status"] for r in report["rows"] if r["backend"] == "gpu"), "no gpu row")
    return (
        f"{status.split('; ')[0]}; found: Vulkan loader {route.get('vulkan_loader') or 'none'}, "
        f"ICD files {', '.join(route.get('icd_files') or []) or 'none'}, "
        f"GPU (driver tools) {route.get('gpu') or 'none'}"
    )


def section(report: dict) -> str:
    """The docs/benchmarks.md section, computed from a gpu_check.json."""
    env = report["environment"]
    rows = [r for r in report["rows"] if r["status"] == "ok"]
    gpu_rows = [r for r in rows if r["backend"] == "gpu"]
    failed = [r for r in report["rows"] if r["backend"] == "gpu" and r["status"] != "ok"]
    machine = f"{env.get('cpu')}, {env.get('cores')} cores; GPU: {env.get('gpu') or 'none'}"
    versions = env.get("versions", {})
    lines = [
        "## LiteRT GPU: MobileNetV2 1.0, 224x224, static batches (issue 31)",
        "",
        f"Measured by `benchmarks/gpu_check.py` on {machine}; ai-edge-litert "
        f"{versions.get('ai-edge-litert', '?')}; TensorFlow installed: "
        f"{'no' if 'tensorflow' not in versions else 'yes'}. Random weights (latency does "
        "not depend on them). Latency is the median per call; `ms/sample` divides it by the "
        "samples of that call; `x ref` is per sample against float32 at batch 1 on the same "
        "backend and threads. `samples/s` is from the median too (batch / p50), so "
        "`samples/s` x `ms/sample` = 1000.",
        *([f"Run note: {report['note']}"] if report.get("note") else []),
        "",
    ]
    if not gpu_rows:
        reason = found(report) if report.get("gpu_route") else failed[0]["status"] if failed else ""
        lines += [
            "**The GPU block is pending a GPU session**: on this machine LiteRT found no GPU "
            f"(`{reason[:300]}`), so only the CPU rows below were measured; the `gpu` target's "
            "checks ran statically. To fill it: carry `out/gpu_models` (written by "
            "`benchmarks/gpu_models.py`, where TensorFlow is) to a machine with a GPU, run "
            "`python benchmarks/gpu_check.py` there, and write this section from its "
            "`out/gpu_check/gpu_check.json` with `--write-docs`.",
            "",
        ]
    lines += [
        "| file | recipe | batch | backend | thr | p50 ms/call | ms/sample | samples/s | x ref "
        "| fully accelerated | on CPU |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["backend"] != "gpu", r["threads"], r["artifact"])):
        details = r.get("backend_details") or {}
        recipe = r["artifact"].split("_")[2]
        accelerated = details.get("fully_accelerated")
        on_cpu = ", ".join(
            sorted({str(o).split(":")[0].split(" ")[0] for o in details.get("cpu_ops") or []})
        )
        lines.append(
            f"| {r['artifact']} | {recipe} | {r['batch']} | {r['backend']} | {r['threads']} | "
            f"{r['latency_ms']['p50']:.3f} | {r['latency_per_sample_ms']:.4f} | "
            f"{r['batch'] * 1000 / r['latency_ms']['p50']:,.1f} | {_num(r.get('speedup'))} | "
            f"{'-' if accelerated is None else accelerated} | {on_cpu or '-'} |"
        )
    verdicts = report.get("verdicts", {})
    checked = sorted({v["checked"] for v in verdicts.values()})
    whole = sum(1 for v in verdicts.values() if v["compatible"])
    lines += [
        "",
        f"`gpu` target check: {whole} of {len(verdicts)} files run whole on a GPU "
        f"(checked: {', '.join(checked)}).",
    ]
    tool = report.get("litert_tool") or {}
    harness = next((r for r in gpu_rows if r["artifact"] == f"{NAME}_float32_b1"), None)
    if tool.get("gpu_median_ms") and harness is not None:
        ratio = harness["latency_ms"]["p50"] / tool["gpu_median_ms"]
        lines.append(
            f"LiteRT's `benchmark_litert_model --use_gpu` on {tool['model']}: "
            f"{tool['gpu_median_ms']:.3f} ms median; the harness's gpu row: "
            f"{harness['latency_ms']['p50']:.3f} ms (ratio {ratio:.2f})."
        )
    built = report.get("built") or {}
    for check in built.get("restatic_checks", []):
        lines.append(
            f"Static batch {check['batch']} of {check['recipe']} made by `restatic`: ops "
            f"{'the same as' if check['same_ops'] else 'DIFFERENT from'} the converter's, "
            f"max |output difference| {check['max_abs_diff']:.2e} on the CPU."
        )
    lines.append(f"\nThe run took {report['seconds']:.0f} s.")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--models", type=Path, default=MODELS)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--quick", action="store_true", help="few runs (a smoke test)")
    parser.add_argument("--write-docs", type=Path, metavar="GPU_CHECK.json")
    parser.add_argument("--note", help="one line about the run, kept in the JSON and the docs")
    args = parser.parse_args(argv)
    if args.write_docs is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _markdown import write_section

        print(f"wrote {write_section('gpu', section(json.loads(args.write_docs.read_text())))}")
        return 0
    try:
        preflight()
        report = measure(args.models, args.out, quick=args.quick, note=args.note)
    except ImportError as error:  # a wheel of the docstring's list not installed: say which
        said = str(error) if error.name is None else f"no module named {error.name!r}: {MISSING}"
        print(f"gpu_check: {said}", file=sys.stderr)  # tfcompress's own errors name it already
        return 2
    except FileNotFoundError as error:
        print(f"gpu_check: {error}", file=sys.stderr)
        return 2
    print(section(report))
    return 0


#: What to do about a missing module (the one line a bare machine gets instead of a traceback).
MISSING = "install the wheels listed at the top of benchmarks/gpu_check.py (no TensorFlow needed)"


if __name__ == "__main__":
    raise SystemExit(main())
