"""What the publisher report must remember per URL, kept on disk while the report is built.

A report counts distinct URLs and records per kind of problem, and lists the URLs without a
valid record, which joins the run's outcomes with the records the catalogue holds. Over a run of
hundreds of thousands of URLs, Python sets and dicts of them grow with the site; :class:`Spill`
keeps them in a private temporary SQLite database (deleted when closed; SQLite holds a few MB of
it in memory at most), so building the report takes bounded memory whatever the run's size.

See docs/decisions/0083-streaming-close-of-a-run.md.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from types import TracebackType

__all__ = ["Spill"]

_SCHEMA = """
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE seen (key BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE outcome (url BLOB PRIMARY KEY, outcome BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE url_row (url BLOB PRIMARY KEY, outcome BLOB NOT NULL, why BLOB NOT NULL)
    WITHOUT ROWID;
CREATE TABLE held_why (seq INTEGER PRIMARY KEY, url BLOB NOT NULL, text BLOB NOT NULL);
CREATE INDEX held_why_by_url ON held_why (url, seq);
CREATE TABLE rank (outcome BLOB PRIMARY KEY, rank INTEGER NOT NULL) WITHOUT ROWID;
"""


def _b(text: str) -> bytes:
    # Stored as UTF-8 bytes, compared as bytes: the order of the code points, which is Python's
    # order of str; "surrogatepass" keeps text that is not valid Unicode as it is.
    return text.encode("utf-8", "surrogatepass")


def _s(data: bytes) -> str:
    return bytes(data).decode("utf-8", "surrogatepass")


class Spill:
    """A report's per-URL bookkeeping in a temporary database: a set of keys, the run's
    outcome by URL, the URLs without a valid record and what their invalid records say."""

    def __init__(self) -> None:
        # "" is SQLite's private temporary database: on disk, deleted when closed.
        self._db = sqlite3.connect("", isolation_level=None)
        self._db.executescript(_SCHEMA)
        self._db.execute("BEGIN")  # never committed: nothing here outlives the report

    def close(self) -> None:
        """Drop the database."""
        self._db.close()

    def __enter__(self) -> Spill:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def add(self, *parts: str) -> bool:
        """Add the key made of ``parts`` to the set; True when it was not in it yet."""
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO seen (key) VALUES (?)", (_b(json.dumps(parts)),)
        )
        return cursor.rowcount == 1

    def note_outcome(self, url: str, outcome: str) -> None:
        """The run's outcome for ``url`` (a later one for the same URL replaces it)."""
        self._db.execute("INSERT OR REPLACE INTO outcome VALUES (?, ?)", (_b(url), _b(outcome)))

    def note_row(self, url: str, outcome: str, why: str) -> None:
        """A URL of the run without a record (a later one for the same URL replaces it)."""
        self._db.execute(
            "INSERT OR REPLACE INTO url_row VALUES (?, ?, ?)", (_b(url), _b(outcome), _b(why))
        )

    def note_held(self, url: str, text: str) -> None:
        """What an invalid record held for ``url`` says, after what was noted before."""
        self._db.execute("INSERT INTO held_why (url, text) VALUES (?, ?)", (_b(url), _b(text)))

    def url_rows(
        self, order: Mapping[str, int], limit: int
    ) -> tuple[int, list[tuple[str, str, str]]]:
        """The URLs without a valid record now: how many, and the first ``limit`` as
        ``(url, outcome, why)``, by ``order`` of their outcome (unknown ones last) then URL.

        They are the rows noted, then the URLs of the records held that have none: their
        outcome is the run's (``held`` when the run did not read the URL), their ``why`` what
        their records say, joined with `` | `` in the order noted.
        """
        self._db.executemany(
            "INSERT OR REPLACE INTO rank VALUES (?, ?)",
            [(_b(outcome), rank) for outcome, rank in order.items()],
        )
        union = (
            "SELECT url, outcome, why FROM url_row UNION ALL "
            "SELECT held.url, COALESCE(NULLIF(o.outcome, x''), CAST('held' AS BLOB)), NULL "
            "FROM (SELECT DISTINCT url FROM held_why) AS held "
            "LEFT JOIN outcome AS o ON o.url = held.url "
            "WHERE held.url NOT IN (SELECT url FROM url_row)"
        )
        (count,) = self._db.execute(f"SELECT COUNT(*) FROM ({union})").fetchone()
        rows = self._db.execute(
            f"SELECT u.url, u.outcome, u.why FROM ({union}) AS u "
            "LEFT JOIN rank AS r ON r.outcome = u.outcome "
            "ORDER BY COALESCE(r.rank, ?), u.url LIMIT ?",
            (len(order), limit),
        ).fetchall()
        listed = [
            (_s(url), _s(outcome), _s(why) if why is not None else " | ".join(self._held(url)))
            for url, outcome, why in rows
        ]
        return int(count), listed

    def _held(self, url: bytes) -> Iterator[str]:
        rows = self._db.execute("SELECT text FROM held_why WHERE url = ? ORDER BY seq", (url,))
        return (_s(text) for (text,) in rows.fetchall())
