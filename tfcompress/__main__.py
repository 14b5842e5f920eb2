"""``python -m tfcompress``."""

from tfcompress.cli import entry

entry()
