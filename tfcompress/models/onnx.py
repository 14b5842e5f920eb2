"""ONNX models held in memory: recognised by name and bytes, read without onnxruntime.

Only what running and measuring an ``.onnx`` needs lives here; exporting Keras models to
ONNX is :mod:`tfcompress.targets.onnx`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress._child.probe import ORT_DTYPES
from tfcompress._files import read_regular_bytes
from tfcompress.errors import MissingDependencyError, ModelLoadError
from tfcompress.models.probe import probe_model

# An ONNX ModelProto starts with field 1 (ir_version, varint): tag byte 0x08. Exporters
# write the fields in order, so this tells a protobuf ModelProto from the other formats.
_IR_VERSION_TAG = 0x08


def is_onnx_bytes(content: bytes) -> bool:
    r"""True when ``content`` looks like a serialized ONNX ``ModelProto``."""
    return len(content) >= 2 and content[0] == _IR_VERSION_TAG and content[1] < 0x80


@dataclass(frozen=True)
class OnnxModel:
    """An ``.onnx`` model held in memory (run it with the ``onnxruntime`` backend).

    Example:
        >>> OnnxModel(b"not a model")
        Traceback (most recent call last):
        ...
        tfcompress.errors.ModelLoadError: <bytes>: not an ONNX model (no ModelProto header) ...
    """

    content: bytes = field(repr=False)
    path: Path | None = None
    label: str | None = None

    def __post_init__(self) -> None:
        if not is_onnx_bytes(self.content):
            raise ModelLoadError(
                f"{self.path or '<bytes>'}: not an ONNX model (no ModelProto header) or corrupt; "
                "export it again (tfcompress.targets.onnx.export_onnx)."
            )

    @property
    def size_bytes(self) -> int:
        """Size of the serialized model in bytes."""
        return len(self.content)

    @property
    def name(self) -> str:
        """A short label: ``label``, else the file name, else 'onnx'."""
        return self.label or (self.path.name if self.path else "onnx")


def load_onnx(path: Path, *, content: bytes | None = None) -> OnnxModel:
    """Read an ``.onnx`` file; check that ONNX parses it and ONNX Runtime loads it.

    Tensors stored outside the file (external data) are read here, from the model's own
    folder only, and put inside the model's bytes, so ONNX Runtime never opens a file
    (:mod:`tfcompress.models.onnx_external`). A model that could never be fed or measured
    (no outputs, an input larger than this machine's memory) is refused. ONNX Runtime's
    first touch runs in a child process (:mod:`tfcompress.models.probe`), so a crafted
    file cannot crash the caller.

    Args:
        path: The file.
        content: Its bytes, when the caller has read and checked them already (the file is
            then not opened again).

    Raises:
        ModelLoadError: The file is not an ONNX model, is truncated/corrupt, points at data
            outside its folder, cannot be fed, or makes ONNX Runtime crash, hang or refuse it.
        MissingDependencyError: ONNX Runtime is installed but not the onnx package, which
            tfcompress needs to check a file before ONNX Runtime reads it.

    Example:
        >>> load_onnx(Path("model.onnx")).name  # doctest: +SKIP
        'model.onnx'
    """
    from tfcompress.models.onnx_external import check_feedable, embed_external_data

    if content is None:
        content = read_regular_bytes(path, error=ModelLoadError, what="an .onnx file")
    model = OnnxModel(content, path)
    proto = parse(model)
    if proto is None:
        if importlib.util.find_spec("onnxruntime") is not None:
            raise MissingDependencyError(
                f"{path}: checking an .onnx before ONNX Runtime reads it needs the onnx "
                "package; pip install 'tfcompress[onnx]'."
            )
        return model
    embedded = embed_external_data(proto, path)
    if embedded is not None:
        model = OnnxModel(embedded, path)
    check_feedable(proto, path)
    # ORT's first touch happens in a child, so a crafted graph cannot crash this process.
    # Running it on zeros with dynamic dimensions set to 1 may fail for a sound model (a
    # reshape that needs more): only a crash or a refusal to load rejects it.
    probe_model(model.content, "onnx", source=path)
    return model


def parse(model: OnnxModel) -> Any | None:
    """The parsed ``onnx.ModelProto``, or None when the ``onnx`` package is not installed.

    Raises:
        ModelLoadError: The bytes do not parse as an ONNX model.
    """
    try:
        import onnx
        from google.protobuf.message import DecodeError
    except ImportError:
        return None
    try:
        proto = onnx.load_from_string(model.content)
    except (DecodeError, ValueError, RuntimeError) as error:
        raise ModelLoadError(
            f"{model.path or model.name}: the ONNX model is truncated or corrupt "
            f"({type(error).__name__}: {error}); export it again."
        ) from error
    if not proto.graph.node:
        raise ModelLoadError(f"{model.path or model.name}: the ONNX graph has no nodes.")
    if not proto.graph.output:
        raise ModelLoadError(
            f"{model.path or model.name}: the ONNX graph declares no outputs, so running it "
            "computes nothing to measure; export it again with its outputs."
        )
    return proto


def ort_dtype(type_name: str) -> str:
    """Map an onnxruntime type string (``'tensor(float)'``) to a numpy dtype name."""
    return ORT_DTYPES.get(type_name, "float32")


def onnx_graphs(graph: Any) -> Iterator[Any]:
    """An ONNX ``GraphProto`` and every subgraph its nodes hold, depth first.

    ``If`` branches and ``Loop`` bodies: where an exporter may keep weights and ops out of the
    main graph.
    """
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield from onnx_graphs(attribute.g)
            for subgraph in attribute.graphs:
                yield from onnx_graphs(subgraph)
