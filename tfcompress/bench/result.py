"""The benchmark result: one row per artifact x backend x threads x batch, plus the machine."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tfcompress.bench.environment import Environment
from tfcompress.bench.size import SizeInfo
from tfcompress.bench.stats import LatencyStats
from tfcompress.report.table import format_table

if TYPE_CHECKING:
    from tfcompress.bench.config import BenchmarkConfig

OK = "ok"


@dataclass(frozen=True)
class BenchmarkRow:
    """One measurement: an artifact on a backend at a thread count and batch size.

    ``status`` is ``"ok"``, ``"unavailable: <reason>"`` (backend missing here, or not with
    this setting, e.g. a thread count TensorFlow can no longer switch to), ``"skipped:
    <reason>"`` (a backend the user named does not run this artifact's format) or
    ``"error: <reason>"`` (this row failed; the other rows are unaffected). Latency is per
    run of ``batch`` samples (one call of the model, or :attr:`calls` calls of its static
    batch); :attr:`latency_per_sample_ms` is the median per sample, ``throughput_per_s`` the
    samples per second at that same median (their product is 1000), and ``speedup`` (``x
    ref``) compares medians per sample. The mean is in ``latency.mean`` (``mean ms``).

    ``init_ms`` is the time from the artifact's bytes to a ready runner: creating this
    row's runner (interpreter build and allocation, ONNX Runtime session, GPU compilation,
    SavedModel load) plus, for a Keras file, deserializing it. It is None when a Keras
    model was passed already loaded, since its load time is unknown.
    ``rss_growth_mb`` is this row's own memory: the resident memory the process gained from
    just before its runner was created until its timing ended (the runner, its buffers, and
    those of the accuracy pass and earlier batch sizes on it; it can be near 0 or negative
    when memory freed by earlier rows was reused). ``process_peak_rss_mb`` is the whole
    process's high-water mark after this row (Python, TensorFlow, every model so far): it
    only grows. Both are measured where the row ran: in its worker process for the native
    runtimes (``backend_details["process"] == "worker"``), in this process for TensorFlow.
    A model whose signature fixes the batch computes whole calls of it: the row's ``batch``
    is the next multiple of that static batch (a batch of 1 asked of a file fixed at 8 is
    timed as one call of 8 samples; ``backend_details["batch_asked"]`` keeps what was
    asked), ``backend_details`` has ``static_batch`` and ``calls``, and the table's status
    says ``ok (4 calls of 8)`` when a batch took several. ``device`` names the Dask worker
    the row ran on (``benchmark --on``; ``"local"`` for this machine beside them), None when
    the whole run was local; :attr:`BenchmarkResult.devices` holds each one's environment.
    ``op_profile`` is the row's per-op profile with ``profile_ops`` (``benchmark
    --profile-ops``; :mod:`tfcompress.bench.op_profile`), ``{"unavailable": why}`` where the
    backend has none, None without it.

    Example:
        >>> BenchmarkRow("m.tflite", "gpu", None, None, "unavailable: no GPU").ok
        False
    """

    artifact: str
    backend: str
    threads: int | None
    batch: int | None
    status: str = OK
    size: SizeInfo | None = None
    init_ms: float | None = None
    first_inference_ms: float | None = None
    latency: LatencyStats | None = None
    accuracy: float | None = None
    process_peak_rss_mb: float | None = None
    rss_growth_mb: float | None = None
    details: dict[str, Any] = field(default_factory=dict)
    size_ratio: float | None = None
    speedup: float | None = None
    device: str | None = None
    op_profile: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True when the row was measured."""
        return self.status == OK

    @property
    def throughput_per_s(self) -> float | None:
        """Samples per second at this batch size, from the median (batch / median latency).

        The same statistic as :attr:`latency_per_sample_ms`: on a noisy run the mean can be
        twice the median, and the two columns would disagree.
        """
        if self.latency is None or self.batch is None or self.latency.p50 <= 0:
            return None
        return self.batch * 1000.0 / self.latency.p50

    @property
    def calls(self) -> int:
        """Calls of the model per timed run (more than 1: a static batch smaller than it)."""
        calls = self.details.get("calls")
        return calls if isinstance(calls, int) and calls > 0 else 1

    @property
    def samples_per_call(self) -> int | None:
        """Samples the model computes in one call: its static batch, else the row's batch."""
        static = self.details.get("static_batch")
        return static if isinstance(static, int) and static > 0 else self.batch

    @property
    def latency_per_call_ms(self) -> float | None:
        """Median latency of one call of the model (the timed run over its calls)."""
        return None if self.latency is None else self.latency.p50 / self.calls

    @property
    def latency_per_sample_ms(self) -> float | None:
        """Median latency per sample: what ``x ref`` and latency objectives compare."""
        if self.latency is None or not self.batch:
            return None
        return self.latency.p50 / self.batch

    def to_dict(self) -> dict[str, Any]:
        """Plain data for reports (the JSON row of :data:`tfcompress.report.schema`)."""
        size = self.size.to_dict() if self.size else {}
        return {
            "artifact": self.artifact,
            "backend": self.backend,
            "threads": self.threads,
            "batch": self.batch,
            "status": self.status,
            "size_bytes": size.get("file_bytes"),
            **{key: size.get(key) for key in ("gzip_bytes", "params", "macs", "ops", "precision")},
            "delegated_ops": self.details.get("delegated_ops"),
            "init_ms": _round(self.init_ms),
            "first_inference_ms": _round(self.first_inference_ms),
            "latency_ms": self.latency.to_dict() if self.latency else None,
            "samples_per_call": self.samples_per_call if self.latency else None,
            "calls": self.calls if self.latency else None,
            "latency_per_call_ms": _round(self.latency_per_call_ms),
            "latency_per_sample_ms": _round(self.latency_per_sample_ms, 6),
            "throughput_per_s": _round(self.throughput_per_s, 2),
            "accuracy": _round(self.accuracy, 6),
            "rss_growth_mb": _round(self.rss_growth_mb, 1),
            "process_peak_rss_mb": _round(self.process_peak_rss_mb, 1),
            "size_ratio": _round(self.size_ratio, 4),
            "speedup": _round(self.speedup, 4),
            "backend_details": dict(self.details),
            "device": self.device,
            "op_profile": self.op_profile,
        }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(float(value), digits)


