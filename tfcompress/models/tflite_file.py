"""The one ``.tflite`` reader: a flatbuffer turned into small frozen dataclasses.

Inspect, size, sparsity and the target linters all read models through :func:`read_tflite`,
so a hostile file is handled in one place. Reading is pure Python (LiteRT's generated schema
over the bytes, no native code) and never trusts the file: every parsing failure becomes a
one-line :class:`~tfcompress.errors.ModelLoadError`, and a file cannot make the reader do
more work than a few times its own size. Reading checks only what it needs to read; what
the indices, shapes and quantization parameters mean is checked by :meth:`TFLiteFile.validate`
(:mod:`tfcompress.models.tflite_checks`), before any native runtime sees the bytes.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from tfcompress.errors import ModelLoadError
from tfcompress.models.formats import is_tflite_bytes

# Each structure element read (a table reference, an int, a string byte) costs its width.
# An honest file stores each element once, so it costs at most its own size; a crafted one
# that points thousands of tables at one long vector is stopped instead of parsed for hours.
_WORK_PER_FILE_BYTE = 4
_MIN_WORK = 1 << 20
_PARSE_ERRORS = (
    IndexError,
    struct.error,
    UnicodeDecodeError,
    TypeError,
    ValueError,
    OverflowError,
    RecursionError,
)


@dataclass(frozen=True)
class Quantization:
    """Affine quantization parameters of a tensor (``real = scale * (q - zero_point)``)."""

    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    quantized_dimension: int


@dataclass(frozen=True)
class Tensor:
    """One tensor of a subgraph.

    Attributes:
        shape: The static shape; None when the file stores none.
        shape_signature: The shape with -1 for dynamic dimensions; None when absent.
        buffer: Index into :attr:`TFLiteFile.buffers` (0 is the empty buffer).
        dtype: Lower-case type name (``"int8"``, ``"float32"``), ``"unknown(N)"`` if unknown.
        name_is_utf8: False when ``name`` had bytes that are not UTF-8 (shown as U+FFFD).
    """

    index: int
    name: str
    name_is_utf8: bool
    dtype: str
    type_code: int
    shape: tuple[int, ...] | None
    shape_signature: tuple[int, ...] | None
    buffer: int
    quantization: Quantization | None
    is_variable: bool
    sparse: bool

    @property
    def signature(self) -> tuple[int, ...]:
        """``shape_signature`` when present, else ``shape`` (``()`` when neither is)."""
        return self.shape_signature or self.shape or ()


@dataclass(frozen=True)
class OperatorCode:
    """An entry of the model's operator-code table; ``name`` is ``CUSTOM:<code>`` for custom ops.

    ``builtin_code`` is what LiteRT runs: the larger of the file's ``builtin_code`` and its
    old 8-bit ``deprecated_builtin_code``; ``from_deprecated_field`` is True when only the old
    field held it (files written before op codes outgrew 8 bits), which readers that look
    at ``builtin_code`` alone (LiteRT Quantizer) would misread as ADD.
    """

    name: str
    builtin_code: int
    custom_code: str | None
    version: int
    from_deprecated_field: bool = False


@dataclass(frozen=True)
class Operator:
    """One node of a subgraph; inputs/outputs are tensor indices, -1 for an omitted input."""

    index: int
    opcode_index: int
    opcode: str
    version: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...]
    custom_options: tuple[int, int] | None  # (offset, size) of options stored outside


@dataclass(frozen=True)
class Subgraph:
    """Tensors, operators and the input/output tensor indices of one subgraph."""

    index: int
    name: str
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Buffer:
    """Where a buffer's bytes lie in the file; ``external`` for >2 GB files (offset/size)."""

    index: int
    offset: int
    size: int
    external: bool


@dataclass(frozen=True)
class SignatureDef:
    """A named entry point: (name, tensor index) pairs into subgraph ``subgraph_index``."""

    key: str
    subgraph_index: int
    inputs: tuple[tuple[str, int], ...]
    outputs: tuple[tuple[str, int], ...]
    names_are_utf8: bool


