"""Stated limits on what an untrusted file may make tfcompress allocate, and how to raise them.

A small file can declare a huge result: a PNG of 20000x20000 pixels decodes to 1.6 GB, a
1.5 MB ``.npz`` of zeros inflates to gigabytes. Such sizes are read from the headers and
compared with these limits *before* anything is decoded; a refusal names the limit and the
environment variable that raises it, for the rare genuine file that needs more.

Example:
    >>> MAX_IMAGE_PIXELS.value() >= 100_000_000
    True
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tfcompress.errors import InvalidInputError

__all__ = ["MAX_IMAGE_PIXELS", "MAX_INFLATED_BYTES", "Limit"]


@dataclass(frozen=True)
class Limit:
    """A limit with a default, read from an environment variable when it is set.

    Attributes:
        env: The variable that overrides the default (a positive integer).
        default: The limit when the variable is unset.
        unit: What is counted, for messages (``"pixels"``, ``"bytes"``).

    Example:
        >>> Limit("TFCOMPRESS_EXAMPLE_LIMIT", 10, "pixels").value()
        10
    """

    env: str
    default: int
    unit: str

    def value(self) -> int:
        """The limit in force.

        Raises:
            InvalidInputError: The variable is set to something that is not a positive
                integer.
        """
        text = os.environ.get(self.env, "").strip()
        if not text:
            return self.default
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise InvalidInputError(
                f"{self.env} must be a positive whole number of {self.unit}, got {text!r}."
            )
        return value

    def hint(self) -> str:
        """How to raise the limit, for the end of a message."""
        return f"for a file you trust, raise the limit with {self.env}=<{self.unit}>"


MAX_IMAGE_PIXELS = Limit("TFCOMPRESS_MAX_IMAGE_PIXELS", 100_000_000, "pixels")
"""Pixels one image may declare (width x height x animation frames): 100 million, four
times a 50-megapixel photo, whose decoded float32 RGBA would take 1.6 GB."""

MAX_INFLATED_BYTES = Limit("TFCOMPRESS_MAX_INFLATED_BYTES", 2**30, "bytes")
"""Bytes the compressed arrays of one ``.npz`` may inflate to: 1 GiB. Arrays stored
uncompressed (``np.savez``) are bounded by the file's own size and are not counted."""