@dataclass(frozen=True)
class Device:
    """Where rows of ``benchmark --on`` ran: a Dask worker, described on it.

    Attributes:
        name: The worker's name (``dask worker ... --name pi5``), or ``"local"``.
        address: The worker's address (``""`` for this machine).
        hostname: The machine's network name, read there.
        executable: The Python interpreter that measured (the worker's, not the caller's).
        environment: CPU model and flags, cores, architecture, OS and versions, read there.
        delegates: Backend -> what loaded there: ``"loaded: ..."`` with what its rows said
            (XNNPACK, ops delegated, the Edge TPU library, accelerators) or the row's
            ``unavailable:``/``error:`` status.
    """

    name: str
    address: str
    hostname: str
    executable: str
    environment: Environment
    delegates: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the report's ``devices`` object."""
        return {
            "address": self.address,
            "hostname": self.hostname,
            "executable": self.executable,
            "environment": self.environment.to_dict(),
            "delegates": dict(self.delegates),
        }

    def __str__(self) -> str:
        where = f" at {self.address}" if self.address else ""
        lines = [f"Device {self.name} ({self.hostname}{where}, {self.executable})"]
        lines += [f"  {line}" for line in str(self.environment).splitlines()]
        lines += [f"  {backend}: {said}" for backend, said in self.delegates.items()]
        return "\n".join(lines)


