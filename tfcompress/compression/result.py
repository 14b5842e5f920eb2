"""CompressionResult: the chosen artifact, every attempt, and why the search stopped."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tfcompress._files import PathLike, write_bytes_atomic
from tfcompress.compression.attempts import Attempt, row_header
from tfcompress.errors import GateFailedError
from tfcompress.targets.base import get_target


@dataclass(frozen=True)
class CompressionResult:
    """What :func:`tfcompress.compress` found.

    Attributes:
        chosen: The best passing attempt (None when nothing passed).
        model_content: Its ``.tflite`` bytes (None when nothing passed).
        attempts: Every attempt, in the order tried.
        objective: ``"size"`` or ``"latency"``.
        target: The registered target searched for (``"cpu"``, ``"gpu"``, ``"edgetpu"``...).
        float32_bytes: Size of the plain float32 ``.tflite`` (the baseline).
        float32_gzip_bytes: Its gzip size.
        gate: The gate's settings (metric, thresholds, mode, backend), as data.
        stop_reason: Why the search stopped, in one line.
        interrupted: Ctrl-C stopped the search (the best so far is returned).
        sensitive_layers: Layers ranked by quantization sensitivity, most sensitive first
            (empty when selective quantization was not needed).
        findings: Sentences computed from the measurements (e.g. int8 slower than float here).
        advice: What to try next, with the numbers (when nothing passed).
        seconds: Wall time of the search.
        threads: CPU threads of gates and latency.
        config: The :class:`~tfcompress.compression.config.CompressConfig` the search ran
            with (``"config"`` in its JSON, which ``CompressConfig.from_dict`` reads back).
        device: Where the latencies were measured with ``on=`` (``--on``): the worker's
            ``name`` and ``address`` and the ``scheduler``'s; None: this machine.
        float32_latency_ms: The baseline's median latency per sample, timed in the same run
            on ``latency_backend`` (None: nothing was timed).
        baseline: What that baseline is: ``"float32"`` (the converter's float32 file) or
            ``"the input .tflite"`` (a ``.tflite`` input: the file given).
        baseline_bytes: The baseline's size, which sizes are compared to (``size_ratio``;
            nothing larger is chosen): the float32 file's, or a ``.tflite`` input's own
            (a float16 file is not compared to its float32 form). 0: ``float32_bytes``.
        latency_backend: The backend every latency was measured on (None: not timed).
        max_slowdown: The slowdown limit the search applied (None: nothing was timed).

    Example:
        >>> result = tfcompress.compress(model, representative_data=calib,
        ...     eval_data=test)  # doctest: +SKIP
        >>> result.chosen.name, result.chosen.gzip_bytes  # doctest: +SKIP
        ('int8', 24511)
    """

    chosen: Attempt | None
    model_content: bytes | None = field(repr=False)
    attempts: tuple[Attempt, ...]
    objective: str
    target: str
    float32_bytes: int
    float32_gzip_bytes: int
    gate: dict[str, Any]
    stop_reason: str
    interrupted: bool = False
    sensitive_layers: tuple[str, ...] = ()
    findings: tuple[str, ...] = ()
    advice: tuple[str, ...] = ()
    seconds: float = 0.0
    threads: int = 1
    config: Any = None
    device: dict[str, str] | None = None
    float32_latency_ms: float | None = None
    baseline: str = "float32"
    baseline_bytes: int = 0
    latency_backend: str | None = None
    max_slowdown: float | None = None

    @property
    def passed(self) -> bool:
        """An artifact passed the gate."""
        return self.chosen is not None

    @property
    def best_attempt(self) -> Attempt | None:
        """The chosen attempt, or the one closest to passing when none passed."""
        if self.chosen is not None:
            return self.chosen
        judged = [
            a
            for a in self.attempts
            if a.value is not None and a.threshold is not None and not (a.gate or {}).get("passed")
        ]
        mode = str(self.gate.get("mode", "strict"))
        return min(judged, key=lambda a: shortfall(a, mode), default=None)

    def save(self, path: PathLike, *, overwrite: bool = False) -> Path:
        """Write the chosen ``.tflite`` atomically.

        Raises:
            GateFailedError: Nothing passed the gate, so there is nothing to write.
            OutputExistsError: ``path`` exists and ``overwrite`` is False.
        """
        if self.model_content is None:
            raise GateFailedError(
                f"no attempt passed the gate ({len(self.attempts)} tried); nothing to save: "
                + (self.advice[0] if self.advice else "relax the gate or pass train_data.")
            )
        return write_bytes_atomic(path, self.model_content, overwrite=overwrite)

    def write_report(self, directory: PathLike, *, overwrite: bool = False) -> list[Path]:
        """:func:`~tfcompress.compression.report.write_compress_report` of this result."""
        from tfcompress.compression.report import write_compress_report

        return write_compress_report(self, directory, overwrite=overwrite)

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``chosen``, ``attempts``, the gate, baseline sizes, why it stopped."""
        chosen = self.chosen.to_dict() if self.chosen else None
        base, _ = self.size_baseline
        if chosen is not None and base and self.chosen is not None:
            size = self.chosen.size_bytes or 0
            chosen["size_ratio"] = round(size / base, 4)  # against the baseline's size
        plain = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "model_content"}
        return {
            "passed": self.passed,
            **{k: list(v) if isinstance(v, tuple) else v for k, v in plain.items()},
            "chosen": chosen,
            "attempts": [a.to_dict() for a in self.attempts],
            "seconds": round(self.seconds, 2),
            "config": None if self.config is None else self.config.to_dict(),
            "baseline_bytes": base,
        }

    def table(self, *, markdown: bool = False) -> str:
        """The attempts table."""
        from tfcompress.report.table import format_table

        backend = self.latency_backend
        if backend is not None and self.device:
            backend = f"{backend} on {self.device.get('name', 'the device')}"
        if backend is not None and not get_target(self.target).judges_latency:
            backend = f"{backend}, host"  # no device figure: shown, never judged
        header = row_header(backend, "float32" if self.baseline == "float32" else "input")
        rows = [a.row(self.float32_latency_ms) for a in self.attempts]
        return format_table(header, rows, markdown=markdown)

    def __str__(self) -> str:
        lines = [self.table(), ""]
        if self.chosen is not None:
            c = self.chosen
            base, who = self.size_baseline
            ratio = (c.size_bytes or 0) / base if base else 0.0
            lines.append(
                f"chosen: {c.name} ({self.objective}, target {self.target}): "
                f"{c.size_bytes:,} B ({ratio:.2f}x {who} {base:,} B), "
                f"gzip {c.gzip_bytes:,} B; {c.why}"
            )
            if c.float_layers:
                lines.append(f"kept in float: {', '.join(c.float_layers)}")
            lines += filter(None, [self.speed(c)])  # none when not timed
        else:
            device = get_target(self.target)
            integer = device.rules.integer_only
            what = f" as a fully-integer artifact for {device.display_name}" if integer else ""
            lines.append(f"nothing passed the gate{what} ({len(self.attempts)} attempts)")
            lines += [f"try: {a}" for a in self.advice]
        lines += [f"{a.name}: {'; '.join(a.notes)}" for a in self.attempts if a.notes]
        lines.append(f"stopped: {self.stop_reason}")
        lines += [f"note: {f}" for f in self.findings]
        return "\n".join(lines)

    @property
    def size_baseline(self) -> tuple[int, str]:
        """The size sizes are compared to, and its name (``float32``, ``the input .tflite's``)."""
        if self.baseline == "float32" or not self.baseline_bytes:
            return self.baseline_bytes or self.float32_bytes, "float32"
        return self.baseline_bytes, f"{self.baseline}'s"

    def speed(self, attempt: Attempt) -> str | None:
        """One line: ``attempt``'s latency against the baseline's (None when not timed)."""
        from tfcompress.quantization.methods.slow_ops import ms, slowdown

        if attempt.latency_ms is None or not self.float32_latency_ms:
            return None
        ratio = slowdown(attempt.latency_ms, self.float32_latency_ms)
        host = "" if get_target(self.target).judges_latency else " (host time, not a device's)"
        limit = self.max_slowdown  # over it, a chosen attempt was within the timings' noise
        over = "" if limit is None or ratio <= limit else "; over it within the timings' spread"
        return (
            f"latency: {ms(attempt.latency_ms)} ms/sample on {self.latency_backend}{host}, "
            f"{ratio:.2f}x {self.baseline}'s {ms(self.float32_latency_ms)} ms"
            + ("" if limit is None else f" (max_slowdown {limit:g}{over})")
        )


def shortfall(attempt: Attempt, mode: str) -> float:
    """How far the number the gate compared is from its threshold (positive: short of it)."""
    from tfcompress.compression.advice import deciding

    number = deciding(attempt, mode)[1]
    value = float(attempt.value if number is None else number)
    threshold = float(attempt.threshold or 0.0)
    lower_is_better = attempt.kind == "task" or attempt.metric == "max_abs"
    return value - threshold if lower_is_better else threshold - value
