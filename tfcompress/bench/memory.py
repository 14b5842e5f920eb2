"""Peak resident memory of the measuring process."""

from __future__ import annotations

import sys


def peak_rss_mb() -> float | None:
    """The process's peak resident set size so far, in MiB (None where unsupported).

    This is a high-water mark of the whole process (Python, TensorFlow, every model loaded
    so far), so it only grows; compare rows measured in separate processes for per-model
    memory.

    Example:
        >>> (peak_rss_mb() or 1.0) > 0
        True
    """
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024
