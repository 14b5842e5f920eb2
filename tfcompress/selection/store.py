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
import os
from pathlib import Path
from typing import Any

import numpy as np

from tfcompress._files import check_writable_folder, write_text_atomic
from tfcompress.errors import OutputExistsError
from tfcompress.selection.candidates import Candidate

logger = logging.getLogger(__name__)

FORMAT = "tfcompress.selection.candidate/1"


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
        """The stored result of ``phase`` ("costs" or "training") when its key matches."""
        stored = self.load(candidate)
        entry = stored.get(phase)
        if isinstance(entry, dict) and entry.get("key") == key:
            return dict(entry["result"])
        return None

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
