"""Op versions the last Edge TPU compiler (16.0.384591198) refuses, with the evidence named.

A file holding an op at a version the compiler's bundled resolver (2021) does not know is
refused as a whole, before any op is mapped (docs/edgetpu.md, "Op versions"). Each
:class:`VersionLimit` records the lowest version a public compiler-16 report shows refused;
``highest_known_accepted`` stays ``None`` ("unknown") unless a source says so, and ops
without a row are not checked. The causes come from TFLite's ``op_version.cc`` (CONV_2D's
also checked with TF 2.21: ``Conv2D(groups=2)`` is written as v6, a plain int8 one as v3).
"""

from __future__ import annotations

from dataclasses import dataclass

COMPILER_VERSION = "16.0.384591198"

#: What public reports did about op versions in general, with where they said it.
GENERAL_WORKAROUNDS = (
    "convert with an older TensorFlow whose converter writes older op versions (Coral's "
    "advice in https://github.com/google-coral/edgetpu/issues/631: TensorFlow 2.8.2)",
    "avoid the model feature that raises the version (the cause named in each finding)",
)


@dataclass(frozen=True)
class VersionLimit:
    """What is known about one op's versions and edgetpu_compiler 16.

    Attributes:
        refused_from: The lowest version a public compiler-16 report shows refused.
        highest_known_accepted: The highest version a source shows accepted; None: unknown.
        cause: What makes the converter write ``refused_from`` (op_version.cc).
        workaround: What the reports did about it, or "unknown" where none is reported.
    """

    op: str
    refused_from: int
    highest_known_accepted: int | None
    evidence: str
    cause: str
    workaround: str


VERSION_LIMITS: tuple[VersionLimit, ...] = (
    VersionLimit(
        "CONV_2D",
        6,
        None,
        "https://github.com/google-coral/edgetpu/issues/631: TensorFlow 2.9.1, edgetpu_compiler "
        "16.0: \"ERROR: Didn't find op for builtin opcode 'CONV_2D' version '6'\"",
        "version 6 is a grouped convolution (input channels != filter channels: Keras "
        "Conv2D(groups > 1))",
        "replace the grouped convolution: one Conv2D per group and a Concatenate, or "
        "DepthwiseConv2D when groups equals the channels; Coral suggested converting with "
        "TensorFlow 2.8.2 (#631)",
    ),
    VersionLimit(
        "TRANSPOSE_CONV",
        4,
        None,
        "https://github.com/google-coral/edgetpu/issues/845: Edge TPU Compiler "
        "16.0.384591198: \"ERROR: Didn't find op for builtin opcode 'TRANSPOSE_CONV' version "
        "'4'\"",
        "version 4 is a transpose convolution with a fused activation",
        "keep the activation out of the transpose convolution; #845 reports success with "
        "converter.experimental_new_converter = False (the older converter)",
    ),
    VersionLimit(
        "QUANTIZE",
        3,
        None,
        "https://github.com/google-coral/edgetpu/issues/879: Edge TPU Compiler "
        "16.0.384591198: \"ERROR: Didn't find op for builtin opcode 'QUANTIZE' version '3'\"",
        "version 3 is a QUANTIZE whose output is quantized per channel",
        "unknown: #879 reports none (the issue is open); quantizing that tensor per tensor "
        "would give an older version, unverified",
    ),
    VersionLimit(
        "EXP",
        2,
        None,
        "https://github.com/tensorflow/tflite-micro/issues/2633 and "
        "https://github.com/google-coral/libedgetpu/issues/71: Edge TPU Compiler "
        "16.0.384591198, TensorFlow 2.16: \"ERROR: Didn't find op for builtin opcode 'EXP' "
        "version '2'\"",
        "version 2 is an int8 EXP",
        "unknown: neither issue reports one; EXP is not an Edge TPU op anyway, so computing "
        "it on the host after the TPU part removes it from the file",
    ),
)

_BY_OP = {limit.op: limit for limit in VERSION_LIMITS}


def version_limit(op: str) -> VersionLimit | None:
    """The row for ``op``, or None when no compiler-16 refusal of it is on record."""
    return _BY_OP.get(op)
