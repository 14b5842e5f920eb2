"""The post-training methods as classes with one interface, registered next to their code.

Every method is a subclass of :class:`WeightMethod` (it rewrites a copy of the float Keras
model: :mod:`.rewrite` calls :meth:`WeightMethod.rewrite` in order), :class:`RangeMethod`
(it edits the calibrated activation ranges of the calibrate-only flatbuffer: :mod:`.apply`
calls :meth:`RangeMethod.edit_ranges`), :class:`GraphMethod` (it edits the weights or
biases of that flatbuffer, called the same way, by its order) or :class:`PrecisionMethod`
(it keeps ops float by measurement, run alone), decorated with
:func:`register_method` in the module that holds its algorithm. The names, their order and
their one-line summaries (:mod:`.catalog`) are read from here; nothing else lists them.

Pure Python (no TensorFlow, no numpy): the method modules are imported on the first question
asked of :data:`PTQ_METHODS` (every module of this package with a ``@register_method`` class,
the one discovery rule of :mod:`tfcompress._registry`), and none imports TensorFlow at
module level, so :class:`~tfcompress.quantization.recipes.Recipe` validates names without it.

Example:
    >>> [m.name for m in methods()][:2]
    ['equalize', 'adaround']
    >>> PTQ_METHODS.get("mse-ranges").needs
    'calibrated-flatbuffer'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from tfcompress._registry import Registry
from tfcompress.errors import InvalidInputError

#: What a method works on: a Keras model to rewrite (a copy of it).
KERAS_MODEL = "keras-model"
#: What a method works on: only the calibrate-only flatbuffer (float, min/max statistics):
#: any model the converter takes, a SavedModel too (range and graph methods).
CALIBRATED_FLATBUFFER = "calibrated-flatbuffer"


class PTQMethod:
    """One post-training method: what it is, where it runs, what it needs and reads.

    Attributes:
        name: The name recipes, ``quantize(methods=...)`` and ``--methods`` use.
        summary: One line for ``--methods``'s help and error messages.
        kind: What it does, in words (``"weight rewrite"``, ``"rounding"``, ``"bias"``,
            ``"range edit"``).
        order: Its place in the order every recipe applies its methods (lower first; the
            weight methods run before the methods on the calibrated flatbuffer whatever
            their numbers, as the rewritten model is what gets calibrated).
        needs: :data:`KERAS_MODEL` or :data:`CALIBRATED_FLATBUFFER`.
        options: The :class:`~tfcompress.quantization.recipes.Recipe` fields it reads
            (``"range_percentile"``): a recipe keeps them only where a method reads them.
        exclusive: Methods with the same group (``"activation range"``) cannot be combined.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    kind: ClassVar[str]
    order: ClassVar[int]
    needs: ClassVar[str]
    options: ClassVar[tuple[str, ...]] = ()
    exclusive: ClassVar[str | None] = None


@dataclass
class RewriteContext:
    """What a weight method works on: the copy being rewritten and its statistics.

    Attributes:
        graph: The :class:`~tfcompress.quantization.methods.graph.LayerGraph` of the copy
            (BatchNorms already folded; earlier methods already applied).
        x: The calibration samples (one array or a dict by input name).
        per_channel: The converter will quantize weights per output channel.
        probe: The :class:`~tfcompress.quantization.methods.stats.Probe` traced once for
            every method (its tensors: :meth:`WeightMethod.probe_tensors`).
        also: Requests for the next pass over the samples (the float check of the copy): a
            method that changes the float model passes them to its first statistics pass.
    """

    graph: Any
    x: Any
    per_channel: bool
    probe: Any
    also: Callable[[], list[tuple[Any, Any]]] = field(default=lambda: [])


class WeightMethod(PTQMethod):
    """A method that rewrites the copy of the float Keras model, in place.

    Attributes:
        keeps_function: True when the rewrite must not change what the model computes
            (equalization): it runs before the copy is checked against the original. False:
            the float model changes on purpose, and the check is measured before it.
        report_key: Its entry in :class:`~tfcompress.quantization.methods.rewrite.Rewrite`
            and the report's ``rewrite`` (``"equalized"``), one item per layer changed.
    """

    needs: ClassVar[str] = KERAS_MODEL
    keeps_function: ClassVar[bool] = False
    report_key: ClassVar[str]

    def probe_tensors(self, graph: Any) -> list[Any]:
        """Tensors of the copy this method reads besides the linear layers' inputs.

        Every method's tensors are in the one probe, asked for or not, so a set of methods
        computes the same statistics whatever else is asked.
        """
        return []

    def rewrite(self, context: RewriteContext) -> tuple[Any, ...]:
        """Change the copy in place; return one report item (with ``to_dict``) per change."""
        raise NotImplementedError


@dataclass
class RangeContext:
    """What a range method works on besides the calibrated flatbuffer.

    Attributes:
        calibration: The calibration samples (a :class:`~tfcompress.data.Dataset`).
        recipe: The candidate's recipe (its options: ``range_percentile``...).
        shared: A cache shared by the candidates that edit the same calibrated flatbuffer
            (one float run of it for every range method).
    """

    calibration: Any
    recipe: Any
    shared: dict[str, Any] = field(default_factory=dict)


