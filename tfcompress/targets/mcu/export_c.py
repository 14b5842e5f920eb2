"""A ``.tflite`` as C source for firmware: ``NAME.cc`` and ``NAME.h``, the way TFLM expects it.

TFLM reads the model in place from flash, so firmware compiles it in as an array. The files
follow ``xxd -i``'s naming, which TFLM's examples use: for ``person_detect.tflite`` the array
is ``person_detect_tflite`` and its length ``person_detect_tflite_len``. The array is
``alignas(16) const unsigned char[]`` (TFLM reads the flatbuffer's fields in place, so
the buffer must be aligned; ``const`` keeps it in flash, not RAM) and the length a
``const unsigned int``. The header declares both ``extern``; the ``.cc`` includes it, so the
definitions have external linkage in C++.

Flash: the array is the model's bytes, plus up to 15 bytes of padding before it (16-byte
alignment) and the 4-byte length: :func:`flash_bytes`. TFLM's own code (interpreter and
the kernels the resolver registers) is the firmware's, and comes on top.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ARRAY_ALIGNMENT",
    "ARRAY_OVERHEAD_BYTES",
    "CArray",
    "c_identifier",
    "export_c",
    "flash_bytes",
    "render",
]

ARRAY_ALIGNMENT = 16
#: Bytes the C array adds to the model in flash, at most: alignment padding + the length.
ARRAY_OVERHEAD_BYTES = (ARRAY_ALIGNMENT - 1) + 4
_BYTES_PER_LINE = 12
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def flash_bytes(model_bytes: int) -> int:
    """Flash the model takes as a C array: its bytes + :data:`ARRAY_OVERHEAD_BYTES`.

    Example:
        >>> flash_bytes(236208)
        236227
    """
    return int(model_bytes) + ARRAY_OVERHEAD_BYTES


def c_identifier(file_name: str) -> str:
    """The name ``xxd -i`` gives a file's array: every other character becomes ``_``.

    A name that would start with a digit gets a leading ``_`` (C forbids it).

    Example:
        >>> c_identifier("mnist-cnn int8.tflite")
        'mnist_cnn_int8_tflite'
        >>> c_identifier("8bit.tflite")
        '_8bit_tflite'
    """
    name = re.sub(r"[^A-Za-z0-9_]", "_", file_name)
    return f"_{name}" if not name or name[0].isdigit() else name


@dataclass(frozen=True)
class CArray:
    """What :func:`export_c` wrote.

    Attributes:
        source: The ``.cc`` file.
        header: The ``.h`` file.
        name: The array's identifier (its length is ``NAME_len``).
        model_bytes: Bytes in the array.
        flash_bytes: The model's flash as a C array (see :func:`flash_bytes`).
    """

    source: Path
    header: Path
    name: str
    model_bytes: int
    flash_bytes: int

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "source": str(self.source),
            "header": str(self.header),
            "array": self.name,
            "length": f"{self.name}_len",
            "model_bytes": self.model_bytes,
            "flash_bytes": self.flash_bytes,
            "alignment": ARRAY_ALIGNMENT,
        }

    def __str__(self) -> str:
        return (
            f"wrote {self.source} and {self.header}: {self.name}[{self.model_bytes:,}] "
            f"(alignas({ARRAY_ALIGNMENT}) const unsigned char) and {self.name}_len; flash "
            f"{self.flash_bytes:,} bytes with the array's overhead"
        )


def render(content: bytes, name: str, header_name: str) -> tuple[str, str]:
    """The ``.cc`` and ``.h`` texts for ``content`` as array ``name``.

    Example:
        >>> source, header = render(b"TFL3", "m_tflite", "m.h")
        >>> print(source.splitlines()[-3])
          0x54, 0x46, 0x4c, 0x33
    """
    guard = re.sub(r"[^A-Za-z0-9]", "_", header_name).upper() + "_"
    header = (
        f"// {name}: a TensorFlow Lite model for TFLite Micro, written by tfcompress export-c.\n"
        f"#ifndef {guard}\n"
        f"#define {guard}\n\n"
        f"extern const unsigned char {name}[];\n"
        f"extern const unsigned int {name}_len;\n\n"
        f"#endif  // {guard}\n"
    )
    lines = [
        "  " + ", ".join(f"0x{byte:02x}" for byte in content[i : i + _BYTES_PER_LINE])
        for i in range(0, len(content), _BYTES_PER_LINE)
    ]
    source = (
        f"// {name}: {len(content)} bytes of .tflite, aligned for TFLite Micro "
        "(tfcompress export-c).\n"
        f'#include "{header_name}"\n\n'
        f"alignas({ARRAY_ALIGNMENT}) const unsigned char {name}[] = {{\n"
        + ",\n".join(lines)
        + f"\n}};\nconst unsigned int {name}_len = {len(content)};\n"
    )
    return source, header


def export_c(
    model: Any,
    out: str | os.PathLike[str],
    *,
    name: str | None = None,
    overwrite: bool = False,
) -> CArray:
    """Write ``OUT.cc`` and ``OUT.h`` holding a ``.tflite`` as an aligned C array.

    Args:
        model: A ``.tflite`` path, its bytes or a :class:`~tfcompress.models.TFLiteModel`.
        out: The files' path without suffix (``model_data`` writes ``model_data.cc`` and
            ``model_data.h``); a ``.cc`` or ``.h`` suffix given is dropped.
        name: The array's identifier (default: ``xxd -i``'s name for the model's file,
            ``model_tflite`` for bytes).
        overwrite: Replace existing files.

    Returns:
        What was written.

    Raises:
        ModelLoadError: A missing file or bytes that are not a valid ``.tflite``.
        InvalidInputError: A ``name`` that is not a C identifier.
        OutputExistsError: A file exists and ``overwrite`` is False.

    Example:
        >>> export_c("mnist_int8.tflite", "model_data")  # doctest: +SKIP
        CArray(source=PosixPath('model_data.cc'), ..., name='mnist_int8_tflite', ...)
    """
    from tfcompress._files import check_output_path, write_text_atomic
    from tfcompress.errors import InvalidInputError
    from tfcompress.targets.mcu.loading import read_checked

    content, source = read_checked(model)
    if name is None:
        name = c_identifier(Path(source).name if source != "<bytes>" else "model.tflite")
    elif not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise InvalidInputError(
            f"--name {name!r} is not a C identifier: use letters, digits and _ (not first)."
        )
    base = Path(out)
    if base.suffix in {".cc", ".h", ".c", ".cpp"}:
        base = base.with_suffix("")
    cc, h = base.with_name(base.name + ".cc"), base.with_name(base.name + ".h")
    inputs = [] if source == "<bytes>" else [source]
    for path in (cc, h):
        check_output_path(path, overwrite=overwrite, inputs=inputs)
    text, header = render(content, name, h.name)
    write_text_atomic(h, header, overwrite=overwrite)
    write_text_atomic(cc, text, overwrite=overwrite)
    return CArray(cc, h, name, len(content), flash_bytes(len(content)))
