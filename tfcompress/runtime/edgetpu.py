"""Edge TPU backend: the LiteRT interpreter with the ``libedgetpu`` external delegate."""

from __future__ import annotations

import ctypes.util
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress._compat.litert import interpreter_module
from tfcompress.errors import BackendUnavailableError, InvalidInputError
from tfcompress.models.loading import TFLiteModel
from tfcompress.runtime.base import BackendFlag, register_backend
from tfcompress.runtime.litert import LiteRTRunner
from tfcompress.targets.edgetpu.compiler_log import parse_compiler_log

logger = logging.getLogger(__name__)

DEFAULT_LIBRARY = "libedgetpu.so.1"
_INSTALL_HINT = (
    "install the Edge TPU runtime (Debian package libedgetpu1-std from "
    "https://coral.ai/software/) and plug in the Coral device, or pass library=PATH"
)


def find_library(library: str | None = None) -> str:
    """Locate the Edge TPU runtime library without loading it (BackendUnavailableError if absent).

    ``library``: a library name or path; default ``$TFCOMPRESS_EDGETPU_LIB`` or ``libedgetpu.so.1``.
    """
    name = library or os.environ.get("TFCOMPRESS_EDGETPU_LIB") or DEFAULT_LIBRARY
    if os.sep in name:
        if os.path.isfile(name):
            return name
    elif ctypes.util.find_library("edgetpu") or _loadable(name):
        return name
    raise BackendUnavailableError(f"{name} not found; {_INSTALL_HINT}.")


