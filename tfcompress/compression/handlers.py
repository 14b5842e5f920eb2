"""How compress makes each kind of rung: one handler per technique, in a registry.

A :class:`Handler` reads a rung's (or a recorded attempt's) recipe into its checked config
(a :class:`~tfcompress.quantization.config.PTQConfig` or a training config of
:mod:`tfcompress.training.configs`), makes one artifact from that config (:func:`build`,
shared by the search and ``--replay``), says what an attempt records, and runs one rung of
the search (a selective or per-op rung expands into several attempts).
``@register_handler("name")`` adds one, here or in a module of its own under
``compression/`` (:data:`HANDLERS` finds it); :func:`get_handler` looks it up.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tfcompress._registry import Registry
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.config import PTQConfig
from tfcompress.targets.base import get_target
from tfcompress.training.configs import TrainingConfig, config_from_dict

if TYPE_CHECKING:
    from tfcompress.compression.candidates import Rung
    from tfcompress.compression.search import SearchState


@dataclass(frozen=True)
class Materials:
    """What making an artifact takes besides its config: the loaded float model, its data.

    ``isolate``: fine-tune in a child process (:mod:`tfcompress.training.isolation`).
    """

    model: Any
    representative_data: Any
    train_data: Any = None
    eval_data: Any = None
    isolate: bool = True


@dataclass(frozen=True)
class Built:
    """A made ``.tflite`` and how to make it again (``recipe``: see :attr:`Attempt.recipe`).

    ``verdict`` is the target's check of it (the Edge TPU's linter and compiler), when
    quantize ran one.
    """

    content: bytes
    recipe: dict[str, Any]
    float_nodes: tuple[str, ...] = ()
    verdict: Any = None
    reference: bytes | None = None  # the float32 .tflite made by the same conversion
    # Fine-tuned artifacts: where they came out worse than the original exported at the
    # same precision (TrainingResult.worse_than_baseline), and that export's gzip bytes.
    worse: tuple[str, ...] = ()
    baseline_gzip: int | None = None


class Handler(ABC):
    """One technique of compress: read its recipe, make its artifact, run its rung."""

    technique: ClassVar[str] = ""
    #: Its attempts carry its own technique, so ``--replay`` makes them again with it.
    records_attempts: ClassVar[bool] = True

    @abstractmethod
    def read(self, recipe: Any, *, seed: int = 0, target: str | None = None) -> Any:
        """The checked config of ``recipe``; ``seed`` and ``target`` where it records none.

        Raises:
            InvalidInputError: A recipe its config refuses.
        """

    @abstractmethod
    def make(self, config: Any, materials: Materials) -> Built:
        """Make the artifact ``config`` describes."""

    @abstractmethod
    def record(self, config: Any) -> dict[str, Any]:
        """What an attempt records of ``config`` when it made nothing (JSON data)."""

    @abstractmethod
    def run(self, state: SearchState, rung: Rung) -> None:
        """Make and judge ``rung`` in the search (its attempts go to ``state``)."""


#: Every technique: a Handler with ``@register_handler(NAME)`` in a module of compression/.
HANDLERS: Registry[Handler] = Registry("technique", "compression", "register_handler")
H = TypeVar("H", bound=type[Handler])


def register_handler(technique: str) -> Callable[[H], H]:
    """Class decorator: make ``technique`` rungs with the decorated :class:`Handler`."""

    def decorate(cls: H) -> H:
        cls.technique = technique
        HANDLERS.register(technique, cls(), replace=True)
        return cls

    return decorate


def get_handler(technique: str) -> Handler:
    """The handler of ``technique`` (UnknownNameError lists the registered ones)."""
    return HANDLERS.get(technique)


def list_handlers() -> list[str]:
    """The registered techniques, sorted."""
    return HANDLERS.names()


def build(
    technique: str,
    recipe: dict[str, Any],
    model: Any,
    *,
    representative_data: Any,
    train_data: Any = None,
    eval_data: Any = None,
    target: str | None = None,
    seed: int = 0,
    isolate: bool = True,
) -> Built:
    """Make the artifact ``recipe`` describes, with the handler of ``technique``.

    ``recipe`` is data (a rung's, or what an attempt recorded), read by the technique's
    config: a :class:`~tfcompress.quantization.config.PTQConfig` (or a bare recipe dict) for
    ``ptq``/``selective``, a config of :mod:`tfcompress.training.configs` for ``qat``,
    ``prune``, ``cluster``. ``methods`` in a PTQ recipe are tried against plain int8, scored
    on ``eval_data``; the recipe kept is what the result records. ``target`` and ``seed``
    apply where the recipe records none (a target that shapes artifacts, the Edge TPU, is
    recorded with it); ``isolate`` fine-tunes in a child process, so a native crash is an
    error, not the end of the search. Returns the bytes, with the recipe that made them.

    Raises:
        InvalidInputError: Unknown technique, a recipe its config refuses, or a training
            technique without train data.
        ConversionError: The converter rejected the model.
        NativeCrashError: Fine-tuning crashed in its child process (also with oneDNN off).
    """
    handler = get_handler(technique)
    config = handler.read(recipe, seed=seed, target=target)
    materials = Materials(model, representative_data, train_data, eval_data, isolate)
    return handler.make(config, materials)


# -- post-training ----------------------------------------------------------------------


@register_handler("ptq")
class PTQHandler(Handler):
    """One PTQ recipe (the converter, or LiteRT Quantizer for a ``.tflite``)."""

    def read(self, recipe: Any, *, seed: int = 0, target: str | None = None) -> PTQConfig:
        """A :class:`PTQConfig`; a bare recipe dict (a ladder rung) is its ``recipe``."""
        if not isinstance(recipe, Mapping):
            raise InvalidInputError(
                f"a PTQ recipe is a JSON object, not a {type(recipe).__name__}."
            )
        recorded = recipe if "recipe" in recipe else {"recipe": recipe}
        return PTQConfig.from_dict({"seed": seed, "target": target, **recorded})

    def make(self, config: PTQConfig, materials: Materials) -> Built:
        """Quantize; records the config quantize made (the methods it chose, if it searched)."""
        from tfcompress.quantization.ptq import quantize

        result = quantize(
            materials.model,
            config=replace(config, target=_shaping_target(config)),
            representative_data=materials.representative_data,
            eval_data=materials.eval_data if _uses_eval(config) else None,
        )
        nodes = tuple(getattr(result, "float_nodes", None) or config.recipe.float_nodes or ())
        verdict = getattr(result, "target_verdict", None)
        return Built(
            result.model_content,
            result.config.to_dict(),
            nodes,
            verdict,
            result.reference_content,
        )

    def record(self, config: PTQConfig) -> dict[str, Any]:
        """The config, with the target only where it shapes the artifact (as made ones do)."""
        return replace(config, target=_shaping_target(config)).to_dict()

    def run(self, state: SearchState, rung: Rung) -> None:
        """One attempt; float32 reuses the baseline file when one was made already."""
        prebuilt = state.float32 if rung.recipe.get("name") == "float32" else None
        recipe = with_batch(rung.recipe, state.static_batch)
        state.attempt(rung.name, "ptq", recipe, prebuilt=prebuilt)


@register_handler("selective")
class SelectiveHandler(PTQHandler):
    """int8 with the 1, 2, 4... most sensitive layers kept float, until the gate passes."""

    def run(self, state: SearchState, rung: Rung) -> None:
        """Rank the layers once, then the selective steps (:func:`.search.run_selective`)."""
        from tfcompress.compression.search import run_selective

        batched = replace(rung, recipe=with_batch(rung.recipe, state.static_batch))
        run_selective(state, batched, lambda: _rank(state))


# -- fine-tuning --------------------------------------------------------------------------


class TrainingHandler(Handler):
    """A fine-tuning technique: its config is its verb's ``config=``."""

    def read(self, recipe: Any, *, seed: int = 0, target: str | None = None) -> TrainingConfig:
        """The technique's config (:func:`~tfcompress.training.configs.config_from_dict`)."""
        if not isinstance(recipe, Mapping):
            raise InvalidInputError(
                f"a {self.technique} recipe is a JSON object of options, not a "
                f"{type(recipe).__name__}."
            )
        return config_from_dict(self.technique, {"seed": seed, **recipe})

    #: ``module:function`` of the technique's verb, imported on first use.
    verb: ClassVar[str]

    def make(self, config: TrainingConfig, materials: Materials) -> Built:
        """Fine-tune and export; records the options that ran (``TrainingResult.options``).

        Raises:
            InvalidInputError: No ``train_data``.
        """
        if materials.train_data is None:
            raise InvalidInputError(
                f"replaying a {self.technique} attempt fine-tunes the model: pass train_data "
                "(--train)."
            )
        from tfcompress.models.loading import KerasFile, loaded_keras

        model = materials.model  # a Keras file: tfmot trains the Keras object, loaded here
        module, function = self.verb.split(":")
        trained = getattr(importlib.import_module(module), function)(
            loaded_keras(model) if isinstance(model, KerasFile) else model,
            config=config,
            train_data=materials.train_data,
            eval_data=materials.eval_data,
            isolate=materials.isolate,
        )
        ran = trained.config  # e.g. the schedule that really ran
        return Built(
            trained.model_content,
            ran.to_dict(),
            worse=trained.worse_than_baseline,
            baseline_gzip=trained.reference_gzip_bytes,
        )

    def record(self, config: TrainingConfig) -> dict[str, Any]:
        """The config's dict (``technique``, every option, ``version``)."""
        return config.to_dict()

    def run(self, state: SearchState, rung: Rung) -> None:
        """One fine-tune with the search's seed, BatchNorm setting and batch (when given)."""
        options = {**rung.recipe, "seed": state.seed, "freeze_batchnorm": state.freeze_batchnorm}
        if state.batch_size is not None:
            options["batch_size"] = state.batch_size
        state.attempt(rung.name, self.technique, options, notes=self.notes(state))

    def notes(self, state: SearchState) -> tuple[str, ...]:
        """What the attempt should say besides its verdict."""
        return ()


@register_handler("qat")
class QATHandler(TrainingHandler):
    """Quantization-aware training to int8."""

    verb = "tfcompress.training.qat:qat"

    def notes(self, state: SearchState) -> tuple[str, ...]:
        """The layers PTQ found most sensitive, which QAT trains rather than keeps float."""
        from tfcompress.compression.search import layer_of

        if not state.sensitive:
            return ()
        names = ", ".join(layer_of(s) for s in state.sensitive[:4])
        return (
            f"most sensitive layers in PTQ's ranking: {names}; tfcompress.qat fake-quantizes "
            "every layer tfmot can, so they are trained to the int8 grid rather than kept float",
        )


@register_handler("prune")
class PruneHandler(TrainingHandler):
    """Magnitude pruning, exported at the config's precision."""

    verb = "tfcompress.training.prune:prune"


@register_handler("cluster")
class ClusterHandler(TrainingHandler):
    """Weight clustering, exported at the config's precision."""

    verb = "tfcompress.training.cluster:cluster"


# -- helpers ------------------------------------------------------------------------------


def _uses_eval(config: PTQConfig) -> bool:
    """Whether quantize scores candidates on the eval data for this attempt.

    The post-training methods (``int8-methods``) are scored on it; so is LiteRT Quantizer's
    calibration, when the recipe calibrates and names none: both calibrations are made and the
    better kept (:mod:`tfcompress.quantization.engines.calibration`), as ``quantize --eval``
    does. A per-op step names the calibration its int8 attempt kept (:mod:`.perop`), so the
    climb does not compare again at every step.
    """
    from tfcompress.quantization.recipes import recipe_spec

    if config.methods:
        return True
    recipe = config.recipe
    return (
        config.engine == "litert-quantizer"
        and getattr(recipe, "calibration", "named") is None
        and recipe_spec(recipe.name).needs_calibration
    )


def with_batch(recipe: dict[str, Any], static_batch: int | None) -> dict[str, Any]:
    """``recipe`` (bare, or ``{"recipe": ...}``) with the search's static batch in its recipe."""
    if static_batch is None:
        return recipe
    if "recipe" in recipe:
        return {**recipe, "recipe": {**recipe["recipe"], "static_batch": static_batch}}
    return {**recipe, "static_batch": static_batch}


def _shaping_target(config: PTQConfig) -> str | None:
    """The config's target where it shapes the artifact (the Edge TPU), else None."""
    if config.target is None or not get_target(config.target).shapes_artifact:
        return None
    return config.target


def _rank(state: SearchState) -> Any:
    from tfcompress.quantization.recipes import Recipe
    from tfcompress.quantization.selective import rank_layers

    return rank_layers(
        state.reference,
        representative_data=state.representative,
        eval_data=state.eval_set,
        recipe=Recipe("int8", static_batch=state.static_batch),
        seed=state.seed,
    )
