"""The CPU target: any recipe, timed and gated on LiteRT's CPU backend (XNNPACK)."""

from __future__ import annotations

from tfcompress.targets.base import Target, register_target


@register_target
class CpuTarget(Target):
    """LiteRT on the CPU: every default hook (any recipe, no check of its own)."""

    name = "cpu"
    summary = "LiteRT on the CPU (XNNPACK): any recipe"
    latency_backend = "cpu"
    gate_backend = "cpu"
