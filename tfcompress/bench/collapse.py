"""Did a quantized model collapse? Outputs that no longer carry the float model's answer.

A gate says whether an artifact is good enough for the user's threshold; this check says
whether it is useless whatever the threshold, so ``tfcompress quantize --eval`` can warn
even without a gate. An output *collapsed* when (each computed on the evaluation samples):

* class scores (``(N, C)``, ``C > 1``, whose float rows are probabilities or whose labels are
  class ids or one-hot rows, or probability rows at every position of a sequence
  ``(N, ..., C)``; the rule :func:`~tfcompress.bench.metrics.choose_metric` gates them by):
  the candidate's top-1 class **agrees** with the float model's no more
  than a quarter of the way from chance to perfect. Chance is what two models that ignore
  each other would agree on: ``sum_k p_ref(k) * p_cand(k)`` over the frequencies of their
  predicted classes, so a model that always answers one class sits exactly at chance;
* with class labels, the same for **accuracy**: at most a quarter of the float model's
  lead over chance is left (only when the float model leads chance by 10 points or more);
* any other output (boxes, regression, audio, logits of one unit): **SNR** against the
  float model below 10 dB (the error's power above a tenth of the output's), said with what
  else is true of it: an output that no longer varies with the input, or its correlation
  with the float model's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from tfcompress.bench.fidelity import class_scores, snr_db, snr_stats

MIN_SNR_DB = 10.0
#: Share of the way from chance to the float model's score below which an output collapsed.
LEFT_OF_LEAD = 0.25
#: The float model must lead chance by this much for an accuracy collapse to mean anything.
MIN_LEAD = 0.10


def find_collapse(
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    labels: Mapping[str, np.ndarray] | None = None,
) -> tuple[str, ...]:
    """One sentence per output of ``candidate`` that collapsed (see the module's rules).

    Both models' outputs and the labels (where there are some) are keyed by output name,
    on the evaluation samples; the sentences come in output order.

    Example:
        >>> find_collapse({"y": np.ones((4, 3))}, {"y": np.ones((4, 3))})
        ()
    """
    found: list[str] = []
    for name, ref in reference.items():
        if name not in candidate:
            continue
        ref = np.asarray(ref, dtype=np.float64)
        cand = np.asarray(candidate[name], dtype=np.float64)
        if ref.shape != cand.shape or ref.size == 0:
            continue
        scores = _class_rows(ref)
        if scores is not None and not _classes(ref, scores, labels, name):
            scores = None  # vectors that are no class scores (boxes, a regression's values)
        if scores is None:
            value = snr_db(snr_stats(ref, cand).sum(axis=0))
            if math.isnan(value) or value < MIN_SNR_DB:
                shown = "NaN" if math.isnan(value) else f"{value:.1f} dB"
                found.append(
                    f"output {name} collapsed: SNR {shown} against the float model on "
                    f"{len(ref):,} samples (below {MIN_SNR_DB:g} dB){_how(ref, cand)}"
                )
            continue
        ref_top = scores.argmax(axis=1)
        cand_top = _class_rows(cand, like=scores.shape[1]).argmax(axis=1)  # type: ignore[union-attr]
        agreement = float((ref_top == cand_top).mean())
        chance = _chance(ref_top, cand_top, scores.shape[1])
        # chance 1: the float model answers one class on every sample, nothing to compare
        if chance < 1.0 and agreement <= chance + LEFT_OF_LEAD * (1.0 - chance):
            found.append(
                f"output {name} collapsed: its top-1 class agrees with the float model on "
                f"{agreement:.1%} of {len(ref_top):,} predictions (chance {chance:.1%})"
            )
            continue
        sentence = _accuracy_collapse(name, ref_top, cand_top, labels, scores.shape[1])
        if sentence:
            found.append(sentence)
    return tuple(found)


def _class_rows(outputs: np.ndarray, like: int | None = None) -> np.ndarray | None:
    """Class scores as ``(samples, C)`` rows: a class-like output, or a sequence of them."""
    rows = class_scores(outputs)
    if rows is not None:
        return rows if rows.shape[1] > 1 else None
    if like is not None or outputs.ndim < 3 or outputs.shape[-1] < 2:
        return None if like is None else outputs.reshape(-1, like)
    flat = outputs.reshape(-1, outputs.shape[-1])
    probabilities = (flat >= 0).all() and np.allclose(flat.sum(axis=1), 1.0, atol=1e-3)
    return flat if probabilities else None


def _chance(first: np.ndarray, second: np.ndarray, classes: int) -> float:
    """Agreement of two independent predictors with these class frequencies."""
    p = np.bincount(first, minlength=classes) / len(first)
    q = np.bincount(second, minlength=classes) / len(second)
    return float((p * q).sum())


def _accuracy_collapse(
    name: str,
    ref_top: np.ndarray,
    cand_top: np.ndarray,
    labels: Mapping[str, np.ndarray] | None,
    classes: int,
) -> str | None:
    truth = _class_ids(labels, name, classes, len(ref_top))
    if truth is None:
        return None
    reference, accuracy = float((ref_top == truth).mean()), float((cand_top == truth).mean())
    chance = _chance(truth, cand_top, classes)
    if reference - chance < MIN_LEAD or accuracy > chance + LEFT_OF_LEAD * (reference - chance):
        return None
    return (
        f"output {name} collapsed: accuracy {accuracy:.1%} against the float model's "
        f"{reference:.1%} on {len(truth):,} labelled samples (chance {chance:.1%})"
    )


def _class_ids(
    labels: Mapping[str, np.ndarray] | None, name: str, classes: int, samples: int
) -> np.ndarray | None:
    """The labels of output ``name`` as class ids (from ids or one-hot rows), else None."""
    given = None if labels is None else labels.get(name)
    if given is None:
        return None
    truth = np.asarray(given)
    if truth.ndim == 2 and truth.shape[1] == classes:  # one-hot rows
        if not np.isin(truth, (0, 1)).all() or not (truth.sum(axis=1) == 1).all():
            return None
        truth = truth.argmax(axis=1)
    truth = truth.reshape(-1)
    if len(truth) != samples or not np.issubdtype(truth.dtype, np.number):
        return None
    if not np.all(np.isfinite(truth)) or truth.min() < 0 or truth.max() >= classes:
        return None
    if not np.array_equal(truth, np.round(truth)):
        return None
    return truth.astype(np.int64)


def _classes(
    ref: np.ndarray,
    scores: np.ndarray,
    labels: Mapping[str, np.ndarray] | None,
    name: str,
) -> bool:
    """Whether ``(N, C)`` rows are class scores: probabilities, or labelled with class ids.

    The rule the gate chooses ``agreement`` or ``accuracy`` by; boxes or a regression's
    values of the same shape are not, and their top-1 "class" would mean nothing.
    """
    if scores.shape[0] != ref.shape[0]:  # probability rows at every position of a sequence
        return True
    finite = np.isfinite(scores).all()
    if finite and scores.min() >= 0 and np.allclose(scores.sum(axis=1), 1.0, atol=1e-3):
        return True
    return _class_ids(labels, name, scores.shape[1], len(scores)) is not None


def _how(ref: np.ndarray, cand: np.ndarray) -> str:
    """What else is true of a collapsed non-class output: constant, or its correlation."""
    if np.isnan(cand).any():
        return ""
    flat_ref, flat_cand = ref.reshape(len(ref), -1), cand.reshape(len(cand), -1)
    if len(cand) > 1 and np.ptp(flat_cand, axis=0).max() == 0:
        return "; it gives the same value on every sample" + (
            "" if np.ptp(flat_ref, axis=0).max() == 0 else ", where the float model's varies"
        )
    a, b = flat_ref.reshape(-1), flat_cand.reshape(-1)
    if a.std() == 0 or b.std() == 0:
        return ""
    return f"; correlation {float(np.corrcoef(a, b)[0, 1]):.2f} with the float model's values"
