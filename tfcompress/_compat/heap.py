"""Keep Python's cycle collector off what importing TensorFlow leaves behind.

Importing TensorFlow and Keras leaves about 400,000 objects that live as long as the process.
Every full collection walks all of them: the TFLite converter calls ``gc.collect()`` once per
conversion, Keras once per ``clear_session()``, and Python starts more on its own; on the CI's
2-core machine each walk costs about 0.25 s, a sixth of a quantize run. ``gc.freeze()`` moves
the objects alive at that moment into a permanent generation the collector never walks;
reference counting still frees them as before.

This happens only in processes tfcompress owns (the CLI's entry point and the fine-tuning
child). In a user's process a freeze would also pin whatever cyclic objects the user holds at
that moment, which the collector could then never free; a user who wants the speed can call
``gc.freeze()`` after their own imports.

Example:
    >>> own_this_process()  # in an entry point, before anything imports TensorFlow
"""

from __future__ import annotations

import gc

_owned = False


def own_this_process() -> None:
    """Mark this process as tfcompress's own: heavy imports are frozen after they finish."""
    global _owned
    _owned = True


def settle_after_import() -> None:
    """Freeze everything alive now, if this process is tfcompress's own (else nothing)."""
    if _owned:
        gc.freeze()
