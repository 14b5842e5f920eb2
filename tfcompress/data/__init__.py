"""One adapter for every data source, validated against the model it feeds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tfcompress._lazy import lazy_exports

# public name -> the module that defines it, imported on first use (PEP 562).
_LAZY = {
    "Dataset": "tfcompress.data.dataset",
    "DataLike": "tfcompress.data.sources",
    "dataset_from_arrays": "tfcompress.data.sources",
    "load_data": "tfcompress.data.sources",
    "PreparedData": "tfcompress.data.prepare",
    "prepare_data": "tfcompress.data.prepare",
    "validate_for_model": "tfcompress.data.validation",
    "validate_for_signature": "tfcompress.data.validation",
}
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
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

if TYPE_CHECKING:
    from tfcompress.data.dataset import Dataset
    from tfcompress.data.prepare import PreparedData, prepare_data
    from tfcompress.data.sources import DataLike, dataset_from_arrays, load_data
    from tfcompress.data.validation import validate_for_model, validate_for_signature
