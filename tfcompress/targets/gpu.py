"""The GPU target: any recipe, timed and gated on LiteRT's GPU backend (``CompiledModel``)."""

from __future__ import annotations

from tfcompress.targets.base import Target, register_target

TARGET = register_target(
    Target(
        name="gpu",
        summary="LiteRT's GPU backend (CompiledModel, GPU|CPU): any recipe",
        latency_backend="gpu",
        gate_backend="gpu",
    )
)
