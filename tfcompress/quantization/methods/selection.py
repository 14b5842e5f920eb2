"""Score candidates against the float32 reference, judge them by the user's gate, keep one.

Every output of every candidate is scored on the same samples against the float32
``.tflite`` made from the same model in the same run: its SNR, and for class scores
(probability rows, as gates without labels read them) its top-1 agreement. With a gate
(the ``GateConfig`` ``check_gate`` takes) each is also judged exactly as ``tfcompress gate``
judges, every check's margin recorded. :func:`choose` then keeps one by the rule of
docs/quantization.md#beyond-minmax-int8.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tfcompress.bench.fidelity import agreement_per_sample, snr_db, snr_stats
from tfcompress.bench.metrics import choose_metric
from tfcompress.bench.paired import run_model
from tfcompress.data import Dataset
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.signature import model_signature
from tfcompress.quantization.methods.report import PLAIN, Candidate, GateMargin, OutputFidelity
from tfcompress.testing.judge import judge_outputs_by_name

if TYPE_CHECKING:
    from tfcompress.testing.config import GateConfig

#: Sizes within this fraction of the smallest passing one, or :data:`SIZE_SLACK` bytes,
#: count as equal (int8 variants of one model differ by a few hundred bytes of flatbuffer
#: bookkeeping: 1.2% of an 8 KB model).
SIZE_TOLERANCE = 0.01
#: Bytes within which sizes count as equal, whatever the model's size.
SIZE_SLACK = 4096
#: A candidate must beat plain int8 by more than this (scaled margin units, or dB of SNR
#: without a gate) to be kept instead: plain int8 wins ties. 0.1 dB is below what a
#: thousand eval samples can tell apart (on the demo CNN, candidates spread 0.06 dB).
TIE = 0.1
#: Eval samples candidates are scored on without a gate, at most (a seeded subset of more).
EVAL_SAMPLES = 1000


#: The :class:`~tfcompress.testing.config.GateConfig` fields quantize feeds from its own
#: config (``PTQConfig.batch_dims``/``input_values``) or runs its own way (the scorer runs
#: LiteRT on the CPU with its default threads): a gate that sets them is refused.
NOT_IN_QUANTIZE = {
    "threads": "quantize scores every candidate with LiteRT's default threads",
    "batch_dims": "quantize reads its samples by its own batch_dims (--batch-dim)",
    "input_values": "quantize feeds its own input_values (--input-value)",
}


def check_methods_gate(gate: Any) -> GateConfig:
    """``gate`` if quantize can honour all of it, else one line saying what it cannot.

    The gate's own config, as ``check_gate(config=...)`` takes it; its feeding and threads
    are quantize's own (:data:`NOT_IN_QUANTIZE`), and its backend LiteRT's CPU.

    Raises:
        InvalidInputError: Not a ``GateConfig``, or a field quantize would not honour.
    """
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.config import GateConfig
    from tfcompress.testing.settings import DEFAULT_BACKEND

    if not isinstance(gate, GateConfig):
        raise InvalidInputError(
            "gate must be a tfcompress.testing.GateConfig (GateConfig.from_options(min_snr=25)),"
            f" got {type(gate).__name__}."
        )
    default = GateConfig()
    for name, why in NOT_IN_QUANTIZE.items():
        value = getattr(gate, name)
        if value != getattr(default, name):
            raise InvalidInputError(
                f"gate=GateConfig({name}={value!r}) is not used by quantize ({why}): drop it "
                "from the gate."
            )
    if gate.settings.backend != DEFAULT_BACKEND:
        raise InvalidInputError(
            f"gate's settings.backend={gate.settings.backend!r} is not used by quantize (the "
            f"candidates run on LiteRT's {DEFAULT_BACKEND}): drop it, and judge the result "
            "there with tfcompress.check_gate(on=...)."
        )
    return gate


def scoring_set(eval_data: Any, model: Any, *, seed: int, gate: Any) -> Dataset:
    """The eval samples candidates are scored on.

    With a gate, every sample with its labels: the gate's task metrics read them, and the
    choice is judged on what the final gate judges. Else at most :data:`EVAL_SAMPLES`, a
    seeded subset.
    """
    if gate is not None:
        from tfcompress.bench.paired import read_for_reference

        return read_for_reference(eval_data, model, "eval data")
    from tfcompress.data.calibration import calibration_set

    signature = model_signature(model)
    return calibration_set(signature, eval_data, limit=EVAL_SAMPLES, seed=seed, what="eval data")


class Scorer:
    """Scores ``.tflite`` files against one float32 ``reference``, run once on ``data``.

    The labels of ``data`` (``y`` keyed by output name) are read only by ``gate``'s task
    metrics; without a gate, fidelity only.
    """

    def __init__(
        self, reference: bytes, data: Dataset, *, source: str, gate: GateConfig | None = None
    ) -> None:
        ref_model = TFLiteModel(reference, label=f"{source}_float32", verified=True)
        self.signature = model_signature(ref_model)
        x = data.x if isinstance(data.x, dict) else {self.signature.inputs[0].name: data.x}
        self.feed = Dataset(x)
        self.source, self.gate, self.count = source, gate, 0
        self.expected = self._run(reference, "float32")
        self.labels = data.y if isinstance(data.y, dict) else None

    def _run(self, content: bytes, name: str) -> dict[str, np.ndarray]:
        """``content``'s outputs, in the warm child (no worker started per file): issue 39."""
        from tfcompress._child import call

        args = (content, self.feed, self.signature, f"{self.source}_{name.replace(' ', '')}")
        what = f"running {name} on the scoring samples"
        return call(f"{__name__}:run_file", *args, name, what=what)  # type: ignore[no-any-return]

    def score(self, content: bytes) -> tuple[tuple[OutputFidelity, ...], tuple[GateMargin, ...]]:
        """One file's per-output fidelities (reference order) and the gate's checks on it.

        Judged exactly as ``tfcompress gate`` judges, with the gate's checks and settings;
        each check with its margin (:func:`gate_margin`).
        """
        self.count += 1
        got = self._run(content, f"candidate {self.count}")
        fidelity = tuple(_fidelity(n, self.expected[n], got[n]) for n in self.expected)
        if self.gate is None:
            return fidelity, ()
        checks = self.gate.checks_to_run or None
        report = judge_outputs_by_name(
            self.labels, self.expected, got, checks=checks, settings=self.gate.settings
        )
        return fidelity, tuple(gate_margin(v) for v in report.verdicts)


