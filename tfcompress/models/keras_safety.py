r"""Find what a Keras file would run when loaded, by reading its config as data.

A Keras model config names classes and functions that the loader instantiates. Some of
them carry or fetch code: a ``Lambda`` layer holds marshalled Python bytecode, a
``TorchModuleWrapper`` a pickle, a ``TFSMLayer`` the path of another SavedModel. Keras 3
refuses these in ``safe_mode``; tf-keras enforces ``safe_mode`` only for ``.keras``
archives, and imports any Python module a ``.keras`` config names. This module is the one
owner of that fact: it reads the config of an ``.h5``, a ``.keras`` archive (Keras 3 or
tf-keras) or a tf-keras SavedModel's ``keras_metadata.pb`` without any Keras loader, parses
it with :func:`json.loads` (the parser both Keras loaders use, so no spelling such as
``"Lamb\u0064a"`` reads differently here) and walks every dict and list iteratively.

What is flagged, and the installed source that justifies it (Keras 3.15, tf-keras 2.21):

* ``Lambda`` layers, whatever their function type. Keras 3 unmarshals a ``__lambda__``
  function or output shape (``keras/src/layers/core/lambda_layer.py`` ``from_config``,
  lines 183-222); tf-keras unmarshals ``function_type``/``output_shape_type``/``mask_type``
  ``"lambda"`` and checks ``in_safe_mode()``, which is unset outside ``.keras`` loads
  (``tf_keras/src/layers/core/lambda_layer.py`` lines 384-406), and resolves a ``"function"``
  type through ``deserialize_keras_object`` without ``module_objects`` (line 386), which can
  import a module.
* ``__lambda__`` objects anywhere: ``func_load`` of marshalled bytecode
  (``keras/src/saving/serialization_lib.py`` lines 679-689,
  ``tf_keras/src/saving/serialization_lib.py`` lines 639-648).
* Any ``*_type`` key set to ``"lambda"``: tf-keras RNN cell wrappers unmarshal
  ``dropout_fn_type``/``residual_fn_type`` functions (``tf_keras/src/layers/rnn/
  cell_wrappers.py`` lines 672-692, and ``legacy_cell_wrappers.py``).
* ``TFSMLayer``: loads an external SavedModel graph
  (``keras/src/export/tfsm_layer.py`` lines 152-180).
* ``TorchModuleWrapper`` with a ``module``: ``torch.load`` of a pickle
  (``keras/src/utils/torch_utils.py`` lines 166-192).
* ``StringLookup``/``IntegerLookup``/``TextVectorization`` whose ``vocabulary`` is a file
  path: reads a file outside the model (``keras/src/layers/preprocessing/index_lookup.py``
  lines 443-452); tf-keras reads it unguarded.

Only where tf-keras is the loader (Keras 3 refuses these itself):

* A ``module`` outside the Keras packages and TensorFlow: tf-keras imports it
  (``tf_keras/src/saving/serialization_lib.py`` lines 792-805); Keras 3 imports only
  ``keras``/``keras_hub``/``keras_cv``/``keras_nlp`` (``keras/src/saving/
  serialization_lib.py`` lines 878-895).
* A ``builtins`` function that is a Python built-in (``exec``, ``eval``, ``open``...):
  tf-keras falls through to ``importlib.import_module("builtins")`` (same lines).
* Keras file and model I/O functions (``get_file``, ``load_model``...): Keras 3 forbids them
  in configs (``NON_MODELING_APIS``, ``keras/src/saving/serialization_lib.py`` lines 34-63);
  tf-keras has no such list.

``TFOpLambda`` is not flagged: its config names a TensorFlow op (``"function":
"math.add"``) that tf-keras looks up in the ``tf`` namespace, with no bytecode.
"""

from __future__ import annotations

import builtins
import io
import json
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfcompress.errors import ModelLoadError
from tfcompress.models.formats import (
    CheckedFile,
    ModelFormat,
)