def _loadable(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


@register_backend("edgetpu")
class EdgeTPURunner(LiteRTRunner):
    """Runs a ``.tflite`` compiled by ``edgetpu_compiler`` on a Coral Edge TPU.

    Ops the compiler mapped to the Edge TPU run there (inside ``edgetpu-custom-op``); the
    rest run on the CPU. A model that was not compiled for the Edge TPU runs entirely on
    the CPU, which :meth:`details` shows as ``edgetpu_ops: 0``; for a compiled one it counts
    the ops inside the custom ops from the compiler's log (:func:`count_tpu_ops`).

    ``library`` (default ``libedgetpu.so.1``), ``device`` (``"usb"``, ``"usb:0"``,
    ``"pci:0"``; default: any) and ``compiler_log`` (default: ``<model>.log`` beside the
    model, as the compiler writes it) are its flags' options; ``threads`` run the CPU's ops.

    Raises:
        BackendUnavailableError: No Edge TPU runtime library, or no device.
    """

    runtime_name = "LiteRT with the Edge TPU delegate"
    flags = (
        BackendFlag(
            "library", "--edgetpu-lib", "Edge TPU runtime library (libedgetpu.so.1)", None, "PATH"
        ),
        BackendFlag("device", "--edgetpu-device", "Edge TPU device, e.g. usb:0 or pci:0"),
        BackendFlag(
            "compiler_log",
            "--edgetpu-log",
            "edgetpu_compiler's log of the compiled model, to count the ops the TPU runs "
            "(default: MODEL.log beside the model, as the compiler writes it)",
            None,
            "PATH",
        ),
    )

    def __init__(
        self,
        model: TFLiteModel,
        *,
        threads: int = 1,
        library: str | None = None,
        device: str | None = None,
        compiler_log: str | os.PathLike[str] | None = None,
    ) -> None:
        self.library = find_library(library)
        self.device = device
        self.compiler_log = compiler_log
        super().__init__(model, threads=threads, use_xnnpack=True)

    def _create_interpreter(self) -> Any:
        module, _ = interpreter_module()
        options = {"device": self.device} if self.device else {}
        try:
            delegate = module.load_delegate(self.library, options)
        except (OSError, ValueError, RuntimeError) as error:
            raise BackendUnavailableError(
                f"the Edge TPU delegate did not load from {self.library} ({error}); check that "
                "the Coral device is plugged in and visible (lsusb / lspci)."
            ) from error
        return module.Interpreter(
            model_content=self.model.content,
            num_threads=self.threads,
            experimental_delegates=[delegate],
        )

    def details(self) -> dict[str, object]:
        """Adds the Edge TPU library, device, and how many of the model's ops the TPU runs.

        ``edgetpu_ops`` counts the original ops inside the ``edgetpu-custom-op`` nodes (read
        from the compiler's log, see :func:`count_tpu_ops`), never the nodes themselves;
        ``edgetpu_segments`` counts the nodes.
        """
        names = [str(node["op_name"]) for node in self.interpreter._get_ops_details()]
        count = count_tpu_ops(names, model_path=self.model.path, compiler_log=self.compiler_log)
        if count.segments == 0:
            logger.warning(
                "%s holds no edgetpu-custom-op: compile it with edgetpu_compiler first, or "
                "it runs entirely on the CPU",
                self.model.name,
            )
        return {
            **super().details(),
            "library": self.library,
            "device": self.device,
            "edgetpu_ops": count.ops,
            "edgetpu_segments": count.segments,
            "edgetpu_ops_source": count.source,
        }


@dataclass(frozen=True)
class TPUOpCount:
    """How many of a compiled model's original ops run on the Edge TPU, and how we know.

    Attributes:
        ops: Ops inside the ``edgetpu-custom-op`` nodes; None when no compiler log says.
        segments: ``edgetpu-custom-op`` nodes (Edge TPU subgraphs) in the compiled graph.
        source: Where ``ops`` comes from, or why it is unknown.
    """

    ops: int | None
    segments: int
    source: str


def count_tpu_ops(
    op_names: Sequence[str],
    *,
    model_path: Path | None = None,
    compiler_log: str | os.PathLike[str] | None = None,
) -> TPUOpCount:
    """Count the ops the Edge TPU runs in a compiled model, not its custom-op nodes.

    ``edgetpu_compiler`` replaces each mapped run of ops with one ``edgetpu-custom-op`` node
    whose payload is the TPU's own program, so the compiled file no longer says how many
    ops went in. The compiler's operation log does: the one it writes next to the compiled
    model (``model_edgetpu.log``, also written by ``tfcompress quantize --target edgetpu``),
    or the one given (its printed output or its ``.log`` file; else the ``.log`` beside
    ``model_path``). InvalidInputError: a ``compiler_log`` that cannot be read or has no
    operator table.

    Example:
        >>> count_tpu_ops(["QUANTIZE", "CONV_2D"]).ops
        0
    """
    segments = sum(1 for name in op_names if "edgetpu" in name.lower())
    if segments == 0:
        return TPUOpCount(0, 0, "no edgetpu-custom-op in the graph")
    log_path = Path(compiler_log) if compiler_log is not None else _log_beside(model_path)
    if log_path is None:
        return TPUOpCount(
            None,
            segments,
            f"unknown: the {segments} edgetpu-custom-op node(s) hide the ops inside; pass "
            "compiler_log=PATH (the *_edgetpu.log edgetpu_compiler writes) to count them",
        )
    try:
        text = log_path.read_text(errors="replace")
    except OSError as error:
        raise InvalidInputError(f"{log_path}: cannot read the compiler log ({error}).") from error
    log = parse_compiler_log(text)
    if log.ops_mapped is not None:  # the printed summary states it
        return TPUOpCount(log.ops_mapped, segments, f"compiler log {log_path}")
    if not log.operators:
        raise InvalidInputError(
            f"{log_path}: no operation count and no 'Operator Count Status' table; pass "
            "the output of 'edgetpu_compiler -s' (or the *_edgetpu.log it writes)."
        )
    mapped = sum(row.count for row in log.operators if row.mapped)
    return TPUOpCount(mapped, segments, f"compiler log {log_path} (operator table)")


def _log_beside(model_path: Path | None) -> Path | None:
    if model_path is None:
        return None
    log = Path(model_path).with_suffix(".log")
    return log if log.is_file() else None
