"""Configs as data: the training configs, PTQConfig and the compress handler registry.

One template over :data:`TRAINING_CONFIGS` (every technique gets the same contract: JSON round
trip, unknown keys, versions, ranges, the verb's own defaults), then what a PTQ attempt
records, then the registry compress dispatches on. Nothing here trains or converts.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from dataclasses import fields

import pytest

from tfcompress.compression.handlers import build, get_handler, list_handlers, with_batch
from tfcompress.errors import InvalidInputError
from tfcompress.quantization.config import PTQConfig, recipe_from_data
from tfcompress.quantization.recipes import Recipe
from tfcompress.training.cluster import ClusterOptions, cluster
from tfcompress.training.configs import (
    CONFIG_VERSION,
    TRAINING_CONFIGS,
    ClusterConfig,
    PruneConfig,
    QATConfig,
    config_from_dict,
)
from tfcompress.training.prune import PruneOptions, prune
from tfcompress.training.qat import QATOptions, qat

VERBS = {"qat": qat, "prune": prune, "cluster": cluster}
OPTIONS = {"qat": QATOptions, "prune": PruneOptions, "cluster": ClusterOptions}
#: Verb parameters that are not what the artifact is made with (data, gate, process).
NOT_RECORDED = {
    "model", "train_data", "eval_data", "config", "safe_mode", "gate", "gate_settings", "isolate"
}  # fmt: skip
#: A value other than the default for every technique-specific option.
CHANGED = {
    "qat": {"preserve": "sparsity"},
    "prune": {
        "target_sparsity": 0.5,
        "schedule": "constant",
        "structure": "2:4",
        "then": "int8",
        "qat_epochs": 0,
        "skip_layers": ("conv0",),
    },
    "cluster": {"clusters": 8, "then": "float16", "qat_epochs": 2, "skip_layers": ("a", "b")},
}
TECHNIQUES = sorted(TRAINING_CONFIGS)


def _changed(technique: str):
    common = {"epochs": 3, "learning_rate": 2e-4, "batch_size": 8, "seed": 7}
    return TRAINING_CONFIGS[technique](freeze_batchnorm=False, **common, **CHANGED[technique])


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_a_config_round_trips_through_json(technique):
    config = _changed(technique)
    data = config.to_dict()
    assert data["technique"] == technique and data["version"] == CONFIG_VERSION
    text = json.dumps(data)  # JSON-safe: tuples written as lists
    assert json.loads(text) == data
    assert type(config).from_dict(json.loads(text)) == config
    assert type(config).from_json(config.to_json()) == config
    assert config_from_dict(technique, json.loads(text)) == config
    assert "version" not in config.options() and "technique" not in config.options()


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_every_option_is_a_typed_keyword_of_the_verb_and_the_config_holds_its_default(technique):
    parameters = inspect.signature(VERBS[technique]).parameters
    config = TRAINING_CONFIGS[technique]()
    assert set(config.options()) == set(OPTIONS[technique].__optional_keys__)
    assert set(parameters) - {"options"} == NOT_RECORDED
    assert parameters["options"].kind is inspect.Parameter.VAR_KEYWORD
    for field in fields(config):
        if field.name != "version":  # the config holds the one default
            assert field.default == getattr(config, field.name)
    assert parameters["config"].default is None
    with pytest.raises(TypeError, match=f"{technique} takes no option 'epoch' \\(it takes "):
        VERBS[technique](None, train_data=None, epoch=2)


@pytest.mark.parametrize("technique", TECHNIQUES)
def test_unknown_keys_newer_versions_and_other_techniques_are_refused(technique):
    cls, data = TRAINING_CONFIGS[technique], TRAINING_CONFIGS[technique]().to_dict()
    with pytest.raises(InvalidInputError, match="takes no option 'safe_mode'") as caught:
        cls.from_dict({**data, "safe_mode": False})
    assert "(it takes batch_size, " in str(caught.value) and ", epochs, " in str(caught.value)
    with pytest.raises(InvalidInputError, match="version 2, newer than this tfcompress"):
        cls.from_dict({**data, "version": CONFIG_VERSION + 1})
    with pytest.raises(InvalidInputError, match="version must be an integer"):
        cls.from_dict({**data, "version": "1"})
    other = next(t for t in TECHNIQUES if t != technique)
    with pytest.raises(InvalidInputError, match=f"a '{other}' config is not a {technique}"):
        cls.from_dict({**data, "technique": other})
    with pytest.raises(InvalidInputError, match="JSON object of options"):
        cls.from_dict([("epochs", 1)])


@pytest.mark.parametrize(
    ("config", "options", "refusal"),
    [
        (QATConfig, {"epochs": 0}, "epochs must be an integer 1 to 1000, got 0"),
        (QATConfig, {"epochs": 1001}, "epochs must be an integer 1 to 1000"),
        (QATConfig, {"epochs": True}, "epochs must be an integer"),
        (QATConfig, {"epochs": 2.0}, "epochs must be an integer"),
        (QATConfig, {"learning_rate": 1}, "learning_rate must be a number between 0 and 1"),
        (QATConfig, {"learning_rate": float("nan")}, "learning_rate must be a number"),
        (QATConfig, {"batch_size": 0}, "batch_size must be a positive integer"),
        (QATConfig, {"seed": 2**32}, "seed must be an integer 0 to 4294967295"),
        (QATConfig, {"freeze_batchnorm": "yes"}, "freeze_batchnorm must be true or false"),
        (QATConfig, {"preserve": "weights"}, "preserve must be null or one of 'sparsity'"),
        (PruneConfig, {"target_sparsity": 1.0}, "target_sparsity must be a number between 0"),
        (PruneConfig, {"schedule": "cosine"}, "schedule must be null or one of 'polynomial'"),
        (PruneConfig, {"structure": "4:2"}, "structure 4:2 needs 0 < M < N"),
        (PruneConfig, {"structure": 24}, "structure must be 'M:N'"),
        (PruneConfig, {"structure": "2:4", "target_sparsity": 0.3}, "fixes target_sparsity"),
        (PruneConfig, {"then": "int3"}, "then must be null or one of 'float32'"),
        (PruneConfig, {"qat_epochs": -1}, "qat_epochs must be an integer 0 to 1000"),
        (PruneConfig, {"skip_layers": "dense"}, "skip_layers must be a list of layer names"),
        (ClusterConfig, {"clusters": 1}, "clusters must be an integer 2 to 256, got 1"),
        (ClusterConfig, {"clusters": 257}, "clusters must be an integer 2 to 256"),
    ],
)
def test_a_value_out_of_range_is_refused_in_one_line_naming_the_field(config, options, refusal):
    with pytest.raises(InvalidInputError, match=refusal) as caught:
        config(**options)
    assert "\n" not in str(caught.value)
    with pytest.raises(InvalidInputError, match=refusal):  # the same through JSON
        config.from_dict(options)


def test_options_recorded_before_configs_had_a_version_still_read():
    # compress wrote these (technique inside, no version; older ones no freeze_batchnorm).
    assert config_from_dict("qat", {"technique": "qat", "epochs": 1, "seed": 0}) == QATConfig()
    pruned = {"target_sparsity": 0.5, "epochs": 1, "then": "int8", "seed": 3,
              "freeze_batchnorm": True, "technique": "prune", "skip_layers": []}  # fmt: skip
    assert config_from_dict("prune", pruned).options()["seed"] == 3
    with pytest.raises(InvalidInputError, match="unknown fine-tuning technique 'ptq'"):
        config_from_dict("ptq", {})


# The recipe a compress attempt records for the Edge TPU: the target's rules applied.
EDGETPU_INT8 = {
    "name": "int8", "input_type": "uint8", "output_type": "uint8", "integer_only": True,
    "static_batch": 1,
}  # fmt: skip


@pytest.mark.parametrize(
    "recorded",
    [
        {"recipe": {"name": "int8"}, "seed": 0},  # before version
        {"recipe": EDGETPU_INT8, "seed": 1, "target": "edgetpu"},
        {"recipe": {"name": "int8", "rules": []}, "seed": 0, "engine": "litert-quantizer"},
        {"recipe": {"name": "int8"}, "methods": "auto"},  # the methods rung
        {"recipe": {"name": "int8", "float_nodes": ["a;b"]}, "seed": 2, "version": 1},
    ],
)
def test_ptq_config_reads_every_recorded_shape_and_writes_it_back(recorded):
    config = PTQConfig.from_dict(recorded)
    data = config.to_dict()
    assert set(data) == {*recorded, "seed", "version"} and data["version"] == CONFIG_VERSION
    assert PTQConfig.from_dict(json.loads(json.dumps(data))) == config
    assert config.recipe == recipe_from_data(recorded["recipe"])
    assert config.recipe.to_dict() == Recipe.from_dict(data["recipe"]).to_dict()


@pytest.mark.parametrize(
    ("recorded", "refusal"),
    [
        ({"recipe": {"name": "int8"}, "mode": "int16"}, "a PTQ attempt takes no option 'mode'"),
        ({"recipe": [1]}, "recipe holds no recipe object"),
        ({"recipe": {"name": "int8"}, "seed": -1}, "seed must be an integer 0 to"),
        ({"recipe": {"name": "int8"}, "engine": "tvm"}, "unknown engine 'tvm'"),
        ({"recipe": {"name": "int8"}, "target": "tpu9"}, "unknown target 'tpu9'"),
        ({"recipe": {"name": "int8"}, "methods": ["zap"]}, "unknown method 'zap'"),
        ({"recipe": {"name": "int8"}, "version": 2}, "version 2, newer than this tfcompress"),
        ({"name": "int3"}, "unknown recipe 'int3'"),
    ],
)
def test_ptq_config_refuses_what_no_attempt_records(recorded, refusal):
    with pytest.raises(InvalidInputError, match=refusal):
        PTQConfig.from_dict(recorded)


def test_ptq_config_applies_the_target_rules_to_its_recipe():
    config = PTQConfig.from_dict({"recipe": {"name": "int8"}, "target": "edgetpu"})
    assert config.recipe == recipe_from_data(EDGETPU_INT8)
    assert PTQConfig.from_dict(config.to_dict()) == config  # shaping it again changes nothing


def test_compress_dispatches_every_rung_technique_through_the_registry():
    assert list_handlers() == ["cluster", "per-op", "prune", "ptq", "qat", "selective"]
    assert get_handler("selective").read({"name": "int8"}, seed=5).seed == 5
    assert get_handler("ptq").read({"recipe": {"name": "int8"}, "seed": 1}, seed=5).seed == 1
    assert get_handler("prune").read({"target_sparsity": 0.5}, seed=9) == PruneConfig(
        target_sparsity=0.5, seed=9
    )
    # The search's static batch goes into the recipe, also of the methods' rung.
    assert with_batch({"recipe": {"name": "int8"}, "methods": "auto"}, 1) == {
        "recipe": {"name": "int8", "static_batch": 1}, "methods": "auto"
    }  # fmt: skip
    assert with_batch({"name": "float16"}, 1) == {"name": "float16", "static_batch": 1}
    assert not get_handler("per-op").records_attempts
    with pytest.raises(InvalidInputError, match="unknown technique 'exec'; choose one of"):
        build("exec", {}, None, representative_data=None)
    with pytest.raises(InvalidInputError, match="per-op rung is made step by step"):
        build("per-op", {"name": "int8"}, None, representative_data=None)
    with pytest.raises(InvalidInputError, match="pass train_data"):
        build("cluster", {"clusters": 8}, None, representative_data=None)
    with pytest.raises(InvalidInputError, match="clusters must be an integer 2 to 256"):
        build("cluster", {"clusters": 1}, None, representative_data=None, train_data=[1])


def test_configs_and_handlers_import_no_tensorflow():
    code = (
        "import sys, tfcompress.compression.handlers, tfcompress.compression.replay;"
        "print([m for m in ('tensorflow', 'keras', 'tf_keras') if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
