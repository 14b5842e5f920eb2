"""TensorFlow backends: the original Keras model, or a plain SavedModel signature.

TensorFlow has one intra-op and one inter-op thread pool per process, and fixes both when
its runtime starts (the first op or variable): after that
``tf.config.threading.set_intra_op_parallelism_threads`` raises ``RuntimeError``. So the
``keras`` backend pins the pools when TensorFlow has not started yet, accepts a thread count
equal to the one TensorFlow already runs, and refuses any other with
:class:`~tfcompress.errors.SettingUnavailableError`: a row is never labelled with a
thread count that did not happen.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tfcompress._compat.keras import flavour_of
from tfcompress._compat.tf import require_tensorflow, tensorflow
from tfcompress.errors import (
    InvalidDataError,
    InvalidInputError,
    SettingUnavailableError,
    UnsupportedModelError,
)
from tfcompress.models.loading import SavedModelDir, load_saved_model
from tfcompress.models.loading import model_name as _model_name
from tfcompress.models.signature import model_signature
from tfcompress.runtime.base import Feed, Outputs, Runner, register_backend

#: How the Keras model is called: traced once into a graph, as a served model runs.
KERAS_CALL = "tf.function"
#: How a SavedModel runs: its serving signature, a graph already.
SIGNATURE_CALL = "saved_model_signature"


def tensorflow_threads() -> tuple[int, int]:
    """The intra-op and inter-op thread counts TensorFlow runs (or will run) with.

    A pool left at TensorFlow's default (configured as 0) gets the size TensorFlow gives it:
    ``TF_NUM_INTRAOP_THREADS`` / ``TF_NUM_INTEROP_THREADS`` when set, else the CPUs this
    process may run on.
    """
    threading = tensorflow().config.threading
    intra = threading.get_intra_op_parallelism_threads()
    inter = threading.get_inter_op_parallelism_threads()
    return (
        intra or _default_pool_size("TF_NUM_INTRAOP_THREADS"),
        inter or _default_pool_size("TF_NUM_INTEROP_THREADS"),
    )


def _default_pool_size(variable: str) -> int:
    # TensorFlow's own rule (process_util.cc): the environment variable when positive, else
    # port::MaxParallelism(), the CPUs this process is allowed to run on.
    configured = os.environ.get(variable, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def threads_pinned() -> bool:
    """Whether TensorFlow's intra-op pool size was set explicitly (not left to its default)."""
    return bool(tensorflow().config.threading.get_intra_op_parallelism_threads())


