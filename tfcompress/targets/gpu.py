"""The GPU target: any recipe, timed and gated on LiteRT's GPU backend (``CompiledModel``)."""

from __future__ import annotations

from tfcompress.targets.base import Target, register_target


@register_target
class GpuTarget(Target):
    """LiteRT's GPU backend: every default hook (any recipe, no check of its own)."""

    name = "gpu"
    summary = "LiteRT's GPU backend (CompiledModel, GPU|CPU): any recipe"
    latency_backend = "gpu"
    gate_backend = "gpu"
