"""What every quantization result shares, whatever the format: two files and their sizes.

``QuantizationResult`` (``.tflite``) and ``OnnxQuantizationResult`` (``.onnx``) get the same
sizes, ratio, atomic save and JSON core, so the two stay interchangeable for the CLI and reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from tfcompress._files import PathLike, write_bytes_atomic


class MadeFile:
    """Sizes and atomic save of a made file (``model_content``) and its ``reference_content``.

    Quantized and fine-tuned results alike: the reference is the file each is compared with.
    """

    model_content: bytes
    reference_content: bytes

    @property
    def size_bytes(self) -> int:
        """Bytes of the made file."""
        return len(self.model_content)

    @property
    def reference_size_bytes(self) -> int:
        """Bytes of the file it is compared with."""
        return len(self.reference_content)

    def save(self, path: PathLike, *, overwrite: bool = False) -> Path:
        """Write the made file atomically; refuses to replace a file unless ``overwrite``."""
        return write_bytes_atomic(path, self.model_content, overwrite=overwrite)


@dataclass(frozen=True)
class QuantizedArtifact(MadeFile):
    """Sizes, ratio, save and JSON of a quantized model next to its float32 reference.

    Subclasses are frozen dataclasses that define ``format`` and these attributes.

    Attributes:
        recipe: The exact recipe that produced ``model_content`` (replayable).
        model_content: The quantized file.
        reference_content: The float32 file of the same model it is compared with.
        source: Name of the model that was quantized.
        conversion_seconds: Wall time of making the file.
        calibration_samples: Samples actually used for calibration (0 when none needed).
        warnings: Warnings met on the way.
        config: The :class:`~tfcompress.quantization.config.PTQConfig` that made the file
            (None while it is being made): its recipe is ``recipe`` (the methods kept, when
            methods were tried), so ``quantize(model, config=result.config, ...)`` makes the
            same file again.
    """

    format: ClassVar[str]
    recipe: Any
    model_content: bytes = field(repr=False)
    reference_content: bytes = field(repr=False)
    source: str
    conversion_seconds: float
    calibration_samples: int
    if TYPE_CHECKING:  # fields with defaults: each subclass declares them after its own
        warnings: tuple[str, ...]
        config: Any

    @property
    def size_ratio(self) -> float:
        """Quantized bytes / float32 bytes (0.26 means 26% of the float32 file)."""
        return self.size_bytes / self.reference_size_bytes

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
