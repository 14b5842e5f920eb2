"""``benchmark(on=...)``: rows measured on the workers of a Dask scheduler, each a device.

A Raspberry Pi, a Jetson or a Coral host runs ``dask worker tcp://HOST:8786 --name pi5``
in the device install (``pip install 'tfcompress[device]'``: no TensorFlow). The caller
loads and checks every artifact and the data here, as a local run does; then, per device,
the artifacts and data travel once (scattered to that worker), and each (artifact, backend)
is one task pinned to it (:mod:`tfcompress.bench._on_device`), measured there in its
measurement worker under the run's time limit, one at a time per machine. The next task of
a device is sent when its previous one is back, so a device that leaves the scheduler (dies,
loses its network) costs the row it was measuring and the rows it had not started: they
become ``error:`` rows naming it, and the other devices finish. Each row says where it ran
(``device``), and the result carries each device's environment, read there.
"""

from __future__ import annotations

import logging
import platform
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tfcompress._compat.dask import TLSFiles, connect, is_dask_client, workers_now
from tfcompress.bench import _on_device, analysis
from tfcompress.bench.config import BenchmarkConfig
from tfcompress.bench.environment import Environment
from tfcompress.bench.result import BenchmarkRow, Device
from tfcompress.bench.rows import Artifact, row_status
from tfcompress.errors import InvalidInputError
from tfcompress.runtime.routing import Route

logger = logging.getLogger(__name__)

#: The device name of rows measured on this machine beside the workers (``--local``).
LOCAL = "local"
#: Seconds between looks at which workers are still connected.
POLL_SECONDS = 1.0
#: A worker missing from the scheduler's list counts as gone when it is still missing this
#: many seconds later (and a later look), never from one look.
GONE_AFTER_SECONDS = 2.0
_DETAILS = ("xnnpack", "accelerators", "fully_accelerated", "library", "device", "edgetpu_ops")


@dataclass
class Absence:
    """Whether a worker has left the scheduler: missing from its list, and still so later."""

    since: float | None = None  # when it was first missing from the list, in a row

    def gone(self, *, present: bool) -> bool:
        """One more look; True once the worker was missing for :data:`GONE_AFTER_SECONDS`."""
        if present:
            self.since = None
            return False
        now = time.monotonic()
        if self.since is None:
            self.since = now
            return False
        return now - self.since >= GONE_AFTER_SECONDS


@dataclass
class _DeviceRun:
    """One worker's share of the run: its payload, its queue of tasks, what came back."""

    address: str
    name: str
    jobs: deque[tuple[str, Route]]
    payload: Any = None
    future: Any = None
    job: tuple[str, Route] | None = None
    description: dict[str, Any] | None = None
    rows: list[BenchmarkRow] = field(default_factory=list)
    samples: int = 0
    gone: str | None = None  # why the device stopped answering
    absence: Absence = field(default_factory=Absence)
    left: int = 0  # the last rows, made errors when it left

    @property
    def busy(self) -> bool:
        return self.future is not None or (self.gone is None and bool(self.jobs))


