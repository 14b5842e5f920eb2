"""Invocation strategies that run something whole: degenerate models, signals, the pytest plugin.

* ``methods.*``: Keras models whose numbers no training makes (a NaN, Inf or 1e30 kernel, a
  BatchNorm with a negative moving variance, all-zero weights) and calibration data at the
  edges of float32 (-3e38, 3e38, denormals) through ``quantize --recipe int8 --methods ...``:
  a clean success or one error line, never a crash, a hang or an internal error.
* ``signal.*``: ``benchmark`` or ``quantize`` in a process of its own, sent SIGTERM, SIGHUP
  or SIGINT 0.2 to 3 s after it starts: exit 143/129/130 with one line (or a clean finish
  if it ended first), no process left in its session, nothing left in its TMPDIR, no output.
* ``pytest.*``: ``python -m pytest`` on a generated test file that uses the
  ``accuracy_gate`` fixture and ``tfcompress.testing.assert_accuracy_drop``, with hostile
  ``--tfc-*`` options: a usage error (pytest's exit 4), before any test runs or, for a gate
  report that names a gate's own input, at the end (that gate fails and names the clash);
  inputs unchanged either way.
"""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np

from fuzzing.invocations import Invocation, _seed_inputs, invocation
from fuzzing.seeds import CLASSES, SAMPLE_SHAPE, Seeds

# --- post-training methods on degenerate models and data --------------------------------

_METHOD_CHOICES = [
    (),
    ("--methods", "none"),
    ("--methods", "auto"),
    ("--methods", "equalize"),
    ("--methods", "adaround"),
    ("--methods", "bias-correction"),
    ("--methods", "percentile-ranges"),
    ("--methods", "mse-ranges"),
    ("--methods", "equalize,bias-correction,mse-ranges"),
    ("--methods", "equalize,adaround,percentile-ranges"),
]
_DEGENERATE = ("nan_kernel", "inf_kernel", "huge_kernel", "negative_variance", "all_zero")


def _degenerate_model(kind: str, path: Path, rng: np.random.Generator) -> None:
    """A conv, BatchNorm, dense Keras model (the seed's input), its numbers made ``kind``."""
    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input(shape=SAMPLE_SHAPE),
            layers.Conv2D(4, 3, name="conv"),
            layers.BatchNormalization(name="bn"),
            layers.ReLU(),
            layers.Flatten(),
            layers.Dense(CLASSES, activation="softmax", name="dense"),
        ],
        name=f"degenerate_{kind}",
    )
    conv, bn, dense = (model.get_layer(n) for n in ("conv", "bn", "dense"))
    if kind == "all_zero":
        for layer in (conv, bn, dense):
            layer.set_weights([np.zeros_like(w) for w in layer.get_weights()])
        return model.save(path)
    if kind == "negative_variance":
        gamma, beta, mean, variance = bn.get_weights()
        bn.set_weights([gamma, beta, mean, -np.abs(variance) - rng.random(variance.shape)])
        return model.save(path)
    value = {"nan_kernel": np.nan, "inf_kernel": np.inf, "huge_kernel": 1e30}[kind]
    layer = conv if rng.random() < 0.5 else dense
    kernel, bias = layer.get_weights()
    flat = kernel.reshape(-1).copy()
    count = int(rng.integers(1, flat.size + 1)) if rng.random() < 0.5 else 1
    flat[rng.choice(flat.size, count, replace=False)] = value * rng.choice([-1, 1], count)
    layer.set_weights([flat.reshape(kernel.shape).astype(np.float32), bias])
    return model.save(path)


def _extreme_data(path: Path, rng: np.random.Generator) -> None:
    """Calibration samples at float32's edges, or mixed with ordinary ones."""
    shape = (16, *SAMPLE_SHAPE)
    kind = int(rng.integers(0, 5))
    tiny = np.finfo(np.float32).smallest_subnormal
    if kind == 0:
        x = np.full(shape, -3e38, np.float32)
    elif kind == 1:
        x = np.full(shape, 3e38, np.float32)
    elif kind == 2:
        x = (rng.choice([-1, 1], shape) * tiny * rng.integers(1, 100, shape)).astype(np.float32)
    elif kind == 3:
        x = rng.choice(np.array([-3e38, 3e38, tiny, -tiny, 0.0], np.float32), shape)
    else:
        x = rng.random(shape, dtype=np.float32)
        x[rng.integers(0, 16)] = 3e38
    np.savez(path, x=x.astype(np.float32), y=rng.integers(0, CLASSES, len(x)))


def _methods_case(model_kind: str | None) -> None:
    name = f"methods.{model_kind}" if model_kind else "methods.extreme_data"

    @invocation(name)
    def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
        model = seeds.keras
        if model_kind is not None:
            model = folder / f"{model_kind}.keras"
            _degenerate_model(model_kind, model, rng)
        data = seeds.data_npz
        if model_kind is None or rng.random() < 0.5:
            data = folder / "extreme.npz"
            _extreme_data(data, rng)
        out = folder / "out.tflite"
        methods = _METHOD_CHOICES[int(rng.integers(0, len(_METHOD_CHOICES)))]
        argv = ("quantize", str(model), "--recipe", "int8", "--data", str(data))
        argv += ("--calibration-samples", "8", *methods, "--out", str(out))
        inputs = (*_seed_inputs(seeds), str(model), str(data))
        return Invocation("quantize", argv, inputs, str(out), False)

    del make


