"""Moved to :mod:`tfcompress.samples.xception`; kept so old imports go on working."""

from tfcompress.samples.xception import mini_xception

__all__ = ["mini_xception"]
