"""Moved to :mod:`tfcompress.samples.cnn`; kept so old imports go on working."""

from tfcompress.samples.cnn import residual_cnn, small_cnn, train_classifier

__all__ = ["residual_cnn", "small_cnn", "train_classifier"]
