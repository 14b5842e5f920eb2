"""Keep Python's cycle collector off what TensorFlow's import and the caller already hold.

Importing TensorFlow and Keras leaves about 400,000 objects that live as long as the process.
Every full collection walks all of them: the TFLite converter calls ``gc.collect()`` once per
conversion, Keras once per ``clear_session()``, and Python starts more on its own; on the CI's
2-core machine each walk costs about 0.25 s, and the walks were a third of quantizing the MNIST
CNN in a user's process (benchmarks/gc_freeze.py). ``gc.freeze()`` moves
the objects alive at that moment into a permanent generation the collector never walks;
reference counting still frees them as before.

Two uses:

* :func:`settled_import`: no collection during TensorFlow's and Keras' imports (0.4 to 1.4 CPU
  seconds on the CI's 2-core machine) and a lasting freeze after them, only in processes tfcompress
  owns (the CLI's entry point and every child). In a user's process a lasting freeze would
  also pin whatever cyclic objects the user holds then, which the collector could never free.
* :func:`sparing_collections`: around one conversion (``convert_all``) in anyone's process,
  the objects that existed before it are frozen and thawed again when it ends, so collections
  inside walk only what the conversion created; nothing stays pinned. It steps aside when something
  is frozen already (an owned process, or a user who froze their own heap before forking).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

_owned = False


def own_this_process() -> None:
    """Mark this process as tfcompress's own: heavy imports are frozen after they finish."""
    global _owned
    _owned = True


@contextlib.contextmanager
def settled_import() -> Iterator[None]:
    """Around a heavy import in a process tfcompress owns: no collection, then a freeze."""
    if _owned:
        gc.disable()
    try:
        yield
    finally:
        if _owned:
            gc.freeze()
            gc.enable()


@contextlib.contextmanager
def sparing_collections() -> Iterator[None]:
    """Inside the block, collections walk only the objects created inside it."""
    if gc.get_freeze_count():  # frozen already, by us or by the user: theirs to keep
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
