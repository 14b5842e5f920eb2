"""Candidates: every family x width multiplier x input resolution, checked before any work."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress._config_fields import number, require_int
from tfcompress.errors import InvalidInputError


@dataclass(frozen=True)
class Candidate:
    """One architecture to try: a registered zoo model at a width and an input resolution.

    Example:
        >>> Candidate("mobilenet_v2", 0.35, 32).name
        'mobilenet_v2-w0.35-r32'
    """

    family: str
    width: float
    resolution: int

    @property
    def name(self) -> str:
        """A stable, file-name-safe display name."""
        return f"{self.family}-w{self.width:g}-r{self.resolution}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data (family, width, resolution)."""
        return asdict(self)


def enumerate_candidates(
    families: Sequence[str], widths: Sequence[float], resolutions: Sequence[int]
) -> list[Candidate]:
    """Every family x width x resolution, after checking each against the zoo.

    Args:
        families: Registered zoo names (see :func:`tfcompress.zoo.list_models`).
        widths: Width multipliers, each > 0.
        resolutions: Square input sizes in pixels.

    Returns:
        The candidates in family, width, resolution order, duplicates removed.

    Raises:
        InvalidInputError: An empty list, an unknown family (with the closest names), a
            width <= 0, or a resolution below a family's minimum.

    Example:
        >>> enumerate_candidates(["mobilenet_v2"], [0.35, 0.5], [32])  # doctest: +SKIP
    """
    from tfcompress.zoo.registry import get_entry  # cheap: no model is built

    families = _unique(_listed(families, "families"))
    widths = _unique(_listed(widths, "width_multipliers"))
    resolutions = _unique(_listed(resolutions, "resolutions"))
    for family in families:
        get_entry(family)  # UnknownNameError: the zoo's names, close ones first
    for width in widths:
        number(0, math.inf, "finite numbers > 0")("width multipliers", width)
    for resolution in resolutions:
        require_int("resolutions", resolution, 1, 2**63 - 1, "whole numbers of pixels >= 1")
    for family in families:
        minimum = get_entry(family).min_resolution
        too_small = [r for r in resolutions if r < minimum]
        if too_small:
            raise InvalidInputError(
                f"{family} needs inputs of at least {minimum}x{minimum} pixels, got "
                f"resolution(s) {too_small}; drop them or choose another family."
            )
    return [
        Candidate(family, float(width), int(resolution))
        for family in families
        for width in widths
        for resolution in resolutions
    ]


def _listed(values: Sequence[Any], what: str) -> list[Any]:
    if isinstance(values, str | bytes) and what != "families":
        raise InvalidInputError(f"{what} must be a list, got the string {values!r}.")
    listed = [values] if isinstance(values, str) else list(values)
    if not listed:
        raise InvalidInputError(f"{what} is empty; give at least one value.")
    return listed


def _unique(values: list[Any]) -> list[Any]:
    return list(dict.fromkeys(values))
