"""The work folder: one JSON file per candidate, written atomically after each finished phase.

Each phase's result is stored with the key of everything it depends on (the candidate,
the data's fingerprint, the backend and threads, the training settings, tfcompress's
version). A re-run with the same folder reuses a phase whose key matches and redoes one
whose key changed; the verdicts (over budget, meets budgets) are recomputed on every run
from the stored measurements, so changing a budget never needs a re-measurement.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress._files import check_writable_folder, write_text_atomic
from tfcompress.errors import OutputExistsError
from tfcompress.selection.candidates import Candidate

logger = logging.getLogger(__name__)

FORMAT = "tfcompress.selection.candidate/1"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


# Each field a phase stores, and the values a real measurement can have.
_FIELD_RULES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "ok": ("true", lambda v: v is True),
    "params": ("a count", lambda v: _is_int(v) and v >= 0),
    "macs": ("a count or null", lambda v: v is None or (_is_int(v) and v >= 0)),
    "size_bytes": ("a positive count", lambda v: _is_int(v) and v > 0),
    "latency_ms": (
        "a positive finite number (null: not measured, latency_unmeasured says why)",
        lambda v: v is None or (_is_finite(v) and v > 0),
    ),
    "latency_unmeasured": ("a reason", lambda v: isinstance(v, str)),
    "latency_backend": ("a backend name", lambda v: isinstance(v, str)),
    "threads": ("a positive count", lambda v: _is_int(v) and v > 0),
    # What the target's own budget fields measured (Edge TPU segments...), by field name.
    "target_measures": (
        "numbers by budget field",
        lambda v: (
            isinstance(v, dict)
            and all(isinstance(k, str) and (x is None or _is_finite(x)) for k, x in v.items())
        ),
    ),
    "accuracy": ("a fraction from 0 to 1", lambda v: _is_finite(v) and 0 <= v <= 1),
    "loss": ("a finite number", _is_finite),
    "train_seconds": ("seconds", lambda v: _is_finite(v) and v >= 0),
    "seconds": ("seconds", lambda v: _is_finite(v) and v >= 0),
    "finished_at": ("a time", _is_finite),
    "worker": ("a name", lambda v: isinstance(v, str)),
    "host": ("a name", lambda v: isinstance(v, str)),
}
_PHASE_FIELDS = {
    "costs": {"ok", "params", "macs", "size_bytes", "latency_ms", "latency_backend", "threads"},
    "training": {"ok", "accuracy", "size_bytes", "loss", "train_seconds"},
}
_OPTIONAL = {"seconds", "finished_at", "worker", "host", "target_measures", "latency_unmeasured"}


def result_problem(phase: str, result: Any) -> str | None:
    """What is wrong with a stored phase result, or None when it could be a real one.

    Example:
        >>> result_problem("training", {"ok": True, "accuracy": 2.0, "size_bytes": 9,
        ...     "loss": 0.1, "train_seconds": 1.0})
        'accuracy is 2.0, not a fraction from 0 to 1'
    """
    if not isinstance(result, dict):
        return f"a JSON {type(result).__name__}, not an object"
    required = _PHASE_FIELDS.get(phase, set())
    missing = sorted(required - set(result))
    unknown = sorted(set(result) - required - _OPTIONAL)
    if missing or unknown:
        return f"missing {missing}" if missing else f"unknown fields {unknown}"
    for name, value in result.items():
        expected, valid = _FIELD_RULES[name]
        if not valid(value):
            shown = repr(value)
            return f"{name} is {shown[:40]}, not {expected}"
    return None


def fingerprint(*arrays: np.ndarray | None) -> str:
    """SHA-256 of the arrays' dtypes, shapes and bytes (None counts as absent).

    Example:
        >>> len(fingerprint(np.zeros(3)))
        64
    """
    digest = hashlib.sha256()
    for array in arrays:
        if array is None:
            digest.update(b"none;")
            continue
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype.str}{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def settings_key(settings: dict[str, Any]) -> str:
    """A short stable hash of JSON-ready settings."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


class CandidateStore:
    """Reads and writes the per-candidate JSON files of a work folder (None: memory only).

    Args:
        workdir: The folder (created if missing), or None to keep nothing on disk.

    Raises:
        OutputExistsError: ``workdir`` is a file.
        OutputLocationError: The folder cannot be written.
    """

    def __init__(self, workdir: str | os.PathLike[str] | None) -> None:
        self.workdir = None if workdir is None else Path(workdir)
        self._memory: dict[str, dict[str, Any]] = {}
        if self.workdir is not None:
            if self.workdir.exists() and not self.workdir.is_dir():
                raise OutputExistsError(
                    f"{self.workdir}: is a file; give a folder for the selection's work."
                )
            self.workdir.mkdir(parents=True, exist_ok=True)
            check_writable_folder(self.workdir)

    def path(self, candidate: Candidate) -> Path | None:
        """The candidate's JSON file (None without a work folder)."""
        return None if self.workdir is None else self.workdir / f"{candidate.name}.json"

    def load(self, candidate: Candidate) -> dict[str, Any]:
        """What was stored for ``candidate`` (empty when nothing, or unreadable)."""
        path = self.path(candidate)
        if path is None:
            return dict(self._memory.get(candidate.name, {}))
        if not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            logger.warning("%s: unreadable (%s); measuring this candidate again", path, error)
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            logger.warning("%s: not a selection record; measuring this candidate again", path)
            return {}
        return data

    def phase(self, candidate: Candidate, phase: str, key: str) -> dict[str, Any] | None:
        """The stored result of ``phase`` ("costs" or "training") when its key matches.

        A work folder is input: a stored result whose fields are missing, unknown, of the
        wrong type or out of range (a NaN latency, an accuracy of 2.0) is not reused; the
        candidate is measured again, with a warning.
        """
        stored = self.load(candidate)
        entry = stored.get(phase)
        if not (isinstance(entry, dict) and entry.get("key") == key):
            return None
        problem = result_problem(phase, entry.get("result"))
        if problem is not None:
            logger.warning(
                "%s: its stored %s result is not valid (%s); measuring this candidate again",
                self.path(candidate),
                phase,
                problem,
            )
            return None
        return dict(entry["result"])

    def save(self, candidate: Candidate, phase: str, key: str, result: dict[str, Any]) -> None:
        """Store one finished phase atomically (the other phase's entry is kept)."""
        stored = self.load(candidate)
        stored.update(
            {
                "format": FORMAT,
                "candidate": candidate.to_dict(),
                phase: {"key": key, "result": result},
            }
        )
        path = self.path(candidate)
        if path is None:
            self._memory[candidate.name] = stored
            return
        write_text_atomic(path, json.dumps(stored, indent=1, sort_keys=True) + "\n", overwrite=True)
