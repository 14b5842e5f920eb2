"""Config flags come from the config fields that declare them: one name, one default, one help."""

import dataclasses
import importlib
import re

import pytest

from tfcompress._config_fields import declared_options
from tfcompress.cli import build_parser, main

#: Every config whose fields declare options (module under tfcompress/, class).
CONFIGS = [
    ("selection.config", "SelectionConfig"),
    ("compression.config", "CompressConfig"),
    ("quantization.config", "PTQConfig"),
    ("quantization.recipes", "Recipe"),
    ("quantization.onnx_ptq", "OnnxRecipe"),
    ("quantization.methods.per_op", "PerOpBar"),
    ("selection.budgets", "Budgets"),
    ("bench.config", "BenchmarkConfig"),
    ("testing.settings", "GateSettings"),
    ("training.configs", "QATConfig"),
    ("training.configs", "PruneConfig"),
    ("training.configs", "ClusterConfig"),
]


@pytest.mark.parametrize(("module", "cls"), CONFIGS)
def test_what_the_cli_reads_is_what_the_fields_declare(module, cls):
    config = getattr(importlib.import_module(f"tfcompress.{module}"), cls)
    declared = declared_options(module, cls)
    fields = {f.name: f for f in dataclasses.fields(config) if "help" in f.metadata}
    assert declared and set(declared) == set(fields)
    for name, option in declared.items():
        field = fields[name]
        default = None if field.default is dataclasses.MISSING else field.default
        assert (option.default, option.help) == (default, field.metadata["help"]), name
        assert option.choices == field.metadata["choices"], name


def _flags(verb):
    parser = build_parser()
    (sub,) = [a for a in parser._actions if hasattr(a, "choices") and a.choices]
    return {flag for action in sub.choices[verb]._actions for flag in action.option_strings}


@pytest.mark.parametrize(
    ("verb", "module", "cls", "names"),
    [
        ("select", "selection.config", "SelectionConfig", ("latency_runs", "width_multipliers")),
        ("select", "selection.budgets", "Budgets", ("max_size", "max_latency", "min_accuracy")),
        (
            "compress",
            "compression.config",
            "CompressConfig",
            ("seed", "time_budget", "freeze_batchnorm"),
        ),
        ("quantize", "quantization.config", "PTQConfig", ("seed", "methods")),
        ("quantize", "quantization.recipes", "Recipe", ("rules", "float_nodes")),
        ("quantize", "quantization.onnx_ptq", "OnnxRecipe", ("calibration_method", "opset")),
        ("export-onnx", "quantization.onnx_ptq", "OnnxRecipe", ("opset",)),
        ("quantize", "quantization.methods.per_op", "PerOpBar", ("per_op_min_snr",)),
        ("benchmark", "bench.config", "BenchmarkConfig", ("backends", "runs", "profile_ops")),
        ("gate", "testing.settings", "GateSettings", ("backend", "confidence", "interval")),
    ],
)
def test_each_config_flag_is_its_field_name(verb, module, cls, names):
    flags = _flags(verb)
    for name in names:
        assert declared_options(module, cls)[name].flag in flags


@pytest.mark.parametrize(
    ("argv", "heir"),
    [
        (["select", "--train", "t.npz", "--eval", "e.npz", "--runs", "5"], "--latency-runs"),
        (["select", "--train", "t.npz", "--eval", "e.npz", "--widths", "1"], "--width-multipliers"),
        (["quantize", "m.keras", "--out", "o.tflite", "--method", "auto"], "--methods"),
        (["quantize", "m.keras", "--out", "o.tflite", "--rule", "a=float"], "--rules"),
        (
            ["quantize", "m.keras", "--out", "o.onnx", "--calibration", "entropy"],
            "--calibration-method",
        ),
        (["benchmark", "m.tflite", "--backend", "cpu"], "--backends"),
    ],
)
def test_a_renamed_flag_is_refused_naming_its_heir(capsys, argv, heir):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"was renamed {heir}" in err and err.count("\n") == 1


def test_select_flags_reach_the_config_and_the_config_keeps_its_defaults():
    from tfcompress.cli._options import config_values
    from tfcompress.cli.select import _CONFIG
    from tfcompress.selection.config import SelectionConfig

    args = build_parser().parse_args(
        ["select", "--train", "t", "--eval", "e", "--latency-runs", "7", "--width-multipliers",
         "0.25,0.5"]
    )  # fmt: skip
    config = SelectionConfig.from_options(**config_values(args, _CONFIG[2:]))
    assert (config.latency_runs, config.width_multipliers) == (7, (0.25, 0.5))
    assert config.epochs == SelectionConfig().epochs and config.calibration_samples is None


