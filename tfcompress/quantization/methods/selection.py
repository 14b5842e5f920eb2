"""Score candidates against the float32 reference and keep one, never worse than plain int8.

Every output of every candidate is scored on the same samples against the float32
``.tflite`` made from the same model in the same run: its SNR, and for class scores
(probability rows, as gates without labels read them) its top-1 agreement. A candidate is
*not worse* than the converter's plain int8 when, on every output, neither number is lower;
among those, the one with the highest mean SNR gain is kept, and only if that gain is
positive. Otherwise plain int8 is kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tfcompress.bench.fidelity import agreement_per_sample, snr_db, snr_stats
from tfcompress.bench.metrics import choose_metric
from tfcompress.bench.paired import run_model
from tfcompress.data import Dataset
from tfcompress.models.loading import TFLiteModel
from tfcompress.models.signature import model_signature
from tfcompress.quantization.methods.report import Candidate, OutputFidelity


def score(
    reference: bytes, contents: Sequence[bytes], data: Dataset, *, source: str
) -> list[tuple[OutputFidelity, ...]]:
    """Each ``.tflite`` in ``contents`` scored against ``reference`` on ``data``.

    Args:
        reference: The float32 ``.tflite``.
        contents: The candidates' ``.tflite`` bytes.
        data: Samples: one array, or a dict keyed by input name (labels unused).
        source: Model name, for the runners' labels.

    Returns:
        One tuple of per-output fidelities per candidate, outputs in the reference's order.

    Example:
        >>> score(result.reference_content, [result.model_content], calib, source="m")
        ... # doctest: +SKIP
    """
    ref_model = TFLiteModel(reference, label=f"{source}_float32", verified=True)
    signature = model_signature(ref_model)
    x = data.x if isinstance(data.x, dict) else {signature.inputs[0].name: data.x}
    feed = Dataset(x)
    expected = run_model(ref_model, feed, signature, name="float32").outputs
    scored = []
    for index, content in enumerate(contents):
        model = TFLiteModel(content, label=f"{source}_candidate{index}", verified=True)
        outputs = run_model(model, feed, signature, name=f"candidate {index}").outputs
        scored.append(tuple(_fidelity(name, expected[name], outputs[name]) for name in expected))
    return scored


def _fidelity(name: str, reference: np.ndarray, candidate: np.ndarray) -> OutputFidelity:
    snr = snr_db(snr_stats(reference, candidate).sum(axis=0))
    agreement = None
    # Class scores are what gates without labels judge by agreement (probability rows); a
    # box or any other vector is judged by SNR alone.
    metric, _ = choose_metric(reference.shape, None, output=name, reference_outputs=reference)
    if metric.name == "agreement":
        agreement = float(np.mean(agreement_per_sample(reference, candidate)))
    return OutputFidelity(name, snr, agreement)


def not_worse(candidate: Candidate, plain: Candidate) -> str | None:
    """None when ``candidate`` is at least as faithful as ``plain`` on every output, else why.

    Example:
        >>> a = Candidate((), (OutputFidelity("y", 20.0, None),))
        >>> not_worse(Candidate(("equalize",), (OutputFidelity("y", 19.0, None),)), a)
        'y: SNR 19.00 dB < 20.00 dB'
    """
    for mine, theirs in zip(candidate.fidelity, plain.fidelity, strict=True):
        if _below(mine.snr_db, theirs.snr_db):
            return f"{mine.output}: SNR {mine.snr_db:.2f} dB < {theirs.snr_db:.2f} dB"
        if mine.agreement is None or theirs.agreement is None:
            continue
        if mine.agreement < theirs.agreement:
            return f"{mine.output}: agreement {mine.agreement:.2%} < {theirs.agreement:.2%}"
    return None


def gain(candidate: Candidate, plain: Candidate) -> float:
    """Mean SNR gain over the outputs in dB (0 where both are identical to the reference)."""
    gains = []
    for mine, theirs in zip(candidate.fidelity, plain.fidelity, strict=True):
        if math.isinf(mine.snr_db) and math.isinf(theirs.snr_db):
            gains.append(0.0)
        else:
            gains.append(mine.snr_db - theirs.snr_db)
    return float(np.mean(gains)) if gains else 0.0


def choose(plain: Candidate, candidates: Sequence[Candidate]) -> tuple[int | None, str]:
    """The index of the candidate to keep (None: plain int8) and one line saying why.

    Example:
        >>> p = Candidate((), (OutputFidelity("y", 20.0, None),))
        >>> c = Candidate(("equalize",), (OutputFidelity("y", 26.0, None),))
        >>> choose(p, [c])
        (0, 'not worse than plain int8 on any output and 6.00 dB better on average')
    """
    best, best_gain, why_not = None, 0.0, []
    for index, candidate in enumerate(candidates):
        if candidate.error is not None:
            why_not.append(f"{candidate.label} could not be made")
            continue
        worse = not_worse(candidate, plain)
        if worse is not None:
            why_not.append(f"{candidate.label} is worse on {worse}")
            continue
        improvement = gain(candidate, plain)
        if improvement > best_gain:
            best, best_gain = index, improvement
        elif best is None:
            why_not.append(f"{candidate.label} is no better ({improvement:+.2f} dB)")
    if best is not None:
        return best, (
            f"not worse than plain int8 on any output and {best_gain:.2f} dB better on average"
        )
    return None, "; ".join(why_not) or "no candidate was tried"


def _below(mine: float, theirs: float) -> bool:
    if math.isnan(mine):
        return not math.isnan(theirs)
    return mine < theirs
