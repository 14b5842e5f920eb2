"""tfcompress.compress: the smallest (or fastest) artifact that passes the gate, and proof.

Real MNIST for the size target; the deliberately int8-sensitive model of
:mod:`tfcompress.samples.sensitive` for selective fallback, the CLI and an impossible gate; a timing
backend registered here (int8 made slow on purpose) for the latency objective.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

import tfcompress
from tfcompress.cli import main
from tfcompress.cli.common import duration
from tfcompress.compression import CompressConfig, plan_ladder
from tfcompress.errors import InvalidInputError
from tfcompress.quantization import Recipe
from tfcompress.samples.sensitive import sensitive_model


@pytest.fixture(scope="module")
def sensitive():
    import keras

    model, (calib, test) = sensitive_model(keras)
    return model, calib[:200], test  # 200 samples: no calibration-variant rung


@pytest.fixture(scope="module")
def sensitive_files(sensitive, tmp_path_factory):
    model, calib, (x, y) = sensitive
    root = tmp_path_factory.mktemp("sensitive")
    model.save(root / "sensitive.keras")
    np.savez(root / "calib.npz", x=calib)
    np.savez(root / "test.npz", x=x, y=y)
    np.savez(root / "unlabelled.npz", x=x)
    return root


def _compress_cli(root, out, *extra: str) -> list[str]:
    model, calib, test = (str(root / n) for n in ("sensitive.keras", "calib.npz", "test.npz"))
    return ["compress", model, "--data", calib, "--eval", test, *extra, "--out", str(out)]


@pytest.mark.slow
def test_mnist_one_point_gate_gives_int8_under_30_percent(trained_cnn, mnist_split) -> None:
    result = tfcompress.compress(
        trained_cnn,
        representative_data=mnist_split.train,
        eval_data=mnist_split.test,
        max_drop=0.01,
        # Not a speed test: on an AMD EPYC this CNN's first int8 CONV_2D (one input channel)
        # takes 57 us against 8-14 us in float, and the speed rule passes plain int8 over.
        measure_latency=False,
    )
    chosen = result.chosen
    assert result.passed and chosen is not None and chosen.name == "int8"
    assert chosen.size_bytes <= 0.30 * result.float32_bytes
    assert chosen.metric == "accuracy" and chosen.accuracy_drop <= 0.01
    assert chosen.ci_low <= chosen.accuracy_drop <= chosen.ci_high
    assert len(result.attempts) == 1  # nothing left can be smaller: the stop rule
    assert "cannot be beaten" in result.stop_reason and "int8-calib" in result.stop_reason
    # The recorded recipe is the whole recipe: quantize() makes the same bytes again.
    again = tfcompress.quantize(
        trained_cnn,
        recipe=Recipe.from_dict(chosen.recipe["recipe"]),
        representative_data=mnist_split.train,
        seed=chosen.recipe["seed"],
    )
    assert again.model_content == result.model_content
    data = result.to_dict()
    assert data["chosen"]["gzip_bytes"] == chosen.gzip_bytes and data["attempts"][0]["passed"]
    assert "chosen: int8" in str(result)


@pytest.mark.slow
def test_the_sensitive_layer_is_kept_float(sensitive, sensitive_files, tmp_path, capsys):
    model, calib, _ = sensitive
    out, report = tmp_path / "chosen.tflite", tmp_path / "report"
    # Every attempt is timed (the report's latency plot), but speed is not this test's
    # subject: a step judged slower in a busy run's timings would change the choice.
    code = main([*_compress_cli(sensitive_files, out, "--max-drop", "0.01"), "--report",
                 str(report), "--max-slowdown", "100", "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0 and "attempt 1 of" in captured.err  # progress on stderr
    payload = json.loads(captured.out)
    by_name = {a["name"]: a for a in payload["attempts"]}
    assert not by_name["int8"]["passed"] and by_name["int8"]["accuracy_drop"] > 0.3  # chance
    # The per-op rung (before selective): the op adding most int8 error, the outlier layer's,
    # kept float; the name says what the file holds, the note why.
    chosen = payload["chosen"]
    assert chosen["name"] == "int8 (1 FULLY_CONNECTED float)", list(by_name)
    assert chosen["float_layers"] == ["sensitive"] and chosen["technique"] == "selective"
    assert "(int8 error)" in chosen["notes"][0] and "x int8's" in chosen["notes"][0]
    assert chosen["output"] == str(out) and chosen["size_bytes"] == out.stat().st_size
    assert {"recipe", "gzip_bytes", "accuracy", "passed", "latency_ms"} <= set(chosen)
    assert chosen["accuracy_drop"] <= 0.01
    float16 = tfcompress.quantize(model, recipe="float16")
    assert by_name["int8"]["size_bytes"] < chosen["size_bytes"] < float16.size_bytes
    assert "int16x8" not in by_name  # the fallback is not needed once an int8 step passes
    # Replay: the recorded recipe through quantize(), and through the CLI, gives the same bytes.
    recorded = chosen["recipe"]["recipe"]
    recipe = Recipe.from_dict(
        {k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items()}
    )
    again = tfcompress.quantize(model, recipe=recipe, representative_data=calib)
    assert again.model_content == out.read_bytes()
    replayed = tmp_path / "replayed.tflite"
    code = main([*_compress_cli(sensitive_files, replayed)[:4], "--replay",
                 str(report / "compress.json"), "--out", str(replayed)])  # fmt: skip
    assert code == 0 and replayed.read_bytes() == out.read_bytes()
    # The report: JSON, Markdown and the plots (every attempt is timed by default).
    assert sorted(p.name for p in report.iterdir()) == [
        "compress.json", "compress.md", "compress_latency.png", "compress_size.png",
    ]  # fmt: skip
    chosen_name = json.loads((report / "compress.json").read_text())["chosen"]["name"]
    assert chosen_name == "int8 (1 FULLY_CONNECTED float)"
    assert "Kept in float: `sensitive`" in (report / "compress.md").read_text()
    assert (report / "compress_size.png").read_bytes()[:4] == b"\x89PNG"
    code = main([*_compress_cli(sensitive_files, tmp_path / "x.tflite"), "--report", str(report)])
    assert code == 2 and "already holds compress.json" in capsys.readouterr().err


@pytest.mark.slow
def test_impossible_gate_exits_1_with_the_attempts(sensitive_files, tmp_path, capsys) -> None:
    out = tmp_path / "never.tflite"
    code = main(_compress_cli(sensitive_files, out, "--min-snr", "200"))
    stdout = capsys.readouterr().out
    assert code == 1 and not out.exists()
    for name in ("int8", "selective-1", "selective-2", "int16x8"):
        assert f" {name} " in stdout
    assert "nothing passed the gate" in stdout and "try: closest:" in stdout
    assert "snr" in stdout and "--train" in stdout


@pytest.mark.slow
def test_a_crashed_fine_tune_is_an_error_and_the_search_goes_on(
    sensitive_files, tmp_path, capsys, monkeypatch
) -> None:
    # The fine-tuning child really dies by SIGSEGV (twice: oneDNN on, then off).
    from tfcompress.training import isolation

    monkeypatch.setattr(isolation, "CHILD_TARGET", "_child_fakes:segfault")
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    out = tmp_path / "chosen.tflite"
    train = str(sensitive_files / "calib.npz")
    # Not a speed test: a step judged slower in a busy run's timings would change the choice.
    code = main([*_compress_cli(sensitive_files, out, "--max-drop", "0.01"), "--train", train,
                 "--no-measure-latency", "--json"])  # fmt: skip
    payload = json.loads(capsys.readouterr().out)
    by_name = {a["name"]: a for a in payload["attempts"]}
    assert code == 0 and payload["chosen"]["name"] == "int8 (1 FULLY_CONNECTED float)"
    assert out.exists()
    assert by_name["qat"]["status"] == "error" and "SIGSEGV" in by_name["qat"]["why"]
    assert "TF_ENABLE_ONEDNN_OPTS=0" in by_name["qat"]["why"]
    # The other fine-tunes run the same fit: skipped, with the reason, not crashed again.
    assert "prune-int8" not in by_name and "cluster-int8" not in by_name
    assert "prune-int8 fine-tunes on the same data, and qat crashed" in payload["stop_reason"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-drop", "1.5"], "max_drop for accuracy-like metrics must be in [0, 1] (a fraction"),
        (["--max-drop", "-0.1"], "must be in [0, 1] (a fraction"),
        (["--max-drop", "0.01", "--unlabelled"], "the thresholds that fit: --min-snr for 'head'"),
        (["--max-drop", "0.01", "--target", "gpu", "--objective", "latency"], ""),
    ],
)
def test_bad_input_exits_2_with_one_line(
    sensitive_files, tmp_path, capsys, monkeypatch, extra, message
):
    from tfcompress.compression import search

    def never(*_, **__):
        raise AssertionError("an attempt was made before the options were refused")

    monkeypatch.setattr(search, "build", never)  # refused before the first attempt
    root = sensitive_files
    data = "unlabelled.npz" if "--unlabelled" in extra else "test.npz"
    extra = [e for e in extra if e != "--unlabelled"]
    if "gpu" in extra and "gpu" in _usable_backends():
        pytest.skip("a GPU is usable here: ranking by its latency is not bad input")
    model, calib = str(root / "sensitive.keras"), str(root / "calib.npz")
    code = main(["compress", model, "--data", calib, "--eval", str(root / data), *extra,
                 "--out", str(tmp_path / "o.tflite")])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("tfcompress compress: error: ") and message in err[-1]
    assert not (tmp_path / "o.tflite").exists()


def test_target_gpu_without_a_gpu_gates_on_the_cpu_and_ranks_by_size(
    sensitive_files, tmp_path, capsys
):
    """docs/compress.md's words, run as typed: exit 0, a note, no refusal."""
    if "gpu" in _usable_backends():
        pytest.skip("a GPU is usable here: compress ranks by its latency")
    root, out = sensitive_files, tmp_path / "o.tflite"
    code = main(["compress", str(root / "sensitive.keras"), "--target", "gpu",
                 "--data", str(root / "calib.npz"), "--eval", str(root / "test.npz"),
                 "--max-drop", "1.0", "--no-measure-latency", "--out", str(out)])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0 and out.exists(), captured.err
    assert "ranked by size, not latency" in captured.out + captured.err


