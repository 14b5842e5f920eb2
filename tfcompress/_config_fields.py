"""What every config of tfcompress shares: its format version and the checks of its fields.

The post-training config (:class:`tfcompress.quantization.config.PTQConfig`) and the
fine-tuning configs (:mod:`tfcompress.training.configs`) sit on different layers; both
read the version they write and check their integers here, so a report's ``version`` and
a seed mean the same thing in each.

Example:
    >>> check_version("qat", CONFIG_VERSION)
    >>> require_int("seed", 3, 0, MAX_SEED, "a seed")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeVar

from tfcompress.errors import InvalidInputError

C = TypeVar("C")

#: The config format this tfcompress writes; ``from_dict`` refuses a newer one.
CONFIG_VERSION = 1
MAX_SEED = 2**32 - 1
"""The largest seed NumPy's legacy seeding (which Keras uses) accepts."""


def require_int(name: str, value: Any, low: int, high: int, expected: str) -> None:
    """Refuse anything but an integer (not a bool) from ``low`` to ``high``.

    Raises:
        InvalidInputError: ``"<name> must be <expected>, got <value>."``

    Example:
        >>> require_int("seed", 3, 0, MAX_SEED, "a seed")
    """
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise InvalidInputError(f"{name} must be {expected}, got {shown(value)}.")


def check_version(kind: str, version: Any) -> None:
    """Refuse a config ``version`` that is not an integer, or newer than this tfcompress reads.

    Raises:
        InvalidInputError: The version is wrong, or says to upgrade tfcompress.

    Example:
        >>> check_version("qat", CONFIG_VERSION)
    """
    require_int("version", version, 1, 2**31 - 1, f"an integer 1 to {CONFIG_VERSION}")
    if version > CONFIG_VERSION:
        raise InvalidInputError(
            f"this {kind} config is version {version}, newer than this "
            f"tfcompress reads (up to {CONFIG_VERSION}): upgrade tfcompress to read it."
        )


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for a message about untrusted data.

    Example:
        >>> shown("x" * 100, 10)
        "'xxxxxx..."
    """
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def config_or_options(
    config: Any,
    cls: type[C],
    options: Mapping[str, Any],
    build: Callable[..., C],
    *,
    holds: str,
    example: str,
    put_it: str,
) -> C:
    """A verb's config: the one given, or the one its keyword options build, never both.

    Args:
        config: What the caller passed as ``config=`` (None: build it).
        cls: The config class the verb takes.
        options: The verb's keyword options, None where not given.
        build: Builds the config from the given options (``cls.from_options``).
        holds: What the config holds, for the message (``the artifact``).
        example: How to build one, for the message (``PTQConfig(recipe=...)``).
        put_it: Where else an option goes, for the message.

    Raises:
        InvalidInputError: ``config`` is not a ``cls``, or keyword options came with it.
    """
    given = {name: value for name, value in options.items() if value is not None}
    if config is None:
        return build(**given)
    if not isinstance(config, cls):
        raise InvalidInputError(
            f"config must be a tfcompress.{cls.__name__}, got {type(config).__name__}; build "
            f"one with {example} or pass the options as keywords."
        )
    if given:
        raise InvalidInputError(
            f"config= holds every option of {holds}: drop {', '.join(given)} (or put it in "
            f"the config: {put_it})."
        )
    return config


def checked_fields(
    cls: type, data: Any, *, what: str, taker: str, leave_out: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``data`` as keyword arguments of the config ``cls``: a mapping of its fields only.

    One check and one pair of messages for every config's ``from_dict`` and
    ``from_options``, so a stray key reads the same whichever config refuses it.

    Args:
        cls: The config dataclass.
        data: What was read (JSON) or given (keywords).
        what: What a valid ``data`` is, for the message (``"a compress config"``).
        taker: Who refuses an unknown key (``"compress"``, ``"check_gate"``).
        leave_out: Fields that ``data`` may not set (``version`` for keywords).

    Raises:
        InvalidInputError: ``data`` is not a mapping, or names a key ``cls`` has not.

    Example:
        >>> from tfcompress.compression.config import CompressConfig
        >>> checked_fields(CompressConfig, {"objective": "size"}, what="a compress config",
        ...                taker="compress")
        {'objective': 'size'}
    """
    if not isinstance(data, Mapping):
        raise InvalidInputError(f"{what} is a JSON object, not a {type(data).__name__}.")
    known = {f.name for f in fields(cls)} - set(leave_out)
    unknown = sorted((k for k in data if k not in known), key=str)
    if unknown:
        raise InvalidInputError(
            f"{taker} takes no option {', '.join(map(shown, unknown))} (it takes "
            f"{', '.join(sorted(known))})."
        )
    return dict(data)
