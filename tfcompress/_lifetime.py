"""What every child process tfcompress starts does first: die with its parent, leave no core.

A child that outlives the process that started it (killed by SIGKILL, by the out-of-memory
killer, or by a SIGTERM whose handler had no time to reap it) keeps measuring or training for
nobody. On Linux a child asks the kernel for SIGKILL when its parent dies
(``prctl(PR_SET_PDEATHSIG)``); elsewhere its parent's clean-up is all there is. A child that
crashes must not write a core file holding the user's model either.

The first three are called *in the child*, first thing, by every child tfcompress starts
(:mod:`tfcompress._child`: its fresh interpreters, its zygote, each worker the zygote forks).

:func:`signal_name` and :func:`last_words` are the parent's side: how every crash message
names the signal and quotes the child.

Example:
    >>> no_core_files()  # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int | None = None) -> bool:
    """Have the kernel kill this process when its parent dies (Linux only).

    Args:
        parent: The pid the parent had when it started us; when given and the parent is
            already gone (we were re-parented before the call), this process exits at once.

    Returns:
        Whether the kernel will do it (False elsewhere than Linux, or if ``prctl`` failed).
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl in this libc: the parent's clean-up only
        return False
    if parent is not None and os.getppid() != parent:  # it died before we asked
        os._exit(1)
    return done


def no_core_files() -> None:
    """A crash of this process writes no core file (it would hold the user's model)."""
    if sys.platform == "win32":
        return
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def limit_memory(size: int) -> None:
    """Cap what this process may allocate at ``size`` bytes (Linux: ``RLIMIT_DATA``).

    ``RLIMIT_DATA`` counts the heap and private writable mappings, what an allocation a
    model's data decides grows; address space merely reserved (thread stacks' guard pages,
    allocator arenas) is not counted, so the cap can sit close to what is really used.
    Where there is no such limit (Windows) nothing is capped.
    """
    if sys.platform == "win32":  # pragma: no cover - no rlimits there
        return
    import contextlib
    import resource

    kind = getattr(resource, "RLIMIT_DATA", resource.RLIMIT_AS)
    with contextlib.suppress(ValueError, OSError):  # a hard limit below ours: keep it
        soft, _ = resource.getrlimit(kind)
        # A lower soft limit the parent set already for the first call (it may come before
        # this line does: :func:`limit_child_memory`) stays.
        keep = soft if 0 <= soft < size and soft != resource.RLIM_INFINITY else size
        resource.setrlimit(kind, (keep, size))


def held_bytes(pid: int, field: str = "VmData") -> int | None:
    """Bytes process ``pid`` holds as ``RLIMIT_DATA`` counts them (``VmData``); None: unknown.

    ``field="VmRSS"``: the bytes it holds in memory now (what the machine runs out of).
    """
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def limit_child_memory(pid: int, soft: int, hard: int) -> bool:
    """Set process ``pid``'s ``RLIMIT_DATA`` to ``soft`` (at most its ``hard``); False: not here."""
    import contextlib

    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return False
    if not hasattr(resource, "prlimit") or not hasattr(resource, "RLIMIT_DATA"):
        return False
    with contextlib.suppress(ValueError, OSError):
        resource.prlimit(pid, resource.RLIMIT_DATA, (min(soft, hard), hard))
        return True
    return False


def signal_name(number: int) -> str:
    """``SIGSEGV`` for 11; ``signal 99`` for a number no signal has.

    Example:
        >>> signal_name(11)
        'SIGSEGV'
    """
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


#: What TensorFlow (and absl) print at start-up in every process that imports them: never
#: why a child died, so never its last words (a CUDA stub's "Could not find cuda drivers" on a
#: CPU machine would otherwise be quoted as the cause of a converter's crash).
_STARTUP_NOISE = re.compile(
    r"absl::InitializeLog\(\)"
    r"|\b(?:cudart_stub|cuda_platform|cuda_dnn|cuda_fft|cuda_blas|cuda_executor|cuda_diagnostics"
    r"|computation_placer|cpu_feature_guard)\.cc:\d+\]"
    r"|oneDNN custom operations are on|TF_ENABLE_ONEDNN_OPTS"
    r"|Could not find cuda drivers|failed call to cuInit"
    r"|To enable the following instructions:|rebuild TensorFlow with the appropriate compiler"
    r"|TF-TRT Warning"
)


def is_startup_noise(line: str) -> bool:
    """Whether ``line`` is a runtime's notice rather than a child's own words.

    LiteRT's ``INFO:`` notices ("Created TensorFlow Lite XNNPACK delegate") and TensorFlow's
    start-up lines (CUDA stubs, oneDNN, absl's InitializeLog warning, the CPU feature guard).

    Example:
        >>> is_startup_noise("I0000 cudart_stub.cc:31] Could not find cuda drivers on your machine")
        True
        >>> is_startup_noise("F0000 check failed: size > 0")
        False
    """
    return "INFO:" in line or _STARTUP_NOISE.search(line) is not None


def last_words(stderr: bytes | None, limit: int = 200) -> str:
    r"""The last non-empty line a child wrote, on one line and capped (for messages).

    Notices of the runtimes (:func:`is_startup_noise`) are never the cause: they are skipped.

    Example:
        >>> last_words(b"loading\nF0000 check failed: size > 0\nINFO: Created delegate\n")
        'F0000 check failed: size > 0'
    """
    text = (stderr or b"").decode("utf-8", errors="replace")
    lines = [line for line in text.splitlines() if line.strip() and not is_startup_noise(line)]
    if not lines:
        return ""
    line = " ".join(lines[-1].split())
    line = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in line)
    return line if len(line) <= limit else line[: limit - 3] + "..."