# A real config is kilobytes to a few megabytes; this bounds what a zip entry may inflate to.
MAX_CONFIG_BYTES = 256 * 2**20
_ZIP_ERRORS = (OSError, KeyError, zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError)
_SAFE_PACKAGES = frozenset({"keras", "tf_keras", "keras_hub", "keras_cv", "keras_nlp"})
_VOCABULARY_LAYERS = frozenset({"StringLookup", "IntegerLookup", "TextVectorization"})
_CODE_LAYERS = _VOCABULARY_LAYERS | {"Lambda", "TFSMLayer", "TorchModuleWrapper"}
# Keras 3's NON_MODELING_APIS, by function name: tf-keras resolves them from any module path.
_IO_FUNCTIONS = frozenset(
    {
        "audio_dataset_from_directory",
        "clear_session",
        "deserialize_keras_object",
        "enable_unsafe_deserialization",
        "get_file",
        "image_dataset_from_directory",
        "load_img",
        "load_model",
        "load_weights",
        "model_from_json",
        "register_keras_serializable",
        "save_img",
        "save_model",
        "save_weights",
        "serialize_keras_object",
        "text_dataset_from_directory",
    }
)
_MAX_LISTED = 5


@dataclass(frozen=True)
class CodeReference:
    """One object in a Keras config that would run or fetch code when the model is loaded.

    Attributes:
        path: Names from the outermost model down to the object, e.g.
            ``("model", "sequential_1", "lambda_3")``.
        class_name: The Keras class, e.g. ``"Lambda"``.
        danger: What loading it does, e.g. ``"runs arbitrary Python code when loaded"``.
    """

    path: tuple[str, ...]
    class_name: str
    danger: str

    def __str__(self) -> str:
        return f"{'/'.join(self.path)} ({self.class_name})"

    def describe(self) -> str:
        """One phrase for an error message: what it is, where, and what it does.

        Example:
            >>> CodeReference(("model", "seq", "lam"), "Lambda", "runs code").describe()
            "a Lambda layer 'lam' (in model/seq), which runs code"
        """
        if not self.path:
            return f"a {self.class_name or 'top-level'} object, which {self.danger}"
        where = f" (in {'/'.join(self.path[:-1])})" if len(self.path) > 1 else ""
        return f"a {self.class_name} layer {self.path[-1]!r}{where}, which {self.danger}"


def file_configs(checked: CheckedFile) -> list[dict[str, Any]]:
    """The parsed model config of a ``.keras`` or ``.h5`` file, read from its checked bytes.

    Raises:
        ModelLoadError: Not a Keras file, or a config that is missing, unreadable, not JSON
            or not a JSON object.
    """
    path, model_format = checked.path, checked.format
    if model_format is ModelFormat.KERAS:
        return [parse_config(path, zip_member(checked, "config.json"), "config.json")]
    if model_format is not ModelFormat.H5:
        raise ModelLoadError(
            f"{path}: a {model_format.value} file holds no Keras config; pass a .keras, an "
            ".h5 or a tf-keras SavedModel directory."
        )
    config = h5_attribute(checked, "model_config")
    if config is None:
        raise ModelLoadError(
            f"{path}: the .h5 file holds no model config (weights only?); save the whole "
            "model with model.save()."
        )
    if not isinstance(config, bytes | str):  # numpy's bytes_/str_ subclass these
        raise ModelLoadError(
            f"{path}: the .h5 model_config attribute is a {type(config).__name__}, not text; "
            "the file is corrupt or hostile; save the model again."
        )
    return [parse_config(path, config, "the model_config attribute")]


def saved_model_configs(metadata: bytes, path: Path) -> list[dict[str, Any]]:
    """The parsed configs of a tf-keras SavedModel's ``keras_metadata.pb`` bytes.

    Raises:
        ModelLoadError: The protobuf or a config in it is corrupt, empty or not an object.
    """
    return [
        parse_config(path, text, where) for text, where in _saved_model_metadata(metadata, path)
    ]


def check_configs(
    configs: list[dict[str, Any]], path: Path, *, tf_keras_loader: bool, safe_mode: bool = True
) -> None:
    """In safe mode, refuse parsed Keras configs whose loading would run code.

    Raises:
        ModelLoadError: A config holds code and ``safe_mode`` is on.
    """
    if not safe_mode:
        return
    references = _unique(
        ref for config in configs for ref in find_code(config, tf_keras_loader=tf_keras_loader)
    )
    if not references:
        return
    first, others = references[0], references[1:]
    also = ""
    if others:
        listed = ", ".join(str(ref) for ref in others[:_MAX_LISTED])
        more = f" and {len(others) - _MAX_LISTED} more" if len(others) > _MAX_LISTED else ""
        also = f" (also {listed}{more})"
    raise ModelLoadError(
        f"{path}: the model holds {first.describe()}{also}; pass --unsafe (safe_mode=False) "
        "only if you trust the file."
    )