class RangeMethod(PTQMethod):
    """A method that edits the calibrated ranges of the calibrate-only flatbuffer."""

    needs: ClassVar[str] = CALIBRATED_FLATBUFFER
    kind: ClassVar[str] = "range edit"
    exclusive: ClassVar[str | None] = "activation range"

    def edit_ranges(
        self, calibrated: bytes, context: RangeContext
    ) -> tuple[bytes, tuple[Any, ...]]:
        """The flatbuffer with new statistics, and each tensor's ranges (``TensorRange``)."""
        raise NotImplementedError


class GraphMethod(RangeMethod):
    """A method that edits the weights or biases of the calibrate-only flatbuffer.

    It works on whatever the converter takes (a SavedModel as well as a Keras model, after
    the weight methods' rewrite), and is called as the range methods are
    (:meth:`RangeMethod.edit_ranges`, on the calibrated flatbuffer, before the quantizer):
    by its ``order``, before them, and combines with any of them. The statistics it needs
    come from the one float run of that flatbuffer the candidates share
    (:func:`~tfcompress.quantization.methods.calibrated.float_statistics`), taken before
    any edit: its own changes do not move the activation ranges.

    Attributes:
        report_key: The name of its report entries (``"corrected"``), one per op changed.
    """

    kind: ClassVar[str] = "graph edit"
    exclusive: ClassVar[str | None] = None
    report_key: ClassVar[str]


class PrecisionMethod(PTQMethod):
    """A method that decides which ops stay float by measuring int8 files (``per-op``).

    It edits nothing the candidates share: ``quantize`` runs it instead of them
    (:meth:`quantize`, from :mod:`.apply`), on the calibrate-only conversion of any model
    the converter takes, alone (:func:`precision_method`).
    """

    needs: ClassVar[str] = CALIBRATED_FLATBUFFER
    kind: ClassVar[str] = "precision per op"
    exclusive: ClassVar[str | None] = "precision"

    def check_target(self, target: Any) -> None:
        """Refuse, in one line, a target (a ``Target`` or None) it cannot measure for."""

    def quantize(self, model: Any, recipe: Any, **context: Any) -> Any:
        """The ``MethodsOutcome`` of the method (``context``: as :mod:`.apply` passes it)."""
        raise NotImplementedError


def precision_method(candidates: Sequence[Sequence[str]]) -> PrecisionMethod | None:
    """The precision method named among ``candidates``, alone, or None when none is.

    Raises:
        InvalidInputError: It is named with another method.
    """
    named = [PTQ_METHODS.get(n) for c in candidates for n in c]
    found = [m for m in named if isinstance(m, PrecisionMethod)]
    if found and len(named) > 1:
        raise InvalidInputError(
            f"method {found[0].name} decides the precision op by op and combines with no other "
            f"method: name it alone (--methods {found[0].name})."
        )
    return found[0] if found else None


#: Every method: a PTQMethod subclass with ``@register_method`` in a module of methods/.
PTQ_METHODS: Registry[PTQMethod] = Registry(
    "method", "quantization/methods", "register_method", hint=" (or 'auto', or 'none')"
)
M = TypeVar("M", bound=type[PTQMethod])


def register_method(cls: M) -> M:
    """Class decorator: add one instance of ``cls`` to :data:`PTQ_METHODS`, under ``cls.name``.

    Raises:
        ValueError: Not a weight or range method, a name or place already taken, or a
            missing attribute.
    """
    PTQ_METHODS.discover()  # the built-in methods first: a later one cannot take their places
    if not issubclass(cls, WeightMethod | RangeMethod | PrecisionMethod):
        raise ValueError(f"{cls.__name__} is no WeightMethod, RangeMethod or PrecisionMethod")
    for attribute in ("name", "summary", "kind", "order"):
        if not hasattr(cls, attribute):
            raise ValueError(f"method {cls.__name__} has no {attribute}")
    if issubclass(cls, WeightMethod | GraphMethod) and not hasattr(cls, "report_key"):
        raise ValueError(f"method {cls.__name__} has no report_key")
    if cls.name in PTQ_METHODS.loaded() or cls.name in ("auto", "none") or "," in cls.name:
        raise ValueError(f"method name {cls.name!r} is taken or reserved")
    taken = [m.name for m in PTQ_METHODS.loaded().values() if m.order == cls.order]
    if taken:
        raise ValueError(f"method {cls.name!r}: order {cls.order} is {taken[0]!r}'s")
    PTQ_METHODS.register(cls.name, cls())
    return cls


def methods() -> tuple[PTQMethod, ...]:
    """Every registered method, weight methods first, each stage by ``order``."""
    found = [PTQ_METHODS.get(name) for name in PTQ_METHODS]
    return tuple(sorted(found, key=lambda m: (m.needs != KERAS_MODEL, m.order, m.name)))


def method_names() -> tuple[str, ...]:
    """Every method's name, in the order recipes apply them."""
    return tuple(m.name for m in methods())


def weight_methods(names: Sequence[str]) -> tuple[WeightMethod, ...]:
    """The weight methods among ``names``, in order."""
    chosen = set(names)
    return tuple(m for m in methods() if m.name in chosen and isinstance(m, WeightMethod))


def range_methods(names: Sequence[str]) -> tuple[RangeMethod, ...]:
    """The methods on the calibrated flatbuffer among ``names`` (graph edits too), in order.

    :mod:`.apply` calls each one's :meth:`RangeMethod.edit_ranges` in this order: a
    :class:`GraphMethod` (``bias-correction``, order 30) before the range methods.
    """
    chosen = set(names)
    return tuple(m for m in methods() if m.name in chosen and isinstance(m, RangeMethod))
