"""Config flags come from the config fields that declare them: one name, one default, one help."""

import dataclasses
import importlib

import pytest

from tfcompress._config_fields import declared_options
from tfcompress.cli import build_parser, main

#: Every config whose fields declare options (module under tfcompress/, class).
CONFIGS = [
    ("selection.config", "SelectionConfig"),
    ("compression.config", "CompressConfig"),
    ("quantization.config", "PTQConfig"),
    ("bench.config", "BenchmarkConfig"),
    ("testing.settings", "GateSettings"),
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
        (
            "compress",
            "compression.config",
            "CompressConfig",
            ("seed", "time_budget", "freeze_batchnorm"),
        ),
        ("quantize", "quantization.config", "PTQConfig", ("seed",)),
        ("benchmark", "bench.config", "BenchmarkConfig", ("runs", "warmup_runs", "profile_ops")),
        ("gate", "testing.settings", "GateSettings", ("confidence", "interval")),
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


@pytest.mark.parametrize("verb", ["quantize", "compress", "select_model"])
def test_an_unknown_keyword_is_refused_naming_the_valid_ones(verb):
    import tfcompress
    from tfcompress.errors import InvalidInputError

    call = getattr(tfcompress, verb)
    args = () if verb == "select_model" else ("never_read.keras",)
    data = {"train_data": None} if verb == "select_model" else {"representative_data": None}
    with pytest.raises(InvalidInputError, match=rf"{verb} takes no option 'sed' \(it takes .*seed"):
        call(*args, **data, eval_data=None, sed=1)


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
    from tfcompress.quantization.config import TFLITE_FLAGS, PTQConfig

    assert set(TFLITE_FLAGS.values()) <= _flags("quantize")
    with pytest.raises(InvalidInputError, match=r"^float_nodes \(--float-node\) applies to"):
        PTQConfig.from_options(format="onnx", float_nodes=["a"])
