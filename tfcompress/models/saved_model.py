"""Check a SavedModel directory once and load it from a private copy of what was checked.

What is checked, before any TensorFlow loader sees the folder:

* no FIFO, socket or device inside (they would block or feed endless bytes);
* ``saved_model.pb`` (or ``.pbtxt``) parses, holds a MetaGraph, and its graph, with every
  function of its library, is scanned for ops that act outside the model
  (:mod:`tfcompress.models.graph_ops`): ops that loading runs are refused without
  ``--unsafe``; ops that only calling runs are recorded, and every runner refuses to call
  the graph without ``--unsafe`` (converting it is not running it);
* ``keras_metadata.pb`` (a tf-keras SavedModel) is read once and parsed here, and the
  caller checks its configs for code;
* ``fingerprint.pb``, which TensorFlow only reads to identify the model, is left out of the
  copy with a one-line warning when it is damaged (TensorFlow would print a traceback);
* the variables' every tensor reads back with its checksum.

The checked protobufs are written, byte for byte, into a private folder
(:mod:`tfcompress.models.private`) together with a copy of ``variables/`` and ``assets/``;
loaders open that copy, never the user's folder again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress._child import call
from tfcompress._compat.tf import tensorflow
from tfcompress._files import check_tree, read_regular_bytes
from tfcompress.errors import ModelLoadError
from tfcompress.models.formats import check_saved_model_dir
from tfcompress.models.graph_ops import GraphOp, scan_graph
from tfcompress.models.private import PrivateFolder, copy_regular_tree, temporary_space

logger = logging.getLogger(__name__)

# Everything TensorFlow's loaders read from a SavedModel folder.
_FOLDERS = ("variables", "assets", "assets.extra")
_UNSAFE_HINT = "pass --unsafe (safe_mode=False) only if you trust the file"
_MAX_LISTED = 3


@dataclass(frozen=True)
class CheckedSavedModel:
    """A SavedModel folder as checked, and the private copy loaders must open.

    Attributes:
        source: The folder the user named (for messages; never opened again).
        copy: The private copy of the checked files.
        keras_metadata: The bytes of ``keras_metadata.pb`` (None for a plain SavedModel).
        graph_ops: The graph's ops that act outside the model (none for ordinary models).
    """

    source: Path
    copy: PrivateFolder = field(repr=False)
    keras_metadata: bytes | None = field(repr=False)
    graph_ops: tuple[GraphOp, ...]


def check_saved_model(path: Path, *, safe_mode: bool = True) -> CheckedSavedModel:
    """Check a SavedModel folder and copy what was checked into a private folder.

    Raises:
        ModelLoadError: A special file inside, a truncated or corrupt protobuf or variable,
            a name that claims a file format, or (in safe mode) a graph that acts outside
            the model when loaded.
    """
    check_saved_model_dir(path)
    for folder in (path, *(path / name for name in _FOLDERS)):
        if folder.is_dir():  # walked on its own: check_tree does not enter linked folders
            check_tree(folder, error=ModelLoadError, what=f"the SavedModel {path}")
    binary = path / "saved_model.pb"
    # TensorFlow reads saved_model.pb first and saved_model.pbtxt only without it.
    source = binary if binary.exists() else path / "saved_model.pbtxt"
    content = read_regular_bytes(source, error=ModelLoadError, what="a SavedModel protobuf")
    # TensorFlow's protobuf reader (and TensorFlow with it) runs in the child that converts.
    graph_ops = call(
        "tfcompress.models.saved_model:graph_ops_of",
        content,
        source,
        path,
        what=f"reading the SavedModel {path}",
        follow="tensorflow",
    )
    at_load = [op for op in graph_ops if op.at_load]
    if safe_mode and at_load:
        raise ModelLoadError(
            f"{path}: the SavedModel's graph calls {describe_ops(at_load)}, which runs when "
            f"the model is loaded and acts outside the model; {_UNSAFE_HINT}."
        )
    metadata_path = path / "keras_metadata.pb"
    metadata = (
        read_regular_bytes(metadata_path, error=ModelLoadError, what="a keras_metadata.pb file")
        if metadata_path.exists()
        else None
    )
    fingerprint = _checked_fingerprint(path)
    with temporary_space():  # a full $TMPDIR is one line, not a traceback
        copy = PrivateFolder(path.name)
        (copy.path / source.name).write_bytes(content)
        if metadata is not None:
            (copy.path / "keras_metadata.pb").write_bytes(metadata)
        if fingerprint is not None:
            (copy.path / "fingerprint.pb").write_bytes(fingerprint)
        for name in _FOLDERS:
            if (path / name).is_dir():
                copy_regular_tree(path / name, copy.path / name, what=f"the SavedModel {path}")
    call(
        "tfcompress.models.saved_model:_check_variables",
        copy.path,
        path,
        what=f"reading the variables of the SavedModel {path}",
        follow="tensorflow",
    )
    return CheckedSavedModel(path, copy, metadata, graph_ops)


def graph_ops_of(content: bytes, source: Path, path: Path) -> tuple[GraphOp, ...]:
    """In the child: the ops of the SavedModel's graphs that act outside the model."""
    proto = _parse_saved_model(content, source, path)
    return tuple(op for meta in proto.meta_graphs for op in scan_graph(meta))


