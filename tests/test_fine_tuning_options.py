"""qat/prune/cluster take their config: one option, one check, one message, one name.

The verbs' keyword options build the same config as ``config=``; the command line builds it
from its flags (defaults read from the config class) and compress's ``--replay`` reads it
from a report. A bad value is refused by the config alone, so it reads the same whichever
way it came in. Nothing here loads a model or trains: every refusal comes first.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

import tfcompress
from tfcompress.cli import build_parser, main
from tfcompress.errors import InvalidInputError
from tfcompress.training.configs import (
    TRAINING_CONFIGS,
    ClusterConfig,
    PruneConfig,
    QATConfig,
)

# (technique, option, bad value, its command-line flag and text)
BAD = [
    ("cluster", "clusters", 1, ["--clusters", "1"]),
    ("cluster", "clusters", 300, ["--clusters", "300"]),
    ("qat", "learning_rate", 2.0, ["--learning-rate", "2"]),
    ("prune", "learning_rate", 0.0, ["--learning-rate", "0"]),
    ("qat", "epochs", 0, ["--epochs", "0"]),
    ("prune", "target_sparsity", 1.0, ["--target-sparsity", "1"]),
    ("cluster", "batch_size", 0, ["--batch-size", "0"]),
]


def _config_message(technique: str, option: str, value: Any) -> str:
    with pytest.raises(InvalidInputError) as refused:
        TRAINING_CONFIGS[technique](**{option: value})
    return str(refused.value)


def _cli_message(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1, lines
    prefix = f"tfcompress {argv[0]}: error: "
    assert lines[0].startswith(prefix), lines
    return lines[0][len(prefix) :]


@pytest.mark.parametrize(("technique", "option", "value", "flags"), BAD)
def test_one_bad_value_gives_one_message_whichever_way_it_came_in(
    tmp_path: Path, capsys, technique: str, option: str, value: Any, flags: list[str]
) -> None:
    expected = _config_message(technique, option, value)
    assert expected.startswith(f"{option} must be "), expected
    verb = getattr(tfcompress, technique)
    missing = str(tmp_path / "model.keras")  # never read: the config refuses first
    # 1. the Python keyword option
    with pytest.raises(InvalidInputError) as keyword:
        verb(missing, train_data="train.npz", **{option: value})
    assert str(keyword.value) == expected
    # 2. config= (the config refuses to be built at all)
    assert _config_message(technique, option, value) == expected
    # 3. the command-line flag
    argv = [technique, missing, "--train", "t.npz", "--out", str(tmp_path / "o.tflite")]
    assert _cli_message(capsys, [*argv, *flags]) == expected
    # 4. a compress report replayed: the attempt's recorded recipe (the message says which)
    report = tmp_path / "compress.json"
    attempt = {"index": 1, "name": technique, "technique": technique, "status": "passed"}
    chosen = {**attempt, "why": "ok", "recipe": {"epochs": 1, option: value}}
    report.write_text(json.dumps({"attempts": [chosen], "chosen": chosen}))
    replay = ["compress", missing, "--data", "c.npz", "--replay", str(report)]
    replayed = _cli_message(capsys, [*replay, "--out", str(tmp_path / "r.tflite")])
    assert replayed.startswith(f"attempt 1 ('{technique}'): {expected.rstrip('.')}"), replayed


@pytest.mark.parametrize(
    ("verb", "config", "options", "named"),
    [
        (tfcompress.qat, QATConfig(epochs=2), {"epochs": 3}, "epochs=3"),
        (tfcompress.prune, PruneConfig(then="int8"), {"then": None}, "then=None"),
        (tfcompress.cluster, ClusterConfig(clusters=8), {"clusters": 16}, "clusters=16"),
        (
            tfcompress.cluster,
            ClusterConfig(seed=1),
            {"seed": 2, "skip_layers": ["a"]},
            "seed=2, skip_layers=('a',)",  # in the order given
        ),
    ],
)
def test_config_and_a_keyword_that_says_otherwise_are_refused(verb, config, options, named):
    with pytest.raises(InvalidInputError) as refused:
        verb("missing.keras", config=config, train_data="t.npz", **options)
    message = str(refused.value)
    assert f"got config= and {named}, but the config sets" in message, message
    assert len(message.splitlines()) == 1


def test_a_keyword_that_agrees_with_config_is_the_same_config():
    config = ClusterConfig(clusters=8, skip_layers=("a",))
    assert ClusterConfig.build(config, clusters=8, skip_layers=["a"]) is config
    assert ClusterConfig.build(None, clusters=8) == ClusterConfig(clusters=8)


def test_another_techniques_config_is_refused():
    with pytest.raises(InvalidInputError, match=r"qat takes config=QATConfig\(...\), not a"):
        tfcompress.qat("missing.keras", config=PruneConfig(), train_data="t.npz")


@pytest.mark.parametrize("technique", sorted(TRAINING_CONFIGS))
def test_the_command_lines_defaults_are_the_configs(technique: str) -> None:
    """Every option flag defaults to "not given", so the config's own default applies."""
    parser = build_parser()
    args = parser.parse_args([technique, "m.keras", "--train", "t.npz", "--out", "o.tflite"])
    from tfcompress.cli._training import training_config

    config_class = TRAINING_CONFIGS[technique]
    assert training_config(args, config_class) == config_class()
    # the help shows the config's defaults
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    help_text = sub.choices[technique].format_help()
    defaults = {f.name: f.default for f in fields(config_class)}
    assert f"(default {defaults['epochs']})" in help_text
    assert f"(default {defaults['learning_rate']:g})" in help_text
    for action in sub.choices[technique]._actions:
        if action.dest in {f.name for f in fields(config_class)} | {"lr", "sparsity"}:
            assert action.default is None, action.dest


@pytest.mark.parametrize("technique", sorted(TRAINING_CONFIGS))
@pytest.mark.parametrize("old", ["--data", "--val"])
def test_renamed_flags_have_no_alias(capsys, technique: str, old: str) -> None:
    argv = [technique, "m.keras", "--train", "t.npz", old, "v.npz", "--out", "o.tflite"]
    assert main(argv) == 2  # no alias: refused, naming the flag that replaced it
    new = {"--data": "--train", "--val": "--eval"}[old]
    assert f"{old} was renamed {new}; use {new}" in capsys.readouterr().err


def test_the_flags_build_the_config_the_verb_gets(tmp_path: Path, monkeypatch) -> None:
    """The CLI passes config= (and eval_data=), never loose options."""
    import importlib

    seen: dict[str, Any] = {}

    def fake(model: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise InvalidInputError("stop here")

    module = importlib.import_module("tfcompress.training.prune")
    monkeypatch.setattr(module, "prune", fake)
    monkeypatch.setattr("tfcompress.models.loading.load_model", lambda *a, **k: object())
    argv = ["prune", "m.keras", "--train", "t.npz", "--eval", "e.npz", "--out"]
    flags = ["--target-sparsity", "0.5", "--then", "int8", "--skip-layers", "b,a"]
    assert main([*argv, str(tmp_path / "p.tflite"), *flags, "--no-freeze-batchnorm"]) == 2
    assert seen["config"] == PruneConfig(
        target_sparsity=0.5, then="int8", skip_layers=("b", "a"), freeze_batchnorm=False
    )
    assert (seen["train_data"], seen["eval_data"]) == ("t.npz", "e.npz")
