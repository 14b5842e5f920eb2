"""``tfcompress benchmark ARTIFACT... [--data TEST.npz] [--backend cpu,gpu] [--threads 1,2]``."""

from __future__ import annotations

import argparse
from typing import IO, Any

from tfcompress.cli._choices import BACKEND_FLAGS, BACKENDS
from tfcompress.cli._devices import add_on_flags, connect_on
from tfcompress.cli._options import add_config_flags, config_values
from tfcompress.cli.common import (
    add_custom_objects_flag,
    add_feeding_flags,
    add_json_flag,
    add_unsafe_flag,
    argument_type,
    csv_of,
    duration,
    emit_json,
    show_progress,
)


def _input_shape(text: str) -> tuple[str, tuple[int | None, ...]]:
    from tfcompress.bench.inputs import parse_input_shape

    return argument_type(parse_input_shape)(text)


#: The BenchmarkConfig fields that are flags made from their declarations.
_CONFIG = (
    "bench.config",
    "BenchmarkConfig",
    "runs",
    "min_seconds",
    "warmup_runs",
    "warmup_seconds",
    "profile_ops",
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
    parser.add_argument(
        "--input-shape",
        action="append",
        type=_input_shape,
        default=[],
        metavar="NAME=DxD...",
        help="full shape (in the model's layout, N allowed at the batch) of an input with "
        "unknown dimensions, for runs without --data, e.g. audio=1x43844x1; repeat per input",
    )
    add_feeding_flags(parser)
    parser.add_argument(
        "--backend",
        type=csv_of(str, "--backend"),
        default=["cpu"],
        help=f"comma list of {','.join(BACKENDS)} (default cpu)",
    )
    # Counts are integers here; BenchmarkConfig checks their range (one message, any way in).
    parser.add_argument("--threads", type=csv_of(int, "--threads"), default=[1], help="e.g. 1,2")
    parser.add_argument("--batch", type=csv_of(int, "--batch"), default=[1], help="e.g. 1,8,32")
    add_config_flags(parser, *_CONFIG)
    parser.add_argument(
        "--metric",
        help="what the accuracy column scores against the labels: accuracy, topK, "
        "binary_accuracy, mse, mae, rmse or miou (default: chosen from the labels)",
    )
    parser.add_argument(
        "--output", metavar="NAME", help="the output the accuracy column scores (several outputs)"
    )
    parser.add_argument("--reference", help="artifact name ratios compare to (default: float32)")
    add_backend_flags(parser)
    parser.add_argument(
        "--timeout",
        type=duration,
        metavar="SECONDS",
        help="time limit of one measurement in a worker process (loading, accuracy, one row's "
        "timing); past it the row is an error and the others go on (default: "
        "TFCOMPRESS_TIMEOUT, else 6h)",
    )
    parser.add_argument("--report", metavar="DIR", help="write JSON, CSV, Markdown and PNG here")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace report files already in --report DIR (checked before anything is timed)",
    )
    add_unsafe_flag(parser)
    add_custom_objects_flag(parser)
    add_on_flags(parser, what="measure every row")
    parser.add_argument(
        "--local",
        action="store_true",
        help="with --on: also measure on this machine, one more device (named local) beside "
        "the workers",
    )
    add_json_flag(parser)
    return parser


def run(args: argparse.Namespace, out: IO[str]) -> int:
    """Build the config from the flags, benchmark, print the table (or JSON), write reports.

    Exit 2 when a row failed.
    """
    from tfcompress.bench.config import BenchmarkConfig
    from tfcompress.bench.harness import benchmark
    from tfcompress.errors import InvalidInputError, UnsupportedModelError

    # A flag that no row would honour is refused, never ignored.
    if args.force and not args.report:
        raise InvalidInputError("--force replaces report files; give it with --report DIR.")
    config = BenchmarkConfig.from_options(
        backends=tuple(args.backend),
        threads=tuple(args.threads),
        batch_sizes=tuple(args.batch),
        **config_values(args, _CONFIG[2:]),
        metric=args.metric,
        output=args.output,
        input_shapes=dict(args.input_shape),
        batch_dims=dict(args.batch_dim),
        input_values=dict(args.input_value),
        reference=args.reference,
        backend_options=backend_options(args),
        timeout=args.timeout,
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
        InvalidInputError: A flag of a backend that ``--backend`` does not name (refused,
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
    for backend, flags in given.items():
        if backend not in args.backend:
            raise InvalidInputError(
                f"{'/'.join(flags)} applies to the {backend} backend, which --backend does not "
                f"name ({','.join(args.backend)}); add {backend} to --backend or drop the flag."
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
