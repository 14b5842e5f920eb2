"""What to try next when no attempt passed, with the numbers that say why."""

from __future__ import annotations

import math
from typing import Any

_WORDS = {"value": "drop", "ci_low": "interval lower end", "ci_high": "interval upper end"}


def deciding(attempt: Any, mode: str) -> tuple[str, float | None]:
    """Which number the gate compared in ``mode`` (as :attr:`Verdict.decided_by`), and its value."""
    lower_is_better = attempt.kind == "task" or attempt.metric == "max_abs"
    if mode == "strict" or attempt.ci_low is None or attempt.ci_high is None:
        return "value", attempt.value
    favourable = "ci_low" if lower_is_better else "ci_high"
    unfavourable = "ci_high" if lower_is_better else "ci_low"
    key = favourable if mode == "tolerant" else unfavourable
    return key, getattr(attempt, key)


def advise(result: Any, *, training: bool) -> tuple[str, ...]:
    """Suggestions for a search that found nothing passing, most useful first.

    One line per suggestion, each with the numbers behind it; ``training``: ``train_data``
    was given.
    """
    tips: list[str] = []
    mode = str(result.gate.get("mode", "strict"))
    best = result.best_attempt
    if best is not None and best.value is not None and best.threshold is not None:
        key, number = deciding(best, mode)
        if best.kind == "task" and number is not None:
            needed = math.ceil(max(number, 0.0) * 1000) / 1000
            tips.append(
                f"closest: {best.name}, {_WORDS[key]} {number * 100:.2f} pt > max_drop "
                f"{best.threshold * 100:.2f} pt ({mode}); --max-drop {needed:g} would pass it"
            )
            if mode != "strict" and best.value <= best.threshold:
                tips.append(
                    f"--mode strict would pass {best.name} (drop {best.value * 100:.2f} pt); "
                    f"or more --eval samples narrow its interval "
                    f"[{(best.ci_low or 0) * 100:.2f}, {(best.ci_high or 0) * 100:.2f}] pt"
                )
            elif mode == "strict" and best.ci_low is not None and best.ci_low <= best.threshold:
                tips.append(
                    f"--mode tolerant would pass {best.name}: its interval's lower end "
                    f"{best.ci_low * 100:.2f} pt is within max_drop {best.threshold * 100:.2f} pt"
                )
        elif number is not None:
            tips.append(
                f"closest: {best.name}, {best.metric} {number:.4g} ({mode}) against the "
                f"threshold {best.threshold:.4g}"
            )
    refused = [a for a in result.attempts if not a.passed and (a.gate or {}).get("passed")]
    slow = [a for a in refused if "--max-slowdown" in a.why and a.latency_ms is not None]
    if slow:  # the fastest attempt that passed the gate: the least slowdown to allow
        fastest = min(slow, key=lambda a: a.latency_ms or 0.0)
        tips.insert(0, f"{fastest.name} passed the gate, but {fastest.why.split('but ', 1)[-1]}")
        refused = [a for a in refused if a not in slow]
    if refused:
        tips.append(f"{refused[0].name} passed the gate, but {refused[0].why.split('but ', 1)[-1]}")
    if not training:
        tips.append(
            "pass train_data (--train TRAIN.npz): QAT fine-tunes the model to the int8 grid, "
            "the usual fix when post-training quantization loses too much"
        )
    errors = [a for a in result.attempts if a.status == "error"]
    if errors:
        first = errors[0]
        tips.append(f"{len(errors)} attempt(s) could not be made: {first.name}: {first.why}")
    if result.interrupted or result.stop_reason.startswith("time budget"):
        tips.append(f"the search stopped early ({result.stop_reason}); give it more time")
    return tuple(tips)
