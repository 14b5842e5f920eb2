"""LiteRT's GPU as a deployment target: artifacts the GPU takes whole, and the check that says so.

The registered ``gpu`` target (:mod:`.target`) makes ``quantize`` produce ``float16`` by default
(``float32`` and ``int8`` too) at a static batch (1 unless asked), so the shape-computing ops a
dynamic batch leaves (``SHAPE``, ``STRIDED_SLICE``, ``PACK``) fold away, then judges the file:
compiled on the GPU where LiteRT finds one (``fully_accelerated`` and the ops on the CPU), or
checked statically against the GPU delegate's op-and-tensor rules
(:mod:`tfcompress.runtime.gpu_support`) where it finds none, and says which it did.
:mod:`.check` (``tfcompress gpu``, :func:`tfcompress.gpu.check`) does the same for any
``.tflite``, with the fix by Keras layer and, on a GPU, the outputs against the CPU.

Example:
    >>> result = tfcompress.quantize(model, target="gpu")  # doctest: +SKIP
    >>> print(result.target_verdict)  # doctest: +SKIP
    GPU check (static: no GPU here): all 14 ops are ones LiteRT's GPU delegate takes
"""
