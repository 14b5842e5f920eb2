"""Gates on every output of a model: task metrics against labels, fidelity without them.

:func:`check_gate` runs the reference and the candidate on the same samples (each through
its runtime, the candidate on the backend it is deployed with), matches their inputs and
outputs by name, and judges one verdict per (output, metric) with
:func:`~tfcompress.testing.judge.judge_outputs_by_name`. It is what ``tfcompress gate``,
the pytest plugin and ``quantize/qat/prune/cluster --max-drop`` run.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any, Unpack

from tfcompress._config_fields import config_or_options
from tfcompress.errors import GateFailedError, UnsupportedModelError
from tfcompress.testing.config import CheckGateOptions, GateConfig
from tfcompress.testing.judge import judge_outputs_by_name
from tfcompress.testing.report import GateReport
from tfcompress.testing.settings import DEFAULT_BACKEND

logger = logging.getLogger(__name__)

__all__ = ["GateError", "assert_gate", "check_gate"]


class GateError(GateFailedError):
    """A gate failed; :attr:`report` holds every verdict (also an ``AssertionError``)."""

    def __init__(self, report: GateReport) -> None:
        super().__init__(report.explain())
        self.report = report


def check_gate(
    reference: Any,
    candidate: Any,
    data: Any,
    *,
    config: GateConfig | None = None,
    safe_mode: bool = True,
    on: Any = None,
    device: str | None = None,
    **options: Unpack[CheckGateOptions],
) -> GateReport:
    """Run both models on ``data`` and judge each (output, metric); a failed gate is returned.

    With no metric named, each output gets one chosen from its shape and the data (labels
    present and class-like -> accuracy; a mask with integer labels -> mean IoU; no labels ->
    top-1 agreement for probabilities, SNR otherwise) and the verdict says why.

    What the gate judges and how is a :class:`~tfcompress.testing.config.GateConfig`
    (``config=``); the keyword options only build the same config, and are refused next
    to ``config=``. The models,
    the data, ``safe_mode`` and where the candidate runs (``on``/``device``) stay keywords:
    the same config judges a file here and on a device. ``report.config`` records it.

    Args:
        reference: The model the candidate must match (Keras, SavedModel, ``.tflite``,
            ``.onnx``; a loaded model, bytes or a path).
        candidate: The deployed artifact.
        data: Samples (one array, ``(x, y)``, a dict or ``.npz`` with one array per input
            name); labels per output as ``y`` or ``y_<output name>``, optional.
        config: What to check and how; None: built from ``**options``.
        safe_mode: Refuse Keras files that would run code when loaded (Lambda layers);
            False only for files you trust (``--unsafe``).
        on: Run the candidate on a device: a Dask scheduler's address or a connected
            ``distributed.Client`` whose worker runs it (``gate --on``; see
            :func:`tfcompress.bench.device_gate.run_on_device`); the reference runs here.
        device: With ``on``, the worker's name (None: the only worker).
        **options: :class:`~tfcompress.testing.config.CheckGateOptions`, what
            :meth:`GateConfig.from_options` takes: ``outputs`` (default: every output),
            ``metrics`` (:func:`~tfcompress.bench.metrics.metric_names`), the
            :class:`GateSettings` fields ``mode``, ``backend`` (of a ``.tflite`` candidate),
            ``confidence`` and ``interval``, or ready-made ``settings``; ``threads``;
            ready-made ``checks`` (then no metric or threshold options); ``batch_dims``
            (``--batch-dim h=1``; an output's name too, where outputs are joined);
            ``input_values`` (``--input-value sr=16000``); and one keyword per row of the
            threshold table (:func:`tfcompress.bench.thresholds.thresholds`): ``max_drop``
            (default 0.01 for accuracy-like metrics), ``min_snr`` (dB, default 20),
            ``min_cosine`` (0.99), ``max_abs`` (no default), ``min_agreement`` (0.99).

    The signature decides how both models are fed (:mod:`tfcompress.models.feeding`): a
    scalar input gets one value per call, a ``(layers, N, units)`` state its batch in the
    middle, a static-batch model (``(1, 40)``) runs one call per sample. A ``.tflite`` or
    ``.onnx`` runs in a worker process, so a native crash is an error (exit 2), not the end.

    Returns:
        The report: one verdict per (output, metric); ``report.passed`` when all pass.

    Raises:
        InvalidInputError: What :class:`~tfcompress.testing.config.GateConfig` refuses, a
            keyword option next to ``config=``, options that fit no output, a metric
            that cannot mean anything for an output (accuracy on a box), a metric without
            a default threshold given none.
        InvalidDataError: Data that does not fit the models, a task metric without labels.
        UnsupportedModelError: Outputs that cannot be matched, a delegate backend for a
            candidate that is not a ``.tflite``.
        BackendUnavailableError: The backend cannot run here.

    Example:
        >>> report = check_gate("model.keras", "model_int8.tflite", "test.npz")  # doctest: +SKIP
        >>> [(v.output, v.metric, v.passed) for v in report.verdicts]  # doctest: +SKIP
        [('cls', 'accuracy', True), ('box', 'snr', True)]
    """
    from tfcompress.bench.paired import read_for_reference, run_model
    from tfcompress.models import model_name, model_signature

    config = config_or_options(
        config,
        GateConfig,
        options,
        GateConfig.from_options,
        holds="what the gate checks and how",
        example="GateConfig.from_options(metrics=..., min_snr=...)",
        put_it="dataclasses.replace(config, threads=...)",
    )
    settings, checks, threads = config.settings, config.checks_to_run, config.threads
    batch_dims, input_values = config.batch_dims, config.input_values
    ref, cand = load_pair(reference, candidate, settings.backend, safe_mode=safe_mode)
    signature = model_signature(ref)
    dataset = read_for_reference(
        data, ref, "gate data", batch_dims=batch_dims, input_values=input_values
    )
    ref_name, cand_name = display_names(model_name(ref), model_name(cand))
    ref_run = run_model(
        ref, dataset, signature, name=ref_name, threads=threads, batch_dims=batch_dims
    )
    run = run_model
    if on is not None:  # the candidate runs where it is deployed: a Dask worker, a device
        from functools import partial

        from tfcompress.bench.device_gate import run_on_device

        run = partial(run_on_device, on, device=device)
    cand_run = run(
        cand,
        dataset,
        signature,
        name=cand_name,
        backend=settings.backend,
        threads=threads,
        batch_dims=batch_dims,
    )
    report = judge_outputs_by_name(
        dataset.y if isinstance(dataset.y, dict) else None,
        ref_run.outputs,
        cand_run.outputs,
        checks=checks,
        settings=settings,
        reference=ref_name,
        candidate=cand_name,
        reference_backend=ref_run.backend,
        backend=cand_run.backend,
    )
    logger.debug("%s", report.headline())
    return replace(report, config=config)


def assert_gate(reference: Any, candidate: Any, data: Any, **options: Any) -> GateReport:
    """Like :func:`check_gate` (the same arguments), but raise :class:`GateError` on a failure.

    Raises:
        GateError: A verdict failed (an ``AssertionError`` too); the message holds every
            verdict and what to do.

    Example:
        >>> assert_gate(model, "detector_int8.tflite", "frames.npz", min_snr=25)  # doctest: +SKIP
    """
    report = check_gate(reference, candidate, data, **options)
    if not report.passed:
        raise GateError(report)
    return report


def load_pair(
    reference: Any, candidate: Any, backend: str, *, safe_mode: bool = True
) -> tuple[Any, Any]:
    """Load both models of a gate; refuse a delegate backend for a candidate it cannot run.

    Raises:
        UnsupportedModelError: ``backend`` runs ``.tflite`` files and the candidate is not one.
    """
    from tfcompress.models import TFLiteModel, model_name, resolve_model
    from tfcompress.models.probe import sharing_zygote
    from tfcompress.runtime import default_backend

    ref = resolve_model(reference, safe_mode=safe_mode)
    # The candidate runs in a worker forked from the zygote: its probe forks from it too.
    with sharing_zygote():
        cand = resolve_model(candidate, safe_mode=safe_mode)
    natural = default_backend(cand)
    if not isinstance(cand, TFLiteModel) and backend not in (DEFAULT_BACKEND, natural):
        raise UnsupportedModelError(
            f"backend {backend!r} runs .tflite artifacts, but the candidate "
            f"{model_name(cand)!r} runs on {natural!r}; pass its converted .tflite."
        )
    return ref, cand


def display_names(reference: str, candidate: str) -> tuple[str, str]:
    """Names for a report; a model gated against itself is told apart.

    Example:
        >>> display_names("cnn", "cnn")
        ('cnn (reference)', 'cnn (candidate)')
    """
    if reference == candidate:
        return f"{reference} (reference)", f"{candidate} (candidate)"
    return reference, candidate
