"""The cursors of the lists read a page at a time in the catalogue's order (decision 0105).

A cursor is the API's own token: URL-safe base64 of JSON ``[index, position]``, the index of
the listing's part (a source's host) and the catalogue's position in it. It is checked here and
by the catalogue before anything is read: what no page gave is a 400, never a query.
"""

import base64
import json

from cdif_harvester.api.errors import ApiError

__all__ = ["CURSOR_PATTERN", "MAX_CURSOR", "bad_cursor", "read_cursor", "write_cursor"]

#: The longest cursor a page gives (a position is a few catalogue keys), and its alphabet.
MAX_CURSOR = 2048
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"


def write_cursor(index: int, after: str | None) -> str:
    """The opaque cursor of a place in a listing: a name's index and the catalogue's position
    in it (URL-safe base64 of JSON)."""
    text = json.dumps([index, after], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii").rstrip("=")


def read_cursor(cursor: str | None, names: int) -> tuple[int, str | None]:
    """The name's index and position :func:`write_cursor` made ``cursor`` of ((0, None):
    from the start)."""
    if cursor is None:
        return 0, None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        index, after = json.loads(base64.urlsafe_b64decode(padded).decode("utf-8"))
    except (ValueError, TypeError):
        raise bad_cursor() from None
    if type(index) is not int or not 0 <= index < names or not isinstance(after, str | None):
        raise bad_cursor()
    return index, after


def bad_cursor() -> ApiError:
    """The 400 of a cursor no page gave."""
    return ApiError(
        "cursor is not one a page of this listing gave: use next_cursor as it came",
        error="invalid-request",
    )
