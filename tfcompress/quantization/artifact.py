"""What every quantization result shares, whatever the format: two files and their sizes.

``QuantizationResult`` (``.tflite``) and ``OnnxQuantizationResult`` (``.onnx``) are frozen
dataclasses with the same fields for the quantized bytes and the float32 reference of the
same model; this base gives both the same sizes, ratio, atomic save and the common part of
their JSON, so the two stay interchangeable for the CLI and reports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfcompress._files import PathLike, write_bytes_atomic


class QuantizedArtifact:
    """Sizes, ratio, save and JSON of a quantized model next to its float32 reference.

    Subclasses are frozen dataclasses that define ``format``, ``recipe``, ``model_content``,
    ``reference_content``, ``source``, ``conversion_seconds``, ``calibration_samples`` and
    ``warnings``, and ``config`` (the ``PTQConfig`` that made the file, None while it is
    being made).

    Example:
        >>> result = tfcompress.quantize(model, recipe="dynamic")  # doctest: +SKIP
        >>> result.size_ratio  # doctest: +SKIP
        0.262
    """

    format: str
    recipe: Any
    model_content: bytes
    reference_content: bytes
    source: str
    conversion_seconds: float
    calibration_samples: int
    warnings: tuple[str, ...]
    config: Any

    @property
    def size_bytes(self) -> int:
        """Bytes of the quantized file."""
        return len(self.model_content)

    @property
    def reference_size_bytes(self) -> int:
        """Bytes of the float32 file of the same model."""
        return len(self.reference_content)

    @property
    def size_ratio(self) -> float:
        """Quantized bytes / float32 bytes (0.26 means 26% of the float32 file)."""
        return self.size_bytes / self.reference_size_bytes

    def save(self, path: PathLike, *, overwrite: bool = False) -> Path:
        """Write the quantized model atomically; refuses to replace a file unless ``overwrite``."""
        return write_bytes_atomic(path, self.model_content, overwrite=overwrite)

    def common_dict(self) -> dict[str, Any]:
        """The JSON keys every format has (no model bytes); subclasses add their own.

        ``config`` is the whole :class:`~tfcompress.quantization.config.PTQConfig`
        (``PTQConfig.from_dict(result.to_dict()["config"])`` makes the same file again);
        ``recipe`` is its recipe.
        """
        return {
            "format": self.format,
            "source": self.source,
            "config": None if self.config is None else self.config.to_dict(),
            "recipe": self.recipe.to_dict(),
            "size_bytes": self.size_bytes,
            "reference_size_bytes": self.reference_size_bytes,
            "size_ratio": round(self.size_ratio, 4),
            "conversion_seconds": round(self.conversion_seconds, 3),
            "calibration_samples": self.calibration_samples,
            "warnings": list(self.warnings),
        }

    def summary(self, tag: str) -> str:
        """``name [tag]: N bytes (x% of float32 M) in Ts``."""
        return (
            f"{self.source} [{tag}]: {self.size_bytes:,} bytes "
            f"({self.size_ratio:.1%} of float32 {self.reference_size_bytes:,}) "
            f"in {self.conversion_seconds:.1f}s"
        )
