"""Every fallback of _compat/litert.py, forced and really run: tflite_runtime, then tf.lite.

The imports are made to fail the way a missing package fails: ``sys.modules[name] = None``
makes ``import name`` raise ModuleNotFoundError. The resolvers cache their answer for the
process, so each test clears the cache before and after forcing a path.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pytest
from _shared import kernel_atol

from tfcompress._compat import litert
from tfcompress._compat.litert import flatbuffer_utils, interpreter_module, make_interpreter

# The tf.lite interpreter warns that it is deprecated: expected on the path of last resort.
pytestmark = pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")

LITERT = ("ai_edge_litert.interpreter",)
TFLITE_RUNTIME = ("tflite_runtime", "tflite_runtime.interpreter")
LITERT_FLATBUFFER = ("ai_edge_litert.tools.flatbuffer_utils",)


@pytest.fixture(scope="module")
def tiny_tflite() -> tuple[bytes, np.ndarray, np.ndarray]:
    """relu(x @ w + b) for a (2, 4) input as a float32 .tflite, with its weights."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])
    def dense(x: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(tf.matmul(x, w) + b)

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [dense.get_concrete_function()], dense
    )
    return converter.convert(), w, b


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    """Forget the resolved modules before the test and after it (its patches undone)."""
    interpreter_module.cache_clear()
    flatbuffer_utils.cache_clear()
    yield
    interpreter_module.cache_clear()
    flatbuffer_utils.cache_clear()


def _missing(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


def _run(content: bytes, x: np.ndarray, *, use_xnnpack: bool) -> tuple[np.ndarray, int]:
    """Invoke the interpreter once; return the output and how many ops a delegate ran."""
    from tfcompress.runtime.litert import delegated_ops

    interpreter = make_interpreter(content, num_threads=1, use_xnnpack=use_xnnpack)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], x)
    interpreter.invoke()
    output = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    _, delegated = delegated_ops(interpreter)
    return output, delegated


def _check_runs(tiny_tflite: tuple[bytes, np.ndarray, np.ndarray]) -> None:
    content, w, b = tiny_tflite
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    expected = np.maximum(x @ w + b, 0.0)
    with_xnnpack, delegated_on = _run(content, x, use_xnnpack=True)
    without, delegated_off = _run(content, x, use_xnnpack=False)
    atol = kernel_atol(expected, terms=len(w) + 1)  # numpy's x @ w + b against two kernels
    np.testing.assert_allclose(with_xnnpack, expected, atol=atol)
    np.testing.assert_allclose(without, expected, atol=atol)
    # XNNPACK really took the fully connected op, and really stayed off when asked to.
    assert delegated_on >= 1
    assert delegated_off == 0


def test_default_is_ai_edge_litert(fresh_cache, tiny_tflite):
    module, package = interpreter_module()
    assert package == "ai_edge_litert"
    assert module.__name__ == "ai_edge_litert.interpreter"
    _check_runs(tiny_tflite)


def test_tf_lite_fallback_loads_and_runs_with_and_without_xnnpack(
    fresh_cache, tiny_tflite, monkeypatch
):
    _missing(monkeypatch, *LITERT, *TFLITE_RUNTIME)
    module, package = interpreter_module()
    assert package == "tensorflow.lite"
    import tensorflow as tf

    # The three names every caller uses, all from TensorFlow's public API.
    assert module.Interpreter is tf.lite.Interpreter
    assert module.OpResolverType is tf.lite.experimental.OpResolverType
    assert module.load_delegate is tf.lite.experimental.load_delegate
    _check_runs(tiny_tflite)


def test_tf_lite_fallback_through_the_cpu_runner(fresh_cache, tiny_tflite, monkeypatch):
    """The `cpu` backend itself on tf.lite, XNNPACK off (the path that used to fail)."""
    _missing(monkeypatch, *LITERT, *TFLITE_RUNTIME)
    from tfcompress.models.loading import TFLiteModel
    from tfcompress.runtime import create_runner

    content, w, b = tiny_tflite
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    for use_xnnpack in (True, False):
        with create_runner(TFLiteModel(content), backend="cpu", use_xnnpack=use_xnnpack) as run:
            outputs = run.predict(x)
            assert run.details()["delegated_ops"] == (1 if use_xnnpack else 0)
        expected = np.maximum(x @ w + b, 0.0)
        np.testing.assert_allclose(outputs, expected, atol=kernel_atol(expected, terms=len(w) + 1))
    assert interpreter_module()[1] == "tensorflow.lite"