@dataclass(frozen=True)
class TFLiteFile:
    """A parsed ``.tflite``: what inspect, size and the linters read instead of the bytes."""

    size_bytes: int
    version: int
    description: str
    operator_codes: tuple[OperatorCode, ...]
    subgraphs: tuple[Subgraph, ...]
    buffers: tuple[Buffer, ...]
    signature_defs: tuple[SignatureDef, ...]
    metadata: tuple[tuple[str, int], ...]  # (name, buffer index)
    content: bytes = field(repr=False, compare=False)

    @property
    def custom_ops(self) -> tuple[str, ...]:
        """Custom codes of the custom ops the model uses (e.g. ``edgetpu-custom-op``)."""
        custom = [c for c in self.operator_codes if c.name.startswith("CUSTOM:")]
        return tuple(c.custom_code or "" for c in custom)

    @property
    def weight_bytes(self) -> int:
        """Bytes of all buffers: constant tensors and metadata."""
        return sum(b.size for b in self.buffers)

    def is_constant(self, tensor: Tensor) -> bool:
        """True when the tensor's buffer holds data (a weight, bias or other constant)."""
        return 0 <= tensor.buffer < len(self.buffers) and self.buffers[tensor.buffer].size > 0

    def buffer_data(self, index: int) -> memoryview:
        """The bytes of buffer ``index``, without copying (empty when out of the file)."""
        buffer = self.buffers[index]
        return memoryview(self.content)[buffer.offset : buffer.offset + buffer.size]

    def validate(self, *, source: object = "<bytes>") -> None:
        """Check indices, shapes, quantization and buffers before native code sees the file.

        Raises:
            ModelLoadError: The first problem found, naming the tensor or operator.
        """
        from tfcompress.models.tflite_checks import validate

        validate(self, source=source)


def read_tflite(content: bytes, *, source: object = "<bytes>") -> TFLiteFile:
    """Parse a ``.tflite`` flatbuffer without running any native code.

    Returns:
        The parsed model. It is not validated: call :meth:`TFLiteFile.validate`.

    Raises:
        ModelLoadError: Not a ``.tflite``, or its flatbuffer cannot be parsed (truncated,
            corrupt or crafted).

    Example:
        >>> read_tflite(b"not a model")
        Traceback (most recent call last):
        ...
        tfcompress.errors.ModelLoadError: <bytes>: not a TFLite model (no 'TFL3' identifier) ...
    """
    content = bytes(content)
    if not is_tflite_bytes(content):
        raise ModelLoadError(
            f"{source}: not a TFLite model (no 'TFL3' identifier) or truncated; re-export it "
            "with `tfcompress quantize`."
        )
    try:
        return _Reader(content).model()
    except _PARSE_ERRORS as error:
        kind = "struct.error" if isinstance(error, struct.error) else type(error).__name__
        reason = " ".join(str(error).split())[:160] or "no detail"
        raise ModelLoadError(
            f"{source}: the .tflite file is truncated or corrupt (or crafted): its flatbuffer "
            f"cannot be read ({kind}: {reason}); re-export it from the source model."
        ) from error


@functools.cache
def _schema() -> ModuleType:
    from tfcompress._compat.litert import flatbuffer_utils

    return flatbuffer_utils().schema_fb  # type: ignore[no-any-return]


