"""Deployment targets: what a target accepts and how to get there (ONNX, Edge TPU)."""