for _kind in _DEGENERATE:
    _methods_case(_kind)
_methods_case(None)


# --- signals during a run ---------------------------------------------------------------

_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT")


def _signal_case(name: str) -> None:
    @invocation(f"signal.{name.lower()}")
    def make(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
        delay = float(rng.uniform(0.2, 3.0))
        if rng.random() < 0.5:
            out = folder / "out.tflite"
            argv: tuple[str, ...] = ("quantize", str(seeds.keras), "--data", str(seeds.data_npz))
            argv += ("--calibration-samples", "8", "--out", str(out))
            if rng.random() < 0.5:
                argv += ("--eval", str(seeds.data_npz), "--layer-errors")
            output: str | None = str(out)
        else:
            argv = ("benchmark", str(seeds.tflite_int8), "--runs", "50", "--min-seconds", "1")
            if rng.random() < 0.5:
                argv += ("--data", str(seeds.data_npz))
            output = None
        code = 128 + int(signal.Signals[name])
        return Invocation(
            argv[0],
            argv,
            _seed_inputs(seeds),
            output,
            False,
            runner="process",
            interrupt=(name, delay),
            exit_codes=(0, code),
        )

    del make


for _name in _SIGNALS:
    _signal_case(_name)


# --- the pytest plugin with hostile --tfc-* options -----------------------------------------

_TEST_FILE = """\
from tfcompress.testing import assert_accuracy_drop

REFERENCE, CANDIDATE, DATA = {reference!r}, {candidate!r}, {data!r}


def test_fixture(accuracy_gate):
    accuracy_gate(REFERENCE, CANDIDATE, DATA)


def test_function():
    assert_accuracy_drop(REFERENCE, CANDIDATE, DATA, max_drop=1.0)
"""


def _usage_errors(seeds: Seeds, folder: Path, rng: np.random.Generator) -> list[tuple[str, ...]]:
    import os

    fifo = folder / "report_fifo.json"
    os.mkfifo(fifo)
    loop = folder / "loop.json"
    loop.symlink_to(loop)
    return [
        ("--tfc-backend", "bogus"),
        ("--tfc-backend", ""),
        ("--tfc-backend", "cpu\x1b[2J"),
        ("--tfc-backend", "b" * 5_000),
        ("--tfc-max-drop", "nan"),
        ("--tfc-max-drop", "inf"),
        ("--tfc-max-drop", "-1"),
        ("--tfc-max-drop", "9" * 5_000),
        ("--tfc-metric", "bogus"),
        ("--tfc-metric", ""),
        ("--tfc-gate-report", str(seeds.root)),
        ("--tfc-gate-report", str(fifo)),
        ("--tfc-gate-report", str(folder / "no" / "such" / "report.json")),
        ("--tfc-gate-report", str(seeds.keras / "report.json")),
        ("--tfc-gate-report", str(folder / ("r" * 5_000 + ".json"))),
        ("--tfc-gate-report", "/proc/tfcompress-fuzz.json"),
        ("--tfc-gate-report", str(loop)),
    ]


@invocation("pytest.usage_error")
def _pytest_usage(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    test = _test_file(seeds, folder)
    options = _usage_errors(seeds, folder, rng)
    extra = options[int(rng.integers(0, len(options)))]
    argv = ("-q", "-p", "no:cacheprovider", str(test), *extra)
    inputs = (*_seed_inputs(seeds), str(test))
    return Invocation("pytest", argv, inputs, None, False, runner="pytest", exit_codes=(4,))


# A pytest session of its own (seconds): the long campaign's; the suite checks each of the
# three roles (tests/test_untrusted_options.py: the gate report never replaces a gate input).
@invocation("pytest.report_names_an_input", slow=True)
def _pytest_clash(rng: np.random.Generator, seeds: Seeds, folder: Path) -> Invocation:
    """``--tfc-gate-report`` names the gate's model or data: that gate fails, nothing is lost.

    Which files a gate reads is known only when the test calls it: the fixture's gate fails
    naming the clash, the report is not written, and the session ends in a usage error (4).
    """
    test = _test_file(seeds, folder)
    target = [seeds.keras, seeds.tflite_int8, seeds.data_npz][int(rng.integers(0, 3))]
    argv = ("-q", "-p", "no:cacheprovider", str(test), "--tfc-gate-report", str(target))
    if rng.random() < 0.5:  # the same file by another name
        link = folder / f"alias{target.suffix}"
        link.symlink_to(target)
        argv = (*argv[:-1], str(link))
    inputs = (*_seed_inputs(seeds), str(test))
    return Invocation("pytest", argv, inputs, None, False, runner="pytest", exit_codes=(4,))


def _test_file(seeds: Seeds, folder: Path) -> Path:
    test = folder / "test_gate_fuzz.py"
    test.write_text(
        _TEST_FILE.format(
            reference=str(seeds.keras), candidate=str(seeds.tflite_int8), data=str(seeds.data_npz)
        )
    )
    return test
