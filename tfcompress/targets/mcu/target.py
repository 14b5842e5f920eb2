"""``--target mcu``: full int8 with int8 input and output, judged by TFLite Micro itself.

``quantize(..., target="mcu")`` makes the ``int8`` recipe integer-only (no float fallback)
with int8 inputs and outputs, then runs :func:`tfcompress.targets.mcu.check` on the result:
the result carries TFLM's verdict (ops, the arena, flash, TFLM against LiteRT), filed under
``"mcu"`` in its JSON. ``compress(..., target="mcu")`` keeps the int8 rungs, admits only
artifacts TFLM runs whole in full int8, and ranks the passing ones by arena, then flash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfcompress.targets.base import BudgetField, RecipeRules, Target, register_target

# rank: arena first, flash second, in one integer (flash < 2**40 bytes on any device).
_FLASH_SPAN = 1 << 40
_UNKNOWN = 1 << 80


def _arena_bytes(content: bytes) -> float:
    from tfcompress.targets.mcu.check import measure_arena

    return measure_arena(content)


def _flash_bytes(content: bytes) -> float:
    from tfcompress.targets.mcu.export_c import flash_bytes

    return float(flash_bytes(len(content)))


@register_target
class McuTarget(Target):
    """Microcontrollers through TensorFlow Lite for Microcontrollers: full int8, int8 I/O."""

    name = "mcu"
    summary = "microcontrollers (TFLite Micro): full int8, int8 I/O; TFLM's check, arena, flash"
    display_name = "TFLite Micro"
    rules = RecipeRules(
        recipes=("int8",),
        integer_only=True,
        io_types=("int8",),
        default_io_type="int8",
    )
    latency_backend = "tflm"  # host time of TFLM's reference kernels, not a device figure
    judges_latency = False  # so compress shows it, labelled, and ranks by arena and flash
    gate_backend = "cpu"  # TFLM computes what LiteRT's int8 kernels compute (the check says)
    budget_fields = (
        BudgetField(
            name="max_arena",
            flag="--max-arena",
            label="TFLM arena",
            help="largest tensor arena TFLite Micro may need for a candidate's int8 file, e.g. "
            "64KB or 64KiB (the recommended size: bisected on this host, +10%%; as `mcu "
            "--max-arena`)",
            measure=_arena_bytes,
            type="size",
        ),
        BudgetField(
            name="max_flash",
            flag="--max-flash",
            label="flash",
            help="largest flash a candidate's int8 file may take as a C array, e.g. 256KB",
            measure=_flash_bytes,
            type="size",
        ),
    )

    def check_setup(self, **options: Any) -> None:
        """Refuse the target before any conversion when ``tflite-micro`` is missing.

        Raises:
            MissingDependencyError: ``tflite-micro`` is not installed (the message says
                ``pip install 'tfcompress[mcu]'``).
        """
        from tfcompress._compat.tflm import require

        require()
        super().check_setup(**options)

    def check(self, content: bytes, **options: Any) -> Any:
        """TFLM's verdict on the artifact (random inputs for the comparison)."""
        from tfcompress.models.loading import TFLiteModel
        from tfcompress.targets.mcu.check import check

        return check(TFLiteModel(content, label="the artifact", verified=True), **options)

    def failure(self, verdict: Any) -> str | None:
        """One line when TFLM cannot run the made artifact (``quantize`` then exits 1).

        Example:
            >>> McuTarget().failure(None) is None
            True
        """
        if verdict is None or verdict.compatible:
            return None
        blocking = [f for f in verdict.findings if f.blocking]
        if not blocking:
            return "TFLite Micro cannot run the artifact"
        first = blocking[0]
        more = f" (and {len(blocking) - 1} more finding(s))" if len(blocking) > 1 else ""
        return f"TFLite Micro cannot run the artifact: {first.message}{more}; fix: {first.fix}"

    def refusal(self, summary: Mapping[str, Any], float_nodes: tuple[str, ...]) -> str | None:
        """Only artifacts TFLM runs whole, in full int8, qualify."""
        if float_nodes:
            return f"keeps {len(float_nodes)} node(s) float: a microcontroller needs full int8"
        if not summary.get("compatible"):
            ops = summary.get("unsupported_ops") or []
            why = f" (no kernel for {', '.join(ops)})" if ops else ""
            return f"TFLite Micro cannot run it{why}"
        if summary.get("full_int8") is False:
            return "it computes in float in places: a microcontroller needs full int8"
        return None

    def rank(self, attempt: Any) -> int:
        """Smaller is better: the recommended arena first, then the flash."""
        summary = getattr(attempt, "target_verdict", None) or {}
        arena, flash = summary.get("arena_recommended_bytes"), summary.get("flash_bytes")
        if arena is None or flash is None:
            return _UNKNOWN
        return int(arena) * _FLASH_SPAN + int(flash)
