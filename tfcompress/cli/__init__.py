"""Command line: ``tfcompress SUBCOMMAND ...`` / ``python -m tfcompress SUBCOMMAND ...``.

Every subcommand is a thin shim over the public API, in its own module with two functions:
``add_parser(subparsers)`` and ``run(args, out) -> int``. Machine-readable output goes to
``out`` (the real stdout); logs go to stderr.

Exit codes mean one thing each:

* 0: success;
* 1: a check the user asked for failed (a gate, a budget);
* 2: bad usage or input (a missing, corrupt or hostile file, data that does not fit, an
  impossible option), always with one line on stderr that says what to do;
* 3: an internal error, i.e. a bug in tfcompress: one line saying so, and the traceback
  only with ``--debug`` or ``TFCOMPRESS_DEBUG=1`` (CI must never read a bug as a failed gate);
* 130, 143, 129: interrupted by SIGINT (Ctrl-C), SIGTERM or SIGHUP (128 + the signal's
  number), after the run's clean-up: no child process or temporary file is left, and no
  partial output (:mod:`tfcompress.cli._interrupt`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import itertools
import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import IO

from tfcompress import __version__
from tfcompress._compat.heap import own_this_process
from tfcompress.cli import _interrupt
from tfcompress.cli._interrupt import Terminated
from tfcompress.cli._io import (
    OneLineArgumentParser,
    in_flags,
    protected_stdio,
    renamed_flag_error,
)
from tfcompress.errors import TFCompressError, bounded

EXIT_INTERNAL_ERROR = 3
DEBUG = (
    "show the traceback of an internal error (also TFCOMPRESS_DEBUG=1); before or after the command"
)
EXIT_INTERRUPTED = 130

# Modules under tfcompress.cli, in the order `--help` lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "demo",
    "data",
    "compress",
    "quantize",
    "inspect",
    "benchmark",
    "gate",
    "qat",
    "prune",
    "cluster",
    "export_onnx",
    "edgetpu",
    "gpu",
    "mcu",
    "export_c",
    "zoo",
    "select",
)


def build_parser() -> OneLineArgumentParser:
    """The full argument parser, with every subcommand."""
    parser = OneLineArgumentParser(
        prog="tfcompress",
        description="Make trained TensorFlow/Keras models fit edge devices, and prove it.",
    )
    parser.add_argument("--version", action="version", version=f"tfcompress {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logs and TensorFlow's native logs"
    )
    parser.add_argument("--debug", action="store_true", help=DEBUG)
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=OneLineArgumentParser
    )
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"tfcompress.cli.{name}")
        verb = module.add_parser(subparsers)
        verb.set_defaults(run=module.run)
        # `VERB ... --debug` too, as "rerun with --debug" reads; SUPPRESS keeps a global
        # `--debug VERB` from being reset by the verb's default.
        verb.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG)
    return parser


@contextlib.contextmanager
def _time_limit(args: argparse.Namespace) -> Iterator[None]:
    """``--timeout`` as ``TFCOMPRESS_TIMEOUT``, the one time limit every child reads.

    A conversion, a calibration, a fine-tune, a load probe, a measurement and the Edge TPU
    compiler all run under it. The variable is put back as it was after the run, so a
    program that calls :func:`main` twice keeps its own setting.
    """
    seconds = getattr(args, "timeout", None)
    if seconds is None:
        yield
        return
    before = os.environ.get("TFCOMPRESS_TIMEOUT")
    os.environ["TFCOMPRESS_TIMEOUT"] = repr(float(seconds))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TFCOMPRESS_TIMEOUT", None)
        else:
            os.environ["TFCOMPRESS_TIMEOUT"] = before


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises for bad input)."""
    words = list(sys.argv[1:] if argv is None else argv)
    renamed = renamed_flag_error(words)
    if renamed is not None:
        print(renamed, file=sys.stderr)
        return 2
    _start_converter_early(words)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version or a usage error
        return int(exit_.code or 0)
    except Exception as error:  # an argument type that raised what argparse does not catch
        print(
            f"tfcompress: internal error (a bug in tfcompress) while reading the arguments: "
            f"{type(error).__name__}: {_one_line(error)[:300]}; report it with the command line",
            file=sys.stderr,
        )
        return EXIT_INTERNAL_ERROR
    if not args.verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # read when TensorFlow is imported
    debug = args.debug or os.environ.get("TFCOMPRESS_DEBUG", "") not in {"", "0"}
    from tfcompress._child.process import command_memory

    with protected_stdio(quiet_native=not args.verbose) as out, _time_limit(args), command_memory():
        _configure_logging(args.verbose)
        try:
            return _run(args, out)
        except TFCompressError as error:
            said = in_flags(_one_line(error), _flags_of(parser, args.command))
            line = f"tfcompress {args.command}: error: {said}"
            code, details = error.exit_code, ""
        except MemoryError:  # this process out of memory: one line, not a bug's traceback
            from tfcompress._limits import out_of_memory

            line, code, details = f"tfcompress {args.command}: error: {out_of_memory()}", 2, ""
        except (KeyboardInterrupt, Terminated) as interruption:  # children and temp files
            # were cleaned up on the way here, by the `finally` and `with` blocks it unwound
            line, code = _interrupt.message(interruption), _interrupt.exit_code(interruption)
            details = ""
        except Exception as error:  # anything else is our bug, never exit 1
            details = "".join(traceback.format_exception(error)) if debug else ""
            line = (
                f"tfcompress {args.command}: internal error (a bug in tfcompress): "
                f"{type(error).__name__}: {_one_line(error)[:300]}; rerun with --debug and "
                "report the traceback (docs/security.md, 'Reporting a problem')"
            )
            code = EXIT_INTERNAL_ERROR
            interruption = _interrupt.cause(error)  # wrapped on its way (RuntimeError...)
            if interruption is not None:
                line, code = _interrupt.message(interruption), _interrupt.exit_code(interruption)
                details = ""
        # The failed command's objects (a LiteRT environment, an interpreter) print from
        # their destructors: free them while native output is still silenced, so nothing
        # follows the error line.
        gc.collect()
    print(details + line, file=sys.stderr)
    return code


