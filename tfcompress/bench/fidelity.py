"""Label-free fidelity metrics: how closely a candidate's outputs follow the reference's.

Pure numpy. The statistics take both models' outputs on the same samples (sample axis first,
same shape) and return one number per sample, or sums per sample that add up over any subset
(so scoring a bootstrap resample is a sum, not a re-run). ``snr_metric()`` and friends wrap
them as :class:`~tfcompress.bench.metric_def.MetricDef` (``snr``, ``cosine``, ``max_abs``,
``agreement``), each registered with its gate threshold (``@register_metric``);
:func:`~tfcompress.bench.metrics.get_metric` is the way in. The class
helpers here are shared with the task metrics of :mod:`tfcompress.bench.task_metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tfcompress.bench.metric_def import METRICS, MetricDef, Prepared, register_metric
from tfcompress.bench.thresholds import ThresholdDef
from tfcompress.errors import InvalidDataError, InvalidInputError


def binary_threshold(outputs: np.ndarray) -> float:
    """The cut of a single-unit output: 0.5 for probabilities in [0, 1], 0.0 for logits."""
    finite = np.asarray(outputs, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    return 0.5 if finite.size == 0 or (finite.min() >= 0.0 and finite.max() <= 1.0) else 0.0


def class_scores(outputs: np.ndarray) -> np.ndarray | None:
    """Outputs as a ``(N, C)`` score matrix when they are class-like, else None.

    Class-like: shape ``(N, C)``, or ``(N, 1, ..., 1, C)`` (a convolutional head), or ``(N,)``
    (one unit per sample, read as ``(N, 1)``).
    """
    array = np.asarray(outputs)
    classes = class_count(array.shape)
    return None if classes is None else array.reshape(len(array), classes)


def class_count(shape: Sequence[int | None]) -> int | None:
    """The class count ``C`` of a class-like output shape (see :func:`class_scores`), else None."""
    if len(shape) == 1:
        return 1
    if len(shape) >= 2 and all(size == 1 for size in shape[1:-1]) and shape[-1] is not None:
        return int(shape[-1])
    return None


def class_predictions(scores: np.ndarray, threshold: float) -> np.ndarray:
    """Top-1 class per sample of an ``(N, C)`` score matrix (``C == 1``: ``score > threshold``)."""
    if scores.shape[1] == 1:
        return (scores[:, 0] > threshold).astype(np.int64)
    return scores.argmax(axis=1)


def snr_stats(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """Per-sample ``[sum(reference**2), sum((reference - candidate)**2)]``, shape ``(N, 2)``.

    Summing rows over any subset and passing the sums to :func:`snr_db` gives the pooled
    signal-to-noise ratio of that subset.
    """
    ref, cand = _flat(reference), _flat(candidate)
    return np.stack([(ref**2).sum(axis=1), ((ref - cand) ** 2).sum(axis=1)], axis=1)


def snr_db(sums: np.ndarray) -> float:
    """``10 * log10(signal / noise)`` in dB from summed :func:`snr_stats` rows.

    Args:
        sums: ``[signal, noise]``.

    Returns:
        The ratio in dB: ``+inf`` when the noise is 0 (identical outputs), ``-inf`` when the
        signal is 0 but the noise is not, NaN when a sum is NaN (non-finite outputs).

    Example:
        >>> snr_db(np.array([100.0, 1.0])), snr_db(np.array([4.0, 0.0]))
        (20.0, inf)
    """
    signal, noise = float(sums[0]), float(sums[1])
    if math.isnan(signal) or math.isnan(noise):
        return math.nan
    if noise == 0.0:
        return math.inf
    return -math.inf if signal == 0.0 else 10.0 * math.log10(signal / noise)


def cosine_per_sample(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """Cosine similarity of each sample's flattened outputs, shape ``(N,)``.

    Zero norms: two all-zero outputs are identical (1.0); exactly one all-zero output shares no
    direction with the other (0.0).
    """
    ref, cand = _flat(reference), _flat(candidate)
    ref_norm, cand_norm = np.linalg.norm(ref, axis=1), np.linalg.norm(cand, axis=1)
    denominator = ref_norm * cand_norm
    both_zero = (ref_norm == 0.0) & (cand_norm == 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.where(denominator > 0.0, (ref * cand).sum(axis=1) / denominator, 0.0)
    cosine = np.where(both_zero, 1.0, cosine)
    nan_rows = np.isnan(ref).any(axis=1) | np.isnan(cand).any(axis=1)
    return np.where(nan_rows, np.nan, np.clip(cosine, -1.0, 1.0))


def agreement_per_sample(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    """Does the candidate pick the reference's top-1 class? Booleans, shape ``(N,)``.

    Single-unit outputs are cut at :func:`binary_threshold` of the reference for both models.

    Raises:
        InvalidInputError: Outputs that are not class-like.
    """
    ref_scores, cand_scores = class_scores(reference), class_scores(candidate)
    if ref_scores is None or cand_scores is None:
        raise InvalidInputError(
            "agreement needs class-like outputs of shape (N, C); use snr or cosine for others."
        )
    threshold = binary_threshold(ref_scores)
    return class_predictions(ref_scores, threshold) == class_predictions(cand_scores, threshold)


def _flat(outputs: np.ndarray) -> np.ndarray:
    array = np.asarray(outputs, dtype=np.float64)
    return array.reshape(array.shape[0], -1)


def describe_shape(shape: Sequence[int | None]) -> str:
    """A shape with the sample axis written ``N``: ``(N, 4)``, ``(N,)``."""
    rest = [str(size) for size in tuple(shape)[1:]]
    return "(N,)" if not rest else f"(N, {', '.join(rest)})"


# The thresholds' defaults. 20 dB SNR: the error's power is 1% of the output's (RMS error 10%
# of RMS output); per-channel int8 PTQ usually lands above it on final outputs. 0.99 cosine is
# the same idea a little looser: an error uncorrelated with the output gives
# cos = 1 / sqrt(1 + 1 / snr), so 20 dB is 0.995 and 0.99 is 17 dB. 0.99 agreement: at most 1%
# of top-1 decisions flip, which bounds the accuracy change by one point, the default
# max_drop. max_abs has no unit-free default (it is in the outputs' own unit), so no value
# fits every gate of a pytest run (suite_default=False).
@register_metric("snr", threshold=ThresholdDef("min_snr", "smallest SNR in dB", 20.0, metavar="DB"))
def snr_metric() -> MetricDef:
    """``snr``: ``10 * log10(sum ref**2 / sum (ref - cand)**2)`` in dB, +inf when identical."""
    return _fidelity(
        "snr",
        "higher",
        "dB",
        "signal-to-noise ratio of the candidate's outputs against the reference's, "
        "10*log10(sum ref^2 / sum (ref - cand)^2) over the samples (+inf when identical)",
        "bootstrap",
        snr_stats,
        lambda rows: snr_db(rows.sum(axis=0)),  # the pooled ratio of a subset's rows
    )


@register_metric(
    "cosine",
    threshold=ThresholdDef("min_cosine", "smallest cosine similarity", 0.99, -1.0, 1.0, "C"),
)
def cosine_metric() -> MetricDef:
    """``cosine``: mean per-sample cosine similarity of the flattened outputs."""
    return _fidelity(
        "cosine",
        "higher",
        "number",
        "mean over samples of the cosine similarity of the flattened outputs (both all-zero: "
        "1, one all-zero: 0)",
        "bootstrap",
        lambda ref, cand: cosine_per_sample(ref, cand)[:, np.newaxis],
        mean_of_first,
    )


@register_metric(
    "max_abs",
    threshold=ThresholdDef(
        "max_abs", "largest absolute difference", None, 0.0, metavar="E", suite_default=False
    ),
)
def max_abs_metric() -> MetricDef:
    """``max_abs``: the largest absolute difference over all samples and elements."""
    return _fidelity(
        "max_abs",
        "lower",
        "number",
        "largest absolute difference between the outputs (no interval: a maximum has no "
        "useful bootstrap)",
        "none",
        lambda ref, cand: np.abs(_flat(ref) - _flat(cand)).max(axis=1)[:, np.newaxis],
        lambda rows: float(rows[:, 0].max()),
    )


@register_metric(
    "agreement",
    threshold=ThresholdDef("min_agreement", "smallest top-1 agreement", 0.99, 0.0, 1.0, "A"),
)
def agreement_metric() -> MetricDef:
    """``agreement``: share of samples where both models pick the same top-1 class."""
    return _fidelity(
        "agreement",
        "higher",
        "fraction",
        "share of samples where the candidate's top-1 class is the reference's (single-unit "
        "outputs cut at the reference's binary threshold)",
        "clopper-pearson",
        lambda ref, cand: agreement_per_sample(ref, cand)[:, np.newaxis].astype(np.float64),
        mean_of_first,
        correctness=agreement_per_sample,
        class_like=True,
    )


def mean_of_first(rows: np.ndarray) -> float:
    """The mean of the first per-sample column (a rate of 0/1 rows)."""
    return float(rows[:, 0].mean())


def _fidelity(
    name: str,
    direction: str,
    unit: str,
    description: str,
    interval: str,
    per_sample: Callable[[np.ndarray, np.ndarray], np.ndarray],
    aggregate: Callable[[np.ndarray], float],
    *,
    correctness: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    class_like: bool = False,
) -> MetricDef:
    def prepare(reference: np.ndarray, candidate: np.ndarray, output: str) -> Prepared:
        for what, array in (("reference", reference), ("candidate", candidate)):
            if array.dtype.kind not in "biuf":
                raise InvalidDataError(
                    f"the {what} outputs of {output!r} are {array.dtype}, not numbers."
                )
        if reference.shape != candidate.shape:
            raise InvalidInputError(
                f"{name} on output {output!r}: the reference outputs "
                f"{describe_shape(reference.shape)} but the candidate "
                f"{describe_shape(candidate.shape)} (over {reference.shape[:1]} vs "
                f"{candidate.shape[:1]} samples); compare variants of the same model on the "
                "same samples."
            )
        if reference.ndim == 0 or len(reference) == 0:
            raise InvalidDataError(f"no samples for output {output!r}; pass at least one.")
        if not np.isfinite(reference).all():
            raise InvalidDataError(
                f"the reference outputs of {output!r} hold NaN or Inf; fidelity needs a finite "
                "reference: check the reference model and the data."
            )
        if class_like and class_scores(reference) is None:
            raise InvalidInputError(
                f"{name} needs class scores of shape (N, C), but output {output!r} has shape "
                f"{describe_shape(reference.shape)}; use --metric snr or cosine."
            )
        return reference, candidate

    threshold = METRICS.get(name).threshold  # declared where it is registered
    return MetricDef(
        name,
        "fidelity",
        direction,
        unit,
        description,
        threshold.name,
        threshold.default,
        interval,
        prepare,
        per_sample,
        aggregate,
        correctness,
    )
