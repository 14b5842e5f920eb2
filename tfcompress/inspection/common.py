"""What every format's inspect report shares: weights grouped by dtype, input/output lines."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tfcompress.models.signature import format_shape
from tfcompress.report.table import format_table

if TYPE_CHECKING:
    from tfcompress.models.feeding import FeedLayout

TIMES = "\u00d7"  # the multiplication sign (U+00D7), for counts such as "Conv x3"


class Describable(Protocol):
    """An input or output: a name, and its shape and dtype in one line."""

    @property
    def name(self) -> str:
        """The tensor's name (``image``)."""
        ...

    def describe(self) -> str:
        """Shape and dtype, e.g. ``(N, 28, 28, 1) float32``."""
        ...


@dataclass(frozen=True)
class WeightGroup:
    """The constant tensors (weights, biases, other constants) of one dtype.

    Attributes:
        dtype: Lower-case dtype name (``"int8"``, ``"float32"``).
        tensors: How many constant tensors have this dtype.
        bytes: Their bytes; data shared by several tensors counts once.
        biases: How many of them are the bias of a convolution or dense op; None where the
            format does not say which tensors are biases.
    """

    dtype: str
    tensors: int
    bytes: int
    biases: int | None = None

    def describe(self) -> str:
        """``int8 12 tensors 91,008 bytes``, with ``(biases)`` or ``(3 biases)`` when known."""
        noun = "tensor" if self.tensors == 1 else "tensors"
        text = f"{self.dtype} {self.tensors} {noun} {self.bytes:,} bytes"
        if self.biases and self.biases == self.tensors:
            return f"{text} (biases)"
        if self.biases:
            return f"{text} ({self.biases} {'bias' if self.biases == 1 else 'biases'})"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Plain data: ``{"dtype", "tensors", "bytes", "biases"}`` (biases None = unknown)."""
        return asdict(self)


def group_weights(
    entries: Iterable[tuple[str, int, bool | None]],
) -> tuple[WeightGroup, ...]:
    """Group ``(dtype, bytes, is_bias)`` per constant tensor by dtype, largest group first.

    ``is_bias`` is None where the format does not say.
    """
    totals: dict[str, list[int]] = {}
    known: dict[str, bool] = {}
    for dtype, size, is_bias in entries:
        counts = totals.setdefault(dtype, [0, 0, 0])
        counts[0] += 1
        counts[1] += size
        counts[2] += bool(is_bias)
        known[dtype] = known.get(dtype, True) and is_bias is not None
    groups = (
        WeightGroup(dtype, tensors, size, biases if known[dtype] else None)
        for dtype, (tensors, size, biases) in totals.items()
    )
    return tuple(sorted(groups, key=lambda g: (-g.bytes, g.dtype)))


def weights_line(groups: Sequence[WeightGroup]) -> str:
    """``weights: int8 12 tensors 91,008 bytes; int32 6 tensors 1,024 bytes (biases)``."""
    return "weights: " + ("; ".join(g.describe() for g in groups) or "none")


def io_lines(
    inputs: Sequence[Describable],
    outputs: Sequence[Describable],
    layout: FeedLayout | None = None,
) -> list[str]:
    """One ``input  NAME SHAPE DTYPE`` line per input, one ``output ...`` line per output.

    With the model's :class:`~tfcompress.models.feeding.FeedLayout`, ``N`` marks each
    tensor's own batch dimension (``h (2, N, 16)``), a tensor fed in a way other than
    "batch first" says how, and a static batch gets a line of its own.
    """
    tensors = (
        {}
        if layout is None
        else {
            (kind, t.name): t for kind in ("input", "output") for t in getattr(layout, kind + "s")
        }
    )
    static = None if layout is None else layout.static_batch
    lines = []
    for kind, group in (("input ", inputs), ("output", outputs)):
        for tensor in group:
            text = tensor.describe()
            placed = tensors.get((kind.strip(), tensor.name))
            if placed is not None:
                plain = format_shape(placed.shape)
                if text.startswith(plain):
                    text = placed.format_shape() + text[len(plain) :]
                how = placed.how_fed()
                text += f"  ({how})" if how else ""
            lines.append(f"{kind} {printable(tensor.name)} {text}")
    if static is not None:
        lines.append(
            f"batch: fixed at {static} by the signature; tfcompress runs any number of samples "
            f"as calls of {static}"
        )
    return lines


def info_text(
    info: Any, head: str, *more: str, table: tuple[list[str], list[Any]] | None = None
) -> str:
    """The human report: ``head``, inputs and outputs, weights, ``more`` lines, a table."""
    lines = [head, *io_lines(info.inputs, info.outputs, info.layout)]
    lines += [weights_line(info.weights_by_dtype), *more]
    return "\n".join(lines if table is None else [*lines, "", format_table(*table)])


def ops_report(info: Any, head: str, custom: Mapping[str, str], note: str) -> str:
    """The human report of a graph format, with its op table.

    ``custom`` maps each op outside the format's standard set to its histogram label; when
    there are any, a line names them with their counts and ``note`` (``"what: ...; why"``).
    """
    what, why = note.split(": ", 1)
    used = ", ".join(
        f"{printable(op)} {TIMES}{info.op_histogram.get(label, 0)}" for op, label in custom.items()
    )
    rows = [[printable(op), str(n)] for op, n in info.op_histogram.items()]
    more = [f"{what}: {used}; {why}"] if custom else []
    return info_text(info, head, *more, table=(["op", "count"], rows))


def io_dict(info: Any) -> dict[str, Any]:
    """What every format's ``--json`` shares: inputs, outputs, feeding (None when not read)."""
    return {
        "inputs": [tensor.to_dict() for tensor in info.inputs],
        "outputs": [tensor.to_dict() for tensor in info.outputs],
        "feeding": None if info.layout is None else info.layout.to_dict(),
        "weights_by_dtype": [group.to_dict() for group in info.weights_by_dtype],
    }


def printable(text: str) -> str:
    r"""``text`` with control characters shown as ``?``, so a crafted name stays on one line."""
    return "".join(c if c.isprintable() else "?" for c in text)


def share(part: int, whole: int) -> str:
    """``part`` as a percentage of ``whole`` (``0.0%`` for an empty whole).

    Example:
        >>> share(1, 4)
        '25.0%'
    """
    return f"{part / whole:.1%}" if whole else "0.0%"
