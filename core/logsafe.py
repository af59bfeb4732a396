"""Make any string a user controls safe to put in a log line.

Names, namespaces, messages and reasons in an AdmissionReview come from whoever created the
object: a newline in one would forge a log record, an escape sequence would drive the reader's
terminal, and a 200 KB name would flood the log. :func:`log_safe` escapes every control and
non-printable character and caps the length, saying how much was cut.
"""

from __future__ import annotations

import reprlib
from typing import Final

LOG_LIMIT: Final = 256
"""Characters of one user string kept in a log line; the rest is counted, not shown."""

_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if char.isprintable():
        return char
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code <= 0xFF
        else f"\\u{code:04x}"
        if code <= 0xFFFF
        else f"\\U{code:08x}"
    )


def log_safe(value: object, limit: int = LOG_LIMIT) -> str:
    """``value`` as one printable line: control characters escaped, at most ``limit``
    characters of it kept (counted before escaping) and the cut announced. Other objects
    are shown by a bounded ``reprlib`` repr, so a huge one costs no more than a small one."""
    text = value if isinstance(value, str) else reprlib.repr(value)
    cut = len(text) - limit
    head = text[:limit] if cut > 0 else text
    escaped = "".join(_escape(char) for char in head)
    return f"{escaped}…(+{cut} chars)" if cut > 0 else escaped