def measure_on_devices(
    on: Any,
    prepared: Mapping[str, Artifact],
    routes: Mapping[str, Sequence[Route]],
    plan: BenchmarkConfig,
    *,
    here: Callable[[], tuple[list[BenchmarkRow], int]] | None = None,
    environment: Environment,
    tls: TLSFiles | None = None,
    on_row: Callable[[int], None] | None = None,
    on_devices: Callable[[int], None] | None = None,
    device: str | None = None,
) -> tuple[list[BenchmarkRow], int, tuple[Device, ...], list[str]]:
    """Measure every artifact on every worker of the scheduler ``on`` (and here, if asked).

    Args:
        on: A scheduler address (``tcp://HOST:8786``, ``tls://HOST:8786``) or a connected
            ``distributed.Client`` (left open).
        prepared: The artifacts, loaded, sized and matched with the data here.
        routes: Each artifact's backends (:func:`tfcompress.runtime.routing.plan_routes`).
        plan: Threads, batches, timing, options and the time limit of one measurement.
        here: Measures the rows on this machine too (``local=True``): its rows come first,
            as device ``"local"``.
        environment: This machine's environment (the ``"local"`` device's).
        tls: This client's TLS files for a ``tls://`` address given as a string.
        on_row: Called with the number of rows each time some are done (a progress bar).
        on_devices: Called once with the number of devices that will measure (the workers
            chosen, plus this machine with ``here``), before any row is measured.
        device: Measure on this worker only (its name); None: on every worker.

    Raises:
        InvalidInputError: The scheduler cannot be reached, has no workers (or none named
            ``device``), or an artifact
            is a Keras model or SavedModel (it runs on TensorFlow, which devices do not have).
    """
    for name, artifact in prepared.items():
        advice = "convert it first (tfcompress quantize MODEL --recipe float32 --out M.tflite)"
        refuse_keras(artifact.model, name, f"{advice} or leave it out")
    client = on if is_dask_client(on) else connect(str(on), tls=tls, flag="--on")
    try:
        workers = workers_of(client)
        if device is not None:
            workers = [pick_device(workers, device)]
        if on_devices is not None:
            on_devices(len(workers) + (here is not None))
        rows: list[BenchmarkRow] = []
        samples = 0
        devices: list[Device] = []
        if here is not None:
            with _on_device.machine_lock():  # a worker on this machine waits meanwhile
                local_rows, samples = here()
            rows += [replace(row, device=LOCAL) for row in local_rows]
            devices.append(
                Device(LOCAL, "", platform.node(), sys.executable, environment, _delegates(rows))
            )
        runs = [
            _DeviceRun(address, name, deque(_jobs(prepared, routes))) for address, name in workers
        ]
        _run_all(client, runs, prepared, routes, plan, on_row or (lambda _: None))
        _say_who_went_on(runs)
    finally:
        if not is_dask_client(on):
            client.close()
    for run in runs:
        rows += run.rows
        samples = max(samples, run.samples)
        devices.append(_device(run))
    return rows, samples, tuple(devices), _notes(rows, devices, environment)


def refuse_keras(model: Any, what: str, advice: str) -> None:
    """Refuse a Keras model or SavedModel sent to a device: devices have no TensorFlow."""
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.models.onnx import OnnxModel

    if not isinstance(model, TFLiteModel | OnnxModel):
        raise InvalidInputError(
            f"{what}: --on measures .tflite and .onnx files on the devices, which have no "
            f"TensorFlow to run a Keras model or SavedModel; {advice}."
        )


def scheduler_address(client: Any) -> str:
    """The scheduler's address as the client knows it, for messages."""
    return str(getattr(client.scheduler, "address", "the scheduler"))


def workers_of(client: Any) -> list[tuple[str, str]]:
    """``(address, name)`` of every worker, by name; refuses a scheduler without any.

    Raises:
        InvalidInputError: No workers, or one named ``"local"`` (this machine's rows' name).
    """
    address = scheduler_address(client)
    info = workers_now(client)
    workers = sorted(
        ((str(worker), str(details.get("name", worker))) for worker, details in info.items()),
        key=lambda pair: pair[1],
    )
    if not workers:
        raise InvalidInputError(
            f"the Dask scheduler at {address} has no workers: start one on each device with "
            f"`dask worker {address} --name NAME` (docs/devices.md)."
        )
    if LOCAL in {name for _, name in workers}:
        raise InvalidInputError(
            f"a worker of {address} is named {LOCAL!r}, the name of this machine's rows in the "
            "report; restart it with another --name."
        )
    return workers


def pick_device(workers: Sequence[tuple[str, str]], device: str | None) -> tuple[str, str]:
    """The ``(address, name)`` of the worker named ``device`` (None: the only one).

    Raises:
        InvalidInputError: No worker of that name, or several and none named.
    """
    if device is None and len(workers) == 1:
        return workers[0]
    chosen = [pair for pair in workers if pair[1] == device]
    if not chosen:
        names = ", ".join(name for _, name in workers)
        raise InvalidInputError(
            f"{'no device named ' + repr(device) if device else 'several devices'} on the "
            f"scheduler ({names}); name one of them (--device NAME)."
        )
    return chosen[0]


def _jobs(
    prepared: Mapping[str, Artifact], routes: Mapping[str, Sequence[Route]]
) -> list[tuple[str, Route]]:
    return [(name, route) for name in prepared for route in routes[name]]


