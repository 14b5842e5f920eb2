"""The one way tfcompress runs native work that model or data bytes can drive: in a child.

TensorFlow's converter and its MLIR quantizer, LiteRT's calibration and its interpreter,
ONNX Runtime and tfmot's fine-tuning are native code that a model file or a data file
steers. A crash there (SIGSEGV on a NaN the quantizer did not expect), a hang, or an
allocation whose size comes from the data (a FILL op sized by an input value) must end as
one line, never as the death of the caller or a machine out of memory. So such work runs
here, in a child process, as a call of ``module:function`` with pickled arguments
(:mod:`.wire`), in one of three flavours:

* :func:`call` with ``warm=True``: this process's warm child, a fresh interpreter that
  keeps its imports (TensorFlow) for the next call (conversion, calibration, the
  quantization debugger, layer errors, fine-tuning);
* :func:`call` with ``warm=False``: a one-shot child of its own;
* :class:`Worker`: a child that keeps state between calls and never imports TensorFlow,
  forked from a zygote that preloaded NumPy and LiteRT (:mod:`.zygote`; Linux) or a fresh
  interpreter (a measurement runner holding one model, a load probe).

Every child answers with the same loop (:mod:`.serve`), under the one time limit
(:data:`~tfcompress._limits.CHILD_TIMEOUT`: a call's ``timeout``, ``--timeout`` or
``TFCOMPRESS_TIMEOUT``) and the one memory limit (:data:`~tfcompress._limits.CHILD_MEMORY`:
``RLIMIT_DATA``); it dies with its parent and writes no core file
(:mod:`tfcompress._lifetime`). What became of a call is one result or one typed error
(:mod:`.answers`): a :class:`~tfcompress.errors.NativeCrashError` naming the signal and the
child's last words, a :class:`~tfcompress.errors.ChildTimeoutError`, a
:class:`~tfcompress.errors.ResourceLimitError`, or what the function raised there.

Example:
    >>> call("os:getpid", what="asking a child its pid") != os.getpid()  # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

if TYPE_CHECKING:
    from tfcompress._child.answers import ChildTransferError
    from tfcompress._child.serve import IDLE_SECONDS, IN_PROCESS
    from tfcompress._child.warm import call, close_warm_child, prestart
    from tfcompress._child.worker import Worker
    from tfcompress._child.zygote import NO_ZYGOTE, preload
    from tfcompress._lifetime import last_words, signal_name


__all__ = [
    "IDLE_SECONDS",
    "IN_PROCESS",
    "NO_ZYGOTE",
    "ChildTransferError",
    "Worker",
    "call",
    "close_warm_child",
    "last_words",
    "preload",
    "prestart",
    "signal_name",
]
# Loaded on first use: a worker that starts as a fresh interpreter imports only what it
# serves with (serve.py, wire.py), so a probe starts as fast as Python, NumPy and the runtime.
__getattr__, __dir__ = lazy_exports(__name__)
