"""Order a stream that may not fit in memory: keep it in memory while it is small, else in a
temporary SQLite database on local disk, and read it back in order a page at a time.

Closing a run walks every URL and record of a source in order (the vanished-URL check merges the
source's URLs with the run's outcomes; the report lists the records by id). A catalogue whose
listings do not come in that order (DynamoDB's come by index key) would otherwise hold the whole
listing to sort it: several kilobytes per record once read into Python objects, more than a
512 MB function has for a source of a hundred thousand records. Here what is held is at most
:data:`SPILL_AFTER` pairs; the rest waits on disk (a Lambda function's ``/tmp``), deleted as
soon as the stream is read to its end or dropped.

Keys compare as Python compares ``str`` (by code point): SQLite compares the UTF-8 bytes, which
sort the same way (``surrogatepass`` keeps any ``str`` as bytes of that order).
"""

from __future__ import annotations

import os
import pickle
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import TypeVar

__all__ = ["SPILL_AFTER", "sorted_pairs"]

#: Pairs held in memory before the stream goes to disk (a catalogue entry is a few KB of
#: objects: some tens of megabytes at most).
SPILL_AFTER = 10_000

_V = TypeVar("_V")

_FETCH = 1_000  # pairs written to disk, and rows read back, at a time


def sorted_pairs(
    pairs: Iterable[tuple[str, _V]], *, unique: bool = False, spill_after: int | None = None
) -> Iterator[tuple[str, _V]]:
    """Yield ``pairs`` (key, value) ordered by key; pairs with equal keys in the order given,
    or, with ``unique``, only the first of them.

    Up to ``spill_after`` pairs (:data:`SPILL_AFTER` when None) are sorted in memory, values as
    they are; beyond that every pair goes to a temporary database on disk (values pickled, and
    read back by this process only), removed when the stream ends or is closed. Raises OSError
    or sqlite3.Error when the disk fails.
    """
    limit = SPILL_AFTER if spill_after is None else spill_after
    held: list[tuple[str, _V]] = []
    source = iter(pairs)
    for pair in source:
        held.append(pair)
        if len(held) > limit:
            yield from _on_disk(held, source, unique=unique)
            return
    held.sort(key=itemgetter(0))  # (stable: equal keys keep their order)
    last: str | None = None
    for key, value in held:
        if unique and key == last:
            continue
        last = key
        yield key, value


def _on_disk(
    held: list[tuple[str, _V]], rest: Iterator[tuple[str, _V]], *, unique: bool
) -> Iterator[tuple[str, _V]]:
    handle, path = tempfile.mkstemp(prefix="cdif-sort-", suffix=".sqlite")
    os.close(handle)
    db = sqlite3.connect(path)
    try:
        db.executescript(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
            "CREATE TABLE pairs (key BLOB NOT NULL, seq INTEGER NOT NULL, value BLOB NOT NULL,"
            " PRIMARY KEY (key, seq)) WITHOUT ROWID;"
        )
        # With ``unique`` every pair has sequence 0, so the first of a key is the one kept.
        insert = f"INSERT {'OR IGNORE ' if unique else ''}INTO pairs VALUES (?, ?, ?)"
        seq = 0
        batch = held
        while batch:
            rows = []
            for key, value in batch:
                rows.append((_b(key), 0 if unique else seq, pickle.dumps(value)))
                seq += 1
            db.executemany(insert, rows)
            batch.clear()  # (the pairs held in memory go as soon as they are on disk)
            batch = [pair for _, pair in zip(range(_FETCH), rest, strict=False)]
        db.commit()  # (what the page cache still held goes to the file: memory stays small)
        cursor = db.execute("SELECT key, value FROM pairs ORDER BY key, seq")
        while found := cursor.fetchmany(_FETCH):
            for key, value in found:
                # (pickled above, by this process: never read from elsewhere)
                yield bytes(key).decode("utf-8", "surrogatepass"), pickle.loads(value)
    finally:
        db.close()
        Path(path).unlink()


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")
