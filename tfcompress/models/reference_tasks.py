"""Moved to :mod:`tfcompress.samples.tasks`; kept so old imports go on working."""

from tfcompress.samples.tasks import (
    digit_boxes,
    ink_masks,
    ink_segmenter,
    train_segmenter,
    train_two_head,
    two_head_cnn,
    two_input_data,
)

__all__ = [
    "digit_boxes",
    "ink_masks",
    "ink_segmenter",
    "train_segmenter",
    "train_two_head",
    "two_head_cnn",
    "two_input_data",
]
