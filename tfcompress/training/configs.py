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
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

from tfcompress._config_fields import (
    CONFIG_VERSION,
    MAX_SEED,
    boolean,
    check_fields,
    check_version,
    checked_fields,
    integer,
    names,
    new_default,
    number,
    one_of,
    option,
    shown,
)
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


def _structure(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"{name} must be 'M:N' (e.g. '2:4') or null, got {shown(value)}.")
    return value


def _precision(name: str, value: Any) -> Any:  # float32 is None: no conversion after
    return None if value == "float32" else one_of(EXPORT_RECIPES)(name, value)


@dataclass(frozen=True, kw_only=True)
class TrainingConfig:
    """The options every fine-tuning technique shares (the base of the three configs).

    Attributes:
        epochs: Fine-tuning epochs, 1 to :data:`MAX_EPOCHS` (1-2 are usually enough from a
            trained model).
        learning_rate: Adam learning rate, in (0, 1); keep it small, the model is already
            trained.
        batch_size: Samples per step.
        seed: Seed of training and calibration sampling (and of the clusters' centroids),
            0 to :data:`MAX_SEED`.
        freeze_batchnorm: Keep BatchNormalization layers in inference mode while
            fine-tuning (their statistics, scale and offset fixed; the default): fine-tuning
            on data unlike the training set, or without labels, otherwise moves them and
            makes the model worse than post-training quantization. False trains them, for a
            real, representative training set (``--no-freeze-batchnorm``).
        version: The config format (:data:`CONFIG_VERSION`).
    """

    technique: ClassVar[str] = ""

    epochs: int = option(1, help="fine-tuning epochs", check=integer(1, MAX_EPOCHS))
    learning_rate: float = option(
        1e-4,
        help="Adam learning rate",
        check=number(0, 1, "a number between 0 and 1 (fine-tuning usually wants 1e-4 to 1e-3)"),
    )
    batch_size: int = option(
        32, help="samples per step", check=integer(1, MAX_BATCH_SIZE, "a positive integer")
    )
    seed: int = option(0, help="training seed", check=integer(0, MAX_SEED))
    freeze_batchnorm: bool = option(
        True,
        help="keep BatchNormalization statistics frozen, so fine-tuning on data unlike the "
        "training set cannot move them; --no-freeze-batchnorm lets them train, for a real "
        "training set",
        check=boolean,
    )
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        check_version(self.technique or "training", self.version)
        check_fields(self)

    @classmethod
    def build(cls, config: Self | None = None, **options: Any) -> Self:
        """The config a verb runs with: ``config``, or the one its keyword options make.

        The verbs' keyword options (``qat(epochs=2)``) are a shorthand for the config
        (``qat(config=QATConfig(epochs=2))``). Every check is the config's, so a bad value
        gives the same message whichever way it came in.

        Returns:
            ``config`` itself, or a new config of the given options (defaults for the rest).

        Raises:
            InvalidInputError: ``config`` is not this technique's config; a keyword option
                says otherwise than ``config``; or the config refuses a value.

        Example:
            >>> QATConfig.build(None, epochs=2).epochs
            2
            >>> try:
            ...     QATConfig.build(QATConfig(epochs=2), epochs=3)
            ... except InvalidInputError as error:
            ...     print(error)  # doctest: +NORMALIZE_WHITESPACE
            qat got config= and epochs=3, but the config sets epochs to 2: set it in the
            config or drop the keyword.
        """
        if config is None:
            return cls(**options)
        if not isinstance(config, cls):
            raise InvalidInputError(
                f"{cls.technique} takes config={cls.__name__}(...), not a {type(config).__name__}."
            )
        conflicts = [
            name for name, value in options.items() if not _same(value, getattr(config, name))
        ]
        if conflicts:
            said = ", ".join(f"{name}={shown(options[name])}" for name in conflicts)
            sets = ", ".join(f"{name} to {shown(getattr(config, name))}" for name in conflicts)
            raise InvalidInputError(
                f"{cls.technique} got config= and {said}, but the config sets {sets}: set "
                f"{'them' if len(conflicts) > 1 else 'it'} in the config or drop the keyword"
                f"{'s' if len(conflicts) > 1 else ''}."
            )
        return config

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
                f"a {shown(technique)} config is not a {cls.technique} config; read it with "
                f"config_from_dict({shown(technique)}, ...)."
            )
        options = {k: v for k, v in data.items() if k != "technique"}
        what = f"a {cls.technique} config"
        return cls(**checked_fields(cls, options, what=what, taker=cls.technique))

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Read :meth:`to_json` output."""
        return cls.from_dict(json.loads(text))


@dataclass(frozen=True, kw_only=True)
class QATConfig(TrainingConfig):
    """Options of :func:`tfcompress.qat`: :class:`TrainingConfig`'s and ``preserve``.

    Attributes:
        preserve: ``"sparsity"`` keeps the zeros of a pruned model (pruning-preserving QAT),
            ``"clusters"`` keeps shared weights of a clustered model; None for plain QAT.

    Example:
        >>> QATConfig(preserve="sparsity").to_dict()["preserve"]
        'sparsity'
    """

    technique: ClassVar[str] = "qat"

    preserve: str | None = option(
        None,
        help="keep the zeros of a pruned model or the shared weights of a clustered one",
        choices=PRESERVE,
        check=one_of(PRESERVE),
    )


@dataclass(frozen=True, kw_only=True)
class _ExportedConfig(TrainingConfig):
    """The options of the techniques that export at a chosen precision (prune, cluster)."""

    #: What the QAT after it keeps with ``then="int8"`` (``QATConfig.preserve``).
    preserves: ClassVar[str] = ""

    then: str | None = option(
        None,
        help="export precision (none: float32); int8 runs a QAT that keeps what this made",
        choices=EXPORT_RECIPES,
        check=_precision,
    )
    qat_epochs: int = option(
        1,
        help="epochs of the preserving QAT with --then int8 (0: post-training int8)",
        check=integer(0, MAX_EPOCHS),
    )
    skip_layers: tuple[str, ...] = option(
        (),
        metavar="NAME,NAME",
        help="leave these layers untouched (comma-separated)",
        check=names("layer names"),
    )

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
    """Options of :func:`tfcompress.prune`: :class:`TrainingConfig`'s and these.

    Its own defaults: 2 epochs at learning rate 5e-4.

    Attributes:
        target_sparsity: Share of each pruned kernel set to zero, in (0, 1); None: 0.75,
            or M/N with a structure (which it must equal when given).
        schedule: ``"polynomial"`` (sparsity ramps up over the first ~70% of the steps)
            or ``"constant"`` (target sparsity from the first step). None: polynomial, or
            constant with ``structure``. An M:N structure always runs the constant schedule
            (tfmot applies the whole M:N mask at every pruning step, so there is nothing to
            ramp): ``"polynomial"`` with a structure runs constant, says so in
            ``result.warnings`` and is recorded as ``"constant"``.
        structure: None or ``"M:N"`` with 0 < M < N (e.g. ``"2:4"``): M zeros in every N
            consecutive weights along the input-channel axis, the pattern sparse kernels
            can exploit. Conv2D/Dense only.
        then: Export precision: None (float32), ``"float16"``, ``"dynamic"`` or ``"int8"``,
            which runs pruning-preserving QAT for ``qat_epochs`` (0: post-training int8).
        qat_epochs: Pruning-preserving QAT epochs with ``then="int8"``, 0 to 1000.
        skip_layers: Layers left dense (e.g. a small first convolution).

    Example:
        >>> PruneConfig(structure="2:4", target_sparsity=0.5).structure
        '2:4'
    """

    technique: ClassVar[str] = "prune"
    preserves: ClassVar[str] = "sparsity"

    target_sparsity: float | None = option(
        None,
        help="share of each pruned kernel set to zero, in (0, 1) (none: 0.75, or M/N with "
        "--structure)",
        check=number(0, 1, "a number between 0 and 1 (exclusive), or null", optional=True),
    )
    schedule: str | None = option(
        None,
        help="none: polynomial, or constant with --structure (the only one M:N can use)",
        choices=SCHEDULES,
        check=one_of(SCHEDULES),
    )
    structure: str | None = option(
        None, metavar="M:N", help="M:N structured sparsity, e.g. 2:4", check=_structure
    )
    epochs: int = new_default(TrainingConfig, "epochs", 2)
    learning_rate: float = new_default(TrainingConfig, "learning_rate", 5e-4)

    def __post_init__(self) -> None:
        super().__post_init__()
        sparsity = self.target_sparsity
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
    """Options of :func:`tfcompress.cluster`: :class:`TrainingConfig`'s and these.

    Attributes:
        clusters: Distinct values per clustered kernel, 2 to :data:`MAX_CLUSTERS` (16, a
            common choice, by default).
        then: Export precision: None (float32), ``"float16"``, ``"dynamic"``, ``"int8"``.
        qat_epochs: Cluster-preserving QAT epochs with ``then="int8"``, 0 to 1000.
        skip_layers: Layers left unclustered.

    Example:
        >>> ClusterConfig(clusters=8, then="int8").options()["clusters"]
        8
    """

    technique: ClassVar[str] = "cluster"
    preserves: ClassVar[str] = "clusters"

    clusters: int = option(16, help="values per kernel", check=integer(2, MAX_CLUSTERS))


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
            f"unknown fine-tuning technique {shown(technique)}; choose one of "
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
    if isinstance(value, str | bytes | Mapping):
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
