"""``gate --on``: a gate's candidate run on a device, a worker of a Dask scheduler.

The reference runs here; the candidate and the samples travel to the worker (scattered, so
the scheduler never holds them) and run there as a local candidate runs
(:func:`tfcompress.bench.paired.run_model`: in a measurement worker on the device, under
the time limit), holding the device's measurement lock.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from tfcompress._compat.dask import connect, is_dask_client, workers_now
from tfcompress.bench import _on_device
from tfcompress.bench.devices import Absence, pick_device, scheduler_address, workers_of
from tfcompress.errors import InvalidInputError


def device_names(client: Any) -> list[str]:
    """The names of the scheduler's workers, sorted (each one a device).

    Raises:
        InvalidInputError: The scheduler has no workers.
    """
    return [name for _, name in workers_of(client, scheduler_address(client))]


def run_on_device(
    on: Any,
    model: Any,
    dataset: Any,
    reference: Any,
    *,
    device: str | None = None,
    **options: Any,
) -> Any:
    """Run a gate's candidate on one device: :func:`tfcompress.bench.paired.run_model` there.

    The model and the samples travel to the worker with the task; the run holds the
    device's measurement lock and runs in a measurement worker there, under the time limit.

    Raises:
        InvalidInputError: No such device (or several and none named), a Keras candidate,
            or the device left the scheduler before it answered.
    """
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.onnx import OnnxModel

    if not isinstance(model, TFLiteModel | OnnxModel):
        raise InvalidInputError(
            "--on runs a .tflite or .onnx candidate on the device, which has no TensorFlow for "
            "a Keras model or SavedModel; gate the converted file."
        )
    client = on if is_dask_client(on) else connect(str(on), flag="--on")
    try:
        address, name = _pick(client, device)
        # Scattered to the worker, not inlined in the task: the scheduler never holds them.
        sent = client.scatter([model, dataset], workers=[address], broadcast=False, hash=False)
        future = client.submit(
            _on_device.run_model,
            *sent,
            reference,
            **options,
            workers=[address],
            allow_other_workers=False,
            pure=False,
            key=f"tfcompress-gate-{name}-{uuid.uuid4().hex[:8]}",
        )
        absence = Absence()
        while not future.done():
            time.sleep(0.05)
            if absence.gone(present=address in workers_now(client)):
                future.cancel()
                break
        if future.status != "finished" and future.status != "error":
            raise InvalidInputError(
                f"device {name} ({address}) left the scheduler (it died or lost its connection) "
                "before the candidate's outputs came back; check the device and run again."
            )
        run = future.result()
    finally:
        if not is_dask_client(on):
            client.close()
    return replace(run, backend=f"{run.backend} on {name}")


def _pick(client: Any, device: str | None) -> tuple[str, str]:
    return pick_device(workers_of(client, scheduler_address(client)), device)
