r"""Which model formats would read a file's bytes: every format asked, not the first bytes.

ZIP readers look for their central directory at the end of a file, HDF5 readers for their
superblock at offset 0, 512, 1024, 2048..., ONNX has no magic bytes at all: a file built for
it can be read by two of them. :func:`detect_formats` asks each format in turn whether it
would read the whole file as one of its models, so :func:`~tfcompress.models.formats.
read_model_file` can refuse a file that more than one accepts.
"""

from __future__ import annotations

import io
import zipfile

from tfcompress.models.formats import ModelFormat, is_tflite_bytes

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_ZIP_MAGIC = b"PK\x03\x04"
_MAX_FIELDS_WALKED = 100_000  # an ONNX model's top level has a handful of fields


def detect_formats(content: bytes) -> tuple[ModelFormat, ...]:
    r"""Every model format ``content`` is valid as, the one its first bytes name first.

    The first bytes name a candidate (``TFL3`` at offset 4, the HDF5 or ZIP signature at 0);
    then each other format is asked whether it would read the whole file as one of its
    models: an HDF5 superblock after a user block (offsets 512, 1024, ...) with a
    ``model_config``, a ZIP directory anywhere that lists ``config.json``, a protobuf that
    parses as an ONNX model with a graph (ONNX has no magic bytes: the parse is the test).

    Returns:
        The formats, possibly none; more than one means a polyglot file.

    Example:
        >>> detect_formats(b"\x1c\x00\x00\x00TFL3" + bytes(32))
        (<ModelFormat.TFLITE: 'tflite'>,)
    """
    first = _named_by_first_bytes(content)
    found = [first] if first is not None else []
    if first is not ModelFormat.H5 and _holds_hdf5_model(content):
        found.append(ModelFormat.H5)
    if first is not ModelFormat.KERAS and _holds_keras_archive(content):
        found.append(ModelFormat.KERAS)
    if _parses_as_onnx(content):
        found.append(ModelFormat.ONNX)
    return tuple(found)


def _named_by_first_bytes(content: bytes) -> ModelFormat | None:
    if is_tflite_bytes(content):
        return ModelFormat.TFLITE
    if content.startswith(_HDF5_MAGIC):
        return ModelFormat.H5
    return ModelFormat.KERAS if content.startswith(_ZIP_MAGIC) else None


def _holds_hdf5_model(content: bytes) -> bool:
    """An HDF5 superblock after a user block (512, 1024, ...) that opens with a model config.

    HDF5 looks for its signature at 0 and at every power of two from 512; a ZIP member
    stored uncompressed may put a weights-only HDF5 file at such an offset by chance, which
    is no model: only a file with a ``model_config`` is one a Keras loader would build.
    """
    offset = 512
    while offset + len(_HDF5_MAGIC) <= len(content):
        if content[offset : offset + len(_HDF5_MAGIC)] == _HDF5_MAGIC:
            break
        offset *= 2
    else:
        return False
    import h5py  # ships with TensorFlow and Keras

    try:
        with h5py.File(io.BytesIO(content), "r") as handle:
            return "model_config" in handle.attrs
    except (OSError, ValueError, RuntimeError, KeyError):  # h5py's words for "not HDF5"
        return False


def _holds_keras_archive(content: bytes) -> bool:
    """A ZIP directory anywhere in the file (readers search from its end) with a config."""
    if b"PK\x05\x06" not in content[-(2**16 + 22) :]:  # no end-of-directory record
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(content)) as archive:
            return "config.json" in archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
        return False


def _parses_as_onnx(content: bytes) -> bool:
    """The bytes parse as an ONNX ``ModelProto`` with an IR version and a graph of nodes."""
    if not _is_protobuf_message(content):
        return False
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError:
        return False
    try:
        proto = onnx.ModelProto.FromString(content)
    except (DecodeError, ValueError, RuntimeError, RecursionError):
        return False
    return proto.ir_version > 0 and len(proto.graph.node) > 0


def _is_protobuf_message(content: bytes) -> bool:
    """Whether the top level of ``content`` is a sequence of well-formed protobuf fields.

    A cheap walk that skips length-delimited fields without reading them: the files of the
    other formats fail it within a few bytes, before the onnx package is imported.
    """
    position, end = 0, len(content)
    for _ in range(_MAX_FIELDS_WALKED):
        if position >= end:
            break
        key, position = _varint(content, position)
        if key is None or key >> 3 == 0:
            return False
        wire = key & 7
        if wire == 0:
            value, position = _varint(content, position)
            if value is None:
                return False
        elif wire == 1:
            position += 8
        elif wire == 2:
            length, position = _varint(content, position)
            if length is None:
                return False
            position += length
        elif wire == 5:
            position += 4
        else:  # groups (3, 4) are not used by ONNX; 6 and 7 do not exist
            return False
    else:
        return True  # that many well-formed fields: let the real parser decide
    return position == end and end > 0


def _varint(content: bytes, position: int) -> tuple[int | None, int]:
    value = shift = 0
    while position < len(content) and shift < 64:
        byte = content[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
    return None, position