def test_the_verbs_typed_options_are_their_configs_options():
    import inspect

    from tfcompress.bench.thresholds import threshold_names
    from tfcompress.compression.config import CompressConfig, CompressOptions
    from tfcompress.quantization.config import PTQConfig, PTQOptions

    built = set(inspect.signature(PTQConfig.from_options).parameters) - {"cls"}
    assert set(PTQOptions.__optional_keys__) == built
    fields = {f.name for f in dataclasses.fields(CompressConfig)} - {"version", "thresholds"}
    assert set(CompressOptions.__optional_keys__) == fields | set(threshold_names())
    from tfcompress.selection.config import SelectionConfig, SelectionOptions

    fields = {f.name for f in dataclasses.fields(SelectionConfig)} - {"version"}
    assert set(SelectionOptions.__optional_keys__) == fields
    from tfcompress.bench.config import BenchmarkConfig, BenchmarkOptions

    fields = {f.name for f in dataclasses.fields(BenchmarkConfig)} - {"version"}
    assert set(BenchmarkOptions.__optional_keys__) == fields


@pytest.mark.parametrize("verb", ["quantize", "compress", "select_model", "benchmark"])
def test_an_unknown_keyword_is_refused_naming_the_valid_ones(verb):
    import tfcompress
    from tfcompress.errors import InvalidInputError

    call = getattr(tfcompress, verb)
    args = () if verb == "select_model" else ("never_read.keras",)
    data = {
        "select_model": {"train_data": None, "eval_data": None},
        "benchmark": {"data": None},
    }.get(verb, {"representative_data": None, "eval_data": None})
    known = "runs" if verb == "benchmark" else "seed"
    message = rf"{verb} takes no option 'sed' \(it takes .*{known}"
    with pytest.raises(InvalidInputError, match=message):
        call(*args, **data, sed=1)


def test_every_rename_is_listed_in_the_docs_and_its_heir_exists():
    from pathlib import Path

    from tfcompress.cli._io import RENAMED_FLAGS

    docs = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
    table = docs.read_text().split("## Renamed before the first release")[1].split("\n## ")[0]
    for verb, renames in RENAMED_FLAGS.items():
        flags = _flags(verb)
        for old, new in renames.items():
            heir = new.split()[0]
            assert f"`{old}" in table, f"docs/cli.md does not list {verb} {old}"
            assert heir in flags and old not in flags, (verb, old, heir)


def test_the_tflite_only_options_name_the_flags_quantize_has():
    from tfcompress.errors import InvalidInputError
    from tfcompress.quantization.config import PTQConfig

    tflite_only = ("input_type", "output_type", "integer_only", "float_nodes", "rules")
    flags = {"--" + n.replace("_", "-") for n in (*tflite_only, "block_size", "static_batch")}
    assert flags | {"--engine"} <= _flags("quantize")  # the field's name is the flag
    with pytest.raises(InvalidInputError, match=r"^float_nodes \(--float-nodes\) applies to"):
        PTQConfig.from_options(format="onnx", float_nodes=["a"])


# Issue 40, the options that were written by hand: each is now its field's flag, refused with
# its field's one message whichever way it comes (flag or keyword), before any file is read.
_Q = ["quantize", "never_read.keras", "--out", "never_written.tflite"]
_O = ["quantize", "never_read.keras", "--out", "never_written.onnx"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([*_Q, "--methods", "equalize,auto"], "--methods 'equalize,auto': pass auto, none"),
        ([*_Q, "--rules", "dense"], "argument --rules: 'dense': write PATTERN=MODE"),
        ([*_Q, "--calibration-method", "entropy"], "--calibration-method applies to --format onnx"),
        ([*_O, "--calibration-method", "kl"], "unknown calibration method"),
        ([*_O, "--opset", "9"], "opset 9 is not one tf2onnx 1.17 writes"),
        ([*_Q, "--per-op-min-snr", "30"], "--per-op-min-snr is the bar of --methods per-op"),
        ([*_Q, "--methods", "per-op", "--per-op-min-snr", "nan"], "a finite number of dB"),
        (["benchmark", "m.tflite", "--backends", "tpu9"], "unknown backend 'tpu9'"),
        (["gate", "a.tflite", "b.tflite", "--eval", "e.npz", "--backend", "tpu9"], "'tpu9'"),
    ],
)
def test_the_hand_written_options_are_fields_refused_in_one_line(capsys, argv, says):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"methods": "equalize,auto"}, "pass auto, none"),
        ({"rules": [{"pattern": "a", "mode": "fast"}]}, "unknown rule mode 'fast'"),
        ({"calibration_method": "entropy"}, "calibration_method (--calibration-method) applies"),
        ({"format": "onnx", "opset": 9}, "opset 9 is not one tf2onnx 1.17 writes"),
        ({"per_op_min_snr": 30.0}, "is the bar of methods='per-op'"),
        ({"methods": "per-op", "per_op_min_snr": "30"}, "a finite number of dB"),
    ],
)
def test_the_same_options_as_keywords_get_the_same_messages(options, says):
    import tfcompress
    from tfcompress.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=re.escape(says)):
        tfcompress.quantize("never_read.keras", representative_data=None, **options)


