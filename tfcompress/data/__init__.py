"""One adapter for every data source, validated against the model it feeds."""

from tfcompress.data.dataset import Dataset
from tfcompress.data.sources import DataLike, dataset_from_arrays, load_data
from tfcompress.data.validation import validate_for_model, validate_for_signature

__all__ = [
    "DataLike",
    "Dataset",
    "dataset_from_arrays",
    "load_data",
    "validate_for_model",
    "validate_for_signature",
]
