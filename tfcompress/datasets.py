"""Kept so `from tfcompress.samples.datasets import mnist` keeps working; see tfcompress.samples."""

from tfcompress.samples.datasets import Split, digits, mnist

__all__ = ["Split", "digits", "mnist"]
