"""Names that go into generated C++: identifiers that compile, file names an ``#include`` can hold.

An identifier is refused (or, when tfcompress derived it from a file name, fixed with a
suffix) when it is a C or C++ keyword, a name C++ reserves (any ``__``, a leading ``_``: at
global scope, where the arrays live, every leading underscore is the implementation's), a
macro or name the standard headers or GCC's GNU modes predefine (``NULL``, ``errno``,
``linux``), or a name the generated files themselves use at global scope (``main``, ``std``,
``tflite``). The header guard is derived from a sanitised identifier; an output file name must
be one a quoted ``#include`` takes as is (ASCII letters, digits, ``_ . + -``).
"""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INCLUDE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_KEYWORD_WORDS = (
    # C++20 keywords and alternative tokens
    "alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t "
    "char16_t char32_t class compl concept const consteval constexpr constinit const_cast "
    "continue co_await co_return co_yield decltype default delete do double dynamic_cast else "
    "enum explicit export extern false float for friend goto if inline int long mutable "
    "namespace new noexcept not not_eq nullptr operator or or_eq private protected public "
    "register reinterpret_cast requires return short signed sizeof static static_assert "
    "static_cast struct switch template this thread_local throw true try typedef typeid "
    "typename union unsigned using virtual void volatile wchar_t while xor xor_eq "
    # C23 keywords C++ does not have, and identifiers with a special meaning
    "restrict typeof typeof_unqual final override import module"
)
_KEYWORDS = frozenset(_KEYWORD_WORDS.split())
_PREDEFINED_WORDS = (
    # what the generated files and the headers they include put at global scope
    "main std tflite FILE NULL EOF errno assert offsetof stdin stdout stderr setjmp va_arg "
    "va_start va_end va_copy va_list size_t ptrdiff_t max_align_t nullptr_t int8_t int16_t "
    "int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t intmax_t "
    "uintmax_t TfLiteStatus TfLiteTensor kTfLiteOk kTfLiteError kTfLiteInt8 kTfLiteInt16 "
    "MicroPrintf TFLITE_SCHEMA_VERSION kArenaSize tensor_arena "
    # macros GCC predefines in its GNU modes (-std=gnu++11, what Arduino builds with)
    "linux unix i386"
)
_PREDEFINED = frozenset(_PREDEFINED_WORDS.split())


def identifier_problem(name: str) -> str | None:
    """Why ``name`` cannot be a global identifier in the generated C++ (None when it can)."""
    if not _IDENTIFIER.fullmatch(name):
        return "not a C identifier (letters, digits and _, not a digit first)"
    if name in _KEYWORDS:
        return "a C/C++ keyword"
    if "__" in name:
        return "reserved in C++ (it contains __)"
    if name.startswith("_"):
        return "reserved at global scope in C and C++ (a leading _)"
    if name.endswith("_"):
        return f"a name ending in _ (its length, {name}_len, would contain __)"
    if name in _PREDEFINED:
        return "a name the standard headers, GCC or the generated files already define"
    return None


def file_identifier(file_name: str) -> tuple[str, str | None]:
    """The array name for a model file, as ``xxd -i`` makes it, made valid, and what was fixed.

    Every character other than ASCII letters and digits becomes ``_`` (runs of them one
    ``_``, none at the ends, so no ``__`` and no leading ``_``); a name that would start
    with a digit gets ``model_`` before it; a keyword or predefined name gets ``_tflite``
    after it.
    """
    xxd = re.sub(r"[^A-Za-z0-9_]", "_", file_name)
    name = re.sub(r"[^A-Za-z0-9]+", "_", file_name).strip("_") or "model"
    if name[0].isdigit():
        name = f"model_{name}"
    problem = identifier_problem(name)
    if problem is not None:
        name = f"{name}_tflite"
    if name == xxd:
        return name, None
    return name, f"{shown(xxd)} is {identifier_problem(xxd) or problem}"


def header_guard(stem: str, suffix: str = "H") -> str:
    """``MODEL_DATA_H_`` for ``model_data``: upper case, from a sanitised identifier."""
    name = re.sub(r"[^A-Za-z0-9]+", "_", stem).strip("_").upper() or "MODEL"
    if name[0].isdigit():
        name = f"MODEL_{name}"
    return f"{name}_{suffix}_"


def include_name_problem(file_name: str) -> str | None:
    """Why ``file_name`` cannot be written in ``#include "..."`` as is (None when it can)."""
    if not _INCLUDE_NAME.fullmatch(file_name):
        return "it has characters other than ASCII letters, digits and _ . + -"
    return None


def shown(text: str, limit: int = 60) -> str:
    """``text``, or its first ``limit`` characters and its length (a crafted name stays short)."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
