"""Measure: accuracy, latency, throughput and size of models and artifacts."""