def _usable_backends() -> set[str]:
    from tfcompress.bench.environment import detect_gpu

    return {"gpu"} if detect_gpu() else set()


def test_latency_objective_picks_float_when_int8_is_slower(monkeypatch) -> None:
    import keras

    from tfcompress.runtime import base
    from tfcompress.runtime.litert import LiteRTRunner

    class SlowInt8Runner(LiteRTRunner):
        """LiteRT with int8 made slow: a CPU without int8 dot-product instructions, exaggerated."""

        def bind(self, x):
            call = super().bind(x)
            details = self.interpreter.get_tensor_details()
            if not any(d["dtype"] == np.int8 for d in details):
                return call

            def slow() -> object:
                time.sleep(0.004)
                return call()

            return slow

    model, (calib, test) = sensitive_model(keras, outlier=0.0)  # int8 passes on this one
    monkeypatch.setitem(base.BACKENDS, "cpu", SlowInt8Runner)
    result = tfcompress.compress(
        model, representative_data=calib[:200], eval_data=test, max_drop=0.01, objective="latency"
    )
    by_name = {a.name: a for a in result.attempts}
    assert set(by_name) == {"float32", "float16", "int8"}  # the int8 family cannot be faster
    int8 = by_name["int8"]
    assert int8.gate["passed"] and int8.latency_ms > by_name["float32"].latency_ms
    assert not int8.passed and "ms/sample is" in int8.why and "--max-slowdown" in int8.why
    assert result.chosen is not None and result.chosen.name in ("float32", "float16")
    finding = " ".join(result.findings)
    assert "int8 is slower than" in finding and "wins: the fastest passing" in finding
    assert "runs at least the int8 graph" in result.stop_reason


