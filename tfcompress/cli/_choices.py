"""The names the parser offers, as plain data: building it imports none of the registries.

``tfcompress --help`` (and every ``tfcompress VERB --help``) builds the whole parser, whose
choices and help lists come from registries that live beside what they register: recipes
beside the converter, backends beside the runtimes, targets beside the Edge TPU linter.
Importing those costs numpy and most of the library (a second on two cores); these copies
cost nothing. ``tests/test_cli_help.py`` compares every one with its registry, order
included, so a name added there and not here fails the tests, never the user.

What the built-in backends, targets, PTQ methods, metrics and recipes declare (``BACKENDS``,
``BACKEND_FLAGS``, ``TARGETS``, ``TARGET_OPTIONS``, ``TARGET_BUDGETS``, ``METHODS``,
``METRICS``, ``RECIPES``) is not copied here: it is read from their source on first use
(:mod:`tfcompress._declared`), so each is its own file and its registration, nothing else.
"""

from __future__ import annotations

from typing import Any

# Read from the registered classes' source on first use (see __getattr__).
_DECLARED = (
    "BACKENDS",
    "BACKEND_FLAGS",
    "TARGETS",
    "TARGET_OPTIONS",
    "TARGET_BUDGETS",
    "METHODS",
    "METRICS",
    "RECIPES",
)

# tfcompress.targets.base.ENTRY_POINT_GROUP
TARGET_ENTRY_POINT_GROUP = "tfcompress.targets"
# tfcompress.quantization.recipes.FORMATS
FORMATS = ("tflite", "onnx")
# the keys of tfcompress.targets.onnx.ort_quantize.CALIBRATION_METHODS
CALIBRATION_METHODS = ("minmax", "entropy", "percentile")
# tfcompress.testing.settings.GATE_MODES
GATE_MODES = ("strict", "tolerant", "proven")


def __getattr__(name: str) -> Any:
    """The lists read from the built-in backends', targets' and methods' classes, on first use.

    ``BACKENDS`` and ``TARGETS`` sorted, ``BACKEND_FLAGS``, ``TARGET_OPTIONS`` and
    ``TARGET_BUDGETS`` by backend or target, ``METHODS`` in the registry's order, ``METRICS``
    as :func:`tfcompress.bench.metrics.metric_names` orders them.
    """
    from tfcompress import _declared

    targets = _declared.declared_targets()
    backends = _declared.declared_backends()
    values = {
        "BACKENDS": tuple(b.name for b in backends),
        "BACKEND_FLAGS": tuple((b.name, *f) for b in backends for f in b.flags),
        "TARGETS": tuple(t.name for t in targets),
        "TARGET_OPTIONS": tuple((t.name, *o) for t in targets for o in t.options),
        "TARGET_BUDGETS": tuple((t.name, *b) for t in targets for b in t.budgets),
        "METHODS": _declared.declared_methods(),
        "METRICS": _declared.declared_metrics(),
        "RECIPES": _declared.declared_recipes(),
    }
    if name not in values:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals().update(values)  # computed once
    return values[name]
