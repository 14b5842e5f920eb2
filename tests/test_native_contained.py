"""Native work that model and data bytes drive runs contained: the reproducers found by fuzzing.

A CNN with a NaN, an Inf or 1e30 in a kernel, a BatchNorm with a negative moving variance, or
calibration data of -3e38 has crashed TensorFlow's MLIR quantizer in the caller (SIGSEGV, exit
139, nothing printed) on some CPUs; a FILL whose size is an input value allocates what the data
says. Through ``quantize`` each now ends in a written file or in one error line with exit 2,
never a signal, and a crash of the converter's child is one line naming the signal.
"""

from __future__ import annotations

import numpy as np
import pytest

from tfcompress.cli import main


def _run(argv, capfd):
    code = main([str(a) for a in argv])
    captured = capfd.readouterr()
    return code, captured.out, captured.err


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "error:" in line]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import keras

    folder = tmp_path_factory.mktemp("contained")

    def cnn() -> keras.Model:
        keras.utils.set_random_seed(0)
        inputs = keras.Input((12, 12, 1))
        x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.Flatten()(x)
        return keras.Model(inputs, keras.layers.Dense(3)(x))

    for name, value in (("nan", np.nan), ("inf", np.inf), ("huge", 1e30)):
        model = cnn()
        kernel, bias = model.layers[1].get_weights()
        kernel.flat[0] = value
        if name == "huge":
            kernel[...] = value
        model.layers[1].set_weights([kernel, bias])
        model.save(folder / f"{name}.keras")
    model = cnn()
    gamma, beta, mean, variance = model.layers[2].get_weights()
    model.layers[2].set_weights([gamma, beta, mean, -np.ones_like(variance)])
    model.save(folder / "negative_variance.keras")
    cnn().save(folder / "plain.keras")
    rng = np.random.default_rng(0)
    np.savez(folder / "calib.npz", x=rng.random((16, 12, 12, 1), dtype=np.float32))
    np.savez(folder / "extreme.npz", x=np.full((16, 12, 12, 1), -3e38, np.float32))
    return folder


@pytest.mark.parametrize(
    "model, data",
    [
        ("nan", "calib"),
        ("inf", "calib"),
        ("huge", "calib"),
        ("negative_variance", "calib"),
        ("plain", "extreme"),
    ],
)
def test_degenerate_weights_or_data_end_in_a_file_or_one_line(files, tmp_path, capfd, model, data):
    out = tmp_path / "int8.tflite"
    argv = ["quantize", files / f"{model}.keras", "--recipe", "int8"]
    code, _, stderr = _run([*argv, "--data", files / f"{data}.npz", "--out", out], capfd)
    assert code in (0, 2), stderr
    assert "Traceback" not in stderr
    if code == 2:
        assert len(_errors(stderr)) == 1 and not out.exists()
    else:
        assert out.stat().st_size > 0


def test_a_converter_crash_is_one_line_and_nothing_is_written(files, tmp_path, capfd, monkeypatch):
    from tfcompress.quantization import converter

    monkeypatch.setattr(converter, "CHILD_TARGET", "_child_fakes:segfault")  # as TF's did
    out = tmp_path / "int8.tflite"
    argv = ["quantize", files / "plain.keras", "--recipe", "int8", "--data", files / "calib.npz"]
    code, stdout, stderr = _run([*argv, "--out", out], capfd)
    (error,) = _errors(stderr)
    assert code == 2 and stdout == "" and not out.exists()
    assert "crashed in native code (SIGSEGV) in its child process" in error
    assert "Nothing was written" in error


def test_a_crash_at_the_static_batch_asked_for_names_the_flag_not_the_data(
    files, tmp_path, capfd, monkeypatch
):
    from tfcompress.quantization import converter

    # The re-traced conversion's child dies by SIGSEGV.
    monkeypatch.setattr(converter, "CHILD_TARGET", "_child_fakes:segfault")
    out = tmp_path / "int8.tflite"
    argv = ["quantize", files / "plain.keras", "--recipe", "int8", "--data", files / "calib.npz"]
    code, stdout, stderr = _run([*argv, "--static-batch", "1", "--out", out], capfd)
    (error,) = _errors(stderr)
    assert code == 2 and stdout == "" and not out.exists()
    assert "crashed in native code (SIGSEGV)" in error
    assert "at the static batch --static-batch 1 asked for" in error
    assert "drop --static-batch" in error and "Nothing was written" in error
    assert "weights and data" not in error


