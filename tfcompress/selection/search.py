"""``tfcompress.select_model``: the most accurate zoo model that fits the budgets, measured."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Unpack

from tqdm.auto import tqdm

from tfcompress._compat.tf import require_tensorflow
from tfcompress._config_fields import config_or_options
from tfcompress.errors import BackendUnavailableError, InvalidInputError
from tfcompress.selection.budgets import Budgets
from tfcompress.selection.candidates import Candidate, enumerate_candidates
from tfcompress.selection.config import SelectionConfig, SelectionOptions, check_workers
from tfcompress.selection.costs import measure_candidate, time_on_device
from tfcompress.selection.data import SelectionData, read_selection_data
from tfcompress.selection.executors import Runner, is_dask_client
from tfcompress.selection.result import SelectionResult
from tfcompress.selection.store import CandidateStore, settings_key
from tfcompress.selection.training import train_candidate
from tfcompress.selection.verdicts import build_records, pareto_names, pick, within_cost_budgets
from tfcompress.targets.base import get_target

logger = logging.getLogger(__name__)

#: The config's training options, as each candidate's training task takes them.
_TRAINING = ("epochs", "batch_size", "learning_rate", "calibration_samples")
PHASE1_CALIBRATION = 16  # "a few" samples: they only set the untrained model's int8 ranges


def select_model(
    *,
    train_data: Any,
    eval_data: Any,
    config: SelectionConfig | None = None,
    executor: Any = None,
    workdir: str | os.PathLike[str] | None = None,
    progress: bool = False,
    workers: int = 1,
    on: Any = None,
    device: str | None = None,
    **options: Unpack[SelectionOptions],
) -> SelectionResult:
    """Find the best zoo model within budgets, every number measured on the int8 artifact.

    Phase 1 (no training) builds every candidate (family x width x resolution), converts
    the untrained model to int8 and measures its parameters, MACs, ``.tflite`` size and
    latency on the worker that runs it; a candidate over the size or latency budget is
    ``over_budget`` and never trained. Phase 2 trains the survivors (Keras, Adam, sparse
    categorical cross-entropy, seeded), quantizes each to int8 calibrated on the training
    images and scores the int8 ``.tflite`` on ``eval_data``. Images are resized to each
    candidate's resolution (``tf.image.resize``, bilinear), channels kept.

    Args:
        train_data: Training images with integer class labels (see
            :func:`tfcompress.data.load_data`: arrays, ``(x, y)``, ``.npz``...).
        eval_data: Images with labels to score each trained candidate's int8 artifact on.
        config: What to search for (budgets, candidates, training, timing, objective, seed),
            recorded as ``result.config``; None: built from ``**options``.
        executor: A ``concurrent.futures.Executor`` or a ``dask.distributed.Client``; None
            runs ``workers`` local child processes (:class:`~.executors.ChildPool`).
        workdir: Folder for one JSON file per candidate; a re-run with it skips finished
            phases. None keeps nothing on disk.
        progress: Draw a progress bar (measured / trained / left) on stderr.
        workers: Processes of the default local pool (refused with ``executor``).
        on: Measure every candidate's int8 latency on a device instead of on the worker
            that built it: a Dask scheduler's address (``tcp://HOST:8786``) or a connected
            ``distributed.Client`` whose worker runs in the device install
            (docs/devices.md). Not ``executor``: that cluster builds and trains; this one
            only times the int8 files, one at a time. Each record's ``device`` (and
            ``worker``/``host``) names it, and ``settings["device"]``.
        device: With ``on``, the worker's name (``dask worker ... --name pi5``); None: the
            only worker (several and none named is refused: budgets are judged on one).
        **options: :class:`~tfcompress.selection.config.SelectionConfig`'s fields by name
            (see it for each and its defaults), refused next to ``config=``; an unknown one
            is refused, naming the valid ones.

    Raises:
        InvalidInputError: What :class:`~tfcompress.selection.config.SelectionConfig`
            refuses (impossible budgets, an unknown family or objective, a resolution a
            family cannot take, bad settings), a keyword option next to ``config=``, an
            unreachable ``on`` or no such device; all checked before any work.
        InvalidDataError: Data without integer class labels, or train and eval
            images with different channel counts.

    Example:
        >>> result = tfcompress.select_model(
        ...     train_data="train.npz", eval_data="eval.npz",
        ...     budgets=Budgets(max_size=500_000, max_latency=5, min_accuracy=0.9),
        ...     families=("mobilenet_v2", "mixnet_s"), epochs=3, workdir="selection_work",
        ... )  # doctest: +SKIP
        >>> print(result.best)  # doctest: +SKIP
    """
    config = config_or_options(
        config,
        SelectionConfig,
        options,
        SelectionConfig.from_options,
        holds="what the selection searches for",
        example="SelectionConfig(budgets=..., families=...)",
        put_it="dataclasses.replace(config, epochs=...)",
    )
    check_workers(workers)
    if executor is not None and workers != 1:
        raise InvalidInputError("workers sizes the default local pool; drop it with executor=.")
    if device is not None and on is None:
        raise InvalidInputError("device= names a worker of on='s scheduler (--on); give on=.")
    if not is_dask_client(executor):  # here: on a Dask cluster the workers build and train
        require_tensorflow("select (it builds and trains zoo models)")
    candidates = enumerate_candidates(config.families, config.width_multipliers, config.resolutions)
    data = read_selection_data(train_data, eval_data)
    where = None
    if on is not None:  # connected and picked before any work
        from tfcompress.bench.device_latency import LatencyDevice

        where = LatencyDevice.open(on, device)
    try:
        result = _select(candidates, data, config, executor, workdir, progress, workers, where)
        return replace(result, config=config)
    finally:
        if where is not None:
            where.close()


def _select(
    candidates: list[Candidate],
    data: SelectionData,
    config: SelectionConfig,
    executor: Any,
    workdir: Any,
    progress: bool,
    workers: int,
    where: Any,
) -> SelectionResult:
    """The two phases of :func:`select_model`, its settings checked."""
    from tfcompress import __version__

    budgets = config.budgets
    timing = {"runs": config.latency_runs, "min_seconds": config.latency_seconds}
    training_options = {name: getattr(config, name) for name in _TRAINING}
    store = CandidateStore(workdir)
    common = {
        "channels": data.channels,
        "num_classes": data.num_classes,
        "seed": int(config.seed),
        "backend": budgets.target,
        "threads": budgets.threads,
        **_latency_optional(budgets),
    }
    # Timed on a device (--on): a work folder's latencies from elsewhere are not reused.
    on_device = {} if where is None else {"latency_on": where.name}
    measure_settings = {
        **common,
        # A target's budget fields are measured in phase 1: a work folder from before they
        # existed has no such numbers, so its key must differ (none: the key stays as it was).
        **_target_measure_key(budgets),
        "train": data.train_fingerprint,
        **timing,
        "version": __version__,
    }
    train_settings = {
        **measure_settings,
        "val": data.val_fingerprint,
        **training_options,
    }
    runner = Runner(executor, workers=workers)
    work = {"measured": 0, "trained": 0, "reused": 0}
    try:
        with tqdm(total=len(candidates), desc="select", unit="step", disable=not progress) as bar:
            costs = _phase(
                runner,
                store,
                "costs",
                candidates,
                lambda c: settings_key({**measure_settings, **on_device, "candidate": c.to_dict()}),
                lambda c: {
                    **common,
                    **on_device,
                    "candidate": c.to_dict(),
                    "calibration": data.x_train[:PHASE1_CALIBRATION],
                    **timing,
                },
                measure_candidate,
                bar,
                work,
                # with on=: each int8 file timed on the device, in turn
                finish=None if where is None else partial(time_on_device, where=where),
            )
            _check_something_measured(costs, budgets)
            survivors = [c for c in candidates if within_cost_budgets(costs[c.name], budgets)]
            bar.total += len(survivors)
            bar.refresh()
            training = _phase(
                runner,
                store,
                "training",
                survivors,
                lambda c: settings_key({**train_settings, "candidate": c.to_dict()}),
                lambda c: {
                    **common,
                    "candidate": c.to_dict(),
                    "x_train": data.x_train,
                    "y_train": data.y_train,
                    "x_val": data.x_val,
                    "y_val": data.y_val,
                    **training_options,
                },
                train_candidate,
                bar,
                work,
            )
        description = runner.describe()
    except BaseException:  # Ctrl-C included: every finished phase is already on disk
        runner.close(wait=False)
        raise
    runner.close()
    settings = {
        **{name: getattr(config, name) for name in (*_TRAINING, "seed")},
        "latency_runs": config.latency_runs,
        "latency_seconds": config.latency_seconds,
        "workdir": None if workdir is None else str(workdir),
        "work": work,
        "device": None if where is None else where.to_dict(),
    }
    result = _result(
        candidates, costs, training, budgets, config.objective, description, data, settings
    )
    return replace(result, notes=_unmeasured_notes(costs, budgets))


def _check_something_measured(costs: dict[str, dict[str, Any]], budgets: Budgets) -> None:
    """Fail when no candidate could be measured at all.

    No budget was judged then, so it is no check that failed (exit 1) but a setting or a
    machine that cannot run the search (exit 2).
    """
    if not costs or any(outcome.get("ok") for outcome in costs.values()):
        return
    reason = str(next(iter(costs.values())).get("reason", "no reason given"))
    if "unavailable" in reason:
        raise BackendUnavailableError(
            f"no candidate could be measured on target {budgets.target!r} "
            f"({reason[:300]}); choose a target this machine has (e.g. --target cpu)."
        )
    raise InvalidInputError(
        f"no candidate could be measured; the first failed with: {reason[:300]}."
    )


def _phase(
    runner: Runner,
    store: CandidateStore,
    phase: str,
    candidates: list[Candidate],
    key_of: Callable[[Candidate], str],
    task_of: Callable[[Candidate], dict[str, Any]],
    function: Callable[[dict[str, Any]], dict[str, Any]],
    bar: Any,
    work: dict[str, int],
    finish: Callable[[dict[str, Any], dict[str, Any], float], dict[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run ``function`` for every candidate not finished in ``store``; save each on arrival.

    ``finish(outcome, task, started)``, when given, completes an outcome here before it is
    saved (``select --on``: the latency measured on the device).
    """
    done: dict[str, dict[str, Any]] = {}
    pending: dict[Any, Candidate] = {}
    tasks: dict[str, tuple[dict[str, Any], float]] = {}
    for candidate in candidates:
        stored = store.phase(candidate, phase, key_of(candidate))
        if stored is not None:
            done[candidate.name] = {**stored, "reused": True}
            work["reused"] += 1
            bar.update(1)
            continue
        task = task_of(candidate)
        tasks[candidate.name] = task, time.perf_counter()
        pending[runner.submit(function, task)] = candidate
    _postfix(bar, phase, done, len(pending))
    try:
        for future in runner.as_completed(list(pending)):
            candidate = pending.pop(future)
            try:
                outcome = future.result()
            except Exception as error:  # a worker died or the task could not travel
                reason = " ".join(str(error).split())[:200]
                outcome = {"ok": False, "reason": f"{phase}: {type(error).__name__}: {reason}"}
            if finish is not None:
                outcome = finish(outcome, *tasks[candidate.name])
            if outcome.get("ok"):
                # Saved the moment it arrives: Ctrl-C or a dead worker later loses none of it.
                store.save(candidate, phase, key_of(candidate), outcome)
                work["measured" if phase == "costs" else "trained"] += 1
            else:  # failures are not stored: a re-run tries them again
                logger.warning("%s: %s", candidate.name, outcome.get("reason"))
            done[candidate.name] = outcome
            bar.update(1)
            _postfix(bar, phase, done, len(pending))
    except BaseException:
        runner.cancel(pending)
        raise
    return done


