"""Cross-layer equalization: rescale channels between consecutive linear layers.

For a linear layer ``A`` whose output reaches linear layers ``B`` only through per-channel
positively homogeneous layers (ReLU, leaky ReLU, ReLU6 where it does not clip, pooling,
padding, dropout, a folded BatchNorm), dividing ``A``'s output channel ``i`` by ``s_i``
and multiplying every weight of each ``B`` that reads channel ``i`` by ``s_i`` computes the
same function (Nagel et al., "Data-Free Quantization Through Weight Equalization and Bias
Correction", ICCV 2019). Quantization does not see the same model, though: a channel whose
range is tens of times wider than its neighbours' sets the scale of the whole tensor.

The scales are chosen by a model of the quantization noise they trade
(:mod:`.equalize_noise`): the targets' weight rounding, the tensor's own activation rounding
and, with per-tensor weights, the source's weight rounding, each target's noise counted
against its output power, so a small-magnitude head weighs as much as a large one. Nagel's
``s_i = sqrt(r1_i / r2_i)`` is the special case of per-tensor weights alone; here the
calibration samples say how large each channel's activations really are.

Chains (conv -> depthwise -> conv) are swept twice, as in the paper. ReLU6 is
homogeneous only below its clip: a channel that reaches 6 on the calibration samples keeps
``s_i = 1``, and every other channel keeps its calibrated peak ``CLIP_MARGIN`` (1.25) times
below the clip before and after, so the rewritten model equals the original wherever the
activations stay within 1.25 times their calibrated peaks (ReLU, leaky ReLU and linear
pairs are exact everywhere). :mod:`.rewrite` checks the rewritten model against the
original.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tfcompress.quantization.methods.equalize_noise import SourceTerms, TargetTerms, optimise
from tfcompress.quantization.methods.graph import LayerGraph, Node
from tfcompress.quantization.methods.linear import LinearWeights
from tfcompress.quantization.methods.registry import RewriteContext, WeightMethod, register_method
from tfcompress.quantization.methods.stats import ChannelPeak, PatchMoments, Probe, collect

#: Sweeps over all groups (each group's scales move its neighbours' weights).
SWEEPS = 2
#: A ReLU6 channel is rescaled only while its calibrated peak times this stays below the clip.
CLIP_MARGIN = 1.25
#: A channel is never scaled by more than this factor either way.
SCALE_LIMIT = 1e3
#: A clip counts as reached at this share of its value.
CLIP_REACHED = 0.999


@register_method
class Equalize(WeightMethod):
    """``equalize``: the first weight method; keeps the float function (checked after it)."""

    name = "equalize"
    summary = (
        "cross-layer equalization of consecutive conv/depthwise/dense layers "
        "(BatchNorm folded first)"
    )
    kind = "weight rewrite"
    order = 10
    keeps_function = True
    report_key = "equalized"

    def probe_tensors(self, graph: LayerGraph) -> list[Any]:
        """The outputs of every group's quantized and clipping layers (peaks, clip limits)."""
        return [
            n.layer.output
            for group in find_groups(graph)
            for n in {*group.quantized(), *group.clipping()}
        ]

    def rewrite(self, context: RewriteContext) -> tuple[EqualizedPair, ...]:
        """:func:`equalize` on the copy (no float check requests: it keeps the function)."""
        return equalize(
            context.graph, context.x, per_channel=context.per_channel, probe=context.probe
        )


@dataclass(eq=False)
class Group:
    """A source layer ``A``, the homogeneous layers after it, and the ``B`` layers it feeds.

    ``A``'s output channels are divided by the scales, the targets' input channels
    multiplied by them.
    """

    source: Node
    members: list[Node] = field(default_factory=list)
    targets: list[Node] = field(default_factory=list)

    def clipping(self) -> list[Node]:
        """The nodes (source or members) whose output is clipped (ReLU6 and the like)."""
        return [n for n in [self.source, *self.members] if n.clip is not None]

    def quantized(self) -> list[Node]:
        """The nodes whose output the converter quantizes (activations fuse into producers)."""
        nodes = [self.source, *self.members]
        return [
            n for n in nodes if not all(c.kind == "activation" or c.folded for c in n.consumers)
        ]


