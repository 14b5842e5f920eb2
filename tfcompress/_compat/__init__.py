"""The only place that knows Keras 3 vs tf-keras and LiteRT vs tflite_runtime vs tf.lite.

Everything here imports its heavy dependency lazily, on first call.
"""
