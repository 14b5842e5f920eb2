"""Moved to :mod:`tfcompress.samples.tasks`; kept so old imports go on working.

The names load on first use, so ``tfcompress.models`` imports nothing of the samples.
"""

from typing import Any

_MOVED = [
    "digit_boxes",
    "ink_masks",
    "ink_segmenter",
    "train_segmenter",
    "train_two_head",
    "two_head_cnn",
    "two_input_data",
]


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from tfcompress.samples import tasks

        return getattr(tasks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
