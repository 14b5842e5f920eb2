"""Keras 3 -> tf-keras bridge: rebuild a Sequential/Functional model for tfmot, same weights.

tfmot only wraps tf-keras models. A Keras 3 model is rebuilt layer by layer from its
config (Keras 3 serialization details translated to tf-keras's), its weights are copied
layer by layer, and the copy must reproduce the original's outputs within ``atol`` before
any training starts. Subclassed models and layers tf-keras does not know are refused with
an :class:`~tfcompress.errors.UnsupportedModelError` that says what to do.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tfcompress._compat.keras import KerasFlavour, flavour_of, input_name
from tfcompress._compat.tf import tensorflow
from tfcompress._compat.tfmot import tf_keras
from tfcompress.errors import UnsupportedModelError

logger = logging.getLogger(__name__)

_GRAPH_CLASSES = frozenset({"Functional", "Sequential"})
# Keyword arguments every tf-keras layer accepts through ``Layer.__init__(**kwargs)``.
_BASE_KWARGS = frozenset({"name", "trainable", "dtype", "dynamic", "input_shape", "batch_size"})
_TENSOR = "__keras_tensor__"


def ensure_graph_model(model: Any) -> None:
    """Refuse models tfmot cannot rewrite: subclassed models (either flavour).

    Raises:
        UnsupportedModelError: ``model`` is not a Sequential or Functional model.
    """
    if type(model).__name__ not in _GRAPH_CLASSES:
        raise UnsupportedModelError(
            f"model {getattr(model, 'name', type(model).__name__)!r} is a subclassed "
            f"{type(model).__name__}; tfmot can only rewrite Sequential or Functional models: "
            "rebuild it with keras.Sequential or keras.Model(inputs, outputs)."
        )


Samples = np.ndarray | Mapping[str, np.ndarray] | Sequence[np.ndarray]


def to_tf_keras(model: Any, samples: Samples, *, atol: float = 1e-5) -> tuple[Any, float]:
    """Return a tf-keras copy of ``model`` that tfmot can wrap, and its max output difference.

    A tf-keras model is cloned (so training never touches the caller's model); a Keras 3
    model is rebuilt from its config with the same weights. Models with several inputs and
    outputs are carried whole: every output of the copy is checked against the original's.

    Args:
        model: A Sequential or Functional model, Keras 3 or tf-keras.
        samples: Inputs the copy is checked on (a few dozen real samples): one array for a
            single-input model, else a dict keyed by input name or a list in input order.
        atol: Largest allowed absolute difference between the two models' outputs.

    Raises:
        UnsupportedModelError: Subclassed model, a layer tf-keras does not know, weights that
            do not fit, or outputs that differ by more than ``atol``.
    """
    ensure_graph_model(model)
    keras2 = tf_keras()
    flavour = flavour_of(model)
    if flavour is KerasFlavour.TF_KERAS:
        copy = keras2.models.clone_model(model)
        copy.set_weights(model.get_weights())
    else:
        copy = _rebuild(model, keras2)
        _copy_weights(model, copy)
    feed = _ordered_inputs(model, samples)
    expected = _outputs(model(feed, training=False))
    actual = _outputs(copy(feed, training=False))
    diff = float("inf")
    if [e.shape for e in expected] == [a.shape for a in actual]:
        pairs = zip(expected, actual, strict=True)
        diff = max((float(np.max(np.abs(e - a))) for e, a in pairs if e.size), default=0.0)
    if not diff <= atol:
        raise UnsupportedModelError(
            f"the tf-keras copy of {model.name!r} does not reproduce it (max abs difference "
            f"{diff:.3g} > {atol:g}); a layer behaves differently in tf-keras: build the model "
            "with tf_keras directly or report the layer."
        )
    logger.info("bridged %s to tf-keras (max abs difference %.2g)", model.name, diff)
    return copy, diff


def _ordered_inputs(model: Any, samples: Samples) -> Any:
    """One array for a single-input model, else a list in the model's input order."""
    if isinstance(samples, np.ndarray):
        return samples
    if isinstance(samples, Mapping):
        names = [input_name(tensor, i) for i, tensor in enumerate(model.inputs)]
        if set(samples) != set(names):
            raise UnsupportedModelError(
                f"samples for the bridge check are keyed {sorted(samples)} but {model.name!r} "
                f"has inputs {names}; key them by input name."
            )
        arrays = [samples[name] for name in names]
    else:
        arrays = list(samples)
    return arrays[0] if len(arrays) == 1 else arrays


def _outputs(value: Any) -> list[np.ndarray]:
    """A model's outputs as a list of float64 arrays, in output order."""
    if isinstance(value, Mapping):
        value = list(value.values())
    if not isinstance(value, list | tuple):
        value = [value]
    return [np.asarray(v, dtype=np.float64) for v in value]


def _rebuild(model: Any, keras2: Any) -> Any:
    config = model.get_config()
    if type(model).__name__ == "Sequential":
        layers = [_layer_from_config(entry, keras2) for entry in config["layers"]]
        return keras2.Sequential(layers, name=model.name)
    tensors: dict[tuple[str, int, int], Any] = {}
    for entry in config["layers"]:
        layer = _layer_from_config(entry, keras2)
        if entry["class_name"] == "InputLayer":
            tensors[(layer.name, 0, 0)] = layer.output
            continue
        for node_index, node in enumerate(entry.get("inbound_nodes", [])):
            args = _resolve(node.get("args", []), tensors, entry["name"])
            kwargs = _resolve(node.get("kwargs", {}), tensors, entry["name"])
            outputs = layer(*args, **kwargs)
            for tensor_index, output in enumerate(tensorflow().nest.flatten(outputs)):
                tensors[(entry["name"], node_index, tensor_index)] = output
    return keras2.Model(
        _wired(config["input_layers"], tensors),
        _wired(config["output_layers"], tensors),
        name=model.name,
    )


def _wired(refs: Any, tensors: dict[tuple[str, int, int], Any]) -> Any:
    """The tensors a model's input or output refs name: one, or a list in the model's order.

    A Keras 3 model keys them by name: a dict, in the order its calls return them.
    """
    if isinstance(refs, Mapping):
        refs = list(refs.values())
    elif refs and isinstance(refs[0], str):  # one ref, not a list of them
        refs = [refs]
    found = [tensors[tuple(ref)] for ref in refs]
    return found if len(found) > 1 else found[0]


def _resolve(value: Any, tensors: dict[tuple[str, int, int], Any], owner: str) -> Any:
    if isinstance(value, dict) and value.get("class_name") == _TENSOR:
        key = tuple(value["config"]["keras_history"])
        if key not in tensors:
            raise UnsupportedModelError(
                f"layer {owner!r} reads {key[0]!r} before it is built; only plain "
                "Sequential/Functional graphs can be bridged to tf-keras."
            )
        return tensors[key]
    if isinstance(value, list | tuple):
        return type(value)(_resolve(v, tensors, owner) for v in value)
    if isinstance(value, dict):
        return {k: _resolve(v, tensors, owner) for k, v in value.items()}
    return value


def _layer_from_config(entry: dict[str, Any], keras2: Any) -> Any:
    class_name = entry["class_name"]
    module = str(entry.get("module") or "")
    cls = getattr(keras2.layers, class_name, None)
    if cls is None or entry.get("registered_name") or not module.startswith("keras"):
        raise UnsupportedModelError(
            f"layer {entry['config'].get('name')!r} is a {class_name} ({module or 'custom'}) that "
            "tf-keras does not provide, so tfmot cannot wrap it; replace it with built-in layers "
            "or build the model with tf_keras and register the layer with tfmot."
        )
    config = _translate(entry["config"], class_name, cls)
    try:
        return cls.from_config(config)
    except (TypeError, ValueError) as error:
        raise UnsupportedModelError(
            f"layer {config.get('name')!r} ({class_name}) cannot be rebuilt in tf-keras: "
            f"{error}; build the model with tf_keras directly."
        ) from error


def _translate(config: dict[str, Any], class_name: str, cls: type) -> dict[str, Any]:
    config = {k: _plain(v, k) for k, v in config.items()}
    if class_name == "InputLayer":
        shape = config.pop("batch_shape", None)
        if shape is not None:
            config["batch_input_shape"] = shape
    if isinstance(config.get("dtype"), dict):
        config["dtype"] = config["dtype"].get("config", {}).get("name", "float32")
    accepted = _BASE_KWARGS | {
        name for klass in cls.__mro__ for name in inspect.signature(klass.__init__).parameters
    }
    accepted |= {"batch_input_shape"} if class_name == "InputLayer" else set()
    dropped = {k: v for k, v in config.items() if k not in accepted}
    meaningful = {k: v for k, v in dropped.items() if v not in (None, False, 0, {}, [])}
    if meaningful:
        raise UnsupportedModelError(
            f"layer {config.get('name')!r} ({class_name}) uses Keras 3 options tf-keras lacks "
            f"({', '.join(sorted(meaningful))}); remove them or build the model with tf_keras."
        )
    return {k: v for k, v in config.items() if k in accepted}


def _plain(value: Any, key: str = "") -> Any:
    """Keras 3 nested objects -> tf-keras's legacy ``{"class_name", "config"}`` form."""
    if isinstance(value, dict):
        if "class_name" in value and "config" in value and "module" in value:
            inner = value["config"] if isinstance(value["config"], dict) else {}
            if key.endswith("_initializer"):
                inner = {"seed": inner["seed"]} if inner.get("seed") is not None else {}
            return {"class_name": value["class_name"], "config": _plain(inner)}
        return {k: _plain(v, k) for k, v in value.items()}
    return [_plain(v) for v in value] if isinstance(value, list) else value


def _copy_weights(source: Any, target: Any) -> None:
    by_name = {layer.name: layer for layer in target.layers}
    for layer in source.layers:
        weights = layer.get_weights()
        twin = by_name.get(layer.name)
        if twin is None:
            if weights:
                raise UnsupportedModelError(
                    f"layer {layer.name!r} has no tf-keras twin to receive its weights."
                )
            continue
        expected = [tuple(w.shape) for w in twin.get_weights()]
        if expected != [tuple(w.shape) for w in weights]:
            raise UnsupportedModelError(
                f"layer {layer.name!r} ({type(layer).__name__}) stores its weights differently "
                "in tf-keras; build the model with tf_keras directly."
            )
        twin.set_weights(weights)
