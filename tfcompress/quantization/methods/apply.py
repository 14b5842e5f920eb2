"""Make plain int8 and every candidate of the methods in one run, score them, keep one.

The converter's plain int8 is made exactly as :func:`tfcompress.quantize` makes it without
methods (one trace shared with the float32 reference). Candidates that share their weight
methods share one rewritten copy of the model and one calibrate-only conversion of it;
each then gets its activation ranges (min/max, or a range method's
:meth:`~.registry.RangeMethod.edit_ranges`) and goes through the converter's quantizer, as
selective quantization does (which methods are which: :mod:`.registry`). Every artifact is
scored against the float32 reference on the same samples (:mod:`.selection`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tfcompress.data import Dataset
from tfcompress.errors import ConversionError, ResourceLimitError, UnsupportedModelError
from tfcompress.quantization.converter import Conversion, ConverterSettings, convert_all
from tfcompress.quantization.methods.budget import (
    AUTO_BUDGET,
    Budget,
    Costs,
    wanted,
    weight_names,
)
from tfcompress.quantization.methods.calibrated import (
    RUN_SECONDS_KEY,
    SECONDS_LEFT_KEY,
    WANTED_KEY,
    OverBudget,
)
from tfcompress.quantization.methods.catalog import (
    AUTO_CANDIDATES,
    DEFAULT_PERCENTILE,
    option_used,
    refuse_unrunnable,
    runnable_candidates,
)
from tfcompress.quantization.methods.registry import (
    GraphMethod,
    RangeContext,
    range_methods,
)
from tfcompress.quantization.methods.report import Candidate, MethodsReport
from tfcompress.quantization.methods.rewrite import Rewrite, rewrite_model
from tfcompress.quantization.methods.selection import (
    Scorer,
    choose,
    worse_than_plain,
)
from tfcompress.quantization.recipes import Recipe
from tfcompress.quantization.selective import quantize_calibrated

if TYPE_CHECKING:
    from tfcompress.testing.config import GateConfig

logger = logging.getLogger(__name__)

#: ``(recipe, calibrate_only) -> configure``: the converter settings of a recipe, stopping
#: after calibration when asked (the path the methods edit).
ConfigureFor = Callable[[Recipe, bool], ConverterSettings]


@dataclass(frozen=True)
class MethodsOutcome:
    """The float32 reference, the artifact kept, its recipe and the report."""

    reference: Conversion
    quantized: Conversion
    recipe: Recipe
    report: MethodsReport
    warnings: tuple[str, ...]


#: The clock auto's budget is measured by (a test may stand in a fake one).
_clock = time.perf_counter

#: Eval samples the methods are scored on without a gate, at most (a seeded subset of
#: more). With a gate, every eval sample: the one the final gate judges.
EVAL_SAMPLES = 1000


def why_not_keras(model: Any) -> str | None:
    """None when the weight methods can rewrite ``model``; else why not, in a few words.

    Cheap (no TensorFlow call): decided before any conversion is paid for.

    Example:
        >>> why_not_keras(object())
        'it is a object, not a Keras model'
    """
    from tfcompress._compat.keras import flavour_of
    from tfcompress.quantization.methods.graph import LayerGraph

    if flavour_of(model) is None:
        kind = "SavedModel" if type(model).__name__ == "SavedModelDir" else type(model).__name__
        return f"it is a {kind}, not a Keras model"
    try:
        LayerGraph(model)
    except UnsupportedModelError as error:
        return str(error).rstrip(".")
    return None


def check_runnable(model: Any, candidates: Sequence[tuple[str, ...]], *, source: str) -> None:
    """Refuse named methods that cannot run on ``model``, before any conversion.

    ``auto``'s candidates are not refused: those that cannot run are skipped and reported.

    Raises:
        InvalidInputError: A method that needs a Keras model, named for a model that is not
            one (which methods would run is in the message).
    """
    if tuple(candidates) == AUTO_CANDIDATES or not candidates:
        return
    reason = why_not_keras(model)
    for methods in candidates:
        refuse_unrunnable(methods, reason, source=source)


def run_methods(
    model: Any,
    recipe: Recipe,
    plan: tuple[Sequence[tuple[str, ...]], bool],
    calibration: Dataset,
    eval_data: Any,
    *,
    configure_for: ConfigureFor,
    seed: int,
    gate: GateConfig | None = None,
    only_if_plain_fails: bool = False,
    started: float | None = None,
) -> MethodsOutcome:
    """:func:`quantize_with_methods` scored on ``eval_data`` (else the calibration samples).

    Args:
        model: The loaded model.
        recipe: The ``int8`` recipe.
        plan: ``(candidates, searched)`` from
            :func:`~tfcompress.quantization.methods.catalog.plan_candidates`.
        calibration: The calibration samples.
        eval_data: The data to score on (any source ``load_data`` reads), or None.
        configure_for: The converter settings of a recipe.
        seed: Seed of the eval subset.
        gate: Judge every candidate by it (needs ``eval_data``; every sample is used).
        only_if_plain_fails: Judge plain int8 by ``gate`` first; make the candidates only
            when it fails.
        started: ``time.perf_counter()`` when the verb began: what it did before the
            methods (loading the model, reading the data) is part of plain int8's seconds,
            which auto's budget multiplies.

    Raises:
        InvalidDataError: ``eval_data`` does not fit the model.
    """
    from tfcompress.bench.paired import read_for_reference
    from tfcompress.data.calibration import calibration_set
    from tfcompress.models.loading import model_name
    from tfcompress.models.signature import model_signature

    scoring, measured_on = calibration, "calibration samples"
    if eval_data is not None and gate is not None:
        # Every sample with its labels: the gate's task metrics read them, and the choice is
        # judged on what the final gate judges.
        scoring = read_for_reference(eval_data, model, "eval data")
        measured_on = "eval samples"
    elif eval_data is not None:
        signature = model_signature(model)
        scoring = calibration_set(
            signature, eval_data, limit=EVAL_SAMPLES, seed=seed, what="eval data"
        )
        measured_on = "eval samples"
    candidates, searched = plan
    return quantize_with_methods(
        model,
        recipe,
        candidates=candidates,
        searched=searched,
        calibration=calibration,
        scoring=scoring,
        measured_on=measured_on,
        configure_for=configure_for,
        source=model_name(model),
        gate=gate,
        only_if_plain_fails=only_if_plain_fails,
        before=0.0 if started is None else time.perf_counter() - started,
    )


def quantize_with_methods(
    model: Any,
    recipe: Recipe,
    *,
    candidates: Sequence[tuple[str, ...]],
    searched: bool,
    calibration: Dataset,
    scoring: Dataset,
    measured_on: str,
    configure_for: ConfigureFor,
    source: str,
    gate: GateConfig | None = None,
    only_if_plain_fails: bool = False,
    before: float = 0.0,
) -> MethodsOutcome:
    """Make plain int8 and each candidate, score them (judge them by the gate), keep one.

    The float32 reference and plain int8 come from one trace; the reference runs once on
    the scoring samples for every candidate. Candidates whose methods cannot run on this
    model (a weight method on a SavedModel) are skipped before anything is made, and listed
    with why in the report.

    Args:
        model: The loaded model (Keras, either flavour, or a SavedModel: range methods only).
        recipe: The ``int8`` recipe (its ``methods`` are ignored: ``candidates`` say which).
        candidates: Each set of methods to make, in catalog order.
        searched: Keep one by :func:`~tfcompress.quantization.methods.selection.choose`;
            False: keep the one candidate, as a recipe that names methods asks.
        calibration: The calibration samples.
        scoring: The samples every artifact is scored on.
        measured_on: How to call them in the report (``"eval data"``...).
        configure_for: The converter settings of a recipe.
        source: Model name, for messages.
        gate: Judge every artifact by it, and choose by it.
        only_if_plain_fails: Judge plain int8 first; the candidates are made only when it
            fails ``gate``.
        before: Seconds the verb spent before (loading the model, reading the data): part of
            plain int8's seconds too, for auto's budget.

    Returns:
        The reference, the kept artifact with its recipe, and the report.

    Raises:
        InvalidInputError: ``searched`` is False (or one set was named) and a method in it
            needs a Keras model this model is not.
        UnsupportedModelError: ``searched`` is False and the weight methods cannot rewrite
            the model.
        ConversionError: ``searched`` is False and the quantizer rejected the candidate.
    """
    start = _clock()
    check_runnable(model, candidates, source=source)
    runnable, skipped_list = runnable_candidates(candidates, why_not_keras(model))
    skipped = list(skipped_list)
    for label, why in skipped:
        logger.info("%s skipped: %s", label, why)
    auto = searched and tuple(candidates) == AUTO_CANDIDATES
    plain_recipe = with_methods(recipe, ())
    configures: list[ConverterSettings | None] = [None, configure_for(plain_recipe, False)]
    ranges_only = any(not weight_names(c) for c in runnable)
    # One trace for all three: the graph candidates' calibrate-only conversion then costs
    # one more calibration pass, not a second trace (it cannot stand in for the converter's
    # plain int8, whose bytes differ: see docs/quantization.md). Under a gate that plain
    # int8 passes, that pass is spent for nothing: it is counted in the run's total.
    if ranges_only:
        configures.append(configure_for(plain_recipe, True))
    made = convert_all(model, configures, static_batch=recipe.static_batch)
    reference, plain = made[0], made[1]
    plain_path = _clock() - start
    if len(made) > 2:  # the calibrate-only conversion's own seconds are not the plain path's
        # each conversion's seconds hold the shared trace: the calibrate-only one's own is
        # its calibration pass, what it took over the float32 reference's (at least 5% of
        # plain int8's conversion, lest a noisy clock call it free)
        calibration_pass = max(made[2].seconds - made[0].seconds, 0.05 * made[1].seconds)
        plain_path = max(plain_path - calibration_pass, 0.0)
    if plain_recipe.float_nodes:
        plain = quantize_calibrated(plain, plain_recipe, source=source)
    # Auto is bounded, asked for or started by a gate; methods named are made.
    budget = Budget(AUTO_BUDGET if auto else None, plain_path + before)
    judge = _Judge(reference.content, scoring, source, gate, plain)
    if gate is not None:  # plain int8 judged first, whatever is made
        judge.ready()
    plain_candidate = judge.plain
    scoring_seconds = judge.seconds
    why_run = "asked"
    if only_if_plain_fails:
        if plain_candidate.passes:
            worst = plain_candidate.worst_margin
            reason = (
                f"plain int8 passes every gate (worst margin {worst.shown if worst else '?'}): "
                "auto not run"
            )
            report = MethodsReport(
                measured_on=measured_on,
                samples=len(scoring),
                plain=plain_candidate,
                candidates=(),
                kept=(),
                reason=reason,
                searched=True,
                why_run="plain int8 passed the gate: auto not run",
                gated=True,
                reference_seconds=reference.seconds,
                scoring_seconds=scoring_seconds,
                total_seconds=_clock() - start,
            )
            logger.info("methods for %s: %s", source, reason)
            return MethodsOutcome(reference, plain, plain_recipe, report, ())
        why_run = "plain int8 failed the gate"
        logger.info("plain int8 of %s fails the gate: trying the methods (auto)", source)
    calibrated: dict[tuple[str, ...], tuple[Conversion, Rewrite | None, float] | str] = {}
    if len(made) > 2:
        calibrated[()] = (made[2], None, made[2].seconds)
    built: list[Candidate] = []
    contents: list[bytes | None] = []
    measured: dict[tuple[str, ...], dict[str, Any]] = {}  # shared by the range methods
    # Running the reference and plain int8 on the samples is the gate's own work (quantize
    # --eval judges the artifact either way), not auto's: under a gate the budget counts the
    # rest; asked for, auto's scoring of plain int8 is its own.
    judging_plain = scoring_seconds if gate is not None else 0.0
    float_run = calibration_pass if len(made) > 2 else plain.seconds
    # Before anything is scored, a candidate's scoring is estimated as a float run; the
    # first also pays for running the reference and plain int8 on the samples.
    costs = Costs(
        graph=scoring_seconds or float_run,
        rewrite=2 * plain.seconds,
        float_run=float_run,
        judging=0.0 if judge.scorer is not None else 2 * float_run,
    )
    pending = list(runnable)
    too_dear: dict[tuple[str, ...], str] = {}  # a float run stopped: its candidates skipped
    while pending:
        methods = costs.best(pending, calibrated, measured)
        pending.remove(methods)
        weights, label = weight_names(methods), "+".join(methods)
        estimate = costs.of(methods, calibrated, measured)
        spent = _clock() - start + before - judging_plain
        why = too_dear.get(weights) or budget.refuses(label, spent=spent, estimate=estimate)
        if why is not None:
            skipped.append((label, why))
            logger.info("%s skipped: %s", label, why)
            continue
        if weights not in calibrated:  # () came with the first trace
            calibrated[weights] = _rewritten(
                model, weights, recipe, calibration, configure_for, searched=searched
            )
        base = calibrated[weights]
        if isinstance(base, str):
            built.append(Candidate(methods, error=base))
            contents.append(None)
            continue
        shared = measured.setdefault(weights, {})
        shared.setdefault(WANTED_KEY, wanted([methods, *pending], weights))
        if budget.ratio is not None:  # room left for this candidate's quantizer and scoring
            left = budget.seconds - (_clock() - start + before - judging_plain)
            shared[SECONDS_LEFT_KEY] = left - costs.graph
        candidate_start = _clock()
        try:
            candidate, content = _candidate(
                methods, base, with_methods(recipe, methods), calibration, source,
                searched=searched, shared=shared,
            )  # fmt: skip
        except OverBudget as error:
            if not searched:
                raise ResourceLimitError(f"{label} on {source!r}: {error}.") from None
            why = budget.stopped(label, str(error)) if budget.ratio is not None else str(error)
            too_dear[weights] = why
            skipped.append((label, why))
            logger.info("%s skipped: %s", label, why)
            continue
        # The shared rewrite and calibration are charged to the first candidate made from
        # them: the candidates' seconds add up to what the methods cost.
        calibrated[weights] = (base[0], base[1], 0.0)
        judged = judge.seconds
        if content is not None:
            fidelity, margins = judge.score(content)
            candidate = replace(candidate, fidelity=fidelity, gate=margins)
        first = judge.first_seconds if judged == 0.0 and judge.scorer is not None else 0.0
        costs.judging = 0.0 if judge.scorer is not None else costs.judging
        costs.made(_clock() - candidate_start - shared.pop(RUN_SECONDS_KEY, 0.0) - first, built)
        built.append(candidate)
        contents.append(content)
    gated = gate is not None
    plain_candidate, scoring_seconds = judge.plain, judge.seconds
    warnings: list[str] = []
    if searched:
        index, reason = choose(plain_candidate, built, gated=gated)
        if not built and budget.ratio is not None and skipped:
            reason = (
                f"auto's budget ({budget.ratio:g}x plain int8, {budget.seconds:.1f} s) left "
                "room for no candidate: plain int8 kept (name methods with --method to make "
                "them)"
            )
    else:
        index = 0
        worse = worse_than_plain(built[0], plain_candidate, gated=gated)
        reason = "the recipe names these methods: applied as given"
        if worse is not None:
            reason += f" (worse than plain int8: {worse})"
            warnings.append(
                f"the recipe's methods ({built[0].label}) are worse than plain int8: {worse}"
            )
    kept = () if index is None else built[index].methods
    chosen = plain if index is None else replace(plain, content=contents[index] or b"")
    total = _clock() - start
    report = MethodsReport(
        measured_on=measured_on,
        samples=len(scoring),
        plain=plain_candidate,
        candidates=tuple(built),
        kept=kept,
        reason=reason,
        searched=searched,
        why_run=why_run,
        gated=gated,
        skipped=tuple(skipped),
        reference_seconds=reference.seconds,
        scoring_seconds=scoring_seconds,
        total_seconds=total,
        budget_seconds=budget.seconds if budget.ratio is not None else None,
    )
    logger.info("methods for %s: kept %s (%s) in %.1fs", source, kept or "plain", reason, total)
    quantized = Conversion(chosen.content, total, plain.warnings + tuple(warnings))
    return MethodsOutcome(reference, quantized, with_methods(recipe, kept), report, tuple(warnings))


def with_methods(recipe: Recipe, methods: tuple[str, ...]) -> Recipe:
    """``recipe`` with ``methods``; its percentile kept only where a method reads it.

    Example:
        >>> with_methods(Recipe("int8", methods=("percentile-ranges",), range_percentile=99.0),
        ...              ()).range_percentile
        99.99
    """
    used = option_used("range_percentile", methods)
    percentile = recipe.range_percentile if used else DEFAULT_PERCENTILE
    return replace(recipe, methods=methods, range_percentile=percentile)


def _rewritten(
    model: Any,
    weights: tuple[str, ...],
    recipe: Recipe,
    calibration: Dataset,
    configure_for: ConfigureFor,
    *,
    searched: bool,
) -> tuple[Conversion, Rewrite | None, float] | str:
    """The calibrate-only conversion of the rewritten copy (or why it could not be made)."""
    start = time.perf_counter()
    try:
        copy, rewrite = rewrite_model(model, weights, calibration, per_channel=recipe.per_channel)
        plain = with_methods(recipe, ())
        conversion = convert_all(
            copy, [configure_for(plain, True)], static_batch=recipe.static_batch
        )
    except (UnsupportedModelError, ConversionError) as error:
        if not searched:
            raise
        logger.info("%s not tried: %s", "+".join(weights), error)
        return str(error)
    return conversion[0], rewrite, time.perf_counter() - start


def _candidate(
    methods: tuple[str, ...],
    base: tuple[Conversion, Rewrite | None, float],
    recipe: Recipe,
    calibration: Dataset,
    source: str,
    *,
    searched: bool,
    shared: dict[str, Any],
) -> tuple[Candidate, bytes | None]:
    """Apply the graph and range methods to the calibrated model and quantize one candidate.

    A graph method's changes go to the candidate's ``edits`` under its ``report_key``; a
    range method's chosen ranges to its ``ranges``.

    ``shared`` is the range methods' cache for the calibrated model (its histograms):
    candidates that share a rewrite share one float run of it, whatever range method each
    uses.
    """
    conversion, rewrite, seconds = base
    start = time.perf_counter()
    ranges: tuple[Any, ...] = ()
    edits: dict[str, tuple[Any, ...]] = {}
    content = conversion.content
    context = RangeContext(calibration, recipe, shared)
    try:
        for method in range_methods(methods):
            content, edited = method.edit_ranges(content, context)
            if isinstance(method, GraphMethod):  # its own report entries, by its key
                edits[method.report_key] = edits.get(method.report_key, ()) + tuple(edited)
            else:
                ranges += tuple(edited)
        quantized = quantize_calibrated(replace(conversion, content=content), recipe, source=source)
    except ConversionError as error:
        if not searched:
            raise
        return Candidate(methods, rewrite=rewrite, error=str(error)), None
    spent = seconds + time.perf_counter() - start
    made = Candidate(
        methods,
        size_bytes=len(quantized.content),
        seconds=spent,
        rewrite=rewrite,
        ranges=ranges,
        edits=edits,
    )
    return made, quantized.content


class _Judge:
    """The scorer of the candidates and plain int8's scores, made when first needed.

    Asked for without a gate, auto runs the reference and plain int8 on the samples only
    once a candidate is made: a run that can afford none pays nothing for them.
    """

    def __init__(
        self, reference: bytes, scoring: Dataset, source: str, gate: Any, plain: Conversion
    ) -> None:
        self.args = (reference, scoring, source, gate)
        self.content = plain.content
        self.plain = Candidate((), (), len(plain.content), plain.seconds)
        self.scorer: Scorer | None = None
        self.seconds = self.first_seconds = 0.0

    def ready(self) -> Scorer:
        """The scorer, with plain int8 scored (the first call runs the reference)."""
        if self.scorer is None:
            start = _clock()
            reference, scoring, source, gate = self.args
            self.scorer = Scorer(reference, scoring, source=source, gate=gate)
            fidelity, margins = self.scorer.score(self.content)
            self.plain = replace(self.plain, fidelity=fidelity, gate=margins)
            self.first_seconds = _clock() - start
            self.seconds += self.first_seconds
        return self.scorer

    def score(self, content: bytes) -> tuple[Any, Any]:
        """``content``'s fidelities and gate margins."""
        scorer = self.ready()
        start = _clock()
        scored = scorer.score(content)
        self.seconds += _clock() - start
        return scored
