"""Small real data and models shaped like users' models: demo, examples, tests, benchmarks.

Nothing here downloads anything: the data ships inside pip packages (the ``data`` extra) and the
models are built in code and trained in seconds on it.

* :mod:`~tfcompress.samples.datasets`: :func:`mnist` (5,000 real digits) and :func:`digits`.
* :mod:`~tfcompress.samples.cnn`: the small CNN of the demo (:func:`small_cnn`,
  :func:`train_classifier`).
* :mod:`~tfcompress.samples.tasks`: a two-input, two-head detector shape and an ink segmenter.
* :mod:`~tfcompress.samples.xception`: the mini-Xception emotion classifier's structure.
* :mod:`~tfcompress.samples.sensitive`: a classifier that int8 breaks in one known layer.
* :mod:`~tfcompress.samples.gate_models`: the digits Dense net and its int8/damaged variants saved
  as files, for gates.
* :mod:`~tfcompress.samples.landmarker`: a MediaPipe-shaped landmark model and its float
  ``.tflite`` written with the quirks of shipped files.
* :mod:`~tfcompress.samples.ptq_stress`: models where the converter's plain int8 is weak (a
  depthwise classifier with a few wide channels, a small-magnitude box head, a normalisation
  front end), for the post-training methods.
* :mod:`~tfcompress.samples.face_nets`: an MTCNN O-Net-shaped model (conv + PReLU, three
  heads) and its data, for precision per op.
* :mod:`~tfcompress.samples.troublemakers`: models that break naive compression (a
  LayerNormalization classifier, three heads with small-magnitude regressions, a BatchNorm-
  heavy depthwise classifier, a static-batch LSTM, a custom layer, a weightless SavedModel).

Example:
    >>> from tfcompress.samples import mnist, small_cnn, train_classifier
    >>> split = mnist()  # doctest: +SKIP
    >>> model = train_classifier(small_cnn(), split.train, epochs=3)  # doctest: +SKIP
"""

from tfcompress.samples.cnn import residual_cnn, small_cnn, train_classifier
from tfcompress.samples.datasets import Split, digits, mnist

__all__ = ["Split", "digits", "mnist", "residual_cnn", "small_cnn", "train_classifier"]