@dataclass(frozen=True)
class BenchmarkResult:
    """Everything one :func:`tfcompress.benchmark` call measured, and where.

    Attributes:
        rows: One per artifact x backend x threads x batch (failed ones included).
        environment: The machine and library versions.
        settings: The options the run used (runs, min_seconds, warm-up...).
        metric: Name of the accuracy metric (rows carry ``accuracy`` when data had labels).
        samples: Labelled samples accuracy was computed on (0 when none).
        reference: Artifact the ratios compare to (the float32 one when present).
        notes: Findings in words, e.g. whether int8 was faster than float32 here and why.
        report_files: Files written by :meth:`save` (or ``report_dir``).
        devices: Where rows ran with ``on=`` (``benchmark --on``): each Dask worker with the
            environment read on it; empty for a local run (``environment`` is this machine).
        config: The :class:`~tfcompress.bench.config.BenchmarkConfig` the run measured with
            (``to_dict()["config"]``; :meth:`BenchmarkConfig.from_dict` reads it back);
            None for a result built by hand.

    Example:
        >>> result = tfcompress.benchmark(["m.tflite", "m_int8.tflite"], runs=20)  # doctest: +SKIP
        >>> print(result)  # doctest: +SKIP
    """

    rows: tuple[BenchmarkRow, ...]
    environment: Environment
    settings: dict[str, Any]
    metric: str = "accuracy"
    samples: int = 0
    reference: str | None = None
    notes: tuple[str, ...] = ()
    report_files: tuple[Path, ...] = ()
    devices: tuple[Device, ...] = ()
    config: BenchmarkConfig | None = None

    def __getitem__(self, artifact: str) -> list[BenchmarkRow]:
        rows = [r for r in self.rows if r.artifact == artifact]
        if not rows:
            raise KeyError(f"no artifact named {artifact!r}; have {self.artifacts}")
        return rows

    @property
    def artifacts(self) -> list[str]:
        """Artifact names, in order."""
        return list(dict.fromkeys(r.artifact for r in self.rows))

    @property
    def failed(self) -> list[BenchmarkRow]:
        """Rows that are not ``ok`` (unavailable, skipped or error)."""
        return [r for r in self.rows if not r.ok]

    def to_dict(self) -> dict[str, Any]:
        """The versioned report (see :mod:`tfcompress.report.schema`)."""
        from tfcompress.report.schema import SCHEMA, SCHEMA_VERSION

        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "environment": self.environment.to_dict(),
            "settings": dict(self.settings),
            "metric": self.metric,
            "samples": self.samples,
            "reference": self.reference,
            "notes": list(self.notes),
            "rows": [r.to_dict() for r in self.rows],
            "devices": {d.name: d.to_dict() for d in self.devices},
            "config": None if self.config is None else self.config.to_dict(),
        }

    def save(
        self,
        directory: str | os.PathLike[str],
        *,
        formats: Sequence[str] = ("json", "csv", "md", "png"),
        overwrite: bool = False,
    ) -> BenchmarkResult:
        """Write the report files into ``directory`` (created when missing).

        Like every tfcompress output, an existing report file is replaced only with
        ``overwrite``; every file is checked before the first one is written. ``png`` plots
        need matplotlib. The copy of this result that comes back lists the files in
        ``report_files``.

        Raises:
            MissingDependencyError: ``png`` asked for without matplotlib.
            InvalidInputError: Unknown format.
            OutputExistsError: Report files exist there and ``overwrite`` is False.

        Example:
            >>> saved = result.save("reports", formats=("json", "md"))  # doctest: +SKIP
            >>> saved.report_files  # doctest: +SKIP
            (PosixPath('reports/benchmark.json'), PosixPath('reports/benchmark.md'))
        """
        from dataclasses import replace

        from tfcompress.report.writers import write_report

        files = write_report(self, Path(directory), formats=formats, overwrite=overwrite)
        return replace(self, report_files=tuple(files))

    def table(self, *, markdown: bool = False) -> str:
        """The rows as an aligned text (or Markdown) table."""
        header = ["artifact", "backend", "thr", "batch", "status", "size", "gzip", "prec"]
        header += ["init ms", "p50 ms", "mean ms", "p90 ms", "ms/sample", "samples/s", "x ref"]
        header += ["peak MB"]  # the measuring process's high-water mark (process_peak_rss_mb)
        header += [self.metric] if self.samples else []
        rows = [_cells(r, with_accuracy=bool(self.samples)) for r in self.rows]
        if self.devices:  # benchmark --on: where each row ran comes first
            header = ["device", *header]
            rows = [[r.device or "-", *cells] for r, cells in zip(self.rows, rows, strict=True)]
        return format_table(header, rows, markdown=markdown)

    def side_by_side(self, *, markdown: bool = False) -> str:
        """Median latency (ms) of each setting, one column per device (``benchmark --on``).

        A cell is the row's p50, or its status (``error``, ``unavailable``...) when it was
        not measured there; ``-`` where that device has no such row.
        """
        names = [d.name for d in self.devices]
        cells: dict[tuple[Any, ...], dict[str, str]] = {}
        # A row with no setting (a device lost before it measured anything) stands for every
        # setting of its artifact and backend, so it fills their cells instead of a line.
        whole = [r for r in self.rows if r.threads is None and r.batch is None]
        for row in (r for r in self.rows if r not in whole):
            key = (row.artifact, row.backend, row.threads, row.batch)
            cells.setdefault(key, {})[row.device or "-"] = _median_cell(row)
        for row in whole:
            keys = [k for k in cells if k[:2] == (row.artifact, row.backend)]
            for key in keys or [(row.artifact, row.backend, None, None)]:
                cells.setdefault(key, {}).setdefault(row.device or "-", _median_cell(row))
        header = ["artifact", "backend", "thr", "batch", *(f"p50 ms {n}" for n in names)]
        body = [
            [a, b, "-" if t is None else str(t), "-" if n is None else str(n)]
            + [by.get(name, "-") for name in names]
            for (a, b, t, n), by in cells.items()
        ]
        return format_table(header, body, markdown=markdown)

    def __str__(self) -> str:
        if self.devices:
            parts = [self.table(), "", self.side_by_side(), ""]
            parts += [str(device) for device in self.devices]
        else:
            parts = [self.table(), "", str(self.environment)]
        from tfcompress.bench.op_profile import top_ops

        profiles = top_ops(self.rows)
        parts += ["", *profiles] if profiles else []
        if self.notes:
            parts += ["", *(f"* {note}" for note in self.notes)]
        if self.report_files:
            parts += ["", "Reports: " + ", ".join(str(p) for p in self.report_files)]
        return "\n".join(parts)


