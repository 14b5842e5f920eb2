"""Load every model format tfcompress accepts into one of three in-memory forms.

* a Keras model object (Keras 3 or tf-keras),
* :class:`TFLiteModel` (the flatbuffer bytes, validated),
* :class:`SavedModelDir` (a plain TensorFlow SavedModel that is not a Keras model),
* :class:`~tfcompress.models.onnx.OnnxModel` (an ``.onnx`` file, run by ONNX Runtime).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress._compat.keras import KerasFlavour, flavour_of, keras_module
from tfcompress._compat.tf import tensorflow
from tfcompress._files import check_tree, read_regular_bytes
from tfcompress.errors import InvalidArgumentTypeError, ModelLoadError
from tfcompress.models.formats import ModelFormat, is_tflite_bytes, keras_version_of, sniff_format
from tfcompress.models.keras_safety import check_keras_file
from tfcompress.models.onnx import OnnxModel, load_onnx

logger = logging.getLogger(__name__)

# What both Keras loaders say about a class they do not know: Keras 3 "Could not locate
# class 'Scale'", tf-keras "Unknown layer: 'Scale'".
_UNKNOWN_CLASS = re.compile(
    r"(?:Unknown (?:layer|object|class)|Could not locate (?:class|function)):? '(?P<name>[^']+)'"
)

ModelLike = Any  # a Keras model, a TFLiteModel, a SavedModelDir, .tflite bytes or a path


@dataclass(frozen=True)
class TFLiteModel:
    """A ``.tflite`` flatbuffer held in memory.

    Example:
        >>> TFLiteModel(b"not a model")
        Traceback (most recent call last):
        ...
        tfcompress.errors.ModelLoadError: <bytes>: not a TFLite model (no 'TFL3' identifier) ...
    """

    content: bytes = field(repr=False)
    path: Path | None = None
    label: str | None = None
    # True once the bytes passed the structural validator and the crash probe, or when
    # tfcompress's own converter made them; resolve_model checks the others before use.
    verified: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not is_tflite_bytes(self.content):
            raise ModelLoadError(
                f"{self.path or '<bytes>'}: not a TFLite model (no 'TFL3' identifier) or "
                "truncated; re-export it with `tfcompress quantize`."
            )

    @property
    def size_bytes(self) -> int:
        """Size of the flatbuffer in bytes."""
        return len(self.content)

    @property
    def name(self) -> str:
        """A short label: ``label``, else the file name, else 'tflite'."""
        return self.label or (self.path.name if self.path else "tflite")


@dataclass(frozen=True)
class SavedModelDir:
    """A TensorFlow SavedModel directory that is not a Keras model (e.g. from model.export())."""

    path: Path
    signature_key: str = "serving_default"

    @property
    def name(self) -> str:
        """The directory name."""
        return self.path.name


def load_model(
    path: str | os.PathLike[str],
    *,
    safe_mode: bool = True,
    custom_objects: dict[str, Any] | None = None,
) -> Any:
    """Load a model file or directory.

    Args:
        path: A ``.keras`` or ``.h5`` file, a SavedModel directory, a ``.tflite`` or an
            ``.onnx`` file.
        safe_mode: Refuse Keras files that would run code when loaded (Lambda layers and
            the rest listed in :mod:`tfcompress.models.keras_safety`). Only turn it off for
            files you trust: such a layer can run arbitrary code.
        custom_objects: The model's custom classes by name, for Keras files (Keras'
            ``custom_objects``; the CLI reads them from ``--custom-objects FILE.py``, see
            :mod:`tfcompress.models.custom_objects`).

    Returns:
        A Keras model, a :class:`TFLiteModel`, a :class:`SavedModelDir` or an
        :class:`~tfcompress.models.onnx.OnnxModel`.

    Raises:
        ModelLoadError: Missing, truncated, corrupt or unsafe model.
        InvalidArgumentTypeError: ``path`` is not a ``str`` or ``os.PathLike``.

    Example:
        >>> model = load_model("mnist_cnn.keras")  # doctest: +SKIP
    """
    try:
        path = Path(path)
    except TypeError:
        raise InvalidArgumentTypeError(
            f"expected a model path (str or os.PathLike), got {type(path).__name__}; pass the "
            "path of a .keras, .h5, .tflite, .onnx file or a SavedModel directory."
        ) from None
    model_format = sniff_format(path)
    if model_format is ModelFormat.TFLITE:
        content = read_regular_bytes(path, error=ModelLoadError, what="a .tflite file")
        _check_tflite_loads(content, path)
        return TFLiteModel(content, path, verified=True)
    if model_format is ModelFormat.ONNX:
        return load_onnx(path)
    if model_format is ModelFormat.SAVED_MODEL:
        _check_saved_model(path)
        if (path / "keras_metadata.pb").is_file():
            return _load_keras(path, KerasFlavour.TF_KERAS, safe_mode, custom_objects)
        return SavedModelDir(path)
    version = keras_version_of(path, model_format)
    flavour = KerasFlavour.TF_KERAS if version.startswith("2.") else KerasFlavour.KERAS3
    return _load_keras(path, flavour, safe_mode, custom_objects)


def resolve_model(model: ModelLike, *, safe_mode: bool = True) -> Any:
    """Turn whatever the user passed into a loaded model (loading paths, wrapping bytes).

    Raises:
        ModelLoadError: ``model`` is a bad path or bytes that are not a ``.tflite``.
        TypeError: ``model`` is of a type tfcompress does not know.
    """
    if isinstance(model, str | os.PathLike):
        return load_model(model, safe_mode=safe_mode)
    if isinstance(model, bytes | bytearray):
        content = bytes(model)
        tflite = TFLiteModel(content)
        _check_tflite_loads(content, "<bytes>")
        return dataclasses.replace(tflite, verified=True)
    if isinstance(model, TFLiteModel) and not model.verified:
        _check_tflite_loads(model.content, model.path or model.name)
        return dataclasses.replace(model, verified=True)
    if isinstance(model, TFLiteModel | SavedModelDir | OnnxModel) or flavour_of(model) is not None:
        return model
    raise InvalidArgumentTypeError(
        f"expected a Keras model, .tflite bytes or a model path, got {type(model).__name__}; "
        "pass a keras.Model, a TFLiteModel/.tflite bytes, or the path of a .keras, .h5, "
        ".tflite, .onnx or SavedModel."
    )


def model_name(model: Any) -> str:
    """A short human label for a loaded model."""
    if isinstance(model, TFLiteModel | SavedModelDir | OnnxModel):
        return model.name
    return str(getattr(model, "name", type(model).__name__))


@contextlib.contextmanager
def saved_model_errors(path: Path) -> Iterator[None]:
    """Turn what TensorFlow raises while reading a SavedModel into one :class:`ModelLoadError`.

    Wrap every ``tf.saved_model.load`` and ``TFLiteConverter.from_saved_model`` call: a
    directory checked by :func:`load_model` can still change, and a :class:`SavedModelDir`
    can be built by hand.

    Args:
        path: The SavedModel directory, for the message.

    Raises:
        ModelLoadError: The SavedModel's graph or variables are truncated, corrupt or too
            large to allocate.

    Example:
        >>> with saved_model_errors(model.path):  # doctest: +SKIP
        ...     loaded = tf.saved_model.load(str(model.path))
    """
    from google.protobuf.message import DecodeError

    tf = tensorflow()
    try:
        yield
    except (tf.errors.ResourceExhaustedError, MemoryError, OverflowError) as error:
        raise ModelLoadError(_too_large(path, error)) from error
    except RecursionError as error:
        raise ModelLoadError(_too_deep(path)) from error
    # IndexError: TensorFlow's reader says "Read less bytes than requested" for a cut file.
    except (tf.errors.OpError, OSError, ValueError, KeyError, IndexError, DecodeError) as error:
        raise ModelLoadError(
            f"{path}: TensorFlow cannot read the SavedModel ({_first_line(error)}); its "
            "saved_model.pb or variables/ are truncated or corrupt; export the model again."
        ) from error


def load_saved_model(model: SavedModelDir) -> Any:
    """``tf.saved_model.load`` of a plain SavedModel, shared by everyone in this process.

    Reading the signature and running it are separate steps (``model_signature``, then a
    runner): loading a SavedModel with an RNN takes seconds, so the loaded object is kept
    while its ``saved_model.pb`` is unchanged (the last four SavedModels).

    Raises:
        ModelLoadError: TensorFlow cannot read it (see :func:`saved_model_errors`).

    Example:
        >>> load_saved_model(SavedModelDir(Path("exported"))).signatures  # doctest: +SKIP
    """
    graph = model.path / "saved_model.pb"
    stamp = graph.stat().st_mtime_ns if graph.exists() else 0
    return _load_saved_model(str(model.path), stamp)


@functools.lru_cache(maxsize=4)
def _load_saved_model(path: str, stamp: int) -> Any:
    del stamp  # part of the cache key only: a re-exported model is loaded again
    with saved_model_errors(Path(path)):
        return tensorflow().saved_model.load(path)


def _load_keras(
    path: Path, flavour: KerasFlavour, safe_mode: bool, custom_objects: dict[str, Any] | None
) -> Any:
    # Read the config as data before any Keras loader sees it: tf-keras enforces safe_mode
    # only for .keras archives, and a hostile config must fail in one line, not a traceback.
    check_keras_file(path, tf_keras_loader=flavour is KerasFlavour.TF_KERAS, safe_mode=safe_mode)
    keras = keras_module(flavour)
    tf = tensorflow()
    logger.debug("loading %s with %s (safe_mode=%s)", path, flavour, safe_mode)
    try:
        return keras.models.load_model(
            path, compile=False, safe_mode=safe_mode, custom_objects=custom_objects
        )
    except (tf.errors.ResourceExhaustedError, MemoryError, OverflowError) as error:
        raise ModelLoadError(_too_large(path, error)) from error
    except RecursionError as error:
        raise ModelLoadError(_too_deep(path)) from error
    # RuntimeError: h5py's word for HDF5 library errors; BadZipFile/zlib.error/EOFError: a
    # damaged .keras archive (weights member) that Keras reads after the config.
    except (
        ValueError,
        OSError,
        TypeError,
        KeyError,
        AttributeError,
        IndexError,
        RuntimeError,
        zipfile.BadZipFile,
        zlib.error,
        EOFError,
        tf.errors.OpError,
    ) as error:
        reason = _first_line(error)
        if "too big" in reason or "overflow" in reason.lower():  # numpy/TF size checks
            raise ModelLoadError(_too_large(path, error)) from error
        if "lambda" in reason.lower() or "safe_mode" in reason:
            hint = (
                " It holds a Lambda layer: pass safe_mode=False (--unsafe) only if you trust "
                "the file."
            )
        elif unknown := _UNKNOWN_CLASS.search(str(error)):
            reason = f"unknown class {unknown['name']!r}"  # Keras' advice is for Python users
            hint = (
                " The model uses a custom class: pass --custom-objects "
                "FILE.py, a Python file that defines it (tfcompress imports it, which runs its "
                "code), or "
                "custom_objects={...} in Python; or export a SavedModel (model.export(path)) "
                "and pass that, or call tfcompress from Python with the loaded model."
            )
        else:
            hint = " Check that the file is complete and saved by Keras."
        raise ModelLoadError(f"{path}: cannot load the Keras model: {reason}.{hint}") from error


def _check_saved_model(path: Path) -> None:
    """Refuse a SavedModel directory that would hang or crash TensorFlow's loader.

    Checks, before any loader: no FIFO or device inside (``check_tree`` does not descend
    into symlinked folders, so ``variables/`` and ``assets/``, which TensorFlow reads, are
    walked on their own even when they are links), a ``saved_model.pb`` that parses as a
    ``SavedModel`` protobuf with a MetaGraph, and variables whose every tensor reads back
    with its checksum.
    """
    for folder in (path, path / "variables", path / "assets"):
        if folder.is_dir():
            check_tree(folder, error=ModelLoadError, what=f"the SavedModel {path}")
    tf = tensorflow()  # tensorflow.core.protobuf imports it anyway
    from google.protobuf import message, text_format
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    binary = path / "saved_model.pb"
    # TensorFlow reads saved_model.pb first and saved_model.pbtxt only without it.
    source = binary if binary.exists() else path / "saved_model.pbtxt"
    content = read_regular_bytes(source, error=ModelLoadError, what="a SavedModel protobuf")
    try:
        if source is binary:
            proto.ParseFromString(content)
        else:
            text_format.Parse(content.decode("utf-8"), proto)
    except RecursionError as error:
        raise ModelLoadError(_too_deep(path)) from error
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError) as error:
        raise ModelLoadError(
            f"{path}: {source.name} is truncated or corrupt ({_first_line(error)}); export "
            "the model again."
        ) from error
    if not proto.meta_graphs:
        raise ModelLoadError(
            f"{path}: {source.name} holds no MetaGraph (empty or truncated); export the "
            "model again."
        )
    prefix = path / "variables" / "variables"
    if prefix.with_name("variables.index").exists():
        with saved_model_errors(path):
            reader = tf.train.load_checkpoint(str(prefix))
            for name in reader.get_variable_to_dtype_map():
                reader.get_tensor(name)  # reads the bytes and checks their checksum


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0].strip() if text else type(error).__name__
    return line if len(line) <= 200 else line[:197] + "..."


def _too_large(path: Path, error: BaseException) -> str:
    return (
        f"{path}: the model's weights are too large to allocate ({_first_line(error)}); its "
        "config is hostile or corrupt (check layer sizes such as units), or the machine "
        "lacks memory for it."
    )


def _too_deep(path: Path) -> str:
    return (
        f"{path}: the model config nests deeper than any real model (hostile or corrupt); "
        "do not load this file, or save the model again."
    )


def _check_tflite_loads(content: bytes, source: object) -> None:
    # Untrusted bytes: first the pure-Python structural checks, then the first native touch
    # in a child process, so a crafted file cannot crash or hang this one (docs/security.md).
    from tfcompress.models.probe import probe_model
    from tfcompress.models.tflite_file import read_tflite

    parsed = read_tflite(content, source=source)
    parsed.validate(source=source)
    # Custom ops (the Edge TPU's) cannot run here, and a dynamic dimension other than the
    # batch (an audio length) set to 1 may be too small for the model (a convolution wider
    # than 1): a clean refusal to run is no error then; only a crash or a refusal to load is.
    main = parsed.subgraphs[0] if parsed.subgraphs else None
    dynamic = main is not None and any(
        -1 in main.tensors[i].signature[1:] for i in main.inputs if i < len(main.tensors)
    )
    probe_model(
        content, "tflite", source=source, must_prepare=not parsed.custom_ops and not dynamic
    )
