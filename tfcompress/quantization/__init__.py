"""Quantization: post-training recipes through the TFLite converter."""

from tfcompress.quantization.config import PTQConfig
from tfcompress.quantization.ptq import QuantizationResult, quantize
from tfcompress.quantization.recipes import Recipe, list_recipes, register_recipe

__all__ = [
    "PTQConfig",
    "QuantizationResult",
    "Recipe",
    "list_recipes",
    "quantize",
    "register_recipe",
]