def test_ctrl_c_returns_the_best_so_far(sensitive_files, tmp_path, capsys, monkeypatch):
    from tfcompress.compression import search

    def interrupted(technique, recipe, *args, **kwargs):
        if technique == "selective" or "methods" in recipe:  # the attempts after plain int8
            raise KeyboardInterrupt
        return real(technique, recipe, *args, **kwargs)

    real = search.build
    monkeypatch.setattr(search, "build", interrupted)
    code = main(_compress_cli(sensitive_files, tmp_path / "o.tflite", "--max-drop", "0.01"))
    captured = capsys.readouterr()
    assert code == 130 and "interrupted (Ctrl-C) after 1 attempt" in captured.out
    assert " int8 " in captured.out and "compress was interrupted" in captured.err
    assert not (tmp_path / "o.tflite").exists()  # int8 failed the gate: nothing to keep


@pytest.mark.slow
def test_edgetpu_keeps_only_integer_artifacts_and_shows_the_split(sensitive) -> None:
    model, calib, test = sensitive
    result = tfcompress.compress(
        model, representative_data=calib, eval_data=test, max_drop=0.01, target="edgetpu"
    )
    int8, methods, selective = result.attempts
    assert int8.recipe["target"] == "edgetpu" and int8.recipe["recipe"]["input_type"] == "uint8"
    assert int8.target_verdict["segments_predicted"] == 1 and int8.status == "failed"  # the gate
    # The methods keep every op int8 (one Edge TPU segment); they cannot fix an input outlier.
    assert methods.name == "int8-methods" and methods.target_verdict["segments_predicted"] == 1
    assert methods.recipe["recipe"]["input_type"] == "uint8" and methods.status == "failed"
    # Selective passes the gate but keeps a layer float: shown with its price, not chosen.
    assert selective.gate["passed"] and not selective.passed
    assert selective.float_layers == ("sensitive",)
    assert "keeps 1 node(s) float: the Edge TPU would run" in selective.why
    assert not result.passed and "as a fully-integer artifact for the Edge TPU" in str(result)
    assert any("selective-1 passed the gate, but keeps" in tip for tip in result.advice)