def run_file(
    content: bytes, feed: Dataset, signature: Any, label: str, name: str
) -> dict[str, np.ndarray]:
    """In a child: one ``.tflite``'s outputs on ``feed`` (a crash there is one error)."""
    model = TFLiteModel(content, label=label, verified=True)
    return run_model(model, feed, signature, name=name, isolate=False).outputs


def score(
    reference: bytes, contents: Sequence[bytes], data: Dataset, *, source: str, gate: Any = None
) -> list[tuple[tuple[OutputFidelity, ...], tuple[GateMargin, ...]]]:
    """Each ``.tflite`` of ``contents`` scored against ``reference`` on ``data``."""
    scorer = Scorer(reference, data, source=source, gate=gate)
    return [scorer.score(content) for content in contents]


def _fidelity(name: str, reference: np.ndarray, candidate: np.ndarray) -> OutputFidelity:
    snr = snr_db(snr_stats(reference, candidate).sum(axis=0))
    agreement = None
    # Class scores are what gates without labels judge by agreement (probability rows); a
    # box or any other vector is judged by SNR alone.
    metric, _ = choose_metric(reference.shape, None, output=name, reference_outputs=reference)
    if metric.name == "agreement":
        agreement = float(np.mean(agreement_per_sample(reference, candidate)))
    return OutputFidelity(name, snr, agreement)