def find_code(config: Any, *, tf_keras_loader: bool) -> list[CodeReference]:
    """List every object in a parsed config that would run or fetch code when loaded.

    The walk is iterative (a hostile config may nest as deep as the JSON parser allows)
    and visits every dict and list, so nested models, wrappers, shared layers and
    activation or initializer sub-configs are all covered.

    Args:
        config: A parsed Keras config (any JSON value).
        tf_keras_loader: Whether tf-keras will load it, which also imports the modules and
            resolves the functions a config names (see the module docstring).
    """
    found: dict[tuple[tuple[str, ...], str], CodeReference] = {}
    # Each entry: a JSON value, the names of the layers around it, and the innermost class.
    stack: list[tuple[Any, tuple[str, ...], str]] = [(config, (), "")]
    while stack:
        value, parents, owner = stack.pop()
        if isinstance(value, list):
            stack.extend((item, parents, owner) for item in reversed(value))
            continue
        if not isinstance(value, dict):
            continue
        class_name = value.get("class_name")
        name = _name_of(value)
        # A named object (a layer, a model) or a code-holding layer becomes a step of the
        # path; an unnamed one (a __lambda__, a function, an initializer) is reported on
        # the layer that holds it.
        if isinstance(class_name, str) and (name is not None or class_name in _CODE_LAYERS):
            label = _label(name if name is not None else class_name)
            if parents[-1:] != (label,):  # a SavedModel node repeats itself in model_config
                parents = (*parents, label)
            owner = class_name
        for danger in _dangers(value, class_name, tf_keras_loader=tf_keras_loader):
            found.setdefault((parents, owner), CodeReference(parents, _label(owner), danger))
        stack.extend((item, parents, owner) for item in reversed(list(value.values())))
    return list(found.values())


def _dangers(value: dict[str, Any], class_name: object, *, tf_keras_loader: bool) -> Iterator[str]:
    """Yield what loading the object (or the config dict) ``value`` would do, if dangerous."""
    config = value.get("config")
    inner = config if isinstance(config, dict) else {}
    if class_name == "Lambda":
        yield "runs arbitrary Python code when loaded"
    elif class_name == "__lambda__":
        yield "holds a serialized Python lambda that runs when loaded"
    elif class_name == "TFSMLayer":
        yield f"loads the external SavedModel {_label(inner.get('filepath'))!r} when loaded"
    elif class_name == "TorchModuleWrapper" and "module" in inner:
        yield "unpickles a torch module, which runs arbitrary code, when loaded"
    elif class_name in _VOCABULARY_LAYERS and isinstance(inner.get("vocabulary"), str):
        yield f"reads the file {_label(inner['vocabulary'])!r} outside the model when loaded"
    for key, item in value.items():
        if item == "lambda" and isinstance(key, str) and key.endswith("_type"):
            yield f"holds marshalled Python bytecode ({_label(key)}) that runs when loaded"
    if tf_keras_loader and isinstance(class_name, str):
        yield from _tf_keras_lookups(value, class_name)


def _tf_keras_lookups(value: dict[str, Any], class_name: str) -> Iterator[str]:
    """What tf-keras's ``_retrieve_class_or_fn`` would import or resolve for ``value``."""
    module = value.get("module")
    if not isinstance(module, str):
        return
    package = module.split(".", 1)[0]
    function = value.get("config") if class_name == "function" else None
    if package not in _SAFE_PACKAGES | {"builtins", "tensorflow"}:
        yield f"makes tf-keras import the Python module {_label(module)!r} when loaded"
    elif package == "builtins" and isinstance(function, str) and hasattr(builtins, function):
        yield f"resolves Python's built-in {_label(function)}() when loaded"
    elif isinstance(function, str) and function in _IO_FUNCTIONS:
        yield f"calls the file/model I/O function {_label(function)}() that Keras forbids"


