"""Where a text file stops being UTF-8: the line, column and byte of the first undecodable byte.

Python's decoder reports a position inside the chunk it was decoding
("can't decode byte 0xe9 in position 7582"); the readers of this package
(:func:`dynnets.data.read_trees`, :func:`dynnets.data.load_embeddings`)
locate it in the file instead, as they do for every other fault.
"""
from __future__ import annotations

import os
from typing import NamedTuple

__all__ = ["DecodeErrorPosition", "find_decode_error", "describe_decode_error"]


class DecodeErrorPosition(NamedTuple):
    """``line`` and ``column`` (1-based, in characters of the line), ``offset``
    (0-based byte offset in the file) and the undecodable ``byte``."""

    line: int
    column: int
    offset: int
    byte: int


def find_decode_error(path: str | os.PathLike, encoding: str = "utf-8") -> DecodeErrorPosition | None:
    """The first byte of ``path`` that ``encoding`` cannot decode, or None.

    Lines end at ``\\n``; a byte-order mark at the start of the file is not
    counted in the first line's columns. Reads the file once, line by line
    (only called after a decoder has failed, so the happy path costs nothing).
    """
    offset = 0
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as e:
                head = raw[:e.start]
                if lineno == 1 and head.startswith(b"\xef\xbb\xbf"):
                    head = head[3:]
                return DecodeErrorPosition(lineno, len(head.decode(encoding)) + 1, offset + e.start, raw[e.start])
            offset += len(raw)
    return None


def describe_decode_error(path: str | os.PathLike, exc: UnicodeDecodeError, what: str = "") -> tuple[int, int, str]:
    """``(line, column, reason)`` for a ``UnicodeDecodeError`` raised while reading ``path``."""
    pos = find_decode_error(path, exc.encoding.replace("-sig", "").replace("_sig", "") or "utf-8")
    enc = "UTF-8" if exc.encoding.lower().replace("_", "-").startswith("utf-8") else exc.encoding
    if pos is None:       # the decoder failed on bytes the line-by-line pass accepts (should not happen)
        return 1, 1, f"{what}the file is not valid {enc} text ({exc.reason})"
    return pos.line, pos.column, (f"{what}byte 0x{pos.byte:02x} (byte offset {pos.offset} of the file) is not "
                                  f"valid {enc}: the file is binary or in another encoding, such as Latin-1; "
                                  f"convert it to {enc}")
