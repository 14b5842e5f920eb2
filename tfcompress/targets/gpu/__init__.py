"""LiteRT's GPU as a deployment target: artifacts the GPU takes whole, and the check that says so.

The registered ``gpu`` target (:mod:`.target`) makes ``quantize`` produce ``float16`` by default
(``float32`` and ``int8`` too) at a static batch (1 unless asked), so the shape-computing ops a
dynamic batch leaves fold away, then judges the file: compiled on the GPU where LiteRT finds
one, checked statically against the delegate's rules (:mod:`tfcompress.runtime.gpu_support`)
where it finds none, and says which. :mod:`.check` (``tfcompress gpu``) does the same for any
``.tflite``, with the fix by Keras layer and, on a GPU, the outputs against the CPU (docs/gpu.md).
"""
