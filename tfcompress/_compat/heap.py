"""Keep Python's cycle collector off what TensorFlow's import and the caller already hold.

Importing TensorFlow and Keras leaves about 400,000 objects that live as long as the process.
Every full collection walks all of them: the TFLite converter calls ``gc.collect()`` once per
conversion, Keras once per ``clear_session()``, and Python starts more on its own; on the CI's
2-core machine each walk costs about 0.25 s, and the walks were a third of quantizing the MNIST
CNN in a user's process (benchmarks/gc_freeze.py). ``gc.freeze()`` moves
the objects alive at that moment into a permanent generation the collector never walks;
reference counting still frees them as before.

Two uses:

* :func:`settle_after_import`: a lasting freeze after TensorFlow's and Keras' imports, only in
  processes tfcompress owns (the CLI's entry point and the fine-tuning child). In a user's
  process a lasting freeze would also pin whatever cyclic objects the user holds at that
  moment, which the collector could then never free.
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


def settle_after_import() -> None:
    """Freeze everything alive now, if this process is tfcompress's own (else nothing)."""
    if _owned:
        gc.freeze()


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
