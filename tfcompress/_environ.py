"""The environment a child process starts with, as compared when deciding to reuse one.

tfcompress keeps children warm across requests (a fine-tuning child, the measurement
zygote) but starts a fresh one when the environment changed, because TensorFlow, oneDNN,
OpenMP and LiteRT read their settings once, at import. A variable that only names what the
caller is doing right now is not such a setting: pytest rewrites ``PYTEST_CURRENT_TEST``
before every test phase, so comparing it would start a fresh child for every test of a
suite of accuracy gates.

Example:
    >>> settled({"TF_ENABLE_ONEDNN_OPTS": "0", "PYTEST_CURRENT_TEST": "t.py::x (call)"})
    {'TF_ENABLE_ONEDNN_OPTS': '0'}
"""

from __future__ import annotations

from collections.abc import Mapping

#: Variables that describe the caller's current step, not a setting any library reads.
VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})


def settled(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without :data:`VOLATILE` variables: what reuse of a child compares."""
    return {name: value for name, value in environ.items() if name not in VOLATILE}
