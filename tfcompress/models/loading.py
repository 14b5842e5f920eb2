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
import sys
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfcompress._compat.keras import KerasFlavour, flavour_of, keras_module
from tfcompress._compat.tf import require_tensorflow, tensorflow
from tfcompress._limits import note_job_bytes
from tfcompress.errors import InvalidArgumentTypeError, InvalidInputError, ModelLoadError
from tfcompress.models.formats import (
    ModelFormat,
    is_tflite_bytes,
    keras_version_of,
    read_model_file,
)
from tfcompress.models.graph_ops import GraphOp
from tfcompress.models.keras_safety import check_configs, file_configs, saved_model_configs
from tfcompress.models.onnx import OnnxModel, load_onnx
from tfcompress.models.private import PrivateFolder, private_file
from tfcompress.models.saved_model import check_saved_model, describe_ops, first_line

logger = logging.getLogger(__name__)

# What both Keras loaders say about a class they do not know: Keras 3 "Could not locate
# class 'Scale'", tf-keras "Unknown layer: 'Scale'".
_UNKNOWN_CLASS = re.compile(
    r"(?:Unknown (?:layer|object|class)|Could not locate (?:class|function)):? '(?P<name>[^']+)'"
)

ModelLike = Any  # a Keras model, a TFLiteModel, a SavedModelDir, .tflite bytes or a path
#: Keras' ``custom_objects`` dict, or the path of a ``.py`` file that defines them.
CustomObjects = dict[str, Any] | str | os.PathLike[str] | None
_held_copies: list[PrivateFolder] = []  # private copies of loaded tf-keras SavedModels


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
    """A TensorFlow SavedModel directory that is not a Keras model (e.g. from model.export()).

    Attributes:
        path: The folder TensorFlow opens: for a model the user named, the private copy of
            what :func:`load_model` checked (:mod:`tfcompress.models.saved_model`).
        signature_key: The signature that is run and converted.
        source: The folder the user named, for messages (None: ``path`` itself).
        graph_ops: Ops of its graph that act outside the model when it is called
            (:mod:`tfcompress.models.graph_ops`); runners refuse them unless ``unsafe``.
        unsafe: The user consented to running them (``safe_mode=False``, ``--unsafe``).

    Example:
        >>> SavedModelDir(Path("exported")).name
        'exported'
    """

    path: Path
    signature_key: str = "serving_default"
    source: Path | None = None
    graph_ops: tuple[GraphOp, ...] = ()
    unsafe: bool = False
    # Keeps the private copy alive while any SavedModelDir made from it is.
    keep: Any = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The directory name (of the folder the user named)."""
        return self.shown.name

    @property
    def shown(self) -> Path:
        """The folder to name in messages: the user's, not the private copy."""
        return self.source or self.path

    def check_may_run(self) -> None:
        """Refuse to run a graph whose ops act outside the model, unless ``unsafe``.

        Raises:
            ModelLoadError: The graph writes or reads files, talks to the network or runs
                code outside the graph, and the user did not pass ``--unsafe``.

        Example:
            >>> SavedModelDir(Path("exported")).check_may_run()
        """
        if self.graph_ops and not self.unsafe:
            raise ModelLoadError(
                f"{self.shown}: the SavedModel's graph calls {describe_ops(self.graph_ops)}; "
                "running it would act outside the model, so tfcompress does not run it "
                "(converting it to .tflite is allowed); pass --unsafe (safe_mode=False) only "
                "if you trust the file."
            )


@dataclass(frozen=True)
class KerasFile:
    """A checked ``.keras``/``.h5`` file, loaded where TensorFlow runs: the converter's child.

    ``quantize MODEL.keras`` needs of the model only what that child reads (its name,
    signature and layer names: :meth:`facts`) and the ``.tflite`` it converts there
    (:func:`~tfcompress.quantization.converter.convert_all`), so the caller never imports
    TensorFlow (:func:`open_model`); :meth:`apply` runs a function on the model there.

    Example:
        >>> open_model("mnist_cnn.keras").name  # doctest: +SKIP
        'mnist_cnn'
    """

    path: Path
    content: bytes = field(repr=False)  # the checked bytes: the only ones ever loaded
    flavour: KerasFlavour
    suffix: str  # the checked format's: Keras loaders choose their reader by the name
    safe_mode: bool = True
    custom_objects: CustomObjects = None
    _facts: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The Keras model's own name (what ``model_name`` says of the loaded model)."""
        return str(self.facts()["name"])

    def facts(self) -> dict[str, Any]:
        """``name``, ``signature`` and ``layers`` of the model, read once in the child."""
        if not self._facts:
            self._facts.update(self.apply("tfcompress.models.loading:keras_facts", what="loading"))
        return self._facts

    def apply(self, target: str, *args: Any, what: str, **kwargs: Any) -> Any:
        """``target(model, *args, **kwargs)`` where the model is loaded: the converter's child.

        Here instead when TensorFlow is imported here, or no such child runs
        (:func:`~tfcompress._child.call`'s ``follow``). ``what``: a verb, for messages.
        """
        from tfcompress._child import call

        what = f"{what} the Keras model {self.path}"
        return call(_APPLY, self, target, args, kwargs, what=what, follow="tensorflow")

    def load(self) -> Any:
        """The Keras model, loaded in this process from the checked bytes."""
        with private_file(self.content, self.suffix) as copy:
            return _load_keras(
                copy,
                self.flavour,
                safe_mode=self.safe_mode,
                shown=self.path,
                custom_objects=self.custom_objects,
            )