def _run_all(
    client: Any,
    runs: list[_DeviceRun],
    prepared: Mapping[str, Artifact],
    routes: Mapping[str, Sequence[Route]],
    plan: BenchmarkConfig,
    on_row: Callable[[int], None],
) -> None:
    """Start every device, then hand each its next task as the last one comes back."""
    payload = _on_device.Payload(dict(prepared), plan)
    for run in runs:
        try:  # the artifacts and the data travel once to each device
            run.payload = client.scatter(
                payload, workers=[run.address], broadcast=False, hash=False
            )
            run.future = submit(client, run.address, f"describe-{run.name}", _on_device.describe)
        except Exception as error:  # the worker left before the run began
            _leave(run, f"could not receive the artifacts ({error_words(error)})", prepared, on_row)
    try:
        while any(run.busy for run in runs):
            # distributed.wait asks for the default client, which a CLI's is not: poll.
            waiting = [run.future for run in runs if run.future is not None]
            deadline = time.monotonic() + POLL_SECONDS
            while time.monotonic() < deadline and not any(f.done() for f in waiting):
                time.sleep(0.02)
            alive = set(workers_now(client))
            for run in runs:
                _step(client, run, alive, prepared, on_row)
    except BaseException:  # Ctrl-C: nothing is left running on the devices
        for run in runs:
            if run.future is not None:
                run.future.cancel()
        raise


def _step(
    client: Any,
    run: _DeviceRun,
    alive: set[str],
    prepared: Mapping[str, Artifact],
    on_row: Callable[[int], None],
) -> None:
    future = run.future
    if future is not None and future.status in ("finished", "error", "cancelled", "lost"):
        run.future = None
        if future.status == "finished":
            _arrived(run, future.result(), on_row)
        elif future.status in ("cancelled", "lost"):  # its worker, or what it was sent, is gone
            _leave(run, "left the scheduler (it died or lost its connection)", prepared, on_row)
        else:
            _failed(run, future, prepared, on_row)
    if run.gone is None and run.absence.gone(present=run.address in alive):
        if run.future is not None:
            run.future.cancel()
            run.future = None
        _leave(run, "left the scheduler (it died or lost its connection)", prepared, on_row)
    while (
        run.gone is None
        and run.absence.since is None  # not sent to a worker the scheduler does not list now
        and run.future is None
        and run.jobs
        and run.description is not None
    ):
        run.job = name, route = run.jobs.popleft()
        if route.skipped is not None:  # a backend that does not run this format: no task
            size = prepared[name].size
            run.rows.append(
                BenchmarkRow(name, route.backend, None, None, route.skipped, size, device=run.name)
            )
            run.job = None
            on_row(1)
            continue
        task = f"measure-{run.name}-{route.backend}"
        run.future = submit(
            client, run.address, task, _on_device.measure, run.payload, name, route.backend
        )


