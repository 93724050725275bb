"""JavaScript string semantics the reference system's scorers rely on, in Python.

Lengths and character comparisons in JavaScript count UTF-16 code units, and its `\\s`
and `trim()` know a whitespace set that differs from Python's `str.isspace()` (no
U+001C..U+001F or U+0085, but U+FEFF). Matching the reference's numbers needs both.
"""

from __future__ import annotations

import re
import sys
from array import array

# ECMAScript WhiteSpace and LineTerminator: what `\s` matches and `trim()` removes.
JS_WHITESPACE = ("\t\n\v\f\r \xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
                 + "\u2028\u2029\u202f\u205f\u3000\ufeff")
JS_WHITESPACE_RUN = re.compile(f"[{re.escape(JS_WHITESPACE)}]+")
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def _has_astral(text: str) -> bool:
    return not text.isascii() and max(text) > "\uffff"


def utf16_length(text: str) -> int:
    """`text.length` in JavaScript: characters beyond the BMP count twice."""
    if not _has_astral(text):
        return len(text)
    return len(text.encode(_UTF16, "surrogatepass")) // 2


def utf16_units(text: str) -> str | array[int]:
    """The text as JavaScript indexes it: itself, or its UTF-16 code units when it has
    characters beyond the BMP."""
    if not _has_astral(text):
        return text
    return array("H", text.encode(_UTF16, "surrogatepass"))


def js_words(text: str) -> list[str]:
    """`text.split(/\\s+/).filter(w => w.length > 0)`."""
    return [word for word in JS_WHITESPACE_RUN.split(text) if word]