# What TensorFlow prints as any child imports it, on a machine without a GPU (TF 2.21).
_TF_STARTUP = b"""\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796176395.345641   25091 port.cc:153] oneDNN custom operations are on. You may \
see slightly different numerical results. To turn them off, set the environment variable \
`TF_ENABLE_ONEDNN_OPTS=0`.
I0000 00:00:1796176395.345957   25091 cudart_stub.cc:31] Could not find cuda drivers on your \
machine, GPU will not be used.
I0000 00:00:1796176395.714349   25091 cpu_feature_guard.cc:227] This TensorFlow binary is \
optimized to use available CPU instructions in performance-critical operations.
To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild \
TensorFlow with the appropriate compiler flags.
E0000 00:00:1796176423.714595   25091 cuda_platform.cc:52] failed call to cuInit: INTERNAL: \
CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
"""


def test_last_words_skip_tensorflows_startup_lines():
    from tfcompress._lifetime import is_startup_noise, last_words

    assert last_words(_TF_STARTUP) == ""  # nothing but notices: no last words to quote
    said = b"F0000 quantize_model.cc:98] Check failed: scale > 0\n" + _TF_STARTUP
    assert last_words(said) == "F0000 quantize_model.cc:98] Check failed: scale > 0"
    assert last_words(_TF_STARTUP + b"Segmentation fault in mlir::Pass\n") == (
        "Segmentation fault in mlir::Pass"
    )
    assert all(is_startup_noise(line) for line in _TF_STARTUP.decode().splitlines())
    assert not is_startup_noise("RuntimeError: CUDA kernel failed in my_custom_op")


@pytest.fixture
def fill_model(tmp_path):
    import tensorflow as tf

    @tf.function(input_signature=[tf.TensorSpec([1, 1], tf.float32)])
    def fill(x):  # zeros allocate nothing; 1e6 asks for 4 GB
        n = tf.cast(x[0, 0], tf.int32)
        return {"y": tf.fill(tf.stack([n, 1024]), 1.0) * x[0, 0]}

    converter = tf.lite.TFLiteConverter.from_concrete_functions(
        [fill.get_concrete_function()], fill
    )
    model = tmp_path / "fill.tflite"
    model.write_bytes(converter.convert())
    data = tmp_path / "data.npz"
    np.savez(data, x=np.full((4, 1), 1e6, np.float32))
    return model, data


def test_a_fill_sized_by_the_data_ends_at_the_memory_limit(
    fill_model, tmp_path, capfd, monkeypatch
):
    model, data = fill_model
    monkeypatch.setenv("TFCOMPRESS_MEMORY_LIMIT", "1GiB")
    out = tmp_path / "int8.tflite"
    code, _, stderr = _run(["quantize", model, "--data", data, "--out", out], capfd)
    assert code == 2 and len(_errors(stderr)) == 1 and not out.exists(), stderr
    assert "FILL" in stderr and "TFCOMPRESS_MEMORY_LIMIT" in stderr  # the limit, a possible cause


def test_gate_measures_under_the_memory_limit(fill_model, tmp_path, capfd, monkeypatch):
    model, data = fill_model
    candidate = tmp_path / "candidate.tflite"
    candidate.write_bytes(model.read_bytes())
    monkeypatch.setenv("TFCOMPRESS_MEMORY_LIMIT", "1GiB")
    code, _, stderr = _run(["gate", model, candidate, "--eval", data], capfd)
    assert code == 2 and len(_errors(stderr)) == 1 and "FILL" in stderr, stderr
    assert "TFCOMPRESS_MEMORY_LIMIT" in stderr  # the limit is named as a possible cause


def test_a_fill_sized_by_the_data_ends_in_one_line_under_the_default_limit(
    fill_model, capfd, monkeypatch
):
    """Issue 43: half the machine let this 2 KB model take 6.4 GB on 24 GB before it ended."""
    model, data = fill_model
    monkeypatch.delenv("TFCOMPRESS_MEMORY_LIMIT", raising=False)
    code, _, stderr = _run(["gate", model, model, "--eval", data], capfd)
    assert code == 2 and len(_errors(stderr)) == 1 and "FILL" in stderr, stderr
    assert "2 GiB over what the runtime holds" in stderr  # the default rule, named


