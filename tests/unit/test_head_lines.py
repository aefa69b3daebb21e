"""How the safe fetcher splits a response head into Link lines and the rest, however it arrives.

The head caps (``max_header_bytes`` for lines other than ``Link``, ``max_link_header_bytes`` on
top for ``Link`` lines) count what ``_HeadLines`` counts; a head read in one piece is counted by
a shortcut, which must agree with the line-by-line count whatever the head holds.
"""

from __future__ import annotations

import random

import pytest

from cdif_harvester.adapters.http import _HeadLines


def _reference(data: bytes) -> tuple[int, int]:
    """(Link bytes, other bytes) of the head at the start of ``data``, line by line: a line is
    a Link line when its first five bytes are ``link:`` in any case, a line starting with a
    space or tab is of the kind of the line before it, and counting ends with the blank line."""
    link = other = 0
    last_was_link = False
    pos = 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        line = data[pos:] if end == -1 else data[pos : end + 1]
        pos += len(line)
        if line in (b"\n", b"\r\n"):
            other += len(line)
            break
        folded = line[:1] in (b" ", b"\t")
        is_link = last_was_link if folded else line[:5].lower() == b"link:"
        if is_link:
            link += len(line)
        else:
            other += len(line)
        last_was_link = is_link
    return link, other


_LINES = [
    b"Content-Type: text/html\r\n",
    b"Link: <https://example.org/a.jsonld>; rel=describedby\r\n",
    b"link:<b>\n",
    b"LINK: <c>; rel=alternate\r\n",
    b"Linked: not a link\r\n",
    b"Link : not a link either\r\n",
    b" folded continuation\r\n",
    b"\tfolded with a tab\n",
    b"lin\n",
    b"X\n",
    b"\r\r\n",
    b"Set-Cookie: a=b\r\n",
]


def _head(rng: random.Random) -> bytes:
    lines = [b"HTTP/1.1 200 OK\r\n"]
    lines += [rng.choice(_LINES) for _ in range(rng.randrange(0, 12))]
    return b"".join(lines) + rng.choice([b"\r\n", b"\n"])


def _count(pieces: list[bytes]) -> tuple[int, int]:
    lines = _HeadLines()
    for piece in pieces:
        lines.feed(piece)
    return lines.link, lines.other


@pytest.mark.parametrize("seed", range(20))
def test_a_head_is_counted_alike_whole_and_in_pieces(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        data = _head(rng)
        expected = _reference(data)
        # What follows the blank line in the same read (body, or the next head) is not counted.
        assert _count([data + b"Link: <x>\r\n\r\nbody"]) == expected
        assert _count([data[i : i + 1] for i in range(len(data))]) == expected
        cuts = sorted(rng.sample(range(1, len(data)), 3))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert _count(pieces) == expected


def test_a_head_with_folded_link_lines_read_whole() -> None:
    status = b"HTTP/1.1 200 OK\r\n"
    link = b"Link: <a>;\r\n rel=describedby\r\n"
    other = b"ETag: x\r\n folded\r\n"
    lines = _HeadLines()
    lines.feed(status + link + other + b"\r\n" + b"Link: <in the body>\r\n")
    assert (lines.link, lines.other) == (len(link), len(status) + len(other) + 2)


def _interim(rng: random.Random) -> bytes:
    code = rng.choice([b"100 Continue", b"102 Processing", b"103 Early Hints"])
    lines = [b"HTTP/1.1 " + code + b"\r\n"]
    lines += [rng.choice(_LINES) for _ in range(rng.randrange(0, 4))]
    return b"".join(lines) + b"\r\n"


@pytest.mark.parametrize("seed", range(10))
def test_interim_heads_and_the_final_one_count_as_one_head(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(30):
        heads = [_interim(rng) for _ in range(rng.randrange(1, 6))] + [_head(rng)]
        sums = [_reference(head) for head in heads]
        expected = (sum(link for link, _ in sums), sum(other for _, other in sums))
        data = b"".join(heads)
        # In one read with the body after it, byte by byte, and cut anywhere: all the same.
        assert _count([data + b"Link: <x>\r\n\r\nbody"]) == expected
        assert _count([data[i : i + 1] for i in range(len(data))]) == expected
        cuts = sorted(rng.sample(range(1, len(data)), 4))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert _count(pieces) == expected


def test_nothing_after_a_switch_of_protocols_is_a_head() -> None:
    switch = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"
    assert _count([switch + b"HTTP/1.1 200 OK\r\n\r\n"]) == (0, len(switch))
