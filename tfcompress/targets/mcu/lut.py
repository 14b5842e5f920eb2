"""Weights as look-up tables for TFLite Micro: clustered weights in less flash, decoded on board.

:func:`lut_compress` picks every int8 weight whose values per channel fit a table that saves
bytes, compresses them with TFLM's own tool (a ``TFLM_DECODE`` op expands them into the
arena), and runs both files through TFLM on the same seeded inputs in a child: a LUT is
lossless, so the outputs must be identical. Both arenas are bisected: flash is traded for
RAM (docs/mcu.md, "Less flash with look-up tables").
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LutCompression:
    """A model with LUT-compressed weights and how it compares with the uncompressed one.

    Attributes:
        tensors: Each tensor compressed: name, index bits, bytes before.
        arena: Recommended arenas ``(before, after)`` (smallest that allocates + 10%; None
            where the bisection did not finish): DECODE's outputs live in the arena.
        max_difference: Largest difference per output between the two files through TFLM.
    """

    content: bytes
    tensors: tuple[dict[str, Any], ...]
    model_bytes: tuple[int, int]
    arena: tuple[int | None, int | None]
    max_difference: tuple[float, ...]
    samples: int

    @property
    def identical(self) -> bool:
        """Whether TFLM computed the same outputs from both files."""
        return all(d == 0 for d in self.max_difference)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        from tfcompress.targets.mcu.export_c import flash_bytes

        before, after = self.model_bytes
        return {
            "tensors": [dict(t) for t in self.tensors],
            "model_bytes_before": before,
            "model_bytes_after": after,
            "flash_bytes_before": flash_bytes(before),
            "flash_bytes_after": flash_bytes(after),
            "arena_bytes_before": self.arena[0],
            "arena_bytes_after": self.arena[1],
            "max_difference": list(self.max_difference),
            "outputs_identical": self.identical,
            "samples": self.samples,
        }

    def __str__(self) -> str:
        from tfcompress.targets.mcu.export_c import flash_bytes

        before, after = (flash_bytes(n) for n in self.model_bytes)
        bits = sorted({t["bits"] for t in self.tensors})
        same = (
            "identical"
            if self.identical
            else f"differ by up to {max(self.max_difference):g} (a bug: a LUT is lossless)"
        )
        arenas = " -> ".join("?" if a is None else f"{a:,} B" for a in self.arena)
        return (
            f"LUT-compressed weights (TFLM DECODE): {len(self.tensors)} tensor(s), "
            f"{'/'.join(map(str, bits))}-bit indices; flash {before:,} B -> {after:,} B "
            f"({after / before - 1:+.0%}); arena {arenas} (decoded weights live there); "
            f"TFLM's outputs {same} with the uncompressed file's on {self.samples} seeded "
            "random inputs"
        )


def lut_compress(
    model: Any, *, name: str = "the model", timeout_s: float | None = None
) -> LutCompression:
    """Compress ``model``'s int8 weights into look-up tables with TFLite Micro's own tool.

    ``model``: a ``.tflite`` path, its bytes or a :class:`~tfcompress.models.TFLiteModel`;
    ``name`` names it in messages; ``timeout_s``: seconds each TFLM call may take.

    Raises:
        MissingDependencyError: ``tflite-micro`` is not installed.
        InvalidInputError: No weight has few enough values per channel for a table to save
            flash (cluster it first), the whole file would not shrink, or TFLM's compressor
            refused the model.
        TFCompressError: TFLM could not allocate either file (crashes and time-outs too).

    Example:
        >>> packed = lut_compress("clustered_int8.tflite")  # doctest: +SKIP
        >>> packed.model_bytes, packed.identical  # doctest: +SKIP
        ((105224, 57648), True)
    """
    from tfcompress._child import call
    from tfcompress._compat.tflm import require
    from tfcompress.errors import InvalidInputError, TFCompressError
    from tfcompress.models.formats import read_tflite_input
    from tfcompress.targets.mcu.arena import recommended, smallest_arena
    from tfcompress.targets.mcu.check import TFLITE_ONLY

    require()
    content, _, _ = read_tflite_input(model, TFLITE_ONLY)
    with tempfile.TemporaryDirectory(prefix="tfcompress-lut-") as folder:
        answer = call(
            "tfcompress.targets.mcu._lut_child:compress_and_compare",
            content,
            what=f"compressing the weights of {name} with TFLM's LUT compressor",
            timeout=timeout_s,
            log=str(Path(folder) / "tflm.log"),
        )
    if answer["refused"]:
        raise InvalidInputError(f"{name}: TFLM's compressor refused it: {answer['refused']}.")
    if not answer["tensors"]:
        raise InvalidInputError(
            f"{name}: no int8 weight has few enough distinct values per channel (at most 128) "
            "for a look-up table to save flash; cluster the weights first (tfcompress cluster "
            "MODEL.keras --clusters 16 ...), quantize with --target mcu, then export with --lut."
        )
    if answer["max_difference"] is None:
        raise TFCompressError(
            f"{name}: TFLM could not allocate the LUT-compressed file or the uncompressed one "
            "on this host; run `tfcompress mcu` on the uncompressed file for why."
        )
    packed = answer["content"]
    if len(packed) >= len(content):
        raise InvalidInputError(
            f"{name}: look-up tables would not save flash here ({len(content):,} B -> "
            f"{len(packed):,} B: the DECODE ops, tables and alignment cost more than "
            f"{len(answer['tensors'])} small tensor(s) save); export without --lut."
        )
    arenas = []
    for blob, high in ((content, answer["plain_arena"]), (packed, answer["arena"])):
        bisection = smallest_arena(blob, high, name=name, timeout=timeout_s)
        arenas.append(None if bisection.failure is not None else recommended(bisection.high))
    return LutCompression(
        packed,
        tuple(answer["tensors"]),
        (len(content), len(packed)),
        (arenas[0], arenas[1]),
        tuple(answer["max_difference"]),
        answer["samples"],
    )