@functools.cache
def _names() -> tuple[dict[int, str], dict[int, str]]:
    """(builtin op code -> name, tensor type code -> lower-case name), from the schema."""
    schema = _schema()
    ops = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    types = {v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")}
    return ops, types


class _Reader:
    """Walks the schema's table accessors, charging every element read to a work budget."""

    def __init__(self, content: bytes) -> None:
        self.content = content
        self.budget = max(_WORK_PER_FILE_BYTE * len(content), _MIN_WORK)

    def spend(self, count: int, width: int) -> int:
        if count * width > len(self.content):
            raise ValueError(f"a vector of {count} entries cannot fit in {len(self.content)} bytes")
        self.budget -= count * width
        if self.budget < 0:
            raise ValueError("the structure references itself far more than the file can hold")
        return count

    def values(self, array: Any) -> tuple[Any, ...]:
        """A numeric vector (a numpy view) as Python ints or floats."""
        if isinstance(array, int):  # the schema's accessors return 0 for an absent vector
            return ()
        self.spend(int(array.size), int(array.itemsize))
        return tuple(array.tolist())

    def each(self, count: int, get: Callable[[int], Any]) -> Iterator[tuple[int, Any]]:
        """``(index, table)`` for every entry of a vector of tables."""
        for j in range(self.spend(count, 4)):
            yield j, get(j)

    def text(self, raw: bytes | None) -> str:
        return self.checked_text(raw)[0]

    def checked_text(self, raw: bytes | None) -> tuple[str, bool]:
        """The decoded text, and whether it was valid UTF-8."""
        if raw is None:
            return "", True
        self.spend(len(raw), 1)
        try:
            return raw.decode("utf-8"), True
        except UnicodeDecodeError:
            return raw.decode("utf-8", errors="replace"), False

    def model(self) -> TFLiteFile:
        root = _schema().Model.GetRootAs(self.content, 0)
        codes = tuple(
            self.operator_code(c)
            for _, c in self.each(root.OperatorCodesLength(), root.OperatorCodes)
        )
        return TFLiteFile(
            size_bytes=len(self.content),
            version=int(root.Version()),
            description=self.text(root.Description()),
            operator_codes=codes,
            subgraphs=tuple(
                self.subgraph(j, g, codes)
                for j, g in self.each(root.SubgraphsLength(), root.Subgraphs)
            ),
            buffers=tuple(
                self.buffer(j, b) for j, b in self.each(root.BuffersLength(), root.Buffers)
            ),
            signature_defs=tuple(
                self.signature(s)
                for _, s in self.each(root.SignatureDefsLength(), root.SignatureDefs)
            ),
            metadata=tuple(
                (self.text(m.Name()), int(m.Buffer()))
                for _, m in self.each(root.MetadataLength(), root.Metadata)
            ),
            content=self.content,
        )

    def operator_code(self, code: Any) -> OperatorCode:
        stored, deprecated = int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode())
        builtin = max(stored, deprecated)
        custom = self.text(code.CustomCode()) if code.CustomCode() is not None else None
        ops, _ = _names()
        if builtin == _schema().BuiltinOperator.CUSTOM:
            name = f"CUSTOM:{custom or ''}"
        else:
            name = ops.get(builtin, f"UNKNOWN_BUILTIN({builtin})")
        return OperatorCode(name, builtin, custom, int(code.Version()), deprecated > stored)

    def buffer(self, index: int, buffer: Any) -> Buffer:
        offset, size = int(buffer.Offset()), int(buffer.Size())
        if offset > 1:  # >2 GB files keep data after the flatbuffer; 0 and 1 mean "inline"
            return Buffer(index, offset, size, external=True)
        table, slot = buffer._tab, buffer._tab.Offset(4)  # the data vector, read without copying
        if slot == 0:
            return Buffer(index, 0, 0, external=False)
        return Buffer(index, int(table.Vector(slot)), int(table.VectorLen(slot)), external=False)

    def subgraph(self, index: int, graph: Any, codes: tuple[OperatorCode, ...]) -> Subgraph:
        return Subgraph(
            index=index,
            name=self.text(graph.Name()),
            tensors=tuple(
                self.tensor(j, t) for j, t in self.each(graph.TensorsLength(), graph.Tensors)
            ),
            operators=tuple(
                self.operator(j, op, codes)
                for j, op in self.each(graph.OperatorsLength(), graph.Operators)
            ),
            inputs=self.values(graph.InputsAsNumpy()),
            outputs=self.values(graph.OutputsAsNumpy()),
        )

    def tensor(self, index: int, tensor: Any) -> Tensor:
        _, types = _names()
        type_code = int(tensor.Type())
        params = tensor.Quantization()
        quantization = None
        if params is not None:
            quantization = Quantization(
                scales=self.values(params.ScaleAsNumpy()),
                zero_points=self.values(params.ZeroPointAsNumpy()),
                quantized_dimension=int(params.QuantizedDimension()),
            )
        name, name_is_utf8 = self.checked_text(tensor.Name())
        return Tensor(
            index=index,
            name=name,
            name_is_utf8=name_is_utf8,
            dtype=types.get(type_code, f"unknown({type_code})"),
            type_code=type_code,
            shape=None if tensor.ShapeIsNone() else self.values(tensor.ShapeAsNumpy()),
            shape_signature=(
                None
                if tensor.ShapeSignatureIsNone()
                else self.values(tensor.ShapeSignatureAsNumpy())
            ),
            buffer=int(tensor.Buffer()),
            quantization=quantization,
            is_variable=bool(tensor.IsVariable()),
            sparse=tensor.Sparsity() is not None,
        )

    def operator(self, index: int, op: Any, codes: tuple[OperatorCode, ...]) -> Operator:
        opcode_index = int(op.OpcodeIndex())
        code = codes[opcode_index] if opcode_index < len(codes) else None
        large = int(op.LargeCustomOptionsOffset())
        return Operator(
            index=index,
            opcode_index=opcode_index,
            opcode=code.name if code else f"<invalid opcode {opcode_index}>",
            version=code.version if code else 0,
            inputs=self.values(op.InputsAsNumpy()),
            outputs=self.values(op.OutputsAsNumpy()),
            intermediates=self.values(op.IntermediatesAsNumpy()),
            custom_options=(large, int(op.LargeCustomOptionsSize())) if large > 1 else None,
        )

    def signature(self, signature: Any) -> SignatureDef:
        valid = []

        def name(raw: bytes | None) -> str:
            text, ok = self.checked_text(raw)
            valid.append(ok)
            return text

        def pairs(count: int, get: Callable[[int], Any]) -> tuple[tuple[str, int], ...]:
            return tuple((name(e.Name()), int(e.TensorIndex())) for _, e in self.each(count, get))

        return SignatureDef(
            key=name(signature.SignatureKey()),
            subgraph_index=int(signature.SubgraphIndex()),
            inputs=pairs(signature.InputsLength(), signature.Inputs),
            outputs=pairs(signature.OutputsLength(), signature.Outputs),
            names_are_utf8=all(valid),
        )
