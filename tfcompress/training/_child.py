"""What a fine-tuning call runs in its child process (:mod:`tfcompress._child`).

:func:`tfcompress.training.isolation.run_isolated` hands :func:`run_request` a request: the
technique, its config as JSON data (``config.to_dict()``), the model as a file, the data
(already loaded and checked in the caller) and the gate. Here the config is read back
(:func:`~tfcompress.training.configs.config_from_dict`), the model is loaded, the technique
runs in this (child) process, and the :class:`~tfcompress.training.result.TrainingResult`
goes back without ``keras_model`` (the fine-tuned Keras model stays here). A native crash
kills only the child; the caller reads the signal (:class:`~tfcompress.errors.NativeCrashError`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any


def run_request(request: dict[str, Any]) -> Any:
    """Read the config, load the model, run the technique here, return its result without Keras."""
    from tfcompress.models import load_model
    from tfcompress.training.cluster import cluster
    from tfcompress.training.configs import config_from_dict
    from tfcompress.training.prune import prune
    from tfcompress.training.qat import qat

    verbs = {"qat": qat, "prune": prune, "cluster": cluster}
    technique = request["technique"]
    config = config_from_dict(technique, request["config"])
    model = load_model(request["model"], safe_mode=request["safe_mode"])
    result = verbs[technique](model, config=config, isolate=False, **request["options"])
    return replace(result, keras_model=None)