@functools.lru_cache(maxsize=1)  # the last one: the file the command works on
def loaded_keras(file: KerasFile) -> Any:
    """``file``'s Keras model, loaded once for every call that needs it (in the child)."""
    return file.load()


_APPLY = "tfcompress.models.loading:applied"


def applied(file: KerasFile, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """In the child: ``target`` called on ``file``'s model (see :meth:`KerasFile.apply`)."""
    from tfcompress._child.serve import resolve

    return resolve(target)(loaded_keras(file), *args, **kwargs)


def keras_facts(model: Any) -> dict[str, Any]:
    """In the child: what the caller needs of the model (see :meth:`KerasFile.facts`)."""
    from tfcompress.models.signature import model_signature

    layers, name = keras_layer_names(model)
    signature = model_signature(model)
    return {"name": name or model_name(model), "signature": signature, "layers": layers}


def keras_layer_names(model: Any) -> tuple[set[str], str]:
    """Every (nested) Keras layer name of ``model`` and its own name; empty otherwise."""
    if isinstance(model, KerasFile):  # read in the child that converts it
        return set(model.facts()["layers"]), model.name
    names: set[str] = set()
    stack = list(getattr(model, "layers", None) or [])
    while stack:
        layer = stack.pop()
        names.add(layer.name)
        stack.extend(getattr(layer, "layers", None) or [])
    return names, str(getattr(model, "name", ""))


def open_model(
    path: str | os.PathLike[str], *, safe_mode: bool = True, custom_objects: CustomObjects = None
) -> Any:
    """:func:`load_model`, but a Keras file is a :class:`KerasFile` the converter's child loads.

    Where TensorFlow is imported here already, or calls run in this process, or the custom
    classes are Python objects, the model is loaded here (:func:`load_model`).
    """
    from tfcompress._child import IN_PROCESS

    here = "tensorflow" in sys.modules or os.environ.get(IN_PROCESS, "") == "1"
    lazy = not here and not isinstance(custom_objects, dict)
    return load_model(path, safe_mode=safe_mode, custom_objects=custom_objects, _lazy=lazy)


def load_model(
    path: str | os.PathLike[str],
    *,
    safe_mode: bool = True,
    custom_objects: CustomObjects = None,
    _lazy: bool = False,
) -> Any:
    """Load a model file or directory.

    Args:
        path: A ``.keras`` or ``.h5`` file, a SavedModel directory, a ``.tflite`` or an
            ``.onnx`` file.
        safe_mode: Refuse Keras files that would run code when loaded (Lambda layers and
            the rest listed in :mod:`tfcompress.models.keras_safety`). Only turn it off for
            files you trust: such a layer can run arbitrary code.
        custom_objects: The model's custom classes by name, for Keras files (Keras'
            ``custom_objects``), or the path of a ``.py`` file that defines them (what
            ``--custom-objects FILE.py`` passes): it is imported for the Keras that saved
            the model, so a layer file written for TF 2's ``tf.keras`` loads a tf-keras
            ``.h5`` (see :mod:`tfcompress.models.custom_objects`).

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
    if path.is_dir():
        files = [path / "saved_model.pb", *(path / "variables").glob("variables.*")]
        note_job_bytes(sum(f.stat().st_size for f in files if f.is_file()))  # graph and weights
        return _load_saved_model(path, safe_mode=safe_mode, custom_objects=custom_objects)
    if not path.exists():
        raise ModelLoadError(
            f"{path}: no such file or directory; pass a .keras file, an .h5 file, a "
            "SavedModel directory, a .tflite or an .onnx file."
        )
    # One read, one decision: every loader below gets exactly these checked bytes.
    checked = read_model_file(path, unsafe=not safe_mode)
    note_job_bytes(len(checked.content))  # calls get memory headroom for it (docs/security.md)
    if custom_objects is not None and checked.format in (ModelFormat.TFLITE, ModelFormat.ONNX):
        raise InvalidInputError(_not_keras(path, checked.format.suffix))
    if checked.format is ModelFormat.TFLITE:
        _check_tflite_loads(checked.content, path)
        return TFLiteModel(checked.content, path, verified=True)
    if checked.format is ModelFormat.ONNX:
        return load_onnx(path, content=checked.content)
    require_tensorflow(f"{path.name}: loading a Keras model")
    version = keras_version_of(checked)
    flavour = KerasFlavour.TF_KERAS if version.startswith("2.") else KerasFlavour.KERAS3
    configs = file_configs(checked)
    # Read the config as data before any Keras loader sees it: tf-keras enforces safe_mode
    # only for .keras archives, and a hostile config must fail in one line, not a traceback.
    check_configs(
        configs, path, tf_keras_loader=flavour is KerasFlavour.TF_KERAS, safe_mode=safe_mode
    )
    suffix = checked.format.suffix
    file = KerasFile(path, checked.content, flavour, suffix, safe_mode, custom_objects)
    return file if _lazy else file.load()


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
    if isinstance(model, TFLiteModel | SavedModelDir | OnnxModel | KerasFile):
        return model
    if flavour_of(model) is not None:
        return model
    raise InvalidArgumentTypeError(
        f"expected a Keras model, .tflite bytes or a model path, got {type(model).__name__}; "
        "pass a keras.Model, a TFLiteModel/.tflite bytes, or the path of a .keras, .h5, "
        ".tflite, .onnx or SavedModel."
    )


def model_name(model: Any) -> str:
    """A short human label for a loaded model."""
    if isinstance(model, TFLiteModel | SavedModelDir | OnnxModel | KerasFile):
        return model.name
    return str(getattr(model, "name", type(model).__name__))


@contextlib.contextmanager
def saved_model_errors(path: Path, *, copy: Path | None = None) -> Iterator[None]:
    """Turn what TensorFlow raises while reading a SavedModel into one :class:`ModelLoadError`.

    Wrap every ``tf.saved_model.load`` and ``TFLiteConverter.from_saved_model`` call: a
    directory checked by :func:`load_model` can still change, and a :class:`SavedModelDir`
    can be built by hand.

    Raises:
        ModelLoadError: The SavedModel's graph or variables are truncated, corrupt or too
            large to allocate.
    """
    from google.protobuf.message import DecodeError

    tf = tensorflow()
    try:
        yield
    except (tf.errors.ResourceExhaustedError, MemoryError, OverflowError) as error:
        raise ModelLoadError(_too_large(path, error, copy)) from error
    except RecursionError as error:
        raise ModelLoadError(too_deep(path)) from error
    # IndexError: TensorFlow's reader says "Read less bytes than requested" for a cut file.
    except (tf.errors.OpError, OSError, ValueError, KeyError, IndexError, DecodeError) as error:
        reason = first_line(error)
        if copy is not None:
            reason = reason.replace(str(copy), str(path))
        raise ModelLoadError(
            f"{path}: TensorFlow cannot read the SavedModel ({reason}); its "
            "saved_model.pb or variables/ are truncated or corrupt; export the model again."
        ) from error


def load_saved_model(model: SavedModelDir) -> Any:
    """``tf.saved_model.load`` of a plain SavedModel, shared by everyone in this process.

    Reading the signature and running it are separate steps (``model_signature``, then a
    runner): loading a SavedModel with an RNN takes seconds, so the loaded object is kept
    while its ``saved_model.pb`` is unchanged (the last four SavedModels). Messages name the
    folder the user gave, not the private copy TensorFlow reads.

    Raises:
        ModelLoadError: TensorFlow cannot read it (see :func:`saved_model_errors`).
    """
    graph = model.path / "saved_model.pb"
    stamp = graph.stat().st_mtime_ns if graph.exists() else 0
    return _cached_saved_model(str(model.path), stamp, model.shown)


@functools.lru_cache(maxsize=4)
def _cached_saved_model(path: str, stamp: int, shown: Path) -> Any:
    del stamp  # part of the cache key only: a re-exported model is loaded again
    with saved_model_errors(shown, copy=Path(path)):
        return tensorflow().saved_model.load(path)


def _load_saved_model(path: Path, *, safe_mode: bool, custom_objects: CustomObjects) -> Any:
    require_tensorflow(f"{path.name}: loading a SavedModel")
    checked = check_saved_model(path, safe_mode=safe_mode)
    if checked.keras_metadata is None:
        if custom_objects is not None:
            raise InvalidInputError(_not_keras(path, "SavedModel without Keras metadata"))
        return SavedModelDir(
            checked.copy.path,
            source=path,
            graph_ops=checked.graph_ops,
            unsafe=not safe_mode,
            keep=checked.copy,
        )
    # A Keras object may call any function of the graph: its ops are refused at load.
    if safe_mode and checked.graph_ops:
        raise ModelLoadError(
            f"{path}: the SavedModel's graph calls {describe_ops(checked.graph_ops)}, which "
            "acts outside the model; pass --unsafe (safe_mode=False) only if you trust the file."
        )
    configs = saved_model_configs(checked.keras_metadata, path)
    check_configs(configs, path, tf_keras_loader=True, safe_mode=safe_mode)
    _held_copies.append(checked.copy)  # a revived Keras model may read its assets later
    return _load_keras(
        checked.copy.path,
        KerasFlavour.TF_KERAS,
        safe_mode=safe_mode,
        shown=path,
        custom_objects=custom_objects,
    )


def _load_keras(
    copy: Path,
    flavour: KerasFlavour,
    *,
    safe_mode: bool,
    shown: Path,
    custom_objects: CustomObjects = None,
) -> Any:
    """Load the private copy ``copy`` of checked bytes; messages name ``shown``."""
    custom_objects = _custom_objects_for(custom_objects, flavour, shown)
    keras = keras_module(flavour)
    tf = tensorflow()
    path = shown
    logger.debug("loading %s (its checked copy) with %s, safe_mode=%s", path, flavour, safe_mode)
    try:
        return keras.models.load_model(
            copy, compile=False, safe_mode=safe_mode, custom_objects=custom_objects
        )
    except (tf.errors.ResourceExhaustedError, MemoryError, OverflowError) as error:
        raise ModelLoadError(_too_large(path, error, copy)) from error
    except RecursionError as error:
        raise ModelLoadError(too_deep(path)) from error
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
        reason = first_line(error).replace(str(copy), str(path))
        if "too big" in reason or "overflow" in reason.lower():  # numpy/TF size checks
            raise ModelLoadError(_too_large(path, error, copy)) from error
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


def _not_keras(path: Path, what: str) -> str:
    return (
        f"custom_objects (--custom-objects) name the custom classes of a Keras file; {path} "
        f"is a {what}, which holds no Keras classes: drop it."
    )


def _custom_objects_for(
    given: CustomObjects, flavour: KerasFlavour, shown: Path
) -> dict[str, Any] | None:
    """``given`` as Keras' ``custom_objects`` for a model of ``flavour``.

    A ``.py`` path is imported for that flavour. A Keras 3 class offered to a tf-keras model
    is refused in one line: tf-keras would fail on it deep inside ("list index out of
    range", "must be an instance of class Layer"), far from the cause.

    Raises:
        InvalidInputError: The file cannot be imported (see ``import_custom_objects``).
        ModelLoadError: A Keras 3 class for a tf-keras model.
    """
    if given is None:
        return None
    if isinstance(given, str | os.PathLike):
        from tfcompress.models.custom_objects import import_custom_objects

        given = import_custom_objects(given, tf_keras=flavour is KerasFlavour.TF_KERAS)
    if flavour is KerasFlavour.TF_KERAS:
        keras3 = sorted(
            name
            for name, value in given.items()
            if isinstance(value, type)
            and any(k.__module__.split(".")[0] == "keras" for k in value.__mro__[1:])
        )
        if keras3:
            raise ModelLoadError(
                f"{shown}: saved by tf-keras, but custom class(es) {', '.join(keras3)} "
                "subclass Keras 3 (import keras); define them with tf-keras (import tf_keras "
                "as keras), or pass the .py file that defines them as custom_objects "
                "(--custom-objects FILE.py), which imports its tf.keras as tf-keras."
            )
    return given


def _too_large(path: Path, error: BaseException, copy: Path | None = None) -> str:
    reason = first_line(error)
    if copy is not None:
        reason = reason.replace(str(copy), str(path))
    return (
        f"{path}: the model's weights are too large to allocate ({reason}); its "
        "config is hostile or corrupt (check layer sizes such as units), or the machine "
        "lacks memory for it."
    )


def too_deep(path: Path) -> str:
    """What to say of a model whose config nests too deep to read (here and in saved_model)."""
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
