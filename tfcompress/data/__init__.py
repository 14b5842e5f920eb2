"""One adapter for every data source, validated against the model it feeds."""

from tfcompress.data.dataset import Dataset
from tfcompress.data.sources import DataLike, load_data
from tfcompress.data.validation import validate_for_model

__all__ = ["DataLike", "Dataset", "load_data", "validate_for_model"]
