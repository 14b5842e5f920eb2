"""Budget-driven model selection: measure every zoo candidate, train the ones that fit.

``tfcompress.select_model`` enumerates family x width x resolution, measures each untrained
int8 model (size, MACs, latency on the worker that runs it), trains only those within the
size and latency budgets, scores their int8 artifacts and picks the best. Candidates run on
a local process pool, any ``concurrent.futures`` executor, or a Dask cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

__all__ = [
    "Budgets",
    "Candidate",
    "CandidateRecord",
    "InlineExecutor",
    "SelectionConfig",
    "SelectionResult",
    "connect_scheduler",
    "select_model",
]
__getattr__, __dir__ = lazy_exports(__name__)

if TYPE_CHECKING:
    from tfcompress.selection.budgets import Budgets
    from tfcompress.selection.candidates import Candidate
    from tfcompress.selection.config import SelectionConfig
    from tfcompress.selection.executors import InlineExecutor, connect_scheduler
    from tfcompress.selection.result import CandidateRecord, SelectionResult
    from tfcompress.selection.search import select_model