def scaled_margin(margin: float, unit: str, threshold: float) -> float:
    """A margin in its metric's unit on the one scale :func:`choose` compares outputs on.

    One unit is one dB of SNR, one percentage point of a fraction metric (an accuracy drop,
    agreement, mIoU: ``0.01`` is 1), or one percent of the threshold for metrics in the
    outputs' own unit (cosine, mse, max_abs...). So an output 3 dB inside ``--min-snr``
    and another 3 points inside ``--max-drop`` are equally safe.
    """
    if math.isnan(margin):
        return -math.inf
    if unit == "dB":
        return margin
    if unit == "fraction":
        return 100.0 * margin
    return 100.0 * margin / abs(threshold) if threshold else 100.0 * margin


def gate_margin(verdict: Any) -> GateMargin:
    """One gate verdict as a :class:`GateMargin`: positive inside the threshold."""
    number = verdict.deciding_value
    # a drop or a maximum: the threshold minus the value; a minimum: the value minus it
    lower = verdict.lower_is_better
    margin = verdict.threshold - number if lower else number - verdict.threshold
    unit = verdict.definition.unit
    return GateMargin(
        output=verdict.output,
        metric=verdict.metric,
        threshold_name=verdict.threshold_name,
        value=float(number),
        threshold=float(verdict.threshold),
        passed=bool(verdict.passed),
        margin=float(margin),
        scaled=scaled_margin(float(margin), unit, float(verdict.threshold)),
        shown=_shown(float(margin), unit),
    )


def _shown(margin: float, unit: str) -> str:
    if math.isnan(margin):
        return "unmeasurable"
    if unit == "dB":
        return f"{margin:+.2f} dB"
    return f"{100 * margin:+.2f} pt" if unit == "fraction" else f"{margin:+.4g}"


def choose(
    plain: Candidate, candidates: Sequence[Candidate], *, gated: bool = False
) -> tuple[int | None, str]:
    """The candidate to keep (an index into ``candidates``; None: plain int8), and why.

    The rule (never "better on every output"):

    * **With a gate** (``gated``: every candidate carries its
      :attr:`~tfcompress.quantization.methods.report.Candidate.gate` checks): among the
      candidates that pass every check, plain int8 included, the smallest (sizes within
      :data:`SIZE_TOLERANCE` or :data:`SIZE_SLACK` bytes of the smallest count as equal),
      then the one whose weakest check has the largest margin. Margins of different
      metrics are compared on one scale (:func:`scaled_margin`: 1 dB = 1 percentage point
      = 1% of a threshold in the outputs' unit). When none passes, the one whose weakest
      check comes closest (the gate fails either way, and says so).
    * **Without a gate**: among those no larger than plain int8 (same tolerance), the one
      whose weakest output (lowest SNR against float32) is best.

    Plain int8 wins ties (a candidate must beat it by more than :data:`TIE`), so it is kept
    unless a candidate is really better by the rule: byte for byte the converter's file.

    Args:
        plain: The converter's plain int8, scored (and judged) like the candidates.
        candidates: The candidates; those with an ``error`` were not made.
        gated: Decide by the gate's checks.

    Returns:
        ``(index, reason)``: the reason names the numbers that decided.

    Example:
        >>> p = Candidate((), (OutputFidelity("y", 20.0, None),))
        >>> c = Candidate(("equalize",), (OutputFidelity("y", 26.0, None),))
        >>> choose(p, [c])[1]
        "equalize's weakest output is 26.00 dB (y) against float32 vs plain int8's 20.00 dB (y)"
    """
    made = [(i, c) for i, c in enumerate(candidates) if c.error is None]
    if gated:
        return _by_gate(plain, made)
    best, best_key = None, plain.worst_snr
    for index, candidate in made:
        if (candidate.size_bytes or 0) > _size_limit(plain.size_bytes):
            continue  # a bigger file is never kept without a gate that asked for fidelity
        if candidate.worst_snr > best_key + TIE:
            best, best_key = index, candidate.worst_snr
    kept = plain if best is None else candidates[best]
    if best is None:
        runner_up = max((c for _, c in made), key=lambda c: c.worst_snr, default=None)
        if runner_up is None:
            return None, "no candidate could be made"
        return None, (
            f"no candidate's weakest output beats plain int8's {_weakest(plain)} against "
            f"float32 by more than {TIE:g} dB (best: {runner_up.label}'s {_weakest(runner_up)})"
        )
    return best, (
        f"{kept.label}'s weakest output is {_weakest(kept)} against float32 vs plain int8's "
        f"{_weakest(plain)}"
    )


