"""pretty_json writes what json.dumps(indent=2) writes, byte for byte."""

from __future__ import annotations

import json
import math
import random
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.jsontext import pretty_json

_STRINGS = ["", "a", "é", "日本", "\u2028", 'quote"back\\slash', "\x00\x1f\n\t", "😀", "</script>"]
_NUMBERS: list[Any] = [0, -1, 2**70, 1.5, -0.0, 1e100, 1e-7, math.nan, math.inf, -math.inf]


def _value(rng: random.Random, depth: int) -> Any:
    """A random JSON value (dicts, lists and tuples down to ``depth`` levels)."""
    pick = rng.randrange(10 if depth else 6)
    if pick == 0:
        return rng.choice(_STRINGS) + str(rng.randrange(100))
    if pick == 1:
        return rng.choice(_NUMBERS)
    if pick == 2:
        return rng.choice([None, True, False])
    if pick == 3:
        return rng.random() * 10 ** rng.randrange(-5, 20)
    if pick in (4, 5):
        return rng.randrange(-(10**6), 10**6)
    if pick in (6, 7):
        return {
            rng.choice(_STRINGS) + str(rng.randrange(50)): _value(rng, depth - 1)
            for _ in range(rng.randrange(5))
        }
    items = [_value(rng, depth - 1) for _ in range(rng.randrange(5))]
    return tuple(items) if pick == 8 else items


@pytest.mark.parametrize("sort_keys", [False, True])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_random_values_are_written_as_json_dumps_writes_them(
    sort_keys: bool, ensure_ascii: bool
) -> None:
    rng = random.Random(20261125)
    for _ in range(2000):
        value = _value(rng, 5)
        expected = json.dumps(value, indent=2, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
        assert pretty_json(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii) == expected


def test_records_of_the_corpus_are_written_as_json_dumps_writes_them(
    corpus: Path,
) -> None:
    files = sorted(corpus.rglob("*.json"))[:200]
    assert files
    for path in files:
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        for sort_keys in (False, True):
            expected = json.dumps(value, indent=2, sort_keys=sort_keys, ensure_ascii=False)
            assert pretty_json(value, sort_keys=sort_keys, ensure_ascii=False) == expected


class _Level(IntEnum):
    LOW = 1


@pytest.mark.parametrize(
    "value",
    [
        {1: "a key that is no string", "b": [1]},
        {"nested": {2.5: "x"}},
        {"enum": _Level.LOW},
        [True, {None: 1}],
    ],
)
def test_what_is_not_plain_json_data_is_left_to_json_dumps(value: Any) -> None:
    assert pretty_json(value) == json.dumps(value, indent=2)


def test_what_json_dumps_refuses_is_refused() -> None:
    with pytest.raises(TypeError):
        pretty_json({"a": object()})