def submit(client: Any, address: str, task: str, function: Any, *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` on the worker at ``address`` only, under a key of its own."""
    key = f"tfcompress-{task}-{uuid.uuid4().hex[:8]}"
    return client.submit(
        function, *args, **kwargs, workers=[address], allow_other_workers=False, pure=False, key=key
    )


def _arrived(run: _DeviceRun, value: Any, on_row: Callable[[int], None]) -> None:
    if run.description is None:  # the first answer: the device describes itself
        run.description = value
        return
    rows, samples = value
    run.rows += [replace(row, device=run.name) for row in rows]
    run.samples = max(run.samples, int(samples))
    run.job = None
    on_row(len(rows))


def _failed(
    run: _DeviceRun, future: Any, prepared: Mapping[str, Artifact], on_row: Callable[[int], None]
) -> None:
    try:
        error = future.exception(timeout=POLL_SECONDS)
    except Exception as raised:  # cancelled, or lost with its worker
        error = raised
    if type(error).__name__ == "KilledWorker":
        _leave(run, "died while measuring (Dask: KilledWorker)", prepared, on_row)
        return
    if run.description is None:
        _leave(
            run,
            f"could not describe itself ({error_words(error)}); install the same tfcompress there "
            "(pip install 'tfcompress[device]')",
            prepared,
            on_row,
        )
        return
    name, route = run.job or ("?", Route("?"))
    status = f"error: on device {run.name}: {row_status(error).removeprefix('error: ')}"
    size = prepared[name].size if name in prepared else None
    run.rows.append(BenchmarkRow(name, route.backend, None, None, status, size, device=run.name))
    run.job = None
    on_row(1)


def _leave(
    run: _DeviceRun, why: str, prepared: Mapping[str, Artifact], on_row: Callable[[int], None]
) -> None:
    """The device is gone: the row it was measuring and the rows it had not begun are errors."""
    run.gone = why
    in_flight = run.job is not None
    unmeasured = ([run.job] if run.job is not None else []) + list(run.jobs)
    run.jobs.clear()
    run.job = None
    for number, (name, route) in enumerate(unmeasured):
        when = "while measuring this row" if number == 0 and in_flight else "before this row"
        status = f"error: device {run.name} ({run.address}) {why}, {when}"
        size = prepared[name].size
        run.rows.append(
            BenchmarkRow(name, route.backend, None, None, status, size, device=run.name)
        )
    run.left = len(unmeasured)
    logger.warning("device %s (%s) %s", run.name, run.address, why)
    on_row(len(unmeasured))


def _say_who_went_on(runs: Sequence[_DeviceRun]) -> None:
    """The rows of a device that left say which of the others finished: all, some or none."""
    for run in runs:
        others = [other for other in runs if other is not run]
        if run.gone is None or not run.left or not others:
            continue
        went_on = [other.name for other in others if other.gone is None]
        if len(went_on) == len(others):
            tail = "the other devices went on"
        elif went_on:
            tail = f"{', '.join(went_on)} went on"
        else:
            tail = "no other device finished either"
        run.rows[-run.left :] = [
            replace(row, status=f"{row.status}; {tail}") for row in run.rows[-run.left :]
        ]


def _device(run: _DeviceRun) -> Device:
    described = run.description or {}
    environment = described.get("environment")
    if not isinstance(environment, Environment):  # it never answered: nothing is known of it
        environment = Environment("unknown", "unknown", None, 0, 0, None, "unknown", "unknown")
    return Device(
        run.name,
        run.address,
        str(described.get("hostname", "unknown")),
        str(described.get("executable", "unknown")),
        environment,
        _delegates(run.rows),
    )


def _delegates(rows: Sequence[BenchmarkRow]) -> dict[str, str]:
    """Backend -> what loaded on the device, from its rows' details (or their status)."""
    said: dict[str, str] = {}
    for backend in dict.fromkeys(row.backend for row in rows):
        mine = [row for row in rows if row.backend == backend]
        loaded = next((row for row in mine if row.ok), None)
        if loaded is None:
            said[backend] = mine[0].status
            continue
        details = loaded.details
        parts = [f"{key} {details[key]}" for key in _DETAILS if key in details]
        if details.get("ops") is not None and details.get("delegated_ops") is not None:
            parts.append(f"{details['delegated_ops']} of {details['ops']} ops delegated")
        said[backend] = "loaded" + (f": {', '.join(parts)}" if parts else "")
    return said


def _notes(
    rows: list[BenchmarkRow], devices: Sequence[Device], environment: Environment
) -> list[str]:
    """Each device's findings (int8 vs float32 with its own CPU's flags), said per device."""
    notes = []
    ours = environment.versions.get("tfcompress", "unknown")  # this machine's
    for device in devices:
        mine = [row for row in rows if row.device == device.name]
        found = [
            *analysis.int8_notes(mine, device.environment, on_device=device.name != LOCAL),
            *analysis.recipe_notes(mine),
            *analysis.latency_notes(mine),
        ]
        notes += [f"on {device.name}: {note}" for note in found]
        versions = device.environment.versions
        if device.name != LOCAL and versions.get("tfcompress") not in (None, ours):
            notes.append(
                f"{device.name} runs tfcompress {versions['tfcompress']}, this machine "
                f"{ours}: install the same version on both"
            )
    return notes


def error_words(error: BaseException | None) -> str:
    """``error`` for a message: its type and first 200 characters, on one line."""
    if error is None:
        return "no reason given"
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"