def _by_gate(plain: Candidate, made: list[tuple[int | None, Candidate]]) -> tuple[int | None, str]:
    pool: list[tuple[int | None, Candidate]] = [(None, plain), *made]
    passing = [(i, c) for i, c in pool if c.passes]
    if passing:
        limit = _size_limit(min(c.size_bytes or 0 for _, c in passing))
        pool = [(i, c) for i, c in passing if (c.size_bytes or 0) <= limit]
    best, best_candidate = pool[0]  # plain int8 when it is in the pool
    for index, candidate in pool[1:]:
        if _worst(candidate) > _worst(best_candidate) + TIE:
            best, best_candidate = index, candidate
    plain_worst = _margin_text(plain)
    if not passing:
        if best is None:
            return None, (
                f"no candidate passes every gate; none comes closer than plain int8 ({plain_worst})"
            )
        return best, (
            f"no candidate passes every gate; {best_candidate.label} comes closest, worst margin "
            f"{_margin_text(best_candidate)} vs plain int8's {plain_worst}"
        )
    if best is None:
        others = [c for i, c in passing if i is not None]
        if not others:
            return None, (
                f"plain int8 passes every gate (worst margin {plain_worst}); no candidate does"
            )
        rival = max(others, key=_worst)
        return None, (
            f"plain int8 passes every gate, worst margin {plain_worst}; no passing candidate of "
            f"its size does better (best: {rival.label}'s {_margin_text(rival)})"
        )
    size = ""
    if (plain.size_bytes or 0) > _size_limit(best_candidate.size_bytes):
        size = f", {best_candidate.size_bytes:,} bytes vs plain int8's {plain.size_bytes:,}"
    return best, (
        f"{best_candidate.label} passes every gate, worst margin {_margin_text(best_candidate)} "
        f"vs plain int8's {plain_worst}{size}"
    )


def _size_limit(size: int | None) -> float:
    """The largest size that counts as equal to ``size`` (:data:`SIZE_TOLERANCE`)."""
    return max((size or 0) * (1 + SIZE_TOLERANCE), (size or 0) + SIZE_SLACK)


def _worst(candidate: Candidate) -> float:
    worst = candidate.worst_margin
    return -math.inf if worst is None else worst.scaled


def _margin_text(candidate: Candidate) -> str:
    worst = candidate.worst_margin
    return "not judged" if worst is None else f"{worst.shown} ({worst.output} {worst.metric})"


def _weakest(candidate: Candidate) -> str:
    if not candidate.fidelity:
        return "nothing"
    weakest = min(candidate.fidelity, key=lambda f: -math.inf if math.isnan(f.snr_db) else f.snr_db)
    return f"{weakest.snr_db:.2f} dB ({weakest.output})"


def worse_than_plain(candidate: Candidate, plain: Candidate, *, gated: bool) -> str | None:
    """Why a candidate applied as given (a recipe's methods) is worse than plain int8, or None.

    Worse by the rule of :func:`choose`: it fails a gate plain int8 passes, or its weakest
    check (without a gate: its weakest output) is below plain int8's.
    """
    if gated:
        if plain.passes and not candidate.passes:
            return f"it fails the gate plain int8 passes (worst margin {_margin_text(candidate)})"
        if _worst(candidate) < _worst(plain):
            return f"worst margin {_margin_text(candidate)} vs {PLAIN} {_margin_text(plain)}"
        return None
    if candidate.worst_snr < plain.worst_snr:
        return f"weakest output {_weakest(candidate)} vs {PLAIN} {_weakest(plain)}"
    return None
