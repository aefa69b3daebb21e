"""Local adapters: a directory as object store, SQLite as catalogue, an in-process queue.

They let every stage run on one machine with no AWS account. The directory uses exactly the key
layout of the S3 bucket (:mod:`cdif_harvester.keys`), so a local output folder and the bucket can be
compared file by file. :class:`NotifyingObjectStore` plays the part of the S3 event notification
that triggers the crosswalk on AWS.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdif_harvester.errors import StorageError
from cdif_harvester.model import (
    CatalogEntry,
    UrlOutcome,
    UrlState,
    entry_from_dict,
    entry_to_dict,
    outcome_from_dict,
    outcome_to_dict,
    url_state_from_dict,
    url_state_to_dict,
)
from cdif_harvester.ports import JobQueue, ObjectStore

__all__ = [
    "DirectoryObjectStore",
    "InProcessQueue",
    "NotifyingObjectStore",
    "SqliteCatalog",
    "SystemClock",
]


class SystemClock:
    """The real clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


class DirectoryObjectStore:
    """An object store in a directory: key ``a/b/c.json`` is the file ``<root>/a/b/c.json``."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def _path(self, key: str) -> Path:
        # Keys come from our own key layout, but refuse anything that would leave the root.
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root) or key.startswith("/") or ".." in key.split("/"):
            raise StorageError(f"object key escapes the store: {key!r}", reason="bad-key")
        return path

    def put(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Write ``body`` atomically (temporary file + rename) so readers never see half a file.

        Safe from several threads at once: each write has its own temporary file, and the last
        rename wins, as the last PUT does on S3.
        """
        path = self._path(key)
        tmp: str | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
            Path(tmp).replace(path)
        except OSError as exc:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise StorageError(f"cannot write {key}: {exc}") from exc

    def get(self, key: str) -> bytes:
        """Read the object under ``key``. Raises KeyError when absent."""
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError as exc:
            raise KeyError(key) from exc
        except OSError as exc:
            raise StorageError(f"cannot read {key}: {exc}") from exc

    def exists(self, key: str) -> bool:
        """Tell whether ``key`` holds an object."""
        return self._path(key).is_file()

    def list(self, prefix: str) -> Iterator[str]:
        """Yield the keys under ``prefix`` in key order (temporary files excluded)."""
        if not self.root.is_dir():
            return
        keys = sorted(
            path.relative_to(self.root).as_posix()
            for path in self.root.rglob("*")
            if path.is_file() and not path.name.startswith(".tmp-")
        )
        yield from (key for key in keys if key.startswith(prefix))