def _latency_optional(budgets: Budgets) -> dict[str, bool]:
    """A target that goes on without its latency backend (the GPU) may, with no latency budget.

    Only such a target's tasks carry the key, so the other targets' stored results stay valid.
    """
    if get_target(budgets.target).fallback_backend is None:
        return {}
    return {"latency_optional": budgets.max_latency is None}


def _unmeasured_notes(costs: dict[str, dict[str, Any]], budgets: Budgets) -> tuple[str, ...]:
    """Say that candidates were ranked without latency, and why (no GPU on the workers)."""
    why = [c["latency_unmeasured"] for c in costs.values() if c.get("latency_unmeasured")]
    if not why:
        return ()
    reason = str(why[0]).removeprefix("unavailable: ").split(";")[0]
    return (
        f"latency not measured for {len(why)} candidate(s) on target {budgets.target!r} "
        f"({reason}): ranked by accuracy, then size; a latency budget (--max-latency) or "
        "the reward objective needs a machine where the target's backend runs",
    )


def _postfix(bar: Any, phase: str, done: dict[str, Any], left: int) -> None:
    bar.set_postfix_str(f"{'measured' if phase == 'costs' else 'trained'} {len(done)}, left {left}")


def _result(
    candidates: list[Candidate],
    costs: dict[str, dict[str, Any]],
    training: dict[str, dict[str, Any]],
    budgets: Budgets,
    objective: str,
    executor: str,
    data: SelectionData,
    settings: dict[str, Any],
) -> SelectionResult:
    from tfcompress.bench.environment import capture_environment

    records = build_records(candidates, costs, training, budgets)
    settings = {
        "families": list(dict.fromkeys(c.family for c in candidates)),
        "width_multipliers": list(dict.fromkeys(c.width for c in candidates)),
        "resolutions": list(dict.fromkeys(c.resolution for c in candidates)),
        "num_classes": data.num_classes,
        "train_samples": len(data.y_train),
        "eval_samples": len(data.y_val),
        "resize": "tf.image.resize, bilinear, channels kept",
        **settings,
    }
    return SelectionResult(
        candidates=tuple(records),
        pareto=tuple(pareto_names(records)),
        best=pick(records, objective),
        budgets=budgets,
        objective=objective,
        settings=settings,
        executor=executor,
        environment=capture_environment().to_dict(),
    )


def _target_measure_key(budgets: Budgets) -> dict[str, Any]:
    names = [f.name for f in get_target(budgets.target).budget_fields]
    return {"target_measures": names} if names else {}
