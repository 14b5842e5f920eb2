"""Latency measured on one device: ``compress --on`` and ``select --on`` time candidates there.

A search picks one worker of a Dask scheduler (``--device NAME``, or the only one) when it
starts, and every latency of the search is measured there with
:func:`tfcompress.benchmark` (``on=``, ``device=``): the ``.tflite`` travels to the worker,
runs in a measurement worker on the device under the run's time limit, holding the device's
measurement lock. One device per search: latencies from several machines would not rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfcompress._compat.dask import TLSFiles, connect, is_dask_client


@dataclass
class LatencyDevice:
    """The worker a search times on, and the client that reaches it.

    Attributes:
        client: The connected ``distributed.Client``.
        name: The worker's name (``dask worker ... --name pi5``).
        address: The worker's address.
        scheduler: The scheduler's address.
        owned: The client was opened here (closed by :meth:`close`), not passed in.
        environment: The device's environment, read there by the latest timing (None
            before the first).
    """

    client: Any
    name: str
    address: str
    scheduler: str
    owned: bool = False
    environment: Any = None

    @classmethod
    def open(
        cls, on: Any, device: str | None = None, *, tls: TLSFiles | None = None
    ) -> LatencyDevice:
        """Connect to ``on`` (an address or a ``distributed.Client``) and pick the device.

        Raises:
            InvalidInputError: An unreachable or malformed address, a scheduler without
                workers, no worker named ``device``, or several and none named.
        """
        from tfcompress.bench.devices import pick_device, scheduler_address, workers_of

        owned = not is_dask_client(on)
        client = connect(str(on), tls=tls, flag="--on") if owned else on
        try:
            address, name = pick_device(workers_of(client), device)
        except BaseException:
            if owned:
                client.close()
            raise
        return cls(client, name, address, scheduler_address(client), owned)

    def close(self) -> None:
        """Close the client when it was opened here."""
        if self.owned:
            self.client.close()

    def __enter__(self) -> LatencyDevice:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def to_dict(self) -> dict[str, str]:
        """``name``, ``address`` and ``scheduler``, for reports."""
        return {"name": self.name, "address": self.address, "scheduler": self.scheduler}


@dataclass(frozen=True)
class Timed:
    """One artifact's latency row: the median per sample, or why there is none.

    Attributes:
        latency_ms: Median (p50) latency per sample in ms; None when the row has none.
        status: The row's status (``ok``, ``unavailable: ...``, ``error: ...``).
        device: The worker that measured it; None: this machine.
        environment: Where it was measured, read there.
        hostname: That machine's network name (None: this machine).
        macs: The harness's multiply-accumulate count of one sample (None: not counted).
        spread_ms: The median's interval, per sample: how far it lies above the fastest run
            (p50 - min; None when the row has no latency). Load only adds time, so the
            file's own cost lies between the two.
        op_profile: The row's per-op profile, when asked for (``profile_ops``).
    """

    latency_ms: float | None
    status: str
    device: str | None
    environment: Any
    hostname: str | None = None
    macs: int | None = None
    spread_ms: float | None = None
    op_profile: dict[str, Any] | None = None


def time_tflite(
    content: bytes,
    *,
    backend: str,
    threads: int,
    name: str,
    runs: int,
    min_seconds: float,
    warmup_runs: int = 1,
    warmup_seconds: float = 0.5,
    where: LatencyDevice | None = None,
    profile_ops: bool = False,
) -> Timed:
    """Time a ``.tflite`` at batch 1 on ``backend``: here, or on ``where``'s device."""
    from tfcompress.bench.harness import benchmark
    from tfcompress.models import TFLiteModel

    result = benchmark(
        {name: TFLiteModel(content, label=name, verified=True)},
        backends=(backend,),
        threads=(threads,),
        batch_sizes=(1,),
        runs=runs,
        min_seconds=min_seconds,
        warmup_runs=warmup_runs,
        warmup_seconds=warmup_seconds,
        on=None if where is None else where.client,
        device=None if where is None else where.name,
        profile_ops=profile_ops,
    )
    timed = [row for row in result.rows if row.latency_per_sample_ms is not None]
    row = timed[0] if timed else (result.rows[0] if result.rows else None)
    latency = None if not timed else float(timed[0].latency_per_sample_ms or 0.0)
    profile = None if row is None else row.op_profile
    spread = None
    if timed and timed[0].latency is not None and timed[0].latency.p50 > 0 and latency:
        stats = timed[0].latency  # per call: scaled to per sample as the median is
        spread = (stats.p50 - stats.min) * latency / stats.p50
    status = "no row" if row is None else row.status
    macs = None if row is None or row.size is None else row.size.macs
    if where is None:
        return Timed(latency, status, None, result.environment, None, macs, spread, profile)
    device = next((d for d in result.devices if d.name == where.name), None)
    if device is not None:
        where.environment = device.environment
    hostname = None if device is None else device.hostname
    return Timed(latency, status, where.name, where.environment, hostname, macs, spread, profile)