def test_time_budget_returns_what_it_has(sensitive) -> None:
    model, calib, test = sensitive
    config = CompressConfig(time_budget=1e-6, thresholds={"max_drop": 0.02})
    result = tfcompress.compress(model, config=config, representative_data=calib, eval_data=test)
    assert result.config == config  # the config it ran with, recorded
    assert CompressConfig.from_dict(json.loads(json.dumps(result.to_dict()))["config"]) == config
    assert not result.passed and result.attempts == ()
    assert result.stop_reason.startswith("time budget ran out")
    with pytest.raises(tfcompress.GateFailedError):
        result.save("never.tflite")


def test_options_are_checked_before_any_work() -> None:
    for options, text in (
        ({"max_drop": 2}, "[0, 1]"),
        ({"target": "tpu"}, "unknown target"),
        ({"objective": "speed"}, "unknown objective"),
        ({"time_budget": -1}, "positive"),
        ({"threads": 0}, "threads"),
        ({"static_batch": 0}, "static_batch must be a positive integer"),
        ({"static_batch": 1, "train_data": "t.npz"}, "fine-tuned ones keep the model's own"),
        ({"batch_size": 8}, "batch_size is the fine-tuning batch of the QAT"),
        ({"batch_size": 0, "train_data": "t.npz"}, "batch_size must be a positive integer"),
    ):
        with pytest.raises(InvalidInputError, match=text.replace("[", r"\[")):
            tfcompress.compress(object(), representative_data=None, eval_data=None, **options)


