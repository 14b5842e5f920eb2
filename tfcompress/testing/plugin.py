"""pytest plugin (entry point ``pytest11``); importing it must not import TensorFlow."""
