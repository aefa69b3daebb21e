"""Ordering a stream larger than memory (cdif_harvester/external_sort.py): the same order as
Python's sort, in memory and on disk; what it holds stays bounded; its file goes away."""

from __future__ import annotations

import random
import tempfile
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdif_harvester.external_sort import sorted_pairs

# Keys that sort differently by code point, by UTF-16 and by locale, and a lone surrogate.
ODD_KEYS = ["b", "a", "B", "é", "\U0001f600", "\uffff", "a\x00", "", "\ud800", "z" * 300]


def _pairs(count: int, seed: int) -> list[tuple[str, bytes]]:
    rng = random.Random(seed)
    keys = [rng.choice(ODD_KEYS) + str(rng.randrange(count // 3 + 1)) for _ in range(count)]
    return [(key, f"{index}".encode()) for index, key in enumerate(keys)]


def _first_of_each(pairs: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    seen: dict[str, bytes] = {}
    for key, value in pairs:
        seen.setdefault(key, value)
    return sorted(seen.items())


@pytest.mark.parametrize("spill_after", [0, 1, 7, 10_000])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_order_is_pythons_with_ties_in_the_order_given(spill_after: int, seed: int) -> None:
    pairs = _pairs(500, seed)
    expected = sorted(pairs, key=lambda pair: pair[0])  # (stable)
    assert list(sorted_pairs(pairs, spill_after=spill_after)) == expected


@pytest.mark.parametrize("spill_after", [0, 3, 10_000])
def test_unique_keeps_the_first_pair_of_each_key(spill_after: int) -> None:
    pairs = _pairs(400, 3)
    assert list(sorted_pairs(pairs, unique=True, spill_after=spill_after)) == _first_of_each(pairs)


def test_an_empty_stream_is_empty() -> None:
    assert list(sorted_pairs([], spill_after=0)) == []
    assert list(sorted_pairs([])) == []


def _temporary_files() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("cdif-sort-*"))


def test_the_file_on_disk_goes_when_read_to_the_end_or_dropped() -> None:
    before = _temporary_files()
    stream = sorted_pairs(_pairs(100, 4), spill_after=10)
    next(stream)
    assert len(_temporary_files() - before) == 1  # spilled, and open while it is read
    stream.close()  # dropped half-way
    assert _temporary_files() == before
    assert len(list(sorted_pairs(_pairs(100, 5), spill_after=10))) == 100
    assert _temporary_files() == before


def _stream(count: int) -> Iterator[tuple[str, bytes]]:
    # made as it is read, as a catalogue's pages are: only the sort can hold them all
    for index in range(count):
        yield f"https://data.example.org/datasets/{(index * 7919) % count:07d}.html", b"x" * 200


def test_what_is_held_does_not_grow_with_the_stream() -> None:
    # 100,000 pairs of about 300 bytes: some 40 MB as Python objects were they held to sort
    def peak(count: int) -> float:
        tracemalloc.start()
        try:
            last = ""
            for key, _ in sorted_pairs(_stream(count), spill_after=1_000):
                assert key >= last
                last = key
            return tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()

    small, large = peak(10_000), peak(100_000)
    assert large < 8, large
    assert large < small * 2, (small, large)
