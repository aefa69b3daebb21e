"""The API's cursors (api/routes/cursors.py): what a page gives is read back as it was, and
anything else is a 400 before any catalogue read (decision 0105)."""

from __future__ import annotations

import base64
import re

import pytest

from cdif_harvester.api.errors import ApiError
from cdif_harvester.api.routes.cursors import (
    CURSOR_PATTERN,
    MAX_CURSOR,
    read_cursor,
    write_cursor,
)


@pytest.mark.parametrize(
    ("index", "after"),
    [
        (0, None),
        (0, '["RECORD#2026-01-01T00:00:00+00:00","RECORD#' + "a" * 32 + '"]'),
        (2, "URL#" + "0" * 32),
        (1, '["2026-01-01", "https://doi.org/10.5072/é?x=1&y=2"]'),
    ],
)
def test_a_cursor_reads_back_as_it_was_written(index: int, after: str | None) -> None:
    cursor = write_cursor(index, after)
    assert re.fullmatch(CURSOR_PATTERN, cursor) and len(cursor) <= MAX_CURSOR
    assert read_cursor(cursor, 3) == (index, after)


def test_no_cursor_is_the_start() -> None:
    assert read_cursor(None, 1) == (0, None)


def _encoded(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "abc",  # not base64 of anything
        "2",  # an offset, as the outcomes' cursors were
        _encoded("[3, null]"),  # a part the listing does not have
        _encoded("[-1, null]"),
        _encoded("[true, null]"),  # (a bool is an int to Python, not an index)
        _encoded('["0", null]'),
        _encoded("[0, 5]"),  # a position is text
        _encoded("[0]"),
        _encoded('{"a": 1, "b": 2}'),
        _encoded("null"),
        _encoded("[0, null, 1]"),
    ],
)
def test_anything_else_is_a_bad_request(cursor: str) -> None:
    with pytest.raises(ApiError) as raised:
        read_cursor(cursor, 3)
    assert raised.value.error == "invalid-request"
    assert "next_cursor" in str(raised.value)
