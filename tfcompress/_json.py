"""Standard JSON out of results that may hold NaN or infinities.

Python's ``json`` writes the non-standard tokens ``NaN`` and ``Infinity``, which strict
parsers (``jq``, JavaScript's ``JSON.parse``) refuse, and ``allow_nan=False`` turns them into
a crash. A value that is not finite (an unmeasured latency, the SNR of identical outputs,
which is infinite) is written as ``null``; the human report still says what it was.
"""

from __future__ import annotations

import json
import math
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (nested in dicts, lists, tuples) made ``None``.

    Example:
        >>> json_safe({"snr_db": float("inf"), "sizes": [1.5, float("nan")]})
        {'snr_db': None, 'sizes': [1.5, None]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    return [json_safe(item) for item in value] if isinstance(value, list | tuple) else value


def dumps(payload: Any, *, indent: int | None = None) -> str:
    """Standard JSON text of ``payload`` (non-finite floats as ``null``, other objects as str).

    Example:
        >>> dumps({"drop": float("nan")})
        '{"drop": null}'
    """
    return json.dumps(json_safe(payload), indent=indent, allow_nan=False, default=str)
