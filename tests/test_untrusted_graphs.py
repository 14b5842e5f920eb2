"""A SavedModel's graph is code: ops that reach files run only with consent.

The payloads are TensorFlow graphs, not Python: ``tf.io.write_file`` in a serving function
(runs when the model is called) or in a resource initializer (runs when it is loaded). The
marker file they write must never appear without ``--unsafe``, and appears with it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tfcompress._compat.tf import tensorflow
from tfcompress.cli import main
from tfcompress.errors import ModelLoadError
from tfcompress.models import SavedModelDir, load_model
from tfcompress.models.graph_ops import scan_graph


def _write_in_serve(tf, marker: Path):
    class WritesWhenCalled(tf.Module):
        def __init__(self):
            self.scale = tf.Variable(tf.ones([3]))

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def serve(self, x):
            tf.io.write_file(str(marker), "ran")
            return {"y": x * self.scale}

    return WritesWhenCalled()


def _write_in_initializer(tf, marker: Path):
    class Resource(tf.saved_model.experimental.TrackableResource):
        def _create_resource(self):
            return tf.raw_ops.VarHandleOp(dtype=tf.float32, shape=[], shared_name="fuzz_init")

        def _initialize(self):
            tf.io.write_file(str(marker), "ran")
            tf.raw_ops.AssignVariableOp(resource=self.resource_handle, value=1.0)

    class WritesWhenLoaded(tf.Module):
        def __init__(self):
            self.resource = Resource()

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def serve(self, x):
            value = tf.raw_ops.ReadVariableOp(
                resource=self.resource.resource_handle, dtype=tf.float32
            )
            return {"y": x + value}

    return WritesWhenLoaded()


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tf = tensorflow()
    root = tmp_path_factory.mktemp("graphs")
    marker = root / "GRAPH_RAN"
    paths = {"marker": marker, "data": root / "data.npz"}
    for name, build in (("serve", _write_in_serve), ("init", _write_in_initializer)):
        module = build(tf, marker)
        paths[name] = root / f"writes_on_{name}"
        tf.saved_model.save(module, paths[name], signatures={"serving_default": module.serve})
    np.savez(paths["data"], x=np.ones((8, 3), np.float32))
    marker.unlink(missing_ok=True)
    return paths


def _meta_graph(path: Path):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    return proto.meta_graphs[0]


def test_the_scan_finds_io_ops_and_when_they_run_and_nothing_in_ordinary_models(graphs, tmp_path):
    from tfcompress._compat.keras import KerasFlavour, keras_module

    (called,) = scan_graph(_meta_graph(graphs["serve"]))
    assert (called.op, called.action, called.at_load) == ("WriteFile", "writes files", False)
    (loaded,) = scan_graph(_meta_graph(graphs["init"]))
    assert (loaded.op, loaded.at_load) == ("WriteFile", True)
    # Real exports carry the saver's SaveV2/RestoreV2/MergeV2Checkpoints: not reported.
    for flavour, save in (
        (KerasFlavour.KERAS3, lambda m, p: m.export(p, verbose=False)),
        (KerasFlavour.TF_KERAS, lambda m, p: m.save(p, save_format="tf")),
    ):
        keras = keras_module(flavour)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        save(model, tmp_path / flavour.value)
        assert scan_graph(_meta_graph(tmp_path / flavour.value)) == ()


def test_a_graph_that_writes_when_called_loads_but_never_runs_without_unsafe(
    graphs, tmp_path, capsys
):
    model = load_model(graphs["serve"])
    assert isinstance(model, SavedModelDir) and model.name == "writes_on_serve"
    assert [op.op for op in model.graph_ops] == ["WriteFile"]
    path, data = str(graphs["serve"]), str(graphs["data"])
    for argv in (
        ["gate", path, path, "--eval", data],
        ["benchmark", path, "--backends", "keras", "--runs", "1", "--min-seconds", "0"],
    ):
        assert main(argv) == 2, argv
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert "WriteFile (writes files)" in error and "--unsafe" in error, error
    assert not graphs["marker"].exists()
    # Converting is not running: tfcompress does not refuse it (the converter has no
    # kernel for WriteFile, and says so).
    assert main(["quantize", path, "--recipe", "float32", "--out", str(tmp_path / "m.tflite")]) == 2
    assert "WriteFile" in capsys.readouterr().err and not graphs["marker"].exists()
    # Consent is honoured: the graph runs and its write happens.
    assert main(["gate", path, path, "--eval", data, "--unsafe"]) == 0
    assert graphs["marker"].exists()
    graphs["marker"].unlink()


def test_a_graph_that_writes_when_loaded_is_refused_before_any_load(graphs, capsys):
    with pytest.raises(
        ModelLoadError, match=r"WriteFile \(writes files\).*when the model is loaded"
    ):
        load_model(graphs["init"])
    assert main(["inspect", str(graphs["init"])]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not graphs["marker"].exists()
    load_model(graphs["init"], safe_mode=False)
    model = load_model(graphs["init"], safe_mode=False)
    from tfcompress.runtime import create_runner

    create_runner(model, backend="keras").close()  # tf.saved_model.load runs the initializer
    assert graphs["marker"].exists()
    graphs["marker"].unlink()


def test_a_damaged_fingerprint_is_ignored_with_one_warning_and_no_traceback(tmp_path, capsys):
    from tfcompress._compat.keras import KerasFlavour, keras_module

    keras = keras_module(KerasFlavour.KERAS3)
    folder = tmp_path / "exported"
    keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)]).export(folder, verbose=False)
    (folder / "fingerprint.pb").write_bytes(b"garbage, not a FingerprintDef")
    assert main(["inspect", str(folder)]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Fingerprint Error" not in err
    warnings = [line for line in err.splitlines() if "fingerprint.pb" in line]
    assert len(warnings) == 1 and "ignored" in warnings[0]
