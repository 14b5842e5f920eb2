"""``--target`` choices and the flags targets declare, made for the parser.

The built-in targets' names, options and budgets are plain data in :mod:`._choices` (compared
with their classes by ``tests/test_cli_help.py``), so ``--help`` imports none of them. Targets
registered in this process (a test or a notebook that calls :func:`tfcompress.cli.main`) and
installed packages' ``tfcompress.targets`` entry points add theirs; only when one exists is
the target registry imported. A flag two targets declare is offered once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tfcompress.cli._choices import (
    TARGET_BUDGETS,
    TARGET_ENTRY_POINT_GROUP,
    TARGET_OPTIONS,
    TARGETS,
)
from tfcompress.cli.common import parse_size


def target_choices() -> tuple[str, ...]:
    """Every target's name, sorted: the built-in ones and any other registered or installed."""
    return tuple(sorted({*TARGETS, *(t.name for t in _other_targets())}))


def add_target_arguments(
    parser: argparse.ArgumentParser, *, help: str, default: str | None = None
) -> None:
    """``--target`` and one flag per option a target's check takes (``--compiler``)."""
    parser.add_argument("--target", choices=target_choices(), default=default, help=help)
    rows = [*TARGET_OPTIONS]
    rows += [
        (t.name, o.name, o.flag, o.help, o.type, o.metavar)
        for t in _other_targets()
        for o in t.options
    ]
    for flag, (name, owners, text, kind, metavar) in _by_flag(rows).items():
        parser.add_argument(
            flag,
            dest=name,
            type=kind,
            metavar=metavar,
            help=f"--target {' or '.join(owners)}: {text}",
        )


def target_options(args: argparse.Namespace) -> dict[str, Any]:
    """The target option flags given, by option name (``{"compiler": "/usr/bin/..."}``)."""
    names = {row[1] for row in TARGET_OPTIONS}
    names |= {o.name for t in _other_targets() for o in t.options}
    return {n: getattr(args, n) for n in sorted(names) if getattr(args, n, None) is not None}


def add_budget_arguments(parser: argparse.ArgumentParser, *, value_type: Any) -> None:
    """One ``tfcompress select`` flag per budget a target adds (``--max-edgetpu-segments``).

    Args:
        parser: The ``select`` parser.
        value_type: Converts a ``float`` budget's text (the CLI's positive-number check);
            a ``"size"`` budget reads ``64KB`` as ``--max-size`` does; a budget of another
            type converts with its own.
    """
    rows = [(t, n, f, h, k, "N") for t, n, f, h, k in TARGET_BUDGETS]
    rows += [
        (t.name, b.name, b.flag, b.help, b.type, "N")
        for t in _other_targets()
        for b in t.budget_fields
    ]
    for flag, (name, owners, text, kind, metavar) in _by_flag(rows).items():
        parser.add_argument(
            flag,
            dest=name,
            type=value_type if kind is float else parse_size if kind == "size" else kind,
            metavar="SIZE" if kind == "size" else metavar,
            help=f"{text} (with --target {' or '.join(owners)})",
        )


def budget_names() -> list[tuple[str, str, str]]:
    """(target, budget name, flag) of every target's budget."""
    rows = [(t, n, f) for t, n, f, _, _ in TARGET_BUDGETS]
    rows += [(t.name, b.name, b.flag) for t in _other_targets() for b in t.budget_fields]
    return rows


def _by_flag(rows: list[tuple[Any, ...]]) -> dict[str, tuple[str, list[str], str, Any, Any]]:
    """Each flag -> (dest, owning targets, help, type, metavar): one flag for all who declare it."""
    flags: dict[str, tuple[str, list[str], str, Any, Any]] = {}
    for target, name, flag, text, kind, metavar in rows:
        if flag in flags:
            flags[flag][1].append(target)
        else:
            flags[flag] = (name, [target], text, kind, metavar)
    return flags


def _other_targets() -> list[Any]:
    """Targets beyond the built-in ones: registered in this process, or installed.

    The registry is imported only when it already is (something registered a target) or an
    installed package declares a ``tfcompress.targets`` entry point.
    """
    registry = sys.modules.get("tfcompress.targets.base")
    found: dict[str, Any] = {}
    if registry is not None:
        found.update(registry.TARGETS.loaded())
    if _entry_points_declared():
        from tfcompress.targets.base import get_target, list_targets

        found.update((name, get_target(name)) for name in list_targets())
    return [found[name] for name in sorted(found) if name not in TARGETS]


def _entry_points_declared() -> bool:
    """Whether an installed distribution declares the target entry point group.

    Reads the ``entry_points.txt`` files on ``sys.path`` directly: importing
    ``importlib.metadata`` costs more than the whole parser.
    """
    marker = f"[{TARGET_ENTRY_POINT_GROUP}]"
    for folder in sys.path:
        try:
            entries = list(os.scandir(folder or "."))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith((".dist-info", ".egg-info")):
                continue
            try:
                text = (Path(entry.path) / "entry_points.txt").read_text(encoding="utf-8")
            except OSError:
                continue
            if marker in text:
                return True
    return False
