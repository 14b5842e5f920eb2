"""Which tensor of one variant of a model is which tensor of another.

A Keras model names its outputs after its layers (``cls``, ``box``); the ``.tflite`` the
converter makes from it names them ``output_0``, ``output_1`` in the Keras order, and lists
them in graph order, which can differ. Gates and evaluations compare outputs of the same
meaning, so they match by name, then by that converter convention, then by shape, and
refuse when the match would be a guess.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tfcompress.errors import UnsupportedModelError
from tfcompress.models.signature import TensorSpec

_POSITIONAL = re.compile(r"output_(\d+)")
_DECORATION = re.compile(r"^serving_default_|:\d+$")


def match_tensors(
    reference: Sequence[TensorSpec],
    candidate: Sequence[TensorSpec],
    *,
    what: str = "outputs",
    candidate_name: str = "the candidate",
) -> dict[str, str]:
    """Map each candidate tensor name to the reference tensor it corresponds to.

    Rules, in order: the same names; the same names once converter decorations are removed
    (``serving_default_`` prefixes, ``:0`` suffixes); the converter's ``output_<i>`` names
    for the reference's i-th output; one tensor each; sample shapes that identify every
    tensor uniquely.

    Raises:
        UnsupportedModelError: Different counts, or no rule tells the tensors apart.
    """
    ref_names = [spec.name for spec in reference]
    cand_names = [spec.name for spec in candidate]
    if len(ref_names) != len(cand_names):
        raise UnsupportedModelError(
            f"{candidate_name} has {len(cand_names)} {what} ({', '.join(cand_names)}) but the "
            f"reference has {len(ref_names)} ({', '.join(ref_names)}); compare variants of the "
            "same model."
        )
    if set(cand_names) == set(ref_names):
        return {name: name for name in cand_names}
    plain = {_DECORATION.sub("", name): name for name in ref_names}
    if len(plain) == len(ref_names) and {_DECORATION.sub("", n) for n in cand_names} == set(plain):
        return {name: plain[_DECORATION.sub("", name)] for name in cand_names}
    positions = [_POSITIONAL.fullmatch(name) for name in cand_names]
    if what == "outputs" and all(positions):
        indices = sorted(int(m.group(1)) for m in positions if m)
        if indices == list(range(len(ref_names))):
            return {
                name: ref_names[int(m.group(1))]
                for name, m in zip(cand_names, positions, strict=True)
                if m
            }
    if len(ref_names) == 1:
        return {cand_names[0]: ref_names[0]}
    by_shape = _match_by_shape(reference, candidate)
    if by_shape is not None:
        return by_shape
    raise UnsupportedModelError(
        f"cannot tell which {what} of {candidate_name} ({', '.join(cand_names)}) are which of "
        f"the reference ({', '.join(ref_names)}): names and shapes differ; export both with "
        "the same tensor names."
    )


def _match_by_shape(
    reference: Sequence[TensorSpec], candidate: Sequence[TensorSpec]
) -> dict[str, str] | None:
    ref_shapes = [spec.sample_shape for spec in reference]
    if len(set(ref_shapes)) != len(ref_shapes):
        return None
    matched = {}
    for spec in candidate:
        hits = [r for r in reference if r.sample_shape == spec.sample_shape]
        if len(hits) != 1:
            return None
        matched[spec.name] = hits[0].name
    return matched if len(set(matched.values())) == len(matched) else None