def pin_tensorflow_threads(threads: int) -> bool:
    """Run TensorFlow's ops on ``threads`` intra-op threads, one op at a time, if still possible.

    Sets the intra-op pool to ``threads`` and the inter-op pool to 1 (ops run one after the
    other, as the ``onnxruntime`` backend runs them). This works only before TensorFlow's
    runtime starts, and holds for the rest of the process. Afterwards nothing changes and
    the answer (True: they now run on ``threads``) says whether TensorFlow already runs
    ``threads`` intra-op threads. InvalidInputError: ``threads`` is not an integer >= 1.

    Example:
        >>> pin_tensorflow_threads(1)  # first thing in a script  # doctest: +SKIP
        True
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInputError(f"threads must be an integer >= 1, got {threads!r}.")
    require_tensorflow("the keras backend (a Keras model or SavedModel to run)")
    threading = tensorflow().config.threading
    try:
        threading.set_intra_op_parallelism_threads(threads)
        threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        # TensorFlow has started: its pools are fixed ("cannot be modified after
        # initialization"), and setting the value they already have is a no-op that does not
        # raise. What matters is whether the intra-op pool has the size asked for.
        return tensorflow_threads()[0] == threads
    return True


@register_backend("keras")
class KerasRunner(Runner):
    """Runs a Keras model (Keras 3 or tf-keras) in inference mode, or a SavedModel signature.

    The Keras model runs as a user would serve it: ``model(x, training=False)`` traced once
    into a ``tf.function`` (``jit_compile`` off, an input signature with the batch dimension
    open, so new batch sizes never retrace), not op by op in eager mode. A SavedModel runs its
    serving signature. :meth:`details` says which (``"call"``), and the thread counts
    TensorFlow ran.

    ``threads`` (intra-op) None leaves TensorFlow's thread pools as they are; a number pins
    them when TensorFlow has not started yet, is accepted when TensorFlow already runs that
    many intra-op threads, and refused otherwise (SettingUnavailableError; see the module).

    Raises:
        UnsupportedModelError: A ``.tflite`` or ``.onnx`` (use ``cpu`` or ``onnxruntime``).
        InvalidInputError: ``threads`` is not an integer >= 1.
        ModelLoadError: A SavedModel that cannot be read.
    """

    runtime_name = "TensorFlow"

    runs = "Keras models and SavedModels"

    @classmethod
    def accepts(cls, model: object) -> bool:
        """Keras models (either flavour) and SavedModel directories."""
        return isinstance(model, SavedModelDir) or flavour_of(model) is not None

    def __init__(self, model: Any, *, threads: int | None = None) -> None:
        if not self.accepts(model):  # a .tflite, an .onnx
            raise UnsupportedModelError(
                "the 'keras' backend runs Keras and SavedModel models; use backend='cpu' for "
                ".tflite files, backend='onnxruntime' for .onnx files."
            )
        if isinstance(model, SavedModelDir):
            model.check_may_run()  # a graph that writes files runs only with --unsafe
        if threads is not None and not pin_tensorflow_threads(threads):
            intra, _ = tensorflow_threads()
            raise SettingUnavailableError(
                f"the keras backend cannot run with {threads} thread(s) in this process: "
                f"TensorFlow fixes its thread pools when it starts and already runs {intra} "
                f"intra-op thread(s); pass threads={intra}, or measure {threads} thread(s) in a "
                "new process that pins them before loading any model (tfcompress benchmark "
                "does so for its first --threads value)."
            )
        self.model = model
        self.threads = threads
        self.signature = model_signature(model)
        tf = tensorflow()
        if isinstance(model, SavedModelDir):
            loaded = load_saved_model(model)
            self._signature = loaded.signatures[model.signature_key]
            self._keep_alive = loaded  # the signature's variables live on this object
            self.call = SIGNATURE_CALL
        else:
            self._signature = None
            # One trace for every batch size: the inputs' own shapes, the batch open unless the
            # model fixes it (then every call has that size: see Runner.layout).
            specs = [
                tf.TensorSpec(spec.shape, spec.dtype, name=spec.name)
                for spec in self.signature.inputs
            ]
            self._function = tf.function(
                self._inference, input_signature=[specs], jit_compile=False
            )
            self.call = KERAS_CALL

    def _inference(self, inputs: list[Any]) -> Any:
        return self.model(inputs[0] if len(inputs) == 1 else inputs, training=False)

    def predict_batch(self, feed: Feed) -> Outputs:
        """Run one call in inference mode (dropout off, batch-norm statistics frozen)."""
        return self._run(self._tensors(feed))

    def bind_call(self, feed: Feed) -> Callable[[], object]:
        """Make the inputs tensors once and return the graph call (with results read back).

        Reading the result into numpy is part of each call: it is what waits for the
        computation to finish where TensorFlow runs ops asynchronously (a GPU).
        """
        tensors = self._tensors(feed)
        return lambda: self._run(tensors)

    def _tensors(self, feed: Feed) -> list[Any]:
        constant = tensorflow().constant
        return [constant(feed[name]) for name in self.signature.input_names]

    def _run(self, tensors: list[Any]) -> Outputs:
        names = self.signature.output_names
        try:
            if self._signature is not None:
                results = self._signature(
                    **dict(zip(self.signature.input_names, tensors, strict=True))
                )
            else:
                results = self._function(tensors)
        except (tensorflow().errors.OpError, ValueError, TypeError) as error:
            # TensorFlow refusing the inputs (a shape its signature does not take) or an op
            # failing on their values: a row error or exit 2, never an unexplained crash.
            reason = " ".join(str(error).split())[:300]
            raise InvalidDataError(
                f"{_model_name(self.model)}: TensorFlow ({self.call}) could not run the "
                f"inputs it was given: {reason}; feed the shapes and values its signature "
                "declares (tfcompress inspect shows them)."
            ) from error
        if self._signature is not None or isinstance(results, Mapping):
            return {name: np.asarray(results[name], dtype=np.float32) for name in names}
        if not isinstance(results, list | tuple):
            results = [results]
        return {
            name: np.asarray(value, dtype=np.float32)
            for name, value in zip(names, results, strict=True)
        }

    def details(self) -> dict[str, object]:
        """Thread counts TensorFlow ran with, whether they were pinned, the call and device."""
        intra, inter = tensorflow_threads()
        gpus = tensorflow().config.list_logical_devices("GPU")
        return {
            "threads": intra,
            "inter_op_threads": inter,
            "threads_pinned": threads_pinned(),
            "call": self.call,
            "device": "GPU" if gpus else "CPU",
        }
