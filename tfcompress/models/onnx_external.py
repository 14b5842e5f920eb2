"""ONNX checks before ONNX Runtime sees a model: external data, and whether it can be fed.

An ONNX tensor may keep its bytes in another file (``external_data``: a location relative
to the model, an offset and a length). tfcompress hands ONNX Runtime the model's bytes, not
its path, so ONNX Runtime would resolve such a location against the *current directory*.
Here every location is resolved against the model's own folder instead, refused when it
leaves that folder (after resolving symlinks) or names anything but a regular file, and
the bytes are read into the model: ONNX Runtime then opens no file at all.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfcompress._files import file_kind
from tfcompress._limits import physical_memory
from tfcompress.errors import ModelLoadError

_PROTOBUF_LIMIT = 2**31 - 1  # a serialized protobuf message cannot be larger
_EXTERNAL = 1  # TensorProto.EXTERNAL


def embed_external_data(proto: Any, path: Path) -> bytes | None:
    """Read every external tensor from the model's folder into ``proto``; its new bytes.

    Raises:
        ModelLoadError: A location that is absolute, leaves the folder (``..``, a link),
            is missing or not a regular file (a FIFO, a device), or an offset/length
            outside the file; or a model too large for one protobuf once embedded.
    """
    tensors = [t for t in _all_tensors(proto) if t.data_location == _EXTERNAL]
    if not tensors:
        return None
    folder = Path(os.path.realpath(path.parent))
    for tensor in tensors:
        tensor.raw_data = _read_external(tensor, folder, path)
        tensor.data_location = 0  # TensorProto.DEFAULT
        del tensor.external_data[:]
    size = proto.ByteSize()
    if size > _PROTOBUF_LIMIT:
        raise ModelLoadError(
            f"{path}: with its external data the model is {size} bytes, more than one ONNX "
            "protobuf can hold (2 GiB); tfcompress runs models of up to 2 GiB."
        )
    return proto.SerializeToString()


def check_feedable(proto: Any, path: Path) -> None:
    """Refuse a model whose inputs no run could be given: not tensors, or too large.

    A dimension left dynamic (a ``dim_param``, no value, or ``dim_value -1`` as Paddle2ONNX
    writes it) counts as 1 (the smallest feed); a static shape whose one
    sample needs more bytes than this machine's memory could never be fed.

    Raises:
        ModelLoadError: A graph input that is not a tensor, or declares a negative
            dimension other than -1 or a shape beyond this machine's memory.
    """
    import onnx

    constants = {init.name for init in proto.graph.initializer}
    memory = physical_memory()
    for value in proto.graph.input:
        if value.name in constants:
            continue
        if value.type.WhichOneof("value") != "tensor_type":
            raise ModelLoadError(
                f"{path}: input {value.name!r} is a {value.type.WhichOneof('value') or 'typeless'} "
                "value, not a tensor; tfcompress feeds tensors only; export the model with "
                "tensor inputs."
            )
        tensor = value.type.tensor_type
        declared = [d.dim_value if d.HasField("dim_value") else 1 for d in tensor.shape.dim]
        # -1 is how Paddle2ONNX (and some older exporters) write a dynamic dimension, and
        # ONNX Runtime runs such files: a dynamic dimension, counted as 1 like a dim_param.
        if any(d < -1 for d in declared):
            raise ModelLoadError(
                f"{path}: input {value.name!r} declares the negative shape {declared} (only -1, "
                "a dynamic dimension, is ever written); the file is corrupt or crafted; export "
                "it again."
            )
        dims = [1 if d == -1 else d for d in declared]
        try:
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).itemsize
        except (KeyError, TypeError, ValueError):
            itemsize = 1  # an element type numpy lacks: the runner refuses it by name
        needed = math.prod(max(d, 1) for d in dims) * max(itemsize, 1)
        if needed > memory:
            raise ModelLoadError(
                f"{path}: input {value.name!r} declares shape {dims}: {needed} bytes for one "
                f"sample, more than this machine's {memory} bytes of memory; the model can "
                "never be fed; export it with a realistic input shape."
            )


def _read_external(tensor: Any, folder: Path, path: Path) -> bytes:
    fields = {entry.key: entry.value for entry in tensor.external_data}
    location = fields.get("location", "")
    name = tensor.name
    if not location or "\x00" in location or os.path.isabs(location):
        raise ModelLoadError(
            f"{path}: tensor {name!r} keeps its data at {location!r}, not a location relative "
            "to the model; the file is corrupt or crafted; export it again."
        )
    resolved = Path(os.path.realpath(folder / location))
    if not resolved.is_relative_to(folder) or resolved == folder:
        raise ModelLoadError(
            f"{path}: tensor {name!r} keeps its data at {location!r}, outside the model's "
            f"folder {folder}; tfcompress reads external data only from inside that folder; "
            "put the data file next to the model."
        )
    try:
        offset = int(fields.get("offset", "0") or 0)
        length = int(fields["length"]) if fields.get("length") else None
    except ValueError:
        offset, length = -1, None
    if offset < 0 or (length is not None and length < 0):
        raise ModelLoadError(
            f"{path}: tensor {name!r} has an invalid external offset or length; the file is "
            "corrupt or crafted; export it again."
        )
    try:
        # The last component is resolved already: O_NOFOLLOW keeps a link swapped in out.
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as failure:
        raise ModelLoadError(
            f"{path}: tensor {name!r} keeps its data in {location!r}, which cannot be opened "
            f"({failure.strerror}); put the data file next to the model."
        ) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ModelLoadError(
                f"{path}: tensor {name!r} keeps its data in {location!r}, which is "
                f"{file_kind(info.st_mode)}; tfcompress reads weights from regular files only."
            )
        available = info.st_size - offset
        if available < 0 or (length is not None and length > available):
            raise ModelLoadError(
                f"{path}: tensor {name!r} reads {length} bytes at offset {offset} of "
                f"{location!r}, which holds {info.st_size}; the data file is truncated or "
                "not this model's; export the model again."
            )
        if (length if length is not None else available) > _PROTOBUF_LIMIT:
            raise ModelLoadError(
                f"{path}: tensor {name!r} is over 2 GiB; tfcompress runs models of up to 2 GiB."
            )
        handle.seek(offset)
        return handle.read(length if length is not None else available)


def _all_tensors(proto: Any) -> Iterator[Any]:
    """Every TensorProto of the model: initializers and attribute tensors, in subgraphs too."""
    graphs = [proto.graph]
    nodes = [node for function in proto.functions for node in function.node]
    while graphs or nodes:
        if graphs:
            graph = graphs.pop()
            yield from graph.initializer
            for sparse in graph.sparse_initializer:
                yield sparse.values
                yield sparse.indices
            nodes.extend(graph.node)
            continue
        node = nodes.pop()
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("sparse_tensor"):
                yield attribute.sparse_tensor.values
                yield attribute.sparse_tensor.indices
            if attribute.HasField("g"):
                graphs.append(attribute.g)
            graphs.extend(attribute.graphs)
