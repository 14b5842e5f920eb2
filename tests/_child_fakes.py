"""Stand-ins for what a child runs, importable there (tests/ is on the children's path).

The probe's tests point ``tfcompress.models.probe.CHILD_TARGET`` at one of these to fake
what a runtime does to a hostile file: crash, hang, or refuse it at one stage; the
converter's and fine-tuning's tests point theirs (``CHILD_TARGET``) at a program that really
crashes its child, as TensorFlow's kernels have.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any


def segfault(*_: Any, **__: Any) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def segfault_while_onednn(*args: Any) -> Any:
    """Fine-tuning that dies by SIGSEGV while oneDNN is on (as TF 2.21's kernels did), else runs."""
    if os.environ.get("TF_ENABLE_ONEDNN_OPTS", "") != "0":
        segfault()
    from tfcompress.training.isolation import run_request

    return run_request(*args)


def abort(*_: Any) -> None:
    os.kill(os.getpid(), signal.SIGABRT)


def allocate(size: int) -> int:
    """Allocate and touch ``size`` bytes, as a model's data-sized tensor would; their count."""
    import numpy as np

    return int(np.ones(size, np.uint8).nbytes)


def hang(*_: Any) -> None:
    time.sleep(60)


def never(*_: Any) -> None:
    raise AssertionError("the probe ran on a file the validator should have refused")


def runs(*_: Any) -> dict[str, Any]:
    return {"ok": True}


def refuses_load(*_: Any) -> dict[str, Any]:
    return {"ok": False, "stage": "load", "reason": "ValueError: bad\nthings"}


def refuses_prepare(*_: Any) -> dict[str, Any]:
    return {"ok": False, "stage": "prepare", "reason": "RuntimeError: unresolved custom op"}


DIV = "RuntimeError: div.cc:262 data[i] != zero_point was not true. Node 3 (DIV) failed"


def refuses_to_run(*_: Any) -> dict[str, Any]:
    return {"ok": False, "stage": "run", "reason": DIV}


def segfault_if_marked(kind: str, content: bytes, *_: Any) -> dict[str, Any]:
    """Crash on a file carrying ``crash-me`` (a tensor name), run any other."""
    if b"crash-me" in content:
        segfault()
    return runs()