def test_timeout_bounds_each_native_step_and_is_put_back(files, tmp_path, capfd, monkeypatch):
    import os

    monkeypatch.delenv("TFCOMPRESS_TIMEOUT", raising=False)
    out = tmp_path / "int8.tflite"
    argv = ["quantize", files / "plain.keras", "--data", files / "calib.npz", "--out", out]
    code, _, stderr = _run([*argv, "--timeout", "0.001"], capfd)
    (error,) = _errors(stderr)
    assert code == 2 and "ran past its time limit of 0.001 s" in error and not out.exists()
    assert "TFCOMPRESS_TIMEOUT" not in os.environ  # the run's limit, not the process's
    code, _, stderr = _run([*argv, "--timeout", "200h"], capfd)
    assert code == 2 and "at most a week" in stderr


def test_a_tf_keras_model_tensorflow_cannot_save_is_converted_in_the_child(monkeypatch):
    from tfcompress._compat.keras import keras_module
    from tfcompress.errors import NativeCrashError
    from tfcompress.models import TFLiteModel
    from tfcompress.quantization import converter
    from tfcompress.runtime import create_runner

    tf_keras = keras_module("tf_keras")
    inputs = tf_keras.Input((6,), name="x")
    model = tf_keras.Model(inputs, tf_keras.layers.Dense(3, name="y")(inputs))
    # As for a model tf.saved_model.save refuses: the call is saved frozen, never converted here.
    monkeypatch.setattr(converter, "_save_tf_keras", lambda *_: False)
    (made,) = converter.convert_all(model, [None])
    x = np.random.default_rng(0).random((4, 6), dtype=np.float32)
    with create_runner(TFLiteModel(made.content)) as runner:
        got = runner.run(x)
    want = model(x).numpy()  # float32 rounding of the same sums: a few ulps of the largest
    np.testing.assert_allclose(got["y"], want, rtol=0, atol=1e-5 * float(np.abs(want).max()))
    monkeypatch.setattr(converter, "CHILD_TARGET", "_child_fakes:segfault")
    with pytest.raises(NativeCrashError, match="SIGSEGV"):
        converter.convert_all(model, [None])


def test_quantize_and_compress_of_a_model_file_import_tensorflow_only_in_their_child(tmp_path):
    # The caller checks the file as data; the converter's child loads, runs, rewrites (the
    # post-training methods) and converts it.
    # compress's artifact is then made again in process, where TensorFlow is: byte for byte.
    import subprocess
    import sys

    import keras

    inputs = keras.Input((32,))  # large enough that plain int8 is smaller and passes
    model = keras.Model(inputs, keras.layers.Dense(64)(inputs))
    model.export(tmp_path / "sm", verbose=False)
    model.save(tmp_path / "model.keras")
    model.save(tmp_path / "model.h5")
    x = np.random.default_rng(0).random((16, 32), dtype=np.float32)
    np.savez(tmp_path / "calib.npz", x=x)
    np.savez(tmp_path / "test.npz", x=x, y=model(x).numpy())
    script = (
        "import os, sys; from tfcompress.cli import main\n"
        "codes = [main(['quantize', m, '--data', 'calib.npz', '--out', m + '.tflite']) "
        "for m in ('sm', 'model.keras', 'model.h5')]\n"
        "codes.append(main(['quantize', 'model.keras', '--data', 'calib.npz', '--methods', "
        "'equalize', '--out', 'eq.tflite']))\n"  # rewritten where it is loaded too
        "compress = ['compress', 'model.keras', '--data', 'calib.npz', '--eval', 'test.npz', "
        "'--min-snr', '20', '--no-measure-latency', '--out']\n"
        "codes.append(main([*compress, 'child.tflite']))\n"
        "print('codes', *codes, 'tensorflow' in sys.modules)\n"
        "os.environ['TFCOMPRESS_IN_PROCESS'] = '1'\n"
        "print('codes', main([*compress, 'here.tflite']), 'tensorflow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    said = [line.split()[1:] for line in done.stdout.splitlines() if line.startswith("codes ")]
    assert said == [["0"] * 5 + ["False"], ["0", "True"]], done.stderr[-2000:]
    for made in ("sm", "model.keras", "model.h5"):
        assert (tmp_path / f"{made}.tflite").stat().st_size > 0
    assert (tmp_path / "child.tflite").read_bytes() == (tmp_path / "here.tflite").read_bytes()
