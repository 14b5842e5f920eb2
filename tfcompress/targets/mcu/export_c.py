"""A ``.tflite`` as firmware source: the C array, the op resolver it needs and a ``main()``.

The files and their conventions are docs/mcu.md's ("Firmware"): ``xxd -i``'s names (fixed
where they would not compile, and said: :mod:`.c_names`), an ``alignas(16) const unsigned
char[]`` (TFLM reads the flatbuffer in place; ``const`` keeps it in flash), ``OUT_ops.h``
(:mod:`.resolver`) and ``OUT_main.cc`` (:mod:`.firmware`), all written or none. Flash is the
model's bytes plus :data:`ARRAY_OVERHEAD_BYTES` (:func:`flash_bytes`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress.targets.mcu.c_names import (
    file_identifier,
    header_guard,
    identifier_problem,
    include_name_problem,
    shown,
)
from tfcompress.targets.mcu.resolver import OpCall

ARRAY_ALIGNMENT = 16
#: Bytes the C array adds to the model in flash, at most: alignment padding + the length.
ARRAY_OVERHEAD_BYTES = (ARRAY_ALIGNMENT - 1) + 4
_BYTES_PER_LINE = 12
_SOURCE_SUFFIXES = {".cc", ".h", ".c", ".cpp"}


def flash_bytes(model_bytes: int) -> int:
    """Flash the model takes as a C array: its bytes + :data:`ARRAY_OVERHEAD_BYTES`.

    Example:
        >>> flash_bytes(236208)
        236227
    """
    return int(model_bytes) + ARRAY_OVERHEAD_BYTES


@dataclass(frozen=True)
class CArray:
    """What :func:`export_c` wrote.

    Attributes:
        source: The ``.cc`` file (``header``: the ``.h``).
        name: The array's identifier (its length is ``NAME_len``).
        ops: The model's distinct ops, each with its resolver method (None: TFLM has none).
        ops_header: ``OUT_ops.h``, the op resolver (None when an op has no method).
        main: ``OUT_main.cc``, one inference (None without a resolver or an arena size).
        arena_bytes: The arena ``OUT_main.cc`` declares.
        lut: With ``lut=True``: the compression, flash and arena before and after.
    """

    source: Path
    header: Path
    name: str
    model_bytes: int
    flash_bytes: int
    ops: tuple[OpCall, ...] = ()
    ops_header: Path | None = None
    main: Path | None = None
    arena_bytes: int | None = None
    notes: tuple[str, ...] = field(default=())
    lut: Any = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        from tfcompress.targets.mcu._resolver_table import COMMIT, REPOSITORY

        return {
            "source": str(self.source),
            "header": str(self.header),
            "array": self.name,
            "length": f"{self.name}_len",
            "model_bytes": self.model_bytes,
            "flash_bytes": self.flash_bytes,
            "alignment": ARRAY_ALIGNMENT,
            "ops": [{"op": c.op, "method": c.method} for c in self.ops],
            "ops_header": None if self.ops_header is None else str(self.ops_header),
            "resolver_methods_from": f"{REPOSITORY}@{COMMIT}",
            "main": None if self.main is None else str(self.main),
            "arena_bytes": self.arena_bytes,
            "notes": list(self.notes),
            "lut": None if self.lut is None else self.lut.to_dict(),
        }

    def __str__(self) -> str:
        lines = [
            f"wrote {self.source} and {self.header}: {self.name}[{self.model_bytes:,}] "
            f"(alignas({ARRAY_ALIGNMENT}) const unsigned char) and {self.name}_len; flash "
            f"{self.flash_bytes:,} bytes with the array's overhead"
        ]
        if self.ops_header is not None:
            adds = ", ".join(f"{c.method}()" for c in self.ops)
            lines.append(
                f"wrote {self.ops_header}: tflite::MicroMutableOpResolver<{len(self.ops)}> "
                f"{self.name}_op_resolver with {adds}"
            )
        if self.main is not None:
            lines.append(f"wrote {self.main}: one inference, tensor arena {self.arena_bytes:,} B")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def render(content: bytes, name: str, header_name: str, guard: str) -> tuple[str, str]:
    """The ``.cc`` and ``.h`` texts for ``content`` as array ``name``."""
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
    arena: int | None = None,
    timeout_s: float | None = None,
    lut: bool = False,
) -> CArray:
    """Write ``OUT.cc`` and ``OUT.h`` (the C array), ``OUT_ops.h`` and ``OUT_main.cc``.

    Args:
        model: A ``.tflite`` path, its bytes or a :class:`~tfcompress.models.TFLiteModel`.
        out: The files' path without suffix (``model_data`` writes ``model_data.cc``,
            ``model_data.h``, ``model_data_ops.h`` and ``model_data_main.cc``); a ``.cc`` or
            ``.h`` suffix given is dropped. Its file name must be one ``#include`` takes as
            is: ASCII letters, digits and ``_ . + -``.
        name: The array's identifier (default: ``xxd -i``'s name for the model's file,
            ``model_tflite`` for bytes, fixed where it would not compile, and said).
        overwrite: Replace existing files.
        arena: Bytes of tensor arena ``OUT_main.cc`` declares (default: measured with TFLM,
            the smallest that allocates + 10%; without ``tflite-micro`` no ``OUT_main.cc``).
        timeout_s: Seconds the arena measurement may take per TFLM call.
        lut: Store int8 weights with few values per channel as look-up tables decoded by
            TFLM's DECODE op (:func:`~.lut.lut_compress`): less flash, a larger arena.

    Returns:
        What was written, with notes on what was fixed or left out.

    Raises:
        ModelLoadError: A missing file or bytes that are not a valid ``.tflite``.
        InvalidInputError: A ``name`` that cannot be a C++ global identifier; with ``lut``,
            a model without weights a look-up table shrinks.
        GateFailedError: With ``lut``, TFLM's outputs from the compressed file differ.
        OutputLocationError: An ``out`` that is a folder, a device, empty or not a name an
            ``#include`` can hold.
        OutputExistsError: A file exists and ``overwrite`` is False.

    Example:
        >>> export_c("mnist_int8.tflite", "model_data")  # doctest: +SKIP
        CArray(source=PosixPath('model_data.cc'), ..., name='mnist_int8_tflite', ...)
    """
    from tfcompress._files import check_output_path, write_files_atomic
    from tfcompress.models.formats import read_tflite_input
    from tfcompress.models.tflite_file import read_tflite
    from tfcompress.targets.mcu.check import TFLITE_ONLY
    from tfcompress.targets.mcu.firmware import render_main
    from tfcompress.targets.mcu.resolver import render_ops_header, resolver_ops

    content, source, _ = read_tflite_input(model, TFLITE_ONLY)
    base = _base_path(out)
    name, notes = _array_name(name, source, base.name)
    files = {
        "cc": base.with_name(base.name + ".cc"),
        "h": base.with_name(base.name + ".h"),
        "ops": base.with_name(base.name + "_ops.h"),
        "main": base.with_name(base.name + "_main.cc"),
    }
    inputs = [] if source == "<bytes>" else [source]
    for path in files.values():
        check_output_path(path, overwrite=overwrite, inputs=inputs)
    packed = None
    if lut:
        content, packed = _lut(content, source, timeout_s, notes)
    calls = resolver_ops(read_tflite(content, source=source))
    text, header = render(content, name, files["h"].name, header_guard(base.name))
    texts = {"cc": text, "h": header}
    lacking = [c.op for c in calls if c.method is None]
    if lacking:
        notes.append(
            f"no {files['ops'].name} or {files['main'].name}: TFLite Micro's op resolver has "
            f"no Add method for {', '.join(lacking)}; `tfcompress mcu` says what to do"
        )
    else:
        texts["ops"] = render_ops_header(calls, name, header_guard(base.name, "OPS_H"))
        measured = None if packed is None else packed.arena[1] or math.inf
        given = arena
        arena, arena_note = _arena(
            content, source, arena, timeout_s, notes, files["main"], measured=measured
        )
        if measured is not None and given is None:
            arena_note = f"with the weights decoded into it (--lut), {arena_note}"
        if arena is not None:
            texts["main"] = render_main(
                name, files["h"].name, files["ops"].name, arena, arena_note, len(calls)
            )
    notes += [
        f"{path.name} is left from an earlier export and does not match this one: delete it"
        for key, path in files.items()
        if key not in texts and path.exists()
    ]
    written = {files[k]: t.encode("utf-8") for k, t in texts.items()}
    write_files_atomic(written, overwrite=overwrite, inputs=inputs)
    return CArray(
        files["cc"],
        files["h"],
        name,
        len(content),
        flash_bytes(len(content)),
        ops=calls,
        ops_header=files["ops"] if "ops" in texts else None,
        main=files["main"] if "main" in texts else None,
        arena_bytes=arena if "main" in texts else None,
        notes=tuple(notes),
        lut=packed,
    )


def _lut(content: bytes, source: str, timeout_s: float | None, notes: list[str]) -> tuple:
    """``content`` with LUT-compressed weights; refused unless TFLM computes the same."""
    from tfcompress.errors import GateFailedError
    from tfcompress.targets.mcu.lut import lut_compress

    name = Path(source).name if source != "<bytes>" else "the model"
    packed = lut_compress(content, name=name, timeout_s=timeout_s)
    if not packed.identical:
        raise GateFailedError(f"{name}: {packed}; nothing was written: export without --lut.")
    notes.append(str(packed))
    return packed.content, packed


def _base_path(out: str | os.PathLike[str]) -> Path:
    """``out`` without a source suffix, refused unless its files can be written and included."""
    import stat

    from tfcompress._files import file_kind
    from tfcompress.errors import OutputLocationError

    text = os.fspath(out)
    base = Path(text)
    if base.suffix in _SOURCE_SUFFIXES:
        base = base.with_suffix("")
    if not text or base.name in {"", ".", ".."} or text.endswith(os.sep):
        raise OutputLocationError(
            f"--out {shown(text)!r}: give a path and a base name for the files, e.g. "
            "--out model_data (writes model_data.cc, model_data.h, ...)."
        )
    try:
        mode = base.stat().st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise OutputLocationError(
            f"--out {shown(text)!r}: is {file_kind(mode)}; give a path and a base name, "
            "e.g. --out DIR/model_data."
        )
    problem = include_name_problem(base.name + ".h")
    if problem is not None:
        raise OutputLocationError(
            f'--out {shown(text)!r}: the header\'s name goes into #include "..." and {problem}; '
            "choose a base name such as model_data."
        )
    return base


def _array_name(name: str | None, source: str, stem: str) -> tuple[str, list[str]]:
    """The array's identifier: ``name`` checked, or the file's name made valid (and said)."""
    from tfcompress.errors import InvalidInputError

    if name is None:
        chosen, fixed = file_identifier(
            Path(source).name if source != "<bytes>" else "model.tflite"
        )
        return chosen, [] if fixed is None else [f"the array is {chosen}: {fixed}"]
    problem = identifier_problem(name) if isinstance(name, str) else "not a string"
    if problem is None and name.upper() in {header_guard(stem), header_guard(stem, "OPS_H")}:
        problem = "the header guard's name"
    if problem is not None:
        raise InvalidInputError(
            f"--name {shown(str(name))!r} cannot name the array: it is {problem}; choose "
            "another identifier, e.g. model_tflite."
        )
    return name, []


def _arena(
    content: bytes,
    source: str,
    arena: int | None,
    timeout_s: float | None,
    notes: list[str],
    main: Path,
    *,
    measured: float | None = None,
) -> tuple[int | None, str]:
    """The arena ``OUT_main.cc`` declares and where it comes from (None: no ``OUT_main.cc``).

    ``measured``: the recommended arena already measured (``inf``: none allocated).
    """
    from tfcompress._compat.tflm import INSTALL_HINT, installed, tflm_version
    from tfcompress.errors import InvalidInputError
    from tfcompress.targets.mcu.arena import MARGIN

    if arena is not None:
        if int(arena) < 1:
            raise InvalidInputError(f"--arena must be a positive size, got {arena}.")
        return int(arena), f"{int(arena):,} B as given (--arena)"
    if measured is None and not installed():
        notes.append(
            f"no {main.name}: measuring its tensor arena needs tflite-micro ({INSTALL_HINT}); "
            "or pass --arena SIZE"
        )
        return None, ""
    from tfcompress.targets.mcu.check import measure_arena

    if measured is None:
        measured = measure_arena(content, timeout_s=timeout_s)
    if math.isinf(measured):
        notes.append(
            f"no {main.name}: TFLM could not allocate the model on this host; `tfcompress mcu "
            f"{shown(source)}` says why (or pass --arena SIZE)"
        )
        return None, ""
    return int(measured), (
        f"the smallest that allocated with TFLM on this host (tflite-micro {tflm_version()}) "
        f"+ {MARGIN:.0%}, rounded up to 16 B. A host estimate: confirm with "
        "interpreter.arena_used_bytes() on the board"
    )
