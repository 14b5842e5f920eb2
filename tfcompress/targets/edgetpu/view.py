"""One operator seen with its tensors, constants and options: what every Edge TPU rule reads."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from tfcompress.models.tflite_file import Operator, Subgraph, Tensor, TFLiteFile
from tfcompress.models.tflite_options import OptionValue

EIGHT_BIT = frozenset({"int8", "uint8"})
_INT_TYPES = {"int8": "<i1", "uint8": "<u1", "int32": "<i4", "int64": "<i8"}


@dataclass(frozen=True)
class OpView:
    """An operator of a validated ``.tflite`` and what the rules ask about it."""

    model: TFLiteFile
    graph: Subgraph
    op: Operator
    options: Mapping[str, OptionValue]

    def tensor(self, index: int) -> Tensor:
        """The tensor at ``index`` of this subgraph."""
        return self.graph.tensors[index]

    def shape(self, index: int) -> tuple[int, ...]:
        """The static shape (a dynamic dimension counts as its size in ``shape``, at least 1)."""
        return tuple(max(abs(d), 1) for d in (self.tensor(index).shape or ()))

    def is_constant(self, index: int) -> bool:
        """True when the tensor's values are stored in the file."""
        return self.model.is_constant(self.tensor(index))

    def input(self, position: int) -> int | None:
        """The tensor index of input ``position``, or None when absent or omitted (-1)."""
        if position < len(self.op.inputs) and self.op.inputs[position] >= 0:
            return self.op.inputs[position]
        return None

    def activations(self) -> Iterator[int]:
        """Tensors the op reads or writes that are not stored constants."""
        for index in (*self.op.inputs, *self.op.outputs):
            if index >= 0 and not self.is_constant(index):
                yield index

    def constant_ints(self, position: int) -> tuple[int, ...] | None:
        """The values of a constant integer input (axes, paddings, strides), else None.

        None when the input is absent, not constant, not an integer type, or its buffer does
        not hold exactly the elements its shape declares.
        """
        index = self.input(position)
        if index is None or not self.is_constant(index):
            return None
        tensor = self.tensor(index)
        dtype = _INT_TYPES.get(tensor.dtype)
        data = self.model.buffer_data(tensor.buffer)
        if dtype is None or len(data) % np.dtype(dtype).itemsize:
            return None
        values = np.frombuffer(data, dtype=dtype)
        count = math.prod(tensor.shape or ())
        return tuple(int(v) for v in values) if values.size == count else None

    def int_option(self, name: str) -> int:
        """An integer builtin option the limitation checks read (see ``options._READ``)."""
        value = self.options[name]
        return value if isinstance(value, int) else 0

    def dims_option(self, name: str) -> tuple[int, ...]:
        """A list-of-dimensions builtin option (``SqueezeDims``)."""
        value = self.options[name]
        return value if isinstance(value, tuple) else ()
