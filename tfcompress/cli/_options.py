"""Config flags made from the config fields that declare them, never written by hand.

A config field made by :func:`tfcompress._config_fields.option` is the only declaration of
an option; :func:`add_config_flags` turns each named field into its flag (the field's name
with dashes, its help and default from the field) without importing the config, and
:func:`config_values` hands the given values back by field name, None where not given, so
the config's own default and check decide (one message, any way in).
"""

from __future__ import annotations

import argparse
from typing import Any

from tfcompress._config_fields import DeclaredOption, declared_options

_TYPES = {"int": int, "float": float, "str": str}
_METAVARS = {"int": "N", "float": "X", "str": "NAME"}


def add_config_flags(
    parser: argparse.ArgumentParser | Any, module: str, cls: str, *names: str
) -> tuple[str, ...]:
    """One flag per option field ``names`` of ``cls`` (``module`` under ``tfcompress/``).

    Every flag defaults to None ("not given"); booleans get ``--name`` and ``--no-name``.

    Returns:
        ``names``, for :func:`config_values`.

    Raises:
        KeyError: A name that is not an :func:`~tfcompress._config_fields.option` field of
            ``cls`` (a bug in tfcompress; ``tests/test_cli_options.py`` builds every parser).
    """
    declared = declared_options(module, cls)
    for name in names:
        parser.add_argument(
            declared[name].flag, dest=name, default=None, **_argument(declared[name])
        )
    return names


def config_values(args: argparse.Namespace, names: tuple[str, ...]) -> dict[str, Any]:
    """The values of the config flags ``names`` as given (None: not given), by field name."""
    return {name: _tuple(getattr(args, name)) for name in names}


def _argument(option: DeclaredOption) -> dict[str, Any]:
    annotation = option.annotation.replace(" | None", "")
    shown_default = _shown(option.default)
    listed: tuple[str, ...] = ()
    if option.names is not None:  # a registry's names, read from the plug-ins' source
        from tfcompress.cli import _choices

        listed = getattr(_choices, option.names)
    in_help = listed and (option.metavar or annotation.startswith("tuple["))
    help_text = option.help + (f" ({', '.join(listed)})" if in_help else "")
    help_text = (help_text + (f" (default {shown_default})" if shown_default else "")).replace(
        "%", "%%"
    )
    if annotation == "bool":
        return {"action": argparse.BooleanOptionalAction, "help": help_text}
    argument: dict[str, Any] = {"help": help_text}
    if option.parse is not None and ":" in option.parse:  # "module:function", imported late
        from tfcompress.cli.common import argument_type

        argument["type"] = argument_type(option.parse)
        if annotation.startswith("tuple["):  # values that hold commas: the flag repeats
            argument["action"] = "append"
    elif annotation.startswith("tuple["):  # tuple[float, ...]: comma-separated values
        from tfcompress.cli.common import csv_of

        kind = annotation[len("tuple[") :].partition(",")[0]
        argument["type"] = csv_of(_TYPES[kind], option.flag)
        argument["metavar"] = option.metavar or f"{_METAVARS[kind]},{_METAVARS[kind]}"
    elif option.parse is not None:
        from tfcompress.cli import common

        argument["type"] = getattr(common, option.parse)
    else:
        argument["type"] = _TYPES.get(annotation, str)  # MetricLike: a name on a command line
    if option.choices is not None:
        argument["choices"] = option.choices
    if option.choices is None and "metavar" not in argument:
        braced = "{" + ",".join(listed) + "}" if listed else None
        argument["metavar"] = option.metavar or braced or _METAVARS.get(annotation, "V")
    return argument


def _shown(default: Any) -> str:
    if default is None:
        return ""
    if isinstance(default, tuple):
        return ",".join(str(v) for v in default)
    return f"{default:g}" if isinstance(default, float) else str(default)


def _tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value
