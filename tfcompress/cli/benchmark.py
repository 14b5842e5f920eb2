"""``tfcompress benchmark ARTIFACT... [--data TEST.npz] [--backends cpu,gpu] [--threads 1,2]``."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress._config_fields import declared_options
from tfcompress.cli._choices import BACKEND_FLAGS
from tfcompress.cli._devices import add_on_flags, connect_on
from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli.common import (
    add_feeding_flags,
    add_per_input_flag,
    add_shared_flags,
    emit_json,
    feeding_options,
    show_progress,
)

#: The BenchmarkConfig fields that are flags made from their declarations.
_CONFIG = (
    "bench.config",
    "BenchmarkConfig",
    "backends",
    "runs",
    "min_seconds",
    "warmup_runs",
    "warmup_seconds",
    "profile_ops",
    "threads",
    "batch_sizes",
    "metric",
    "output",
    "reference",
    "timeout",
)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register the subcommand."""
    parser = subparsers.add_parser(
        "benchmark",
        help="size, accuracy, latency and throughput of artifacts per backend",
        description=(
            "Measure .tflite, .onnx and Keras artifacts side by side on LiteRT CPU/GPU, the "
            "Edge TPU, ONNX Runtime or TensorFlow. Exit 0 when every row was measured or says "
            "why not (its backend is unavailable here, or skipped: it runs none of the "
            "artifacts); 2 on bad input: an artifact or data file that cannot be read, a "
            "--report folder that already holds a report (without --force), or a row the "
            "model cannot run, a runtime that crashed or a measurement past --timeout (the "
            "table still shows every row). Native runtimes run in worker processes, so a "
            "crash is a row, not the end of the run."
        ),
    )
    parser.add_argument("artifacts", nargs="+", metavar="ARTIFACT", help=".tflite/.onnx/.keras")
    parser.add_argument(
        "--data",
        help="test samples (.npz with x and y for accuracy; one array per input name for "
        "several inputs); without it, latency runs on seeded random inputs",
    )
    add_per_input_flag(
        parser,
        "--input-shape",
        "NAME=DxD...",
        "tfcompress.bench.inputs:parse_input_shape",
        "full shape (in the model's layout, N allowed at the batch) of an input with "
        "unknown dimensions, for runs without --data, e.g. audio=1x43844x1; repeat per input",
    )
    add_feeding_flags(parser)
    # Counts are integers here; BenchmarkConfig checks their range (one message, any way in).
    add_config_flags(parser, *_CONFIG)
    add_backend_flags(parser)
    parser.add_argument("--report", metavar="DIR", help="write JSON, CSV, Markdown and PNG here")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace report files already in --report DIR (checked before anything is timed)",
    )
    add_shared_flags(parser, "unsafe", "custom_objects")
    add_on_flags(parser, what="measure every row")
    parser.add_argument(
        "--local",
        action="store_true",
        help="with --on: also measure on this machine, one more device (named local) beside "
        "the workers",
    )
    add_shared_flags(parser, "json")
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Benchmark as the flags say, print the table (or JSON), write reports; failed rows: exit 2."""
    from tfcompress.bench.config import BenchmarkConfig
    from tfcompress.bench.harness import benchmark
    from tfcompress.errors import InvalidInputError, UnsupportedModelError

    # A flag that no row would honour is refused, never ignored.
    if args.force and not args.report:
        raise InvalidInputError("--force replaces report files; give it with --report DIR.")
    config = BenchmarkConfig.from_options(
        **config_values(args, _CONFIG[2:]),
        input_shapes=dict(args.input_shape),
        **feeding_options(args),
        backend_options=backend_options(args),
        safe_mode=not args.unsafe,
    )
    if args.local and not args.on:
        raise InvalidInputError("--local adds this machine beside the devices of --on; give --on.")
    client = connect_on(args)  # an unreachable scheduler is one line (exit 2) before any work
    try:
        result = benchmark(
            _with_custom_objects(args, config.threads[0]),
            config=config,
            data=args.data,
            report_dir=args.report,
            overwrite=args.force,
            progress=show_progress(),
            on=client,
            local=args.local,
        )
    finally:
        if client is not None:
            client.close()
    if args.json:
        payload = result.to_dict()
        payload["report_files"] = [str(p) for p in result.report_files]
        emit_json(out, payload)
    else:
        out.write(f"{result}\n")
    failed = [r for r in result.rows if r.status.startswith("error")]
    if failed:
        first = failed[0]
        raise UnsupportedModelError(
            f"{len(failed)} of {len(result.rows)} rows could not be measured (first: "
            f"{first.artifact} on {first.backend}: {first.status.removeprefix('error: ')}); "
            "see the status column."
        )
    return 0


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per option a backend's runner declares (``--no-xnnpack``, ``--edgetpu-lib``)."""
    for backend, option, flag, text, value, metavar in BACKEND_FLAGS:
        dest, text = _dest(backend, option), f"{backend} backend: {text}"
        if value is None:
            parser.add_argument(flag, dest=dest, metavar=metavar or option.upper(), help=text)
        else:
            parser.add_argument(flag, dest=dest, action="store_const", const=value, help=text)


def backend_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The backend flags given, as ``{backend: {option: value}}``.

    Raises:
        InvalidInputError: A flag of a backend that ``--backends`` does not name (refused,
            never ignored).
    """
    from tfcompress.errors import InvalidInputError

    options: dict[str, dict[str, Any]] = {}
    given: dict[str, list[str]] = {}
    for backend, option, flag, _, _, _ in BACKEND_FLAGS:
        value = getattr(args, _dest(backend, option), None)
        if value is not None:
            options.setdefault(backend, {})[option] = value
            given.setdefault(backend, []).append(flag)
    named = args.backends or declared_options(*_CONFIG[:2])["backends"].default
    for backend, flags in given.items():
        if backend not in named:
            raise InvalidInputError(
                f"{'/'.join(flags)} applies to the {backend} backend, which --backends does "
                f"not name ({','.join(named)}); add {backend} to --backends or drop the flag."
            )
    return options


def _dest(backend: str, option: str) -> str:
    """The namespace attribute of one backend's option (two backends may share a name)."""
    return f"backend_option:{backend}:{option}"


def _with_custom_objects(args: argparse.Namespace, threads: int) -> Any:
    """The artifacts as given, or with ``--custom-objects`` the Keras ones loaded with them.

    Labelled by file name, as paths are; a ``.tflite``/``.onnx`` stays a path. Loading a
    Keras model starts TensorFlow, whose thread pools are fixed from then on: they are
    pinned to the first ``--threads`` value first, as :func:`tfcompress.benchmark` pins them
    for the paths it loads itself (else the keras rows were "unavailable").
    """
    if not args.custom_objects:
        return args.artifacts
    from pathlib import Path

    from tfcompress.cli._custom_objects import load_cli_models, may_be_keras

    keras = [p for p in args.artifacts if may_be_keras(p)]
    if keras:
        from tfcompress.runtime.keras import pin_tensorflow_threads

        pin_tensorflow_threads(threads)
    loaded = dict(zip(keras, load_cli_models(args, keras or args.artifacts), strict=False))
    named: dict[str, Any] = {}
    for path in args.artifacts:
        label = Path(path).name
        while label in named:
            label += "'"
        named[label] = loaded.get(path, path)
    return named