#: The verbs whose converter's child :func:`_start_converter_early` may start.
_CONVERTING = ("quantize", "compress")
#: Flags (or argparse's abbreviations of them) that leave the start to the verb.
_LEFT_TO_THE_VERB = ("--help", "--list-recipes", "--format", "--timeout")


def _start_converter_early(words: list[str]) -> None:
    """Start the converter's child before the parser is built, for ``VERB MODEL ...``.

    ``quantize`` and ``compress`` of a Keras model or SavedModel spend their longest step
    importing TensorFlow in that child; building the parser (a quarter of a second reading
    the option declarations) and the verb's imports overlap it from here. Only the plain
    form is read: the verb first, the model next. The child must see the environment its
    calls will, so global flags (``-v``), ``--timeout`` (the child's variable), ``--format``,
    an ``.onnx`` or ``.tflite`` and help leave the start to the verb, as before
    (:func:`tfcompress.cli.common.warm_converter`). A command refused later kills it at exit.
    """
    if len(words) < 2 or words[0] not in _CONVERTING:
        return
    flags = [w.split("=", 1)[0] for w in words[1:] if w.startswith("-")]
    if (
        words[1].startswith("-")
        or any(w.lower().endswith(".onnx") for w in words)
        or any(
            f == "-h" or (len(f) > 2 and any(x.startswith(f) for x in _LEFT_TO_THE_VERB))
            for f in flags
        )
    ):
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # as main sets it after parsing
    from tfcompress.cli.common import warm_converter  # none for a .tflite model

    warm_converter(words[1])


def _run(args: argparse.Namespace, out: IO[str]) -> int:
    """Run the subcommand; TensorFlow missing where it was needed is one line (exit 2).

    The device install has no TensorFlow: the lazy imports in ``_compat/`` say so in a
    :class:`~tfcompress.errors.MissingDependencyError`; this catches any import of it that
    they do not see (a Keras import in a model's own code), with the same words.
    """
    try:
        return int(args.run(args, out))
    except ModuleNotFoundError as error:
        from tfcompress._compat.tf import is_missing_tensorflow, missing_tensorflow

        if is_missing_tensorflow(error):
            raise missing_tensorflow("this command (with these inputs)") from error
        raise


def entry() -> None:
    """Console-script entry point: run :func:`main`, then exit without native chatter.

    Native runtimes print from their destructors while the interpreter shuts down
    (``INFO: DestroyAccelerator``...): after the last line of tfcompress has been written,
    file descriptors 1 and 2 are pointed at /dev/null unless ``--verbose`` was given.

    SIGINT, SIGTERM and SIGHUP end the run with one line and exit code 128+N, from the first
    import on (:mod:`tfcompress.cli._interrupt`).
    """
    _interrupt.install()  # first: a signal during the imports below is one line too
    own_this_process()  # a process of its own: heavy imports are frozen (_compat/heap.py)
    argv = sys.argv[1:]
    try:
        code = main(argv)
        _interrupt.settle()  # the exit's clean-up (atexit: children, temp folders) runs whole
    except BaseException as error:  # while importing or parsing
        _interrupt.settle()
        interruption = _interrupt.cause(error)
        if interruption is None:
            raise
        print(_interrupt.message(interruption), file=sys.stderr)
        code = _interrupt.exit_code(interruption)
    sys.stdout.flush()
    sys.stderr.flush()
    global_options = itertools.takewhile(lambda arg: arg.startswith("-"), argv)
    if not {"-v", "--verbose"} & set(global_options):
        with open(os.devnull, "w") as devnull:
            for fd in (1, 2):
                os.dup2(devnull.fileno(), fd)
    if code == _interrupt.EXIT_SIGINT:
        # A Ctrl-C that once crossed native code running Python (an extension's exec during
        # an import) makes the interpreter end by SIGINT at exit, even caught: the exit's
        # clean-up (children, temporary folders) runs here, then the process ends with 130.
        atexit._run_exitfuncs()
        os._exit(code)
    raise SystemExit(code)


def _flags_of(parser: argparse.ArgumentParser, verb: str) -> set[str]:
    """Every flag of ``verb``'s parser: what a message may recommend to its user."""
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices[verb]._option_string_actions)


def _one_line(error: BaseException) -> str:
    # one line, whatever the message holds, and the values it quotes cut (errors.bounded)
    return bounded(" ".join(str(error).split())) or "no message"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at emit time (it is swapped during a command).

    A warning quotes values as an error does: cut (:func:`tfcompress.errors.bounded`).
    """

    @property
    def stream(self) -> IO[str]:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _: IO[str]) -> None:
        pass

    def format(self, record: logging.LogRecord) -> str:
        return bounded(super().format(record))


def _configure_logging(verbose: bool) -> None:
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tfcompress")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    # Python warnings and the libraries' own loggers (TensorFlow, absl) are noise in a CLI
    # whose failures are one line; --verbose shows them.
    logging.captureWarnings(True)
    for noisy in ("py.warnings", "absl", "tensorflow", "h5py"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.ERROR)