def _fingerprint_parses(content: bytes) -> bool:
    """In the child: whether ``content`` is a ``FingerprintDef``."""
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import fingerprint_pb2

    try:
        fingerprint_pb2.FingerprintDef.FromString(content)
    except DecodeError:
        return False
    return True


def describe_ops(ops: list[GraphOp] | tuple[GraphOp, ...]) -> str:
    """The first ops of a list for a message, e.g. ``'WriteFile (writes files) in ...'``."""
    shown = "; ".join(op.describe() for op in ops[:_MAX_LISTED])
    more = f" and {len(ops) - _MAX_LISTED} more" if len(ops) > _MAX_LISTED else ""
    return shown + more


def first_line(error: BaseException) -> str:
    """The first line of an error's message, at most 200 characters."""
    text = str(error).strip()
    line = text.splitlines()[0].strip() if text else type(error).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def _parse_saved_model(content: bytes, source: Path, path: Path) -> Any:
    tensorflow()  # tensorflow.core.protobuf imports it anyway
    from google.protobuf import message, text_format
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    try:
        if source.suffix == ".pb":
            proto.ParseFromString(content)
        else:
            text_format.Parse(content.decode("utf-8"), proto)
    except RecursionError as error:
        from tfcompress.models.loading import too_deep

        raise ModelLoadError(too_deep(path)) from error
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as error:
        raise ModelLoadError(
            f"{path}: {source.name} is truncated or corrupt ({first_line(error)}); export "
            "the model again."
        ) from error
    if not proto.meta_graphs:
        raise ModelLoadError(
            f"{path}: {source.name} holds no MetaGraph (empty or truncated); export the "
            "model again."
        )
    return proto


def _checked_fingerprint(path: Path) -> bytes | None:
    """``fingerprint.pb``'s bytes when it parses; None (and a warning) when it does not."""
    target = path / "fingerprint.pb"
    if not target.exists():
        return None
    content = read_regular_bytes(target, error=ModelLoadError, what="a fingerprint.pb file")
    parses = call(
        "tfcompress.models.saved_model:_fingerprint_parses",
        content,
        what="reading fingerprint.pb",
        follow="tensorflow",
    )
    if not parses:
        logger.warning(
            "%s: fingerprint.pb is damaged and was ignored (TensorFlow uses it only to "
            "identify the model; export the model again to restore it)",
            path,
        )
        return None
    return content


def _check_variables(copy: Path, shown: Path) -> None:
    """Every variable of the copy reads back with its checksum (or one clear error)."""
    from tfcompress.models.loading import saved_model_errors

    prefix = copy / "variables" / "variables"
    if not prefix.with_name("variables.index").exists():
        return
    with saved_model_errors(shown, copy=copy):
        reader = tensorflow().train.load_checkpoint(str(prefix))
        for name in reader.get_variable_to_dtype_map():
            reader.get_tensor(name)  # reads the bytes and checks their checksum
