"""A documented, reversible text form for bytes that must become a string (keys, attributes).

Valid UTF-8 is kept as text. Anything else is base64 (standard alphabet, padded), and the caller
marks that with an `<name>.encoding=base64` attribute so a consumer can reverse it exactly.
"""

from __future__ import annotations

import base64

BASE64 = "base64"


def bytes_to_text(value: bytes) -> tuple[str, str | None]:
    """Return (text, encoding): encoding is None for UTF-8 text, "base64" otherwise."""
    try:
        return value.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(value).decode("ascii"), BASE64
