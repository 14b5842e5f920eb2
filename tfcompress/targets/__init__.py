"""Deployment targets: export and target-specific compression (ONNX; Edge TPU later)."""
