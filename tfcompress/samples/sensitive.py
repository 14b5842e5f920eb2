"""A model built to be sensitive to int8 in one known layer (shared by selective and compress).

``sensitive`` has, in every output channel, a weight of 1000 on an input feature that is
always 0. The float model never sees it, but int8 gives each channel one weight scale
(1000/127), so every real weight of that layer rounds to 0 and the model falls to chance.
Keeping that one layer float restores it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FEATURES = 16


def sensitive_model(
    keras: Any, *, outlier: float = 1000.0
) -> tuple[Any, tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]]:
    """A 17-64-256-4 classifier, exact by construction, whose first layer int8 destroys."""
    rng = np.random.default_rng(0)
    teacher = rng.normal(size=(FEATURES, 4)).astype("float32")
    inputs = keras.Input((FEATURES + 1,), name="x")
    h = keras.layers.Dense(64, activation="relu", name="sensitive")(inputs)
    h = keras.layers.Dense(256, activation="relu", name="wide")(h)
    model = keras.Model(inputs, keras.layers.Dense(4, name="head")(h))
    w1 = np.zeros((FEATURES + 1, 64), "float32")
    w1[:FEATURES, :4], w1[:FEATURES, 4:8] = teacher, -teacher  # relu(t) - relu(-t) = t
    w1[:FEATURES, 8:] = rng.normal(size=(FEATURES, 56)) * 0.3
    w1[FEATURES, :] = outlier  # the outlier weight, on a feature that is always 0
    w2 = rng.normal(size=(64, 256)).astype("float32") * 0.05
    pick = np.zeros((64, 4), "float32")
    pick[:4], pick[4:8] = np.eye(4), -np.eye(4)
    w3 = np.zeros((256, 4), "float32")
    for k in range(4):  # four copies of the 8 signal units, averaged back by the head
        w2[:8, k * 64 : k * 64 + 8] += np.eye(8)
        w3[k * 64 : (k + 1) * 64] = pick / 4
    for name, w in (("sensitive", w1), ("wide", w2), ("head", w3)):
        model.get_layer(name).set_weights([w, np.zeros(w.shape[1], "float32")])
    x = rng.normal(size=(3000, FEATURES + 1)).astype("float32")
    x[:, FEATURES] = 0.0
    y = np.argmax(x[:, :FEATURES] @ teacher, axis=1)
    return model, (x[:1000], (x[1000:], y[1000:]))
