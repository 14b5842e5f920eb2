"""Edge TPU backend: the LiteRT interpreter with the ``libedgetpu`` external delegate."""

from __future__ import annotations

import ctypes.util
import logging
import os
from typing import Any

from tfcompress._compat.litert import interpreter_module
from tfcompress.errors import BackendUnavailableError
from tfcompress.models.loading import TFLiteModel
from tfcompress.runtime.base import register_backend
from tfcompress.runtime.litert import LiteRTRunner

logger = logging.getLogger(__name__)

DEFAULT_LIBRARY = "libedgetpu.so.1"
_INSTALL_HINT = (
    "install the Edge TPU runtime (Debian package libedgetpu1-std from "
    "https://coral.ai/software/) and plug in the Coral device, or pass library=PATH"
)


def find_library(library: str | None = None) -> str:
    """Locate the Edge TPU runtime library without loading it.

    Args:
        library: A library name or path; default ``$TFCOMPRESS_EDGETPU_LIB`` or
            ``libedgetpu.so.1``.

    Returns:
        The name or path to hand to ``load_delegate``.

    Raises:
        BackendUnavailableError: The library is not installed here.

    Example:
        >>> find_library("/nonexistent/libedgetpu.so.1")
        Traceback (most recent call last):
        ...
        tfcompress.errors.BackendUnavailableError: /nonexistent/libedgetpu.so.1 not found; ...
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
    the CPU, which :meth:`details` shows as ``edgetpu_ops: 0``.

    Args:
        model: The ``.tflite`` to run (ideally ``*_edgetpu.tflite``).
        threads: CPU threads for the ops left on the CPU.
        library: Path or name of the Edge TPU runtime (default ``libedgetpu.so.1``).
        device: Which Edge TPU, e.g. ``"usb"``, ``"usb:0"`` or ``"pci:0"`` (default: any).

    Raises:
        BackendUnavailableError: No Edge TPU runtime library, or no device.

    Example:
        >>> with EdgeTPURunner(model, device="usb") as runner:  # doctest: +SKIP
        ...     outputs = runner.predict(x)
    """

    def __init__(
        self,
        model: TFLiteModel,
        *,
        threads: int = 1,
        library: str | None = None,
        device: str | None = None,
    ) -> None:
        self.library = find_library(library)
        self.device = device
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
        """Adds the Edge TPU library, device and how many compiled Edge TPU ops the model has."""
        edgetpu_ops = sum(
            1
            for node in self.interpreter._get_ops_details()
            if "edgetpu" in str(node["op_name"]).lower()
        )
        if edgetpu_ops == 0:
            logger.warning(
                "%s holds no edgetpu-custom-op: compile it with edgetpu_compiler first, or "
                "it runs entirely on the CPU",
                self.model.name,
            )
        return {
            **super().details(),
            "library": self.library,
            "device": self.device,
            "edgetpu_ops": edgetpu_ops,
        }
