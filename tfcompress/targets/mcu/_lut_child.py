"""What runs in the child for LUT compression: TFLM's compressor, then both files through TFLM.

TFLM's compressor (``tflite_micro...compression``) rewrites a weight tensor with few distinct
values as packed indices into a value table per channel and inserts a ``TFLM_DECODE``
custom op before its consumer; TFLM's host interpreter decodes it at run time. Its
flatbuffer alignment step is native code, so this runs in a child (:mod:`.lut`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from tfcompress.targets.mcu._tflm import _interpreter, _run_tflm, _stderr_to, first_allocating

#: The widest index TFLM's LUT format holds; 8 bits would save nothing on int8 weights.
MAX_BITS = 7
_FIRST_ARENA = 64 * 1024
_NAMED = re.compile(r"\(subgraph (\d+), tensor (\d+)\)")


def _candidates(content: bytes) -> list[dict[str, Any]]:
    """int8 constant inputs of operators whose values per channel fit a LUT that saves bytes."""
    import numpy as np

    from tfcompress.models.tflite_file import read_tflite

    parsed = read_tflite(content)
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for subgraph in parsed.subgraphs:
        for operator in subgraph.operators:
            for index in operator.inputs:
                if index < 0 or (subgraph.index, index) in found:
                    continue
                tensor = subgraph.tensors[index]
                if tensor.dtype != "int8" or not parsed.is_constant(tensor) or not tensor.shape:
                    continue
                data = np.frombuffer(parsed.buffer_data(tensor.buffer), np.int8)
                if data.size != math.prod(tensor.shape) or data.size < 64:
                    continue
                data = data.reshape(tensor.shape)
                quant = tensor.quantization
                axis = quant.quantized_dimension if quant and len(quant.scales) > 1 else None
                slices = [data] if axis is None else list(np.moveaxis(data, axis, 0))
                widest = max(len(np.unique(s)) for s in slices)
                bits = max(1, (widest - 1).bit_length())
                after = math.ceil(data.size * bits / 8) + len(slices) * widest + 16
                if bits <= MAX_BITS and after < data.size:
                    found[(subgraph.index, index)] = {
                        "subgraph": subgraph.index, "tensor": index, "name": tensor.name,
                        "axis": axis, "bits": bits, "bytes": int(data.size),
                    }  # fmt: skip
    return list(found.values())


def _compress(content: bytes, chosen: list[dict[str, Any]]) -> tuple[bytes, list[dict[str, Any]]]:
    """TFLM's compressor on ``chosen``; a tensor it refuses is dropped, the rest compressed.

    The compressor refuses a tensor that must stay constant (one a kernel reads at prepare).
    """
    from tflite_micro.tensorflow.lite.micro.compression import compress, spec
    from tflite_micro.tensorflow.lite.micro.compression.compressor import CompressionError

    while chosen:
        specs = [
            spec.Tensor(
                subgraph=c["subgraph"],
                tensor=c["tensor"],
                compression=[
                    spec.LookUpTableCompression(
                        index_bitwidth=c["bits"],
                        mode=spec.PerTensor() if c["axis"] is None else spec.PerChannel(c["axis"]),
                    )
                ],
            )
            for c in chosen
        ]
        try:
            return bytes(compress(content, specs)), chosen
        except CompressionError as refusal:
            named = _NAMED.search(str(refusal))
            if named is None:
                raise
            where = (int(named.group(1)), int(named.group(2)))
            chosen = [c for c in chosen if (c["subgraph"], c["tensor"]) != where]
    return b"", []


def compress_and_compare(
    content: bytes, *, log: str, samples: int = 8, most_arena: int = 256 * 2**20
) -> dict[str, Any]:
    """Compress ``content``'s weights with LUTs; run both files through TFLM on the same inputs."""
    import warnings

    import numpy as np

    from tfcompress.models.tflite_file import read_tflite
    from tfcompress.targets.mcu.exactness import random_values

    with _stderr_to(log), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "index_bitwidth larger than necessary" and the like
        try:
            compressed, tensors = _compress(content, _candidates(content))
        except Exception as refusal:  # the compressor's own refusal, said in one line
            return {"content": b"", "tensors": [], "refused": str(refusal).splitlines()[0][:300]}
        if not tensors:
            return {"content": b"", "tensors": [], "refused": None}
        graph = read_tflite(content).subgraphs[0]
        rng, tensors_in = np.random.default_rng(0), [graph.tensors[i] for i in graph.inputs]
        inputs = [random_values(rng, (samples, *(t.shape or ())), t.dtype) for t in tensors_in]
        plain_arena, _ = first_allocating(content, _FIRST_ARENA, most_arena, 2)
        arena, _ = first_allocating(compressed, _FIRST_ARENA, most_arena, 2)
        difference = None
        if plain_arena is not None and arena is not None:
            plain = _run_tflm(_interpreter(content, plain_arena), inputs, len(graph.outputs))
            packed = _run_tflm(_interpreter(compressed, arena), inputs, len(graph.outputs))
            difference = [
                float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                for a, b in zip(plain, packed, strict=True)
            ]
    return {"content": compressed, "tensors": tensors, "arena": arena, "refused": None,
            "plain_arena": plain_arena,
            "max_difference": difference, "samples": samples}  # fmt: skip
