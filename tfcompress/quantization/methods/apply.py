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
from tfcompress.models.loading import KerasFile
from tfcompress.quantization.converter import Conversion, ConverterSettings, convert_all
from tfcompress.quantization.engines import converter_float_nodes
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
    precision_method,
    range_methods,
)
from tfcompress.quantization.methods.report import Candidate, MethodsReport
from tfcompress.quantization.methods.rewrite import Rewrite, rewrite_model
from tfcompress.quantization.methods.selection import (
    Scorer,
    choose,
    scoring_set,
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


def why_not_keras(model: Any) -> str | None:
    """None when the weight methods can rewrite ``model``; else why not, in a few words.

    Cheap (no TensorFlow call): decided before any conversion is paid for. A Keras file is
    asked where it is loaded, the converter's child.
    """
    from tfcompress._compat.keras import flavour_of
    from tfcompress.quantization.methods.graph import LayerGraph

    if isinstance(model, KerasFile):
        return model.apply(f"{__name__}:why_not_keras", what="reading")  # type: ignore[no-any-return]
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
    per_op_min_snr: float | None = None,
) -> MethodsOutcome:
    """Make plain int8 and each candidate, score them (judge them by the gate), keep one.

    The float32 reference and plain int8 come from one trace; the reference runs once on
    the scoring samples (``eval_data``, else the calibration samples) for every candidate.
    Candidates whose methods cannot run on this model (a weight method on a SavedModel) are
    skipped before anything is made, and listed with why in the report. The recipe's own
    ``methods`` are ignored: ``plan`` (:func:`~.catalog.plan_candidates`) says which sets to
    make, in catalog order, and whether to keep one by :func:`~.selection.choose` (else the
    one named is kept, as a recipe that names methods asks). ``gate`` judges and chooses on
    every eval sample; with ``only_if_plain_fails``, plain int8 is judged first and the
    candidates made only when it fails. ``started`` (when the verb began) counts what came
    before in plain int8's seconds, which auto's budget multiplies. ``per_op_min_snr``:
    per-op's bar (None: its default).

    Raises:
        InvalidDataError: ``eval_data`` does not fit the model.
        InvalidInputError: Not searched (or one set named) and a method in it needs a
            Keras model this model is not.
        UnsupportedModelError: Not searched and the weight methods cannot rewrite the model.
        ConversionError: Not searched and the quantizer rejected the candidate.
    """
    from tfcompress.models.loading import model_name

    candidates, searched = plan
    source = model_name(model)
    scoring = calibration
    if eval_data is not None:
        scoring = scoring_set(eval_data, model, seed=seed, gate=gate)
    measured_on = "calibration samples" if eval_data is None else "eval samples"
    before = 0.0 if started is None else time.perf_counter() - started
    precision = precision_method(candidates)  # per-op: run alone, instead of the candidates
    if precision is not None:
        context = {"calibration": calibration, "scoring": scoring, "measured_on": measured_on}
        context.update(configure_for=configure_for, source=source, gate=gate)
        if per_op_min_snr is not None:  # the PerOpBar field; its default otherwise
            from tfcompress.quantization.methods.per_op import PerOpBar

            context["bar"] = PerOpBar(per_op_min_snr=per_op_min_snr)
        return precision.quantize(model, recipe, **context)  # type: ignore[no-any-return]
    start = _clock()
    check_runnable(model, candidates, source=source)
    runnable, skipped_list = runnable_candidates(candidates, why_not_keras(model))
    skipped = list(skipped_list)
    for label, why in skipped:
        logger.info("%s skipped: %s", label, why)
    auto = searched and tuple(candidates) == AUTO_CANDIDATES
    plain_recipe = with_methods(recipe, ())
    # Ops kept float (float_nodes, float rules): plain int8 is its calibration quantized with
    # them denylisted, as every candidate is; the rules become the nodes they name.
    selective = bool(plain_recipe.float_nodes or plain_recipe.rules)
    configures: list[ConverterSettings | None] = [None, configure_for(plain_recipe, selective)]
    ranges_only = any(not weight_names(c) for c in runnable)
    # One trace for all three; the graph candidates' calibrate-only conversion is the model
    # plain int8 calibrated, not a conversion more (it cannot stand in for the converter's
    # plain int8, whose bytes differ: docs/quantization.md).
    if ranges_only:
        configures.append(configure_for(plain_recipe, True))
    made = convert_all(model, configures, static_batch=recipe.static_batch)
    reference, plain = made[0], made[1]
    plain_path, float_run, loading = _clock() - start, plain.seconds, 0.0
    if len(made) > 2:
        # The calibrate-only one is plain int8's calibration (the trace T every one's seconds
        # hold, and that pass): the wall is T, overheads and each own (s - T), so the pass
        # took at most 2 s2 + wall - (s0 + s1 + s2). A Keras file is traced in the child.
        s0, s1, s2 = (m.seconds for m in made)
        float_run = min(s2, max(s2 + plain_path - s0 - s1, 0.0))
        loading = max(plain_path - s0 - s1 - s2 + float_run, 0.0)
    if selective:
        nodes = converter_float_nodes(plain.content, plain_recipe, source=source)
        recipe = replace(recipe, float_nodes=nodes, rules=())
        plain_recipe = with_methods(recipe, ())
        plain = quantize_calibrated(plain, plain_recipe, source=source)
    # Auto is bounded, asked for or started by a gate; methods named are made.
    budget = Budget(AUTO_BUDGET if auto else None, plain_path + before)
    judge = _Judge(reference.content, scoring, source, gate, plain)
    if gate is not None:  # plain int8 judged first, whatever is made
        judge.ready()
    plain_candidate, scoring_seconds = judge.plain, judge.seconds
    why_run, passed = "asked", only_if_plain_fails and plain_candidate.passes
    if passed:  # under a gate that plain int8 passes, nothing more is made
        runnable, skipped, why_run = (), [], "plain int8 passed the gate: auto not run"
    elif only_if_plain_fails:
        why_run = "plain int8 failed the gate"
        logger.info("plain int8 of %s fails the gate: trying the methods (auto)", source)
    calibrated: dict[tuple[str, ...], tuple[Conversion, Rewrite | None, float] | str] = {}
    if len(made) > 2:
        calibrated[()] = (made[2], None, 0.0)
    built: list[Candidate] = []
    contents: list[bytes | None] = []
    measured: dict[tuple[str, ...], dict[str, Any]] = {}  # shared by the range methods
    # Running the reference and plain int8 on the samples is the gate's own work (quantize
    # --eval judges the artifact either way), not auto's: under a gate the budget counts the
    # rest; asked for, auto's scoring of plain int8 is its own.
    judging_plain = scoring_seconds if gate is not None else 0.0
    # Until measured, a run over the scoring samples is estimated as the calibration's
    # (scaled by the counts), a graph candidate as two (its quantizer call and scoring).
    run = float_run * len(scoring) / max(len(calibration), 1)
    costs = Costs(
        graph=scoring_seconds or 2 * run,
        rewrite=2 * plain.seconds + 3 * loading,  # two conversions and a Keras file's load
        float_run=float_run,
        judging=0.0 if judge.scorer is not None else 2 * run,
    )
    pending = list(runnable)
    too_dear: dict[tuple[str, ...], str] = {}  # a float run stopped: its candidates skipped

    def spent() -> float:
        return _clock() - start + before - judging_plain

    while pending:
        methods = costs.best(pending, calibrated, measured)
        pending.remove(methods)
        weights, label = weight_names(methods), "+".join(methods)
        if judge.scorer is None and not budget.refuses(
            label, spent=spent(), estimate=costs.judging
        ):
            judge.ready()  # paid once it fits: the candidates are then costed on its seconds
            costs.judging, costs.graph = 0.0, judge.seconds
        estimate = costs.of(methods, calibrated, measured)
        why = too_dear.get(weights) or budget.refuses(label, spent=spent(), estimate=estimate)
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
            shared[SECONDS_LEFT_KEY] = budget.seconds - spent() - costs.graph
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
        if content is not None:
            fidelity, margins = judge.score(content)
            candidate = replace(candidate, fidelity=fidelity, gate=margins)
        costs.made(_clock() - candidate_start - shared.pop(RUN_SECONDS_KEY, 0.0), built)
        built.append(candidate)
        contents.append(content)
    gated = gate is not None
    plain_candidate, scoring_seconds = judge.plain, judge.seconds
    warnings: list[str] = []
    if searched:
        index, reason = choose(plain_candidate, built, gated=gated)
        if passed:
            worst = plain_candidate.worst_margin
            shown = worst.shown if worst else "?"
            reason = f"plain int8 passes every gate (worst margin {shown}): auto not run"
        elif not built and budget.ratio is not None and skipped:
            reason = (
                f"auto's budget ({budget.ratio:g}x plain int8, {budget.seconds:.1f} s) left "
                "room for no candidate: plain int8 kept (name methods with --methods to make "
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
        budget_seconds=None if budget.ratio is None or passed else budget.seconds,
    )
    logger.info("methods for %s: kept %s (%s) in %.1fs", source, kept or "plain", reason, total)
    quantized = Conversion(chosen.content, total, plain.warnings + tuple(warnings))
    return MethodsOutcome(reference, quantized, with_methods(recipe, kept), report, tuple(warnings))