def _name_of(value: dict[str, Any]) -> str | None:
    """The object's own name: ``config.name`` (layers, models) or ``name`` (SavedModel nodes)."""
    config = value.get("config")
    name = config.get("name") if isinstance(config, dict) else None
    name = name if isinstance(name, str) else value.get("name")
    return name if isinstance(name, str) else None


def _label(text: object) -> str:
    """``text`` on one short line: escapes newlines and control characters, cuts at 60."""
    shown = repr(str(text))[1:-1]
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _unique(references: Iterator[CodeReference]) -> list[CodeReference]:
    """Drop repeats: a SavedModel lists each layer in its parent's config and on its own."""
    kept: dict[tuple[str, str], CodeReference] = {}
    for ref in references:
        key = (ref.path[-1] if ref.path else "", ref.class_name)
        if key not in kept or len(ref.path) > len(kept[key].path):
            kept[key] = ref
    return list(kept.values())


def parse_config(
    path: Path, text: bytes | str, where: str, holds: str = "a model config object"
) -> dict[str, Any]:
    """``text`` (``where`` in the file at ``path``) parsed as a JSON object (``holds``).

    Raises:
        ModelLoadError: Not JSON, nested deeper than the parser goes, or not an object.
    """
    try:
        config = json.loads(text)
    except RecursionError:
        raise ModelLoadError(
            f"{path}: {where} nests deeper than any real model (hostile or corrupt); "
            "do not load this file, or save the model again."
        ) from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise ModelLoadError(
            f"{path}: {where} is not valid JSON ({_label(error)}); the file is truncated or "
            "corrupt; save the model again."
        ) from error
    if not isinstance(config, dict):
        raise ModelLoadError(
            f"{path}: {where} is a JSON {type(config).__name__}, not {holds}; the file is "
            "corrupt or hostile; save the model again."
        )
    return config


def h5_attribute(checked: CheckedFile, name: str) -> Any:
    """The root attribute ``name`` of a checked ``.h5`` (None when absent).

    Raises:
        ModelLoadError: The file is truncated or corrupt.
    """
    import h5py  # ships with TensorFlow and Keras

    try:
        with h5py.File(io.BytesIO(checked.content), "r") as handle:
            return handle.attrs.get(name)
    # RuntimeError: h5py reports some HDF5 library errors (a damaged attribute) this way.
    except (OSError, KeyError, ValueError, TypeError, RuntimeError) as error:
        raise ModelLoadError(
            f"{checked.path}: the .h5 file is truncated or corrupt ({_label(error)}); save the "
            "model again."
        ) from error


def zip_member(checked: CheckedFile, member: str, *, limit: int = MAX_CONFIG_BYTES) -> bytes:
    """The bytes of ``member`` of a checked ``.keras`` archive, refused past ``limit``.

    Raises:
        ModelLoadError: A missing member, a damaged archive, or one inflating past ``limit``.
    """
    path = checked.path
    try:
        with zipfile.ZipFile(io.BytesIO(checked.content)) as archive:
            size = archive.getinfo(member).file_size
            if size > limit:
                raise ModelLoadError(
                    f"{path}: {member} inflates to {size} bytes, far more than a model needs; "
                    "the archive is hostile or corrupt; save the model again."
                )
            return archive.read(member)
    except _ZIP_ERRORS as error:
        raise ModelLoadError(
            f"{path}: cannot read {member} from the .keras archive ({_label(error)}); the file "
            "is truncated or corrupt; save the model again."
        ) from error


def _saved_model_metadata(content: bytes, path: Path) -> list[tuple[bytes | str, str]]:
    from google.protobuf.message import DecodeError

    from tfcompress._compat.keras import saved_metadata_message

    metadata = saved_metadata_message()
    try:
        metadata.ParseFromString(content)
    except DecodeError as error:
        raise ModelLoadError(
            f"{path}: keras_metadata.pb is truncated or corrupt ({_label(error)}); save the "
            "model again."
        ) from error
    if not metadata.nodes:
        raise ModelLoadError(
            f"{path}: keras_metadata.pb lists no Keras objects (empty or truncated); save "
            "the model again with model.save()."
        )
    return [
        (node.metadata, f"keras_metadata.pb node {_label(node.node_path)!r}")
        for node in metadata.nodes
    ]