@dataclass(frozen=True)
class EqualizedPair:
    """What equalization did to one source layer and the layers it feeds.

    Attributes:
        source: The layer whose output channels were divided by the scales.
        targets: The layers whose input channels were multiplied by them.
        channels: Channels of the tensor between them.
        scale_min: The smallest scale applied.
        scale_max: The largest scale applied.
        held: Channels kept at scale 1 because a ReLU6 clip was reached on the samples.
        range_before: The widest channel's activation range over the narrowest non-zero one,
            before equalization.
        range_after: The same ratio after.
    """

    source: str
    targets: tuple[str, ...]
    channels: int
    scale_min: float
    scale_max: float
    held: int
    range_before: float
    range_after: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON reports."""
        rounded = {"scale_min": 6, "scale_max": 6, "range_before": 3, "range_after": 3}
        data = {**asdict(self), "targets": list(self.targets)}
        return {k: round(v, rounded[k]) if k in rounded else v for k, v in data.items()}

    def __str__(self) -> str:
        return (
            f"{self.source} -> {', '.join(self.targets)}: {self.channels} channels scaled "
            f"{self.scale_min:.3g}..{self.scale_max:.3g}"
            + (f" ({self.held} held at 1 by a clip)" if self.held else "")
            + f"; activation range spread {self.range_before:.3g}x -> {self.range_after:.3g}x"
        )


def find_groups(graph: LayerGraph) -> list[Group]:
    """Every source layer whose output reaches only linear layers through homogeneous layers."""
    groups = []
    for node in graph.linear_nodes():
        group = _group_from(node) if node.homogeneous else None
        if group is not None:
            groups.append(group)
    return groups


def _group_from(source: Node) -> Group | None:
    group = Group(source)
    frontier = [source]
    while frontier:
        node = frontier.pop()
        if node.is_output or not node.consumers:
            return None
        for consumer in node.consumers:
            if consumer.producers != [node]:
                return None
            if consumer.is_linear:
                group.targets.append(consumer)
            elif consumer.kind in ("activation", "pass") or consumer.folded:
                group.members.append(consumer)
                frontier.append(consumer)
            else:
                return None
    channels = LinearWeights.read(source).out_channels
    if any(LinearWeights.read(t).in_channels != channels for t in group.targets):
        return None
    return group


def equalize(
    graph: LayerGraph, x: Any, *, per_channel: bool, probe: Probe | None = None
) -> tuple[EqualizedPair, ...]:
    """Equalize every group of ``graph``'s model (BatchNorms folded) in place.

    The activation ranges, the ReLU6 peaks and the targets' input statistics are measured
    on the calibration samples ``x`` in one pass of ``probe`` (shared by the methods of one
    rewrite; None builds one). One entry per rescaled source layer.
    """
    groups = find_groups(graph)
    peaks: dict[int, ChannelPeak] = {}
    moments: dict[int, PatchMoments] = {}
    requests: list[tuple[Any, Any]] = []
    for group in groups:
        for node in {*group.quantized(), *group.clipping()}:
            if id(node) not in peaks:
                peaks[id(node)] = ChannelPeak()
                requests.append((node.layer.output, peaks[id(node)].update))
        wanted = [(t, True) for t in group.targets]
        if not per_channel:
            wanted.append((group.source, False))
        for node, power in wanted:
            found = moments.get(id(node))
            if found is None or (power and found.weights is None):
                weights = LinearWeights.read(node) if power else None
                held = None if weights is None else (weights.matrix(), weights.bias)
                moments[id(node)] = PatchMoments(node.layer, node.kind, weights=held)
    requests += [(m.layer.input, m.update) for m in moments.values()]
    collect(graph.model, x, requests, probe=probe)
    states = [_State(group, peaks, moments, per_channel=per_channel) for group in groups]
    upstream = {id(t): state for state in states for t in state.group.targets}
    downstream = {id(state.group.source): state for state in states}
    for _ in range(SWEEPS):
        for state in states:
            state.step(upstream.get(id(state.group.source)), downstream)
    return tuple(state.report() for state in states if state.changed())


class _State:
    """One group's measured statistics (at scale 1) and the scales applied so far."""

    def __init__(
        self,
        group: Group,
        peaks: dict[int, ChannelPeak],
        moments: dict[int, PatchMoments],
        *,
        per_channel: bool,
    ) -> None:
        self.group = group
        self.per_channel = per_channel
        quantized = group.quantized()
        self.top = np.max([np.maximum(peaks[id(n)].max, 0.0) for n in quantized], axis=0)
        self.bottom = np.min([np.minimum(peaks[id(n)].min, 0.0) for n in quantized], axis=0)
        self.moments = moments
        self.floor = np.full(self.top.shape, 1.0 / SCALE_LIMIT)  # the smallest scale allowed
        self.held = np.zeros(self.top.shape, bool)
        for node in group.clipping():
            top, clip = np.asarray(peaks[id(node)].max), float(node.clip or 0.0)
            self.held |= top >= clip * CLIP_REACHED
            self.floor = np.maximum(self.floor, top * CLIP_MARGIN / clip)
        self.held |= self.floor > 1.0  # too close to the clip to be moved either way
        self.scale = np.ones_like(self.top)

    def step(self, upstream: _State | None, downstream: dict[int, _State]) -> None:
        source = LinearWeights.read(self.group.source)
        targets = [LinearWeights.read(t) for t in self.group.targets]
        terms = [self._target_terms(t, downstream.get(id(t.node))) for t in targets]
        source_terms = None if self.per_channel else self._source_terms(source, upstream)
        low = np.where(self.held, 1.0, self.floor) / self.scale
        high = np.where(self.held, 1.0, SCALE_LIMIT) / self.scale
        step = optimise(
            terms,
            self.top / self.scale,
            self.bottom / self.scale,
            source_terms,
            low=low,
            high=high,
        )
        source.scale_outputs(step)
        source.write()
        for target in targets:
            target.scale_inputs(step)
            target.write()
        self.scale = self.scale * step

    def _target_terms(self, target: LinearWeights, rescaled: _State | None) -> TargetTerms:
        moments = self.moments[id(target.node)]
        matrix = target.matrix()
        if target.kind == "depthwise":  # column c * mult + j reads channel c only
            _, _, cin, mult = target.kernel.shape
            channel = np.broadcast_to(np.repeat(np.arange(cin), mult)[None, :], matrix.shape)
            squares = np.repeat(moments.squares, mult, axis=1)
        else:
            cin = target.in_channels
            channel = np.broadcast_to((np.arange(matrix.shape[0]) % cin)[:, None], matrix.shape)
            squares = np.broadcast_to(moments.squares[:, None], matrix.shape)
        scale = self.scale[channel]  # the statistics were measured at scale 1
        # The target's outputs keep their power unless the target's own group (as a source)
        # has divided its output channels since.
        power = moments.power if rescaled is None else moments.power / rescaled.scale**2
        return TargetTerms(
            matrix,
            np.ascontiguousarray(channel),
            squares / scale**2,
            float(np.sum(power)),
            self.per_channel,
        )

    def _source_terms(self, source: LinearWeights, upstream: _State | None) -> SourceTerms:
        squares = self.moments[id(source.node)].squares
        if source.kind == "depthwise":  # (taps, cin): output c * mult + j reads channel c
            mult = source.kernel.shape[3]
            adjust = 1.0 if upstream is None else upstream.scale[None, :] ** 2
            per_output = np.repeat((squares / adjust).sum(axis=0), mult)
        else:
            cin = source.in_channels
            adjust = 1.0 if upstream is None else np.tile(upstream.scale, len(squares) // cin) ** 2
            per_output = np.full(source.out_channels, float((squares / adjust).sum()))
        return SourceTerms(source.output_ranges(), per_output)

    def changed(self) -> bool:
        return not np.allclose(self.scale, 1.0)

    def report(self) -> EqualizedPair:
        peak = np.maximum(self.top, -self.bottom)
        return EqualizedPair(
            source=self.group.source.name,
            targets=tuple(t.name for t in self.group.targets),
            channels=len(self.scale),
            scale_min=float(self.scale.min()),
            scale_max=float(self.scale.max()),
            held=int(self.held.sum()),
            range_before=_spread(peak),
            range_after=_spread(peak / self.scale),
        )


def _spread(values: np.ndarray) -> float:
    alive = values[values > 0]
    return float(alive.max() / alive.min()) if alive.size else 1.0