def _cells(row: BenchmarkRow, *, with_accuracy: bool) -> list[str]:
    def num(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    size = row.size
    status = row.status
    if row.ok and row.calls > 1:  # a static batch: said on the row
        status = f"ok ({row.calls} calls of {row.samples_per_call})"
    cpu_ops = row.details.get("cpu_ops")
    if row.ok and row.details.get("fully_accelerated") is False and cpu_ops:
        # a GPU row that ran in part on the CPU: the ops it left there, said on the row
        shown = sorted({str(op).split(" ", 1)[0].rstrip(":") for op in cpu_ops})
        status = f"{status}, on CPU: {','.join(shown)}"
    status = status if len(status) <= 60 else status[:57] + "..."
    cells = [
        row.artifact,
        row.backend,
        num(row.threads, "d"),
        num(row.batch, "d"),
        status,
        _bytes(size.file_bytes) if size else "-",
        _bytes(size.gzip_bytes) if size else "-",
        size.precision if size else "-",
        num(row.init_ms, ".1f"),
        num(row.latency.p50 if row.latency else None, ".3f"),
        num(row.latency.mean if row.latency else None, ".3f"),
        num(row.latency.p90 if row.latency else None, ".3f"),
        num(row.latency_per_sample_ms, ".4f"),
        num(row.throughput_per_s, ".1f"),
        num(row.speedup, ".2f"),
        num(row.process_peak_rss_mb, ".0f"),
    ]
    if with_accuracy:
        cells.append("-" if row.accuracy is None else f"{row.accuracy:.2%}")
    return cells


def _bytes(count: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def _median_cell(row: BenchmarkRow) -> str:
    """A side-by-side cell: the row's p50 in ms, or its status (``error``...) when unmeasured."""
    return f"{row.latency.p50:.3f}" if row.ok and row.latency else row.status.split(":")[0]
