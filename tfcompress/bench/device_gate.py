"""``gate --on``: a gate's candidate run on a device, a worker of a Dask scheduler.

The reference runs here; the candidate and the samples travel to the worker (scattered, so
the scheduler never holds them) and run there as a local candidate runs
(:func:`tfcompress.bench.paired.run_model`: in a measurement worker on the device, under
the time limit), holding the device's measurement lock.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from tfcompress._compat.dask import connect, is_dask_client, workers_now
from tfcompress.bench import _on_device
from tfcompress.bench.devices import (
    Absence,
    error_words,
    pick_device,
    refuse_keras,
    submit,
    workers_of,
)
from tfcompress.errors import TFCompressError


class DeviceRunError(TFCompressError):
    """The candidate's run failed on a device (it crashed there, its time limit, it left).

    ``gate --on`` makes it that device's error row and gates on the other devices.
    """


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
        InvalidInputError: No such device (or several and none named), a Keras candidate.
        DeviceRunError: The run failed on the device (what it raised there: a crash of its
            measurement worker, its time limit), or the device left the scheduler.
    """
    refuse_keras(model, "the candidate", "gate the converted file")
    client = on if is_dask_client(on) else connect(str(on), flag="--on")
    try:
        address, name = pick_device(workers_of(client), device)
        try:  # what fails from here on is the device's: its row, not the command's end
            # Scattered to the worker, not inlined in the task: the scheduler never holds them.
            sent = client.scatter([model, dataset], workers=[address], broadcast=False, hash=False)
            future = submit(
                client, address, f"gate-{name}", _on_device.run_model, *sent, reference, **options
            )
            absence = Absence()
            while not future.done():
                time.sleep(0.05)
                if absence.gone(present=address in workers_now(client)):
                    future.cancel()
                    break
            left = future.status not in ("finished", "error")
            run = None if left else future.result()
        except Exception as error:  # what the device raised: its crash, its time limit...
            cause = str(error) if isinstance(error, TFCompressError) else error_words(error)
            raise DeviceRunError(f"on device {name}: {cause}") from error
        if run is None:
            raise DeviceRunError(
                f"on device {name}: it ({address}) left the scheduler (it died or lost its "
                "connection) before the candidate's outputs came back; check it and run again."
            )
    finally:
        if not is_dask_client(on):
            client.close()
    return replace(run, backend=f"{run.backend} on {name}")
