"""One adapter for every data source, validated against the model it feeds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

__all__ = [
    "DataLike",
    "Dataset",
    "PreparedData",
    "dataset_from_arrays",
    "load_data",
    "prepare_data",
    "validate_for_model",
    "validate_for_signature",
]
__getattr__, __dir__ = lazy_exports(__name__)

if TYPE_CHECKING:
    from tfcompress.data.dataset import Dataset
    from tfcompress.data.prepare import PreparedData, prepare_data
    from tfcompress.data.sources import DataLike, dataset_from_arrays, load_data
    from tfcompress.data.validation import validate_for_model, validate_for_signature
