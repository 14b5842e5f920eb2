"""One attempt of the search: how its artifact was made (as data, replayable) and how it did."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from tfcompress.errors import InvalidInputError


@dataclass(frozen=True)
class Attempt:
    """One candidate artifact, judged by the gate.

    Attributes:
        index: 1-based position in the search.
        name: Label (``int8``, ``selective-2``, ``prune-int8``...).
        technique: ``ptq``, ``selective``, ``qat``, ``prune`` or ``cluster``.
        recipe: How to make the artifact again, as data: for PTQ a
            :class:`~tfcompress.quantization.config.PTQConfig` dict (``{"recipe":
            Recipe.to_dict(), "seed": N, "version": 1}``, ``target``/``engine`` where they
            apply; ``tfcompress.quantize(model, recipe=Recipe.from_dict(a.recipe["recipe"]),
            ...)`` gives the same bytes), otherwise the technique's training config
            (:mod:`tfcompress.training.configs`) as it ran.
        status: ``passed``, ``failed`` (the gate or the target said no) or ``error`` (the
            artifact could not be made; ``why`` says what the converter said).
        why: One line: the gate's deciding rule, or why the attempt does not qualify.
        size_bytes: Size of the ``.tflite``.
        gzip_bytes: Its gzip size (the download size).
        metric: The deciding gate metric (``accuracy``, ``agreement``, ``snr``...).
        kind: ``task`` (a drop against labels) or ``fidelity`` (a value against the reference).
        reference_score: The original model's score (task metrics).
        score: The artifact's score.
        value: The drop (task metrics) or the fidelity value.
        ci_low: Lower end of the value's interval.
        ci_high: Upper end.
        threshold: The gate's threshold for ``value``.
        latency_ms: Median latency per sample on the target's latency backend (None: not timed).
        device: The Dask worker that measured ``latency_ms`` (``compress --on``); None:
            this machine.
        float_layers: Layers kept in float (selective quantization).
        float_nodes: Their converter node names (``Recipe.float_nodes``).
        target_verdict: What the target's check kept of the artifact's verdict
            (``Target.summarize``: the Edge TPU linter's numbers), None for a target with no
            check; the target's rank reads it. Filed in JSON under the target's name
            (``"edgetpu": {...}``), as reports always have.
        verdict_of: The target whose verdict ``target_verdict`` is (its JSON key).
        seconds: Time spent on the attempt (making, gating, measuring).
        gate: The full gate report (``GateReport.to_dict()``).
        notes: Anything else worth knowing (e.g. the sensitive layers QAT could not skip).

    Example:
        >>> a = Attempt(1, "int8", "ptq", {"recipe": {"name": "int8"}}, "passed", "ok")
        >>> Attempt.from_dict(a.to_dict()) == a
        True
    """

    index: int
    name: str
    technique: str
    recipe: dict[str, Any]
    status: str
    why: str
    size_bytes: int | None = None
    gzip_bytes: int | None = None
    metric: str | None = None
    kind: str | None = None
    reference_score: float | None = None
    score: float | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    threshold: float | None = None
    latency_ms: float | None = None
    device: str | None = None
    float_layers: tuple[str, ...] = ()
    float_nodes: tuple[str, ...] = ()
    target_verdict: dict[str, Any] | None = None
    verdict_of: str | None = None
    seconds: float = 0.0
    gate: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """The artifact passed the gate and qualifies for the target."""
        return self.status == "passed"

    @property
    def accuracy_drop(self) -> float | None:
        """The drop of a task metric (None for fidelity gates)."""
        return self.value if self.kind == "task" else None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (``from_dict`` reads it back)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _VERDICT}
        return {
            **data,
            **{name: list(data[name]) for name in _TUPLES},
            "passed": self.passed,
            "accuracy": self.score if self.kind == "task" else None,
            "accuracy_drop": self.accuracy_drop,
            "seconds": round(self.seconds, 3),
            **_verdicts(self.verdict_of, self.target_verdict),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        """Read an attempt of a JSON report back.

        Raises:
            InvalidInputError: A field is missing.
        """
        names = [f.name for f in fields(cls)]
        try:
            read = {n: data[n] for n in names[6:] if n in data and n not in _VERDICT}
            read.update({n: tuple(read[n]) for n in _TUPLES if n in read})
            read["seconds"] = float(read.get("seconds", 0.0))
            required = (int, str, str, dict, str, str)  # index, name, technique, recipe...
            first = [kind(data[n]) for kind, n in zip(required, names, strict=False)]
            return cls(*first, **read, **_read_verdict(data))
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidInputError(
                f"not an attempt of a compress report ({error}); pass the report.json that "
                "tfcompress compress --report wrote."
            ) from error

    def row(self, baseline_ms: float | None = None) -> list[str]:
        """Cells of the attempts table (``baseline_ms``: float32's, for the ``x float32`` cell)."""

        def pct(number: float | None) -> str:
            return "-" if number is None else f"{number * 100:.2f}"

        if self.kind == "task":
            score, value = pct(self.score), pct(self.value)
            if self.ci_low is not None and self.ci_high is not None:
                value += f" [{pct(self.ci_low)}, {pct(self.ci_high)}]"
        else:
            score = "-"
            value = "-" if self.value is None else f"{self.metric} {self.value:.4g}"
        latency = ratio = "-"
        if self.latency_ms is not None:
            from tfcompress.quantization.methods.slow_ops import ms, slowdown

            latency = ms(self.latency_ms)
            if baseline_ms:
                ratio = f"{slowdown(self.latency_ms, baseline_ms):.2f}"
        return [
            str(self.index),
            self.name,
            "-" if self.size_bytes is None else f"{self.size_bytes:,}",
            "-" if self.gzip_bytes is None else f"{self.gzip_bytes:,}",
            latency,
            ratio,
            score,
            value,
            self.status,
            f"{self.seconds:.1f}",
        ]


#: Fields JSON files under the target's key, and fields written as lists.
_VERDICT, _TUPLES = ("target_verdict", "verdict_of"), ("float_layers", "float_nodes", "notes")


def _verdicts(target: str | None, summary: dict[str, Any] | None) -> dict[str, Any]:
    """Every checking target's key (``"edgetpu": null`` without one), this one's filled."""
    from tfcompress.targets.base import verdict_keys

    keys: dict[str, Any] = dict.fromkeys(verdict_keys())
    if target is not None:
        keys[target] = summary
    return keys


def _read_verdict(data: dict[str, Any]) -> dict[str, Any]:
    """``target_verdict``/``verdict_of`` from the key a report filed the verdict under."""
    from tfcompress.targets.base import verdict_keys

    for key in verdict_keys():
        if isinstance(data.get(key), dict):
            return {"target_verdict": dict(data[key]), "verdict_of": key}
    return {}


#: The attempts table's columns; ``ms/sample`` is named with its backend by the result's
#: table (:func:`row_header`).
ROW_HEADER = [
    "#",
    "attempt",
    "size B",
    "gzip B",
    "ms/sample",
    "x float32",
    "score %",
    "drop pt [interval]",
    "status",
    "s",
]


def row_header(backend: str | None, baseline: str = "float32") -> list[str]:
    """:data:`ROW_HEADER` with the latency's backend and the baseline named."""
    header = list(ROW_HEADER)
    if backend:
        header[4] = f"ms/sample ({backend})"
    header[5] = f"x {baseline}"
    return header
