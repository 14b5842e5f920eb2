"""Per-op quantization rules: which ops of a model get which precision.

A :class:`Rule` picks ops by a regular expression over their output tensor names (the
op's *scope*, ``"name1;name2;"``, as LiteRT Quantizer and Model Explorer name ops) and/or by
TFLite op type, and says what they become. A recipe carries an ordered tuple of rules on
top of its own setting for every op; **a later rule overrides an earlier one** for the ops
both match (LiteRT Quantizer's own order), and an op no rule matches keeps the recipe's
setting.

Modes:

- ``float``: the op is not quantized (its weights and activations stay float; the engine
  puts DEQUANTIZE/QUANTIZE around it).
- ``int8``: int8 activations (calibrated), integer weights of ``weight_bits``.
- ``int16``: int16 activations with int8 weights (the ``int16x8`` scheme for one op).
- ``weights``: weight-only: weights stored in ``weight_bits`` integers and dequantized
  before a float op (smaller file, float accuracy and speed).
- ``dynamic``: dynamic range: integer weights, activations quantized on the fly by the
  kernel.

The TFLite converter engine honours ``float`` rules (through selective quantization's
``denylisted_nodes``) and refuses every other mode; LiteRT Quantizer honours all of them.

Op names come from the model, so matching them must not hang on a crafted one: patterns
are RE2 expressions (``google-re2``), matched in time linear in the name, whatever the
pattern (no backreferences or lookaround; Python's ``re`` backtracks, and ``(.*)*;x`` or
``conv.*relu`` on a 100,000-character name would run for minutes or forever). A pattern is
at most :data:`PATTERN_LIMIT` characters and is searched in the first :data:`SCOPE_LIMIT`
characters of an op's scope.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from typing import Any

from tfcompress.errors import InvalidInputError, MissingDependencyError, shown_name

#: Characters of a rule's pattern at most.
PATTERN_LIMIT = 1_000
#: Characters of an op's scope a rule's pattern is searched in (the first ones).
SCOPE_LIMIT = 1_024

MODES = ("float", "int8", "int16", "weights", "dynamic")
GRANULARITIES = ("channel", "tensor", "block32", "block64", "block128")
#: Weight algorithms, by LiteRT Quantizer's names for them (``AlgorithmName``).
ALGORITHMS = {
    "min_max": "min_max_uniform_quantize",
    "mse": "MSE",
    "octav": "OCTAV",
    "gptq": "GPTQ",
    "hadamard": "DECOMPOSED_HADAMARD_ROTATION",
}
_OP_TYPE = re.compile(r"\*|[A-Z][A-Z0-9_]*")


@dataclass(frozen=True)
class Rule:
    """What the ops matching ``pattern`` and ``op_type`` become.

    Attributes:
        pattern: Regular expression (RE2 syntax, at most :data:`PATTERN_LIMIT` characters)
            searched in the op's scope: its output tensor names joined by ``;`` with a
            trailing ``;`` (its first :data:`SCOPE_LIMIT` characters). ``".*"`` matches
            every op.
        op_type: TFLite op type (``CONV_2D``, ``FULLY_CONNECTED``...) or ``"*"`` for any.
        mode: ``float``, ``int8``, ``int16``, ``weights`` or ``dynamic`` (see the module).
        weight_bits: 8 or 4 (``int16`` takes 8 only; ignored by ``float``).
        granularity: Weight scales: ``channel``, ``tensor`` or ``block32``/``64``/``128``
            (blockwise: LiteRT Quantizer 0.11 has it for ``dynamic`` 4-bit fully connected
            and embedding weights, and refuses the rule otherwise).
        algorithm: How weight scales are chosen: ``min_max`` (default), ``mse``,
            ``octav``, ``gptq`` (calibrates) or ``hadamard`` (rotation before rounding).

    Raises:
        InvalidInputError: An invalid regular expression or an unknown value.

    Example:
        >>> Rule(op_type="FULLY_CONNECTED", mode="weights", weight_bits=4).mode
        'weights'
    """

    pattern: str = ".*"
    op_type: str = "*"
    mode: str = "int8"
    weight_bits: int = 8
    granularity: str = "channel"
    algorithm: str = "min_max"

    def __post_init__(self) -> None:
        _compiled(self.pattern)
        if not isinstance(self.op_type, str) or not _OP_TYPE.fullmatch(self.op_type):
            raise InvalidInputError(
                f"a rule's op_type must be a TFLite op type such as CONV_2D or '*', got "
                f"{_shown(self.op_type)}."
            )
        _choice(self.mode, MODES, "mode")
        _choice(self.granularity, GRANULARITIES, "granularity")
        _choice(self.algorithm, tuple(ALGORITHMS), "algorithm")
        if isinstance(self.weight_bits, bool) or self.weight_bits not in (8, 4):
            raise InvalidInputError(
                f"a rule's weight_bits must be 8 or 4, got {_shown(self.weight_bits)}."
            )
        if self.mode == "int16" and self.weight_bits != 8:
            raise InvalidInputError(
                "mode 'int16' pairs int16 activations with int8 weights; drop weight_bits=4."
            )
        if self.granularity.startswith("block") and self.mode not in ("weights", "dynamic"):
            raise InvalidInputError(
                f"blockwise weights ({self.granularity}) apply to modes 'weights' and "
                f"'dynamic', not {self.mode!r}."
            )

    @property
    def calibrates(self) -> bool:
        """Activation ranges (or GPTQ's statistics) come from representative data."""
        quantized = self.mode != "float"
        return quantized and (self.mode in ("int8", "int16") or self.algorithm == "gptq")

    def matches(self, op_type: str, scope: str) -> bool:
        """The rule applies to an op of ``op_type`` whose scope is ``scope``.

        The pattern is searched (RE2, linear time) in the first :data:`SCOPE_LIMIT`
        characters of ``scope``.

        Example:
            >>> Rule(pattern="dense").matches("FULLY_CONNECTED", "model/dense/MatMul;")
            True
        """
        if self.op_type not in ("*", op_type):
            return False
        text = scope[:SCOPE_LIMIT]
        try:
            return _compiled(self.pattern).search(text) is not None
        except UnicodeEncodeError:  # a lone surrogate (only through the Python API)
            text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
            return _compiled(self.pattern).search(text) is not None

    def describe(self) -> str:
        """``int16 for FULLY_CONNECTED ops matching 'head'``."""
        what = {
            "float": "float",
            "int8": f"int8 (w{self.weight_bits})",
            "int16": "int16 activations",
            "weights": f"int{self.weight_bits} weights only",
            "dynamic": f"dynamic int{self.weight_bits}",
        }[self.mode]
        ops = "ops" if self.op_type == "*" else f"{self.op_type} ops"
        where = "" if self.pattern == ".*" else f" matching {self.pattern!r}"
        return f"{what} for {ops}{where}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data; :meth:`from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Rule:
        """Build from :meth:`to_dict` output; unknown keys are an error.

        Raises:
            InvalidInputError: Not a dict, or unknown keys.
        """
        if isinstance(data, Rule):
            return data
        if not isinstance(data, dict):
            raise InvalidInputError(
                "a rule is an object like {'pattern': 'dense_2', 'mode': 'float'}, got "
                f"{_shown(data)}."
            )
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InvalidInputError(
                f"unknown rule fields {_shown(sorted(unknown, key=str))}; allowed: {sorted(known)}."
            )
        return cls(**data)


def coerce_rules(rules: Any) -> tuple[Rule, ...]:
    """Rules from a list of :class:`Rule` or their dicts (as JSON gives them back).

    Raises:
        InvalidInputError: Not a list, or a rule that is not valid.

    Example:
        >>> coerce_rules([{"pattern": "head", "mode": "int16"}])[0].mode
        'int16'
    """
    if isinstance(rules, str | dict) or not isinstance(rules, list | tuple):
        raise InvalidInputError(
            f"rules must be a list of rules, got {_shown(rules)}; e.g. "
            "[{'pattern': 'dense_2', 'mode': 'float'}]."
        )
    return tuple(Rule.from_dict(rule) for rule in rules)


def _choice(value: Any, allowed: tuple[str, ...], what: str) -> None:
    if value not in allowed:
        raise InvalidInputError(
            f"unknown rule {what} {_shown(value)}; choose one of {', '.join(allowed)}."
        )


def _shown(value: Any) -> str:
    """``repr(value)`` bounded for a one-line message (a value can be a huge JSON object)."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # nested too deep, an int too long to print
        text = f"<{type(value).__name__}>"
    return shown_name(text, limit=100)


def _compiled(pattern: Any) -> Any:
    """``pattern`` compiled by RE2 (linear-time matching), or the error that says why not."""
    if not isinstance(pattern, str) or not pattern:
        raise InvalidInputError(
            f"a rule's pattern must be a non-empty regular expression, got {_shown(pattern)}."
        )
    return _compiled_text(pattern)


@lru_cache(maxsize=256)
def _compiled_text(pattern: str) -> Any:
    if len(pattern) > PATTERN_LIMIT:
        raise InvalidInputError(
            f"rule pattern {_shown(pattern[:40])[:-1]}...' is {len(pattern):,} characters; a "
            f"pattern is at most {PATTERN_LIMIT:,}."
        )
    try:
        import re2
    except ImportError:
        raise MissingDependencyError("rules are matched with RE2: pip install google-re2") from None
    options = re2.Options()
    options.log_errors = False  # the error comes back in the exception, not on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        why = error.args[0] if error.args else error
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise InvalidInputError(
            f"rule pattern {_shown(pattern)} is not a regular expression RE2 accepts "
            f"({shown_name(why, limit=100)}); rules use RE2 syntax: no backreferences or "
            "lookaround."
        ) from None