def with_methods(recipe: Recipe, methods: tuple[str, ...]) -> Recipe:
    """``recipe`` with ``methods``; its percentile kept only where a method reads it."""
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
    """The calibrate-only conversion of the rewritten copy (or why it could not be made).

    A Keras file is rewritten where it is loaded, the converter's child: the user's model
    runs there, contained, and TensorFlow stays out of the caller.
    """
    start = time.perf_counter()
    settings = configure_for(with_methods(recipe, ()), True)
    given = (weights, calibration, settings, recipe.per_channel, recipe.static_batch)
    try:
        if isinstance(model, KerasFile):
            made = model.apply(f"{__name__}:rewrite_and_calibrate", *given, what="rewriting")
        else:
            made = rewrite_and_calibrate(model, *given)
    except (UnsupportedModelError, ConversionError) as error:
        if not searched:
            raise
        logger.info("%s not tried: %s", "+".join(weights), error)
        return str(error)
    return (*made, time.perf_counter() - start)


def rewrite_and_calibrate(
    model: Any, weights: tuple[str, ...], calibration: Dataset, settings: ConverterSettings,
    per_channel: bool, static_batch: int | None,
) -> tuple[Conversion, Rewrite]:  # fmt: skip
    """The rewritten copy of ``model``, converted as ``settings`` say (calibrate-only)."""
    copy, rewrite = rewrite_model(model, weights, calibration, per_channel=per_channel)
    return convert_all(copy, [settings], static_batch=static_batch)[0], rewrite


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

    A graph method's changes go to ``edits`` under its ``report_key``, a range method's
    ranges to ``ranges``; ``shared`` is the float run's cache, shared by one rewrite's
    candidates.
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

    Auto without a gate runs the reference and plain int8 only once its budget has room.
    """

    def __init__(
        self, reference: bytes, scoring: Dataset, source: str, gate: Any, plain: Conversion
    ) -> None:
        self.args = (reference, scoring, source, gate)
        self.content = plain.content
        self.plain = Candidate((), (), len(plain.content), plain.seconds)
        self.scorer: Scorer | None = None
        self.seconds = 0.0

    def ready(self) -> Scorer:
        """The scorer, with plain int8 scored (the first call runs the reference)."""
        if self.scorer is None:
            start = _clock()
            reference, scoring, source, gate = self.args
            self.scorer = Scorer(reference, scoring, source=source, gate=gate)
            fidelity, margins = self.scorer.score(self.content)
            self.plain = replace(self.plain, fidelity=fidelity, gate=margins)
            self.seconds += _clock() - start
        return self.scorer

    def score(self, content: bytes) -> tuple[Any, Any]:
        """``content``'s fidelities and gate margins."""
        scorer = self.ready()
        start = _clock()
        scored = scorer.score(content)
        self.seconds += _clock() - start
        return scored