def test_ladder_and_durations() -> None:
    size = plan_ladder(objective="size", target="cpu", calibration_available=100, training=True)
    assert [r.name for r in size] == [
        "int8", "int8-methods", "per-op", "selective", "int16x8", "qat", "prune-int8",
        "cluster-int8", "float16",
    ]  # fmt: skip
    assert size[1].recipe == {"recipe": {"name": "int8"}, "methods": "auto"}
    assert size[1].bound == "int8"  # the same int8 ops: never smaller than plain int8
    assert size[-1].bound == "float16" and not any(r.last_resort for r in size)
    latency = plan_ladder(
        objective="latency", target="edgetpu", calibration_available=5000, training=False
    )
    assert [r.name for r in latency] == ["int8", "int8-calib1000", "int8-methods", "selective"]
    assert duration("10m") == 600 and duration("90") == 90 and duration("1.5h") == 5400
    with pytest.raises(Exception, match="positive duration"):
        duration("ten")


@pytest.mark.parametrize(
    ("extra", "flags"),
    [
        (["--max-drop", "0.01"], "the gate flags"),
        (["--target", "edgetpu", "--time-budget", "1m"], "--target, --time-budget"),
        (["--report", "rep", "--measure-latency"], "--measure-latency, --report"),
        (["--static-batch", "1", "--batch-size", "8"], "--static-batch, --batch-size"),
    ],
)
def test_replay_refuses_the_options_of_a_search(tmp_path, capsys, extra, flags):
    out = tmp_path / "o.tflite"
    argv = ["compress", "m.keras", "--data", "c.npz", "--replay", "compress.json", *extra]
    assert main([*argv, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{flags} apply to a search: drop them" in error and not out.exists()


def test_batch_size_is_the_fine_tuning_batch_and_needs_train(tmp_path, capsys):
    out = tmp_path / "o.tflite"
    argv = ["compress", "m.keras", "--data", "c.npz", "--eval", "t.npz", "--batch-size", "8"]
    assert main([*argv, "--out", str(out)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "--batch-size is the fine-tuning batch of --train" in error[0]
    assert "--static-batch" in error[0] and not out.exists()


def test_compress_takes_its_config_and_keywords_build_the_same_one() -> None:
    config = CompressConfig.from_options(
        target="edgetpu", objective="latency", outputs="cls", max_drop=0.02, threads=2
    )
    assert config == CompressConfig(
        target="edgetpu",
        objective="latency",
        outputs=("cls",),
        thresholds={"max_drop": 0.02},
        threads=2,
    )
    assert config.measure and config.settings.backend == "cpu"  # the Edge TPU gates on cpu
    assert CompressConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert hash(config) == hash(CompressConfig.from_dict(config.to_dict()))
    with pytest.raises(InvalidInputError, match=r"config= holds every option.*threads"):
        tfcompress.compress(
            object(), representative_data=None, eval_data=None, config=config, threads=1
        )
    with pytest.raises(InvalidInputError, match=r"config= holds every option.*max_drop"):
        tfcompress.compress(
            object(), representative_data=None, eval_data=None, config=config, max_drop=0.1
        )
    with pytest.raises(InvalidInputError, match="needs a static batch of 1, not 4"):
        CompressConfig(target="edgetpu", static_batch=4)
    with pytest.raises(InvalidInputError, match="compress takes no option 'max_drops'"):
        CompressConfig.from_dict({"max_drops": 0.1})
    with pytest.raises(InvalidInputError, match="compress got unknown option"):
        CompressConfig(thresholds={"min_snrr": 20})