def test_the_fields_flags_reach_the_config():
    from tfcompress.cli.quantize import ptq_config

    def config(*flags):
        return ptq_config(build_parser().parse_args([*_Q, *flags]))

    made = config("--methods", "per-op", "--per-op-min-snr", "30", "--rules", "a=float",
                  "--rules", '{"pattern": "b", "mode": "float"}')  # fmt: skip
    assert (made.methods, made.per_op_min_snr) == ("per-op", 30.0)
    assert [r.pattern for r in made.recipe.rules] == ["a", "b"]
    onnx = config("--format", "onnx", "--calibration-method", "entropy", "--opset", "13")
    assert (onnx.recipe.calibration_method, onnx.recipe.opset) == ("entropy", 13)
    assert config().per_op_min_snr is None  # PerOpBar's default decides
    from tfcompress.quantization.config import PTQConfig

    assert PTQConfig.from_dict(made.to_dict()) == made  # a replay keeps the bar


def test_export_onnx_checks_the_opset_of_the_one_declaration():
    from tfcompress.errors import InvalidInputError
    from tfcompress.targets.onnx import export_onnx

    with pytest.raises(InvalidInputError, match=r"opset 12 is not one tf2onnx 1\.17 writes"):
        export_onnx("never_read.keras", opset=12)


def test_per_op_min_snr_is_refused_beside_a_gate(tmp_path):
    """The gate is per-op's bar when given: a bar beside it would be dropped, so it is refused."""
    import keras
    import numpy as np

    import tfcompress
    from tfcompress.errors import InvalidInputError
    from tfcompress.testing.config import GateConfig

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    x = np.random.default_rng(0).random((8, 4), dtype=np.float32)
    with pytest.raises(InvalidInputError, match=r"the gate .* is its bar here: drop one"):
        tfcompress.quantize(
            model,
            representative_data=x,
            eval_data=x,
            methods="per-op",
            per_op_min_snr=30.0,
            gate=GateConfig.from_options(min_snr=20.0),
        )


def test_metric_names_are_names_and_say_how_to_ask_for_top_k(capsys):
    from tfcompress.bench.metrics import get_metric, metric_names

    assert all(get_metric(name).name for name in metric_names())  # no placeholder
    assert main(["gate", "a.tflite", "b.tflite", "--eval", "e.npz", "--metric", "f1"]) == 2
    err = capsys.readouterr().err
    assert "unknown metric 'f1'" in err and "topN for the top-N accuracy" in err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--threads", "0"], "threads must be a whole number >= 1, got 0."),
        (["--max-size", "0"], "is not a size from 1 byte"),
        (["--target", "mcu", "--max-latency", "5ms"], "--max-latency would judge by tflm's time"),
        (
            ["--max-arena", "64KB"],
            "budget --max-arena applies to target 'mcu' (--target mcu), not 'cpu'.",
        ),
    ],
)
def test_select_budgets_are_the_budgets_fields(capsys, flags, says):
    from tfcompress.errors import InvalidInputError
    from tfcompress.selection import Budgets

    assert main(["select", "--train", "t.npz", "--eval", "e.npz", *flags]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    with pytest.raises(InvalidInputError, match="max_size must be a positive whole number"):
        Budgets(max_size=0)
    with pytest.raises(InvalidInputError, match=r"min_accuracy must be a fraction in \[0, 1\]"):
        Budgets(min_accuracy=1.5)
    # The arena: one name and one unit (bytes) in select's budgets and mcu's check.
    assert Budgets(target="mcu", target_limits={"max_arena": 65536}).target_limits == {
        "max_arena": 65536
    }
    sizes = ["--max-arena", "64KiB", "--max-size", "500KB", "--max-latency", "5ms"]
    args = build_parser().parse_args(["select", "--train", "t", "--eval", "e", *sizes])
    assert (args.max_arena, args.max_size, args.max_latency) == (65536, 500_000, 5.0)
