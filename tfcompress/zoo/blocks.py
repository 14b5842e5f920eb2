"""MixNet block strings (``r1_k3.5.7_a1.1_p1.1_s22_e6_i24_o40_se0.5_sw``) and channel rounding.

No Keras here: the decoder and the arithmetic are plain Python, so they can be tested and
read without TensorFlow. The notation is the one of the TensorFlow reference builder
(tensorflow/tpu ``mixnet_builder.py``) and timm; docs/zoo.md explains every token.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from tfcompress.errors import InvalidInputError

__all__ = ["BlockSpec", "decode_arch", "decode_block", "round_filters", "split_channels"]

_TOKEN = re.compile(r"^(se|sw|noskip|[rkapseio])(.*)$")


@dataclass(frozen=True)
class BlockSpec:
    """One stage of a MixNet: ``repeats`` identical inverted-residual blocks.

    Attributes:
        repeats: Blocks in the stage (``r``); only the first one strides and changes width.
        kernel_sizes: Depthwise kernel sizes of the MixConv (``k3.5.7``), one channel group each.
        expand_groups: Groups of the 1x1 expansion conv (``a1.1`` = 2 groups).
        project_groups: Groups of the 1x1 projection conv (``p1.1`` = 2 groups).
        stride: Depthwise stride of the first block (``s22`` = 2).
        expand_ratio: Expanded channels over input channels (``e6``).
        input_filters: Input channels at width 1.0 (``i24``).
        output_filters: Output channels at width 1.0 (``o40``).
        se_ratio: Squeeze-excite channels over the block's input channels (``se0.5``); 0: none.
        swish: Swish activation (``sw``), otherwise ReLU.
        skip: Residual connection where the shapes allow (off with ``noskip``).
    """

    repeats: int
    kernel_sizes: tuple[int, ...]
    expand_groups: int
    project_groups: int
    stride: int
    expand_ratio: int
    input_filters: int
    output_filters: int
    se_ratio: float = 0.0
    swish: bool = False
    skip: bool = True

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON-ready)."""
        return asdict(self)


def decode_block(text: str) -> BlockSpec:
    """Decode one block string.

    Args:
        text: E.g. ``"r1_k3.5.7_a1.1_p1.1_s22_e6_i24_o40_se0.5_sw"``.

    Raises:
        InvalidInputError: An unknown or malformed token, or a required one missing.

    Example:
        >>> decode_block("r3_k3.5_a1.1_p1.1_s11_e6_i40_o40_se0.5_sw").kernel_sizes
        (3, 5)
    """
    fields: dict[str, str] = {}
    for token in text.strip().split("_"):
        match = _TOKEN.match(token)
        if match is None or match.group(1) in fields:
            raise InvalidInputError(
                f"block string {text!r}: bad or repeated token {token!r}; use tokens like "
                "r1_k3.5_a1_p1_s11_e6_i24_o40_se0.5_sw (see docs/zoo.md)."
            )
        fields[match.group(1)] = match.group(2)
    missing = [key for key in "rkapseio" if key not in fields]
    if missing:
        raise InvalidInputError(
            f"block string {text!r} lacks {', '.join(missing)}; every block needs "
            "r, k, a, p, s, e, i and o (see docs/zoo.md)."
        )
    try:
        strides = {int(s) for s in fields["s"]}
        spec = BlockSpec(
            repeats=int(fields["r"]),
            kernel_sizes=tuple(int(k) for k in fields["k"].split(".")),
            expand_groups=len(fields["a"].split(".")),
            project_groups=len(fields["p"].split(".")),
            stride=strides.pop() if len(strides) == 1 else -1,
            expand_ratio=int(fields["e"]),
            input_filters=int(fields["i"]),
            output_filters=int(fields["o"]),
            se_ratio=float(fields.get("se", "0") or 0),
            swish="sw" in fields,
            skip="noskip" not in fields,
        )
    except ValueError as error:
        raise InvalidInputError(
            f"block string {text!r}: {error}; numbers go right after their letter, "
            "kernel sizes joined by dots (k3.5.7)."
        ) from error
    numbers = (
        spec.repeats,
        spec.stride,
        spec.expand_ratio,
        spec.input_filters,
        spec.output_filters,
    )
    if min(numbers) < 1 or min(spec.kernel_sizes) < 1 or not 0 <= spec.se_ratio <= 1:
        raise InvalidInputError(
            f"block string {text!r}: counts, strides and kernel sizes must be at least 1 "
            "(both strides equal) and se between 0 and 1."
        )
    return spec


def decode_arch(blocks: str | list[str] | tuple[str, ...]) -> tuple[BlockSpec, ...]:
    """Decode a comma-separated string (or a list) of block strings.

    Example:
        >>> len(decode_arch("r1_k3_a1_p1_s11_e1_i16_o16, r2_k3.5_a1_p1_s22_e6_i16_o24"))
        2
    """
    parts = blocks.split(",") if isinstance(blocks, str) else list(blocks)
    return tuple(decode_block(part) for part in parts if part.strip())


def round_filters(filters: int, width_multiplier: float, *, divisor: int = 8) -> int:
    """Channels at ``width_multiplier``, rounded to the nearest multiple of ``divisor``.

    Never below ``divisor``, and never more than 10% below the exact scaled value (the
    reference builders' rule, so that small layers do not lose a whole group of channels).

    Example:
        >>> round_filters(1536, 1.3), round_filters(24, 1.3), round_filters(16, 0.5)
        (2000, 32, 8)
    """
    scaled = filters * width_multiplier
    rounded = max(divisor, int(scaled + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * scaled:
        rounded += divisor
    return int(rounded)


def split_channels(total: int, groups: int) -> list[int]:
    """Split ``total`` channels into ``groups`` near-equal groups; the first takes the rest.

    Example:
        >>> split_channels(10, 3)
        [4, 3, 3]
    """
    sizes = [total // groups] * groups
    sizes[0] += total - sum(sizes)
    return sizes
