"""Fine-tuning configs as data: what QAT, pruning and clustering run with, as JSON.

:class:`QATConfig`, :class:`PruneConfig` and :class:`ClusterConfig` hold every option of
:func:`~tfcompress.training.qat.qat`, :func:`~tfcompress.training.prune.prune` and
:func:`~tfcompress.training.cluster.cluster` that decides what the fine-tune makes (not the
data, the gate or how it is isolated), with the verbs' own defaults. They are frozen,
checked on construction with the limits the command line uses, and round-trip through JSON:
``to_dict()`` writes ``technique`` and ``version`` beside the options; ``from_dict()``
refuses unknown keys, a newer ``version`` and values of the wrong type or range, and still
reads the options compress reports wrote before configs had a version.

This module imports no TensorFlow: a report is checked before any model is loaded.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, Self

from tfcompress._config_fields import CONFIG_VERSION, MAX_SEED, check_version, require_int
from tfcompress.errors import InvalidInputError

MAX_EPOCHS = 1000
"""The most fine-tuning epochs any command accepts (a trained model needs a few)."""
MAX_BATCH_SIZE = 2**31 - 1
MAX_CLUSTERS = 256
#: What QAT can keep of an earlier compression (``preserve=``).
PRESERVE = ("sparsity", "clusters")
SCHEDULES = ("polynomial", "constant")
#: The precisions a fine-tuned model is exported at (``then=``; None means float32).
EXPORT_RECIPES = ("float32", "float16", "dynamic", "int8")
_STRUCTURE = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


class _ConfigDefault:
    """The default of every keyword option of the verbs: "whatever the config says"."""

    def __repr__(self) -> str:
        return "<config default>"


#: The default of the verbs' keyword options (``qat(epochs=...)``): an option left at it is
#: not given, so the config's own default (or ``config=``'s value) applies.
CONFIG_DEFAULT: Any = _ConfigDefault()


@dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """The options every fine-tuning technique shares (the base of the three configs).

    Attributes:
        epochs: Fine-tuning epochs, 1 to :data:`MAX_EPOCHS`.
        learning_rate: Adam learning rate, in (0, 1).
        batch_size: Samples per step.
        seed: Seed of training and calibration sampling, 0 to :data:`MAX_SEED`.
        freeze_batchnorm: Keep BatchNormalization layers in inference mode.
        version: The config format (:data:`CONFIG_VERSION`).
    """

    technique: ClassVar[str] = ""

    epochs: int = 1
    learning_rate: float = 1e-4
    batch_size: int = 32
    seed: int = 0
    freeze_batchnorm: bool = True
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        check_version(self.technique or "training", self.version)
        require_int("epochs", self.epochs, 1, MAX_EPOCHS, f"an integer 1 to {MAX_EPOCHS}")
        _require(
            "learning_rate",
            self.learning_rate,
            _is_number(self.learning_rate) and 0 < self.learning_rate < 1,
            "a number between 0 and 1 (fine-tuning usually wants 1e-4 to 1e-3)",
        )
        require_int("batch_size", self.batch_size, 1, MAX_BATCH_SIZE, "a positive integer")
        require_int("seed", self.seed, 0, MAX_SEED, f"an integer 0 to {MAX_SEED}")
        _require(
            "freeze_batchnorm",
            self.freeze_batchnorm,
            isinstance(self.freeze_batchnorm, bool),
            "true or false",
        )

    @classmethod
    def build(cls, config: Self | None = None, **options: Any) -> Self:
        """The config a verb runs with: ``config``, or the one its keyword options make.

        The verbs' keyword options (``qat(epochs=2)``) are a shorthand for the config
        (``qat(config=QATConfig(epochs=2))``): each one left at :data:`CONFIG_DEFAULT` is
        not given. Every check is the config's, so a bad value gives the same message
        whichever way it came in.

        Args:
            config: The config given as ``config=``, or None.
            **options: The verb's keyword options, by field name.

        Returns:
            ``config`` itself, or a new config of the given options (defaults for the rest).

        Raises:
            InvalidInputError: ``config`` is not this technique's config; a keyword option
                says otherwise than ``config``; or the config refuses a value.

        Example:
            >>> QATConfig.build(None, epochs=2, seed=CONFIG_DEFAULT).epochs
            2
            >>> try:
            ...     QATConfig.build(QATConfig(epochs=2), epochs=3)
            ... except InvalidInputError as error:
            ...     print(error)  # doctest: +NORMALIZE_WHITESPACE
            qat got config= and epochs=3, but the config sets epochs to 2: set it in the
            config or drop the keyword.
        """
        given = {name: value for name, value in options.items() if value is not CONFIG_DEFAULT}
        if config is None:
            return cls(**given)
        if not isinstance(config, cls):
            raise InvalidInputError(
                f"{cls.technique} takes config={cls.__name__}(...), not a {type(config).__name__}."
            )
        conflicts = [
            name for name, value in given.items() if not _same(value, getattr(config, name))
        ]
        if conflicts:
            said = ", ".join(f"{name}={_shown(given[name])}" for name in conflicts)
            sets = ", ".join(f"{name} to {_shown(getattr(config, name))}" for name in conflicts)
            raise InvalidInputError(
                f"{cls.technique} got config= and {said}, but the config sets {sets}: set "
                f"{'them' if len(conflicts) > 1 else 'it'} in the config or drop the keyword"
                f"{'s' if len(conflicts) > 1 else ''}."
            )
        return config

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every option's default, by field name (what the command line shows and omits).

        Example:
            >>> PruneConfig.defaults()["epochs"]
            2
        """
        return {
            f.name: f.default
            for f in fields(cls)
            if f.name != "version" and f.default is not MISSING
        }

    def steps(self, samples: int) -> int:
        """Optimizer steps of a fine-tune over ``samples`` training samples.

        Example:
            >>> QATConfig(epochs=2, batch_size=32).steps(100)
            8
        """
        return math.ceil(samples / self.batch_size) * self.epochs

    def recorded(self) -> dict[str, Any]:
        """The options as JSON data, without ``technique`` and ``version``.

        What a result records as its ``options``; :meth:`from_dict` reads it back.

        Example:
            >>> ClusterConfig(skip_layers=("a",)).recorded()["skip_layers"]
            ['a']
        """
        return {k: v for k, v in self.to_dict().items() if k not in ("technique", "version")}

    def options(self) -> dict[str, Any]:
        """The keyword arguments of the technique's verb (``tfcompress.<technique>``).

        Example:
            >>> QATConfig(epochs=2).options()["epochs"]
            2
        """
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "version"}

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe data: ``technique``, every option (tuples as lists), ``version``."""
        options = {k: list(v) if isinstance(v, tuple) else v for k, v in self.options().items()}
        return {"technique": self.technique, **options, "version": self.version}

    def to_json(self) -> str:
        """JSON form; :meth:`from_json` reads it back."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read :meth:`to_dict` output (or the options a compress report recorded).

        ``technique`` and ``version`` may be missing (reports written before configs had
        them); every other key must be an option of the technique.

        Raises:
            InvalidInputError: Not a mapping, another technique, an unknown key, a newer
                version, or a value of the wrong type or range.
        """
        if not isinstance(data, Mapping):
            raise InvalidInputError(
                f"a {cls.technique} config is a JSON object of options, not a "
                f"{type(data).__name__}."
            )
        technique = data.get("technique", cls.technique)
        if technique != cls.technique:
            raise InvalidInputError(
                f"a {_shown(technique)} config is not a {cls.technique} config; read it with "
                f"config_from_dict({_shown(technique)}, ...)."
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted((k for k in data if k not in known and k != "technique"), key=str)
        if unknown:
            accepted = ", ".join(sorted(known - {"version"}))
            raise InvalidInputError(
                f"{cls.technique} takes no option {', '.join(map(_shown, unknown))} "
                f"(it takes {accepted}, and version)."
            )
        return cls(**{k: v for k, v in data.items() if k != "technique"})

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Read :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True, kw_only=True)
class QATConfig(TrainingConfig):
    """Options of :func:`tfcompress.qat` (see its docstring for each).

    Attributes:
        preserve: None, ``"sparsity"`` or ``"clusters"``: what QAT keeps of an earlier
            pruning or clustering.

    Example:
        >>> QATConfig(preserve="sparsity").to_dict()["preserve"]
        'sparsity'
    """

    technique: ClassVar[str] = "qat"

    preserve: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_choice("preserve", self.preserve, PRESERVE)


@dataclass(frozen=True, kw_only=True)
class _ExportedConfig(TrainingConfig):
    """The options of the techniques that export at a chosen precision (prune, cluster)."""

    #: What the QAT after it keeps with ``then="int8"`` (``QATConfig.preserve``).
    preserves: ClassVar[str] = ""

    then: str | None = None
    qat_epochs: int = 1
    skip_layers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        _require_choice("then", self.then, EXPORT_RECIPES)
        require_int("qat_epochs", self.qat_epochs, 0, MAX_EPOCHS, f"an integer 0 to {MAX_EPOCHS}")
        layers = self.skip_layers
        _require(
            "skip_layers",
            layers,
            isinstance(layers, list | tuple) and all(isinstance(n, str) for n in layers),
            "a list of layer names",
        )
        object.__setattr__(self, "skip_layers", tuple(layers))  # JSON gives a list

    def preserving_qat(self, learning_rate: float | None = None) -> QATConfig:
        """The QAT that follows with ``then="int8"``, keeping the zeros or the clusters.

        It runs ``qat_epochs`` epochs at ``learning_rate`` (default: this config's).
        """
        return QATConfig(
            epochs=self.qat_epochs,
            learning_rate=self.learning_rate if learning_rate is None else learning_rate,
            batch_size=self.batch_size,
            preserve=self.preserves,
            seed=self.seed,
            freeze_batchnorm=self.freeze_batchnorm,
        )


@dataclass(frozen=True, kw_only=True)
class PruneConfig(_ExportedConfig):
    """Options of :func:`tfcompress.prune` (see its docstring for each).

    Attributes:
        target_sparsity: Share of each pruned kernel set to zero, in (0, 1); None: 0.75,
            or M/N with a structure (which it must equal when given).
        schedule: None, ``"polynomial"`` or ``"constant"``.
        structure: None or ``"M:N"`` with 0 < M < N (e.g. ``"2:4"``).
        then: Export precision: None (float32), ``"float16"``, ``"dynamic"``, ``"int8"``.
        qat_epochs: Pruning-preserving QAT epochs with ``then="int8"``, 0 to 1000.
        skip_layers: Layers left dense.

    Example:
        >>> PruneConfig(structure="2:4", target_sparsity=0.5).structure
        '2:4'
    """

    technique: ClassVar[str] = "prune"
    preserves: ClassVar[str] = "sparsity"

    target_sparsity: float | None = None
    schedule: str | None = None
    structure: str | None = None
    epochs: int = 2
    learning_rate: float = 5e-4

    def __post_init__(self) -> None:
        super().__post_init__()
        sparsity = self.target_sparsity
        _require(
            "target_sparsity",
            sparsity,
            sparsity is None or (_is_number(sparsity) and 0 < sparsity < 1),
            "a number between 0 and 1 (exclusive), or null",
        )
        _require_choice("schedule", self.schedule, SCHEDULES)
        _require(
            "structure",
            self.structure,
            self.structure is None or isinstance(self.structure, str),
            "'M:N' (e.g. '2:4') or null",
        )
        m_by_n = parse_structure(self.structure)
        if (
            m_by_n is not None
            and sparsity is not None
            and abs(sparsity - m_by_n[0] / m_by_n[1]) > 1e-9
        ):
            raise InvalidInputError(
                f"structure {m_by_n[0]}:{m_by_n[1]} fixes target_sparsity at "
                f"{m_by_n[0] / m_by_n[1]:g}, not {sparsity:g}; leave target_sparsity out."
            )


@dataclass(frozen=True, kw_only=True)
class ClusterConfig(_ExportedConfig):
    """Options of :func:`tfcompress.cluster` (see its docstring for each).

    Attributes:
        clusters: Distinct values per clustered kernel, 2 to :data:`MAX_CLUSTERS`.
        then: Export precision: None (float32), ``"float16"``, ``"dynamic"``, ``"int8"``.
        qat_epochs: Cluster-preserving QAT epochs with ``then="int8"``, 0 to 1000.
        skip_layers: Layers left unclustered.

    Example:
        >>> ClusterConfig(clusters=8, then="int8").options()["clusters"]
        8
    """

    technique: ClassVar[str] = "cluster"
    preserves: ClassVar[str] = "clusters"

    clusters: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()
        require_int("clusters", self.clusters, 2, MAX_CLUSTERS, f"an integer 2 to {MAX_CLUSTERS}")


#: Technique name -> its config class: how compress and ``--replay`` read a recipe.
TRAINING_CONFIGS: dict[str, type[TrainingConfig]] = {
    config.technique: config for config in (QATConfig, PruneConfig, ClusterConfig)
}


def config_from_dict(technique: str, data: Mapping[str, Any]) -> TrainingConfig:
    """The config of ``technique`` read from ``data`` (see :meth:`TrainingConfig.from_dict`).

    Raises:
        InvalidInputError: An unknown technique, or data its config refuses.

    Example:
        >>> config_from_dict("cluster", {"clusters": 8}).clusters
        8
    """
    if not isinstance(technique, str) or technique not in TRAINING_CONFIGS:
        raise InvalidInputError(
            f"unknown fine-tuning technique {_shown(technique)}; choose one of "
            f"{', '.join(TRAINING_CONFIGS)}."
        )
    return TRAINING_CONFIGS[technique].from_dict(data)


def parse_structure(structure: str | tuple[int, int] | None) -> tuple[int, int] | None:
    """Read ``"M:N"`` (or ``(M, N)``) with 0 < M < N.

    Raises:
        InvalidInputError: Anything else.
    """
    if structure is None:
        return None
    if isinstance(structure, tuple) and len(structure) == 2:
        m, n = structure
    else:
        match = _STRUCTURE.match(str(structure))
        if match is None:
            raise InvalidInputError(
                f"structure={structure!r} is not M:N; use e.g. '2:4' (2 zeros in every 4 "
                "consecutive weights) or None for unstructured pruning."
            )
        m, n = int(match.group(1)), int(match.group(2))
    if not (isinstance(m, int) and isinstance(n, int) and 0 < m < n):
        raise InvalidInputError(f"structure {m}:{n} needs 0 < M < N, e.g. '2:4'.")
    return m, n


def layer_names(value: Any) -> Any:
    """A verb's ``skip_layers`` (any iterable of names) as the config's tuple.

    A string, or anything not iterable, is returned as it is, for the config to refuse.
    """
    if value is CONFIG_DEFAULT or isinstance(value, str | bytes | Mapping):
        return value
    try:
        return tuple(value)
    except TypeError:
        return value


def _same(given: Any, configured: Any) -> bool:
    """Whether a keyword option says what the config says (a list equals its tuple)."""
    if isinstance(given, list | tuple) and isinstance(configured, tuple):
        return tuple(given) == configured
    return type(given) is type(configured) and given == configured


def _require_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    ok = value is None or (isinstance(value, str) and value in choices)
    _require(name, value, ok, f"null or one of {', '.join(map(repr, choices))}")


def _require(name: str, value: Any, ok: bool, expected: str) -> None:
    if not ok:
        raise InvalidInputError(f"{name} must be {expected}, got {_shown(value)}.")


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
