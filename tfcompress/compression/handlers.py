"""How compress makes each kind of rung: one handler per technique, in a registry.

A :class:`Handler` reads a rung's (or a recorded attempt's) recipe into its checked config
(a :class:`~tfcompress.quantization.config.PTQConfig` or a training config of
:mod:`tfcompress.training.configs`), makes one artifact from that config
(:func:`~tfcompress.compression.build.build`, shared by the search and ``--replay``), says
what an attempt records, and runs one rung of the search (a selective or rules rung expands
into several attempts). ``@register_handler("name")`` adds one, here or in a module of its
own under ``compression/`` (:data:`HANDLERS` finds it); :func:`get_handler` looks it up.

Example:
    >>> get_handler("qat").read({"epochs": 2}).epochs
    2
    >>> list_handlers()
    ['cluster', 'per-op', 'prune', 'ptq', 'qat', 'rules', 'selective']
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from tfcompress._registry import Registry
from tfcompress.compression.build import Built
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.config import PTQConfig
from tfcompress.targets.base import get_target
from tfcompress.training.configs import TrainingConfig, config_from_dict

if TYPE_CHECKING:
    from tfcompress.compression.candidates import Rung
    from tfcompress.compression.search import SearchState


@dataclass(frozen=True)
class Materials:
    """What making an artifact takes besides its config.

    Attributes:
        model: The float model (loaded).
        representative_data: Calibration samples.
        train_data: Fine-tuning samples (training techniques only).
        eval_data: Validation samples (the post-training methods and fine-tunes score on it).
        isolate: Fine-tune in a child process (see :mod:`tfcompress.training.isolation`).
    """

    model: Any
    representative_data: Any
    train_data: Any = None
    eval_data: Any = None
    isolate: bool = True


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
    """Class decorator: make ``technique`` rungs with the decorated :class:`Handler`.

    Example:
        >>> @register_handler("mine")  # doctest: +SKIP
        ... class Mine(Handler): ...
    """

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


@dataclass(frozen=True)
class RulesRung:
    """A rules rung: LiteRT Quantizer's int8 attempt and the mode its worst tensors get.

    Attributes:
        ptq: The int8 recipe and engine the steps start from.
        mode: The rule mode of the worst tensors (``int16``, ``float``...).
    """

    ptq: PTQConfig
    mode: str


@register_handler("rules")
class RulesHandler(Handler):
    """LiteRT Quantizer: the 1, 2, 4... worst tensors of int8 get the rung's mode."""

    records_attempts = False  # each step is a ptq attempt with its rules in the recipe

    def read(self, recipe: Any, *, seed: int = 0, target: str | None = None) -> RulesRung:
        """The rung's PTQ config and its ``mode``."""
        from tfcompress.quantization.rules import MODES

        if not isinstance(recipe, Mapping) or recipe.get("mode") not in MODES:
            raise InvalidInputError(
                f"a rules rung needs a mode, one of {', '.join(MODES)}, beside its recipe."
            )
        rest = {k: v for k, v in recipe.items() if k != "mode"}
        return RulesRung(PTQHandler().read(rest, seed=seed, target=target), recipe["mode"])

    def make(self, config: RulesRung, materials: Materials) -> Built:
        """Refused: the rung's steps are made (and replayed) as ptq attempts."""
        raise InvalidInputError(
            "a rules rung is made step by step, each step a ptq attempt with its rules in "
            "the recipe: make (or --replay) that step."
        )

    def record(self, config: RulesRung) -> dict[str, Any]:
        """The PTQ config's record with the mode."""
        return {**PTQHandler().record(config.ptq), "mode": config.mode}

    def run(self, state: SearchState, rung: Rung) -> None:
        """Rank the tensors once, then the rule steps (:func:`.mixed.run_rules`)."""
        from tfcompress.compression.mixed import run_rules

        config = self.read(rung.recipe, seed=state.seed)
        run_rules(state, rung, lambda: _worst_tensors(state, config.ptq))


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

    @staticmethod
    @abstractmethod
    def verb() -> Callable[..., Any]:
        """The technique's function (imported from where it lives, on first use)."""

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
        trained = self.verb()(
            materials.model,
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

    @staticmethod
    def verb() -> Callable[..., Any]:
        """:func:`tfcompress.training.qat.qat`."""
        from tfcompress.training.qat import qat

        return qat

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

    @staticmethod
    def verb() -> Callable[..., Any]:
        """:func:`tfcompress.training.prune.prune`."""
        from tfcompress.training.prune import prune

        return prune


@register_handler("cluster")
class ClusterHandler(TrainingHandler):
    """Weight clustering, exported at the config's precision."""

    @staticmethod
    def verb() -> Callable[..., Any]:
        """:func:`tfcompress.training.cluster.cluster`."""
        from tfcompress.training.cluster import cluster

        return cluster


# -- helpers ------------------------------------------------------------------------------


def _uses_eval(config: PTQConfig) -> bool:
    """Whether quantize scores candidates on the eval data for this attempt.

    The post-training methods (``int8-methods``) are scored on it; so is LiteRT Quantizer's
    calibration, when the recipe calibrates and names none: both calibrations are made and the
    better kept (:mod:`tfcompress.quantization.engines.calibration`), as ``quantize --eval``
    does. A rules step names the calibration its int8 attempt kept (:mod:`.mixed`), so the
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
    """``recipe`` (bare, or ``{"recipe": ...}``) with the search's static batch in its recipe.

    Example:
        >>> with_batch({"recipe": {"name": "int8"}, "methods": "auto"}, 1)["recipe"]
        {'name': 'int8', 'static_batch': 1}
    """
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


def _worst_tensors(state: SearchState, config: PTQConfig) -> list[str]:
    """The int8 tensors of LiteRT Quantizer's attempt, the op adding most error first.

    Measured on the eval data against the float ``.tflite``; ranked by
    :func:`~tfcompress.compression.mixed.rank_by_added_error` (the error an op adds, not the
    error it inherits).
    """
    from tfcompress.errors import ConversionError
    from tfcompress.quantization.ptq import quantize

    try:
        result = quantize(state.reference, config=config, representative_data=state.representative)
    except ConversionError:
        return []
    from tfcompress.data.calibration import calibration_set
    from tfcompress.models.signature import model_signature
    from tfcompress.quantization.layer_errors import MAX_SAMPLES
    from tfcompress.quantization.ptq import contained_layer_errors

    samples = calibration_set(
        model_signature(result.reference), state.eval_set, limit=MAX_SAMPLES, seed=config.seed
    )
    from tfcompress.compression.mixed import worst_first

    errors = contained_layer_errors(result, samples)
    return worst_first(errors.tensors, result.reference_content)