class NotifyingObjectStore:
    """Wraps a store and announces new objects under a prefix on a queue, as S3 does on AWS.

    The message body is an S3 event notification, so the crosswalk parses the same shape locally
    and on AWS.
    """

    def __init__(self, inner: ObjectStore, queue: JobQueue, *, prefix: str, target: str) -> None:
        self.inner = inner
        self.queue = queue
        self.prefix = prefix
        self.target = target

    def put(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Store the object, then notify when its key is under the watched prefix."""
        self.inner.put(key, body, content_type=content_type, metadata=metadata)
        if key.startswith(self.prefix):
            event = {
                "Records": [
                    {
                        "eventSource": "aws:s3",
                        "eventName": "ObjectCreated:Put",
                        "s3": {"bucket": {"name": "local"}, "object": {"key": key}},
                    }
                ]
            }
            self.queue.send(self.target, [json.dumps(event)])

    def get(self, key: str) -> bytes:
        """Read through to the wrapped store."""
        return self.inner.get(key)

    def exists(self, key: str) -> bool:
        """Ask the wrapped store."""
        return self.inner.exists(key)

    def list(self, prefix: str) -> Iterator[str]:
        """List the wrapped store."""
        return self.inner.list(prefix)


class InProcessQueue:
    """First-in first-out queues held in memory, one per logical queue name (thread-safe)."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[str]] = {}
        self._lock = threading.Lock()

    def send(
        self, queue: str, bodies: Sequence[str], *, delays: Sequence[int] | None = None
    ) -> None:
        """Append every body to ``queue``.

        Delays are not kept: the local runner spaces requests to a host as they are made
        (:class:`~cdif_harvester.adapters.politeness.GatedFetcher`), which is exact where
        message delays are only approximate.
        """
        with self._lock:
            self._queues.setdefault(queue, deque()).extend(bodies)

    def receive(self, queue: str) -> str | None:
        """Take the oldest body from ``queue``, or None when it is empty."""
        with self._lock:
            pending = self._queues.get(queue)
            return pending.popleft() if pending else None

    def pending(self, queue: str | None = None) -> int:
        """Count the bodies waiting in ``queue`` (or in every queue)."""
        with self._lock:
            if queue is not None:
                return len(self._queues.get(queue, ()))
            return sum(len(q) for q in self._queues.values())


_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    record_id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_source ON records (source);
CREATE TABLE IF NOT EXISTS url_outcomes (
    run_id TEXT NOT NULL,
    url TEXT NOT NULL,
    outcome TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (run_id, url)
);
CREATE TABLE IF NOT EXISTS urls (
    url TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    last_run TEXT NOT NULL,
    outcome TEXT NOT NULL,
    body TEXT NOT NULL
);
"""
# Columns added after the first release: a catalogue written by an older version is upgraded in
# place when opened (SQLite cannot add a column "if not exists").
_ADDED_COLUMNS = {
    "records": (("changed_at", "TEXT"),),
    "urls": (("last_seen", "TEXT"), ("state", "TEXT NOT NULL DEFAULT '{}'")),
}
_INDEXES = """
CREATE INDEX IF NOT EXISTS records_by_change ON records (source, changed_at);
CREATE INDEX IF NOT EXISTS urls_by_source ON urls (source, outcome);
"""
# The fields of a UrlState that follow every outcome (the rest is the harvest state).
_OUTCOME_FIELDS = ("url", "source", "outcome", "last_run", "last_seen")


class SqliteCatalog:
    """The catalogue in one SQLite file (WAL mode, safe for the runner's worker threads)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL never corrupts the database; a power cut may lose the last
            # commits, which a rerun redoes. FULL would sync the disk on every URL's outcome.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            for table, columns in _ADDED_COLUMNS.items():
                have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
                for name, kind in columns:
                    if name not in have:
                        self._db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            self._db.executescript(_INDEXES)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open catalogue {path}: {exc}") from exc

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def put_record(self, entry: CatalogEntry) -> None:
        """Insert or replace the entry of ``entry.record_id``."""
        body = json.dumps(entry_to_dict(entry), sort_keys=True)
        self._execute(
            "INSERT OR REPLACE INTO records (record_id, source, changed_at, body) "
            "VALUES (?, ?, ?, ?)",
            (entry.record_id, entry.source, entry.changed_at or entry.harvested_at, body),
        )

    def get_record(self, record_id: str) -> CatalogEntry | None:
        """Return the entry of ``record_id``, or None."""
        rows = self._query("SELECT body FROM records WHERE record_id = ?", (record_id,))
        return entry_from_dict(json.loads(rows[0][0])) if rows else None

    def records(
        self, source: str | None = None, *, changed_since: str | None = None
    ) -> list[CatalogEntry]:
        """Return the entries of ``source`` (every source when None), changed at or after
        ``changed_since`` when given, ordered by record id."""
        sql = "SELECT body FROM records WHERE 1 = 1"
        params: list[object] = []
        if source is not None:
            sql += " AND source = ?"
            params.append(source)
        if changed_since is not None:
            sql += " AND changed_at >= ?"
            params.append(changed_since)
        rows = self._query(sql + " ORDER BY record_id", tuple(params))
        return [entry_from_dict(json.loads(row[0])) for row in rows]

    def put_outcome(self, outcome: UrlOutcome) -> None:
        """Record the outcome of a URL in a run, and as the URL's latest outcome."""
        body = json.dumps(outcome_to_dict(outcome), sort_keys=True)
        with self._lock:
            try:
                self._db.execute("BEGIN")
                self._db.execute(
                    "INSERT OR REPLACE INTO url_outcomes (run_id, url, outcome, body) "
                    "VALUES (?, ?, ?, ?)",
                    (outcome.run_id, outcome.url, outcome.outcome.value, body),
                )
                self._db.execute(
                    "INSERT INTO urls (url, source, last_run, outcome, last_seen, body) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (url) DO UPDATE SET "
                    "source = excluded.source, last_run = excluded.last_run, "
                    "outcome = excluded.outcome, last_seen = excluded.last_seen, "
                    "body = excluded.body",
                    (
                        outcome.url,
                        outcome.source,
                        outcome.run_id,
                        outcome.outcome.value,
                        outcome.recorded_at,
                        body,
                    ),
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise StorageError(f"cannot record outcome of {outcome.url}: {exc}") from exc

    def outcomes(self, run_id: str) -> Iterator[UrlOutcome]:
        """Yield the outcomes of ``run_id`` ordered by URL."""
        rows = self._query("SELECT body FROM url_outcomes WHERE run_id = ? ORDER BY url", (run_id,))
        for (body,) in rows:
            yield outcome_from_dict(json.loads(body))

    def get_url(self, url: str) -> UrlState | None:
        """Return what is known about ``url``, or None."""
        rows = self._query(
            "SELECT url, source, outcome, last_run, last_seen, state FROM urls WHERE url = ?",
            (url,),
        )
        return _url_state(rows[0]) if rows else None

    def put_url(self, state: UrlState) -> None:
        """Store the harvest state of ``state.url``; its outcome fields are not touched."""
        harvest = {k: v for k, v in url_state_to_dict(state).items() if k not in _OUTCOME_FIELDS}
        self._execute(
            "INSERT INTO urls (url, source, last_run, outcome, body, state) "
            "VALUES (?, ?, '', '', '{}', ?) ON CONFLICT (url) DO UPDATE SET "
            "source = excluded.source, state = excluded.state",
            (state.url, state.source, json.dumps(harvest, sort_keys=True)),
        )

    def urls(self, source: str, *, outcome: str | None = None) -> list[UrlState]:
        """Return the state of every URL of ``source`` (with latest outcome ``outcome``)."""
        sql = "SELECT url, source, outcome, last_run, last_seen, state FROM urls WHERE source = ?"
        params: tuple[object, ...] = (source,)
        if outcome is not None:
            sql += " AND outcome = ?"
            params = (source, outcome)
        return [_url_state(row) for row in self._query(sql + " ORDER BY url", params)]

    def _execute(self, sql: str, params: tuple[object, ...]) -> None:
        with self._lock:
            try:
                self._db.execute(sql, params)
            except sqlite3.Error as exc:
                raise StorageError(f"catalogue write failed: {exc}") from exc

    def _query(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._db.execute(sql, params).fetchall())
            except sqlite3.Error as exc:
                raise StorageError(f"catalogue read failed: {exc}") from exc


def _url_state(row: tuple[Any, ...]) -> UrlState:
    url, source, outcome, last_run, last_seen, state = row
    harvest = json.loads(state or "{}")
    return url_state_from_dict(
        {
            **harvest,
            "url": url,
            "source": source,
            "outcome": outcome or None,
            "last_run": last_run or None,
            "last_seen": last_seen,
        }
    )