# tf.lite's Delegate.__del__ trips over its own half-built object after a failed load.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_tf_lite_fallback_load_delegate_is_the_real_one(fresh_cache, monkeypatch):
    """The Edge TPU backend calls module.load_delegate: on tf.lite it must exist and work.

    It really tries to open the library: the error names the path (the Edge TPU backend
    catches OSError/ValueError/RuntimeError and turns them into "unavailable").
    """
    _missing(monkeypatch, *LITERT, *TFLITE_RUNTIME)
    module, _ = interpreter_module()
    with pytest.raises((OSError, ValueError), match="nonexistent"):
        module.load_delegate("/nonexistent/libedgetpu.so.1")


def test_tflite_runtime_is_preferred_over_tf_lite(fresh_cache, tiny_tflite, monkeypatch):
    """With ai-edge-litert missing, tflite_runtime is taken when present.

    tflite_runtime 2.14 cannot be installed next to numpy 2, so a stand-in module with its
    layout (the same ``Interpreter``/``OpResolverType``/``load_delegate`` that LiteRT, its
    successor, still has) takes its place in ``sys.modules``; the interpreter really runs.
    """
    import ai_edge_litert.interpreter as real

    stand_in = ModuleType("tflite_runtime.interpreter")
    stand_in.Interpreter = real.Interpreter  # type: ignore[attr-defined]
    stand_in.OpResolverType = real.OpResolverType  # type: ignore[attr-defined]
    stand_in.load_delegate = real.load_delegate  # type: ignore[attr-defined]
    package = ModuleType("tflite_runtime")
    package.interpreter = stand_in  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tflite_runtime", package)
    monkeypatch.setitem(sys.modules, "tflite_runtime.interpreter", stand_in)
    _missing(monkeypatch, *LITERT)
    module, name = interpreter_module()
    assert (module, name) == (stand_in, "tflite_runtime")
    _check_runs(tiny_tflite)


def test_real_tflite_runtime_when_installed(fresh_cache, tiny_tflite, monkeypatch):
    pytest.importorskip("tflite_runtime.interpreter", reason="tflite_runtime not installed")
    _missing(monkeypatch, *LITERT)
    assert interpreter_module()[1] == "tflite_runtime"
    _check_runs(tiny_tflite)


def test_flatbuffer_utils_fallback_reads_and_writes_a_model(fresh_cache, tiny_tflite, monkeypatch):
    content, _, _ = tiny_tflite
    _missing(monkeypatch, *LITERT_FLATBUFFER)
    utils = flatbuffer_utils()
    assert utils.__name__ == "tensorflow.lite.tools.flatbuffer_utils"
    model = utils.read_model_from_bytearray(bytearray(content))
    (graph,) = model.subgraphs
    names = {
        v: k for k, v in vars(utils.schema_fb.BuiltinOperator).items() if not k.startswith("_")
    }
    opcodes = [model.operatorCodes[op.opcodeIndex] for op in graph.operators]
    assert "FULLY_CONNECTED" in {
        names[max(c.builtinCode, c.deprecatedBuiltinCode)] for c in opcodes
    }
    # Written back by the fallback, the model still loads and gives the same answer.
    rewritten = bytes(utils.convert_object_to_bytearray(model))
    _check_runs((rewritten, *tiny_tflite[1:]))


def test_default_flatbuffer_utils_is_litert(fresh_cache):
    assert flatbuffer_utils().__name__ == "ai_edge_litert.tools.flatbuffer_utils"
    assert litert.INTERPRETER_MODULES[0] == "ai_edge_litert.interpreter"


@pytest.mark.parametrize(
    ("missing", "resolve", "forget"),
    [
        # ai-edge-litert 2.3's tensor buffers import ml_dtypes: once read as "needs >= 2"
        ("ml_dtypes", litert.compiled_model_module, ("compiled_model", "tensor_buffer")),
        ("flatbuffers", flatbuffer_utils, ("tools.flatbuffer_utils",)),  # once "needs TF"
    ],
)
def test_a_module_litert_imports_is_named_when_missing(
    fresh_cache, monkeypatch, missing, resolve, forget
):
    from tfcompress.errors import MissingDependencyError

    for name in forget:  # imported again, as on a machine that never had the module
        monkeypatch.delitem(sys.modules, f"ai_edge_litert.{name}", raising=False)
    _missing(monkeypatch, missing)
    with pytest.raises(MissingDependencyError) as raised:
        resolve()
    message = str(raised.value)
    assert f"no module named {missing!r}" in message and f"pip install {missing}" in message
    assert ">= 2" not in message and "TensorFlow" not in message
