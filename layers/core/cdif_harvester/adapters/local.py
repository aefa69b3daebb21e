"""Local adapters: a directory as object store, SQLite as catalogue, an in-process queue.

They let every stage run on one machine with no AWS account. The directory uses exactly the key
layout of the S3 bucket (:mod:`cdif_harvester.keys`), so a local output folder and the bucket can be
compared file by file. :class:`NotifyingObjectStore` plays the part of the S3 event notification
that triggers the crosswalk on AWS. :class:`MemoryObjectStore` and :class:`OfflineFetcher` serve
a check of one document, which keeps nothing and fetches nothing. The SQLite catalogue keeps
each record's signposts with its entry (docs/decisions/0100-local-catalogue-keeps-signposts.md).
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdif_harvester.errors import PermanentError, StorageError
from cdif_harvester.keys import parse_segment_ref
from cdif_harvester.model import (
    QUEUED,
    CatalogEntry,
    FetchResponse,
    Page,
    ProfileQuery,
    RunState,
    RunStatus,
    Source,
    UrlOutcome,
    UrlState,
    entry_from_dict,
    entry_to_dict,
    fill_page,
    keeper,
    outcome_from_dict,
    outcome_to_dict,
    run_from_dict,
    run_to_dict,
    settle_moves,
    source_from_dict,
    source_to_dict,
    url_state_from_dict,
    url_state_to_dict,
)
from cdif_harvester.ports import JobQueue, ObjectStore

__all__ = [
    "DirectoryObjectStore",
    "InProcessQueue",
    "MemoryObjectStore",
    "NotifyingObjectStore",
    "OfflineFetcher",
    "SqliteCatalog",
    "SystemClock",
]


class SystemClock:
    """The real clock, in UTC."""

    def now(self) -> datetime:
        """Return the current UTC time."""
        return datetime.now(UTC)


# Temporary files are created new, never followed through a link, never inherited.
_CREATE_NEW = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_TEMPORARY_NAMES = itertools.count()


def _temporary(folder: str) -> tuple[str, int]:
    """A new file in ``folder`` to write an object into before it is renamed into place, as
    ``tempfile.mkstemp`` makes one (readable by its owner only), its name unique across threads
    and processes. Raises FileNotFoundError when the folder is not there."""
    while True:
        name = f"{folder}/.tmp-{os.getpid()}-{next(_TEMPORARY_NAMES)}"
        try:
            return name, os.open(name, _CREATE_NEW, 0o600)
        except FileExistsError:  # (left by a killed process that had the same id): the next
            continue


class DirectoryObjectStore:
    """An object store in a directory: key ``a/b/c.json`` is the file ``<root>/a/b/c.json``."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._root_text = str(self.root)

    def _path(self, key: str) -> Path:
        return Path(self._file(key))

    def _file(self, key: str) -> str:
        # Keys come from our own key layout, but refuse anything that would leave the root. The
        # check is on the key's text, not Path.resolve(): resolving (a system call per part of
        # the path) took a sixth of a local harvest's time. No part of the store is a symbolic
        # link of ours, so a key without absolute, "." or ".." parts stays inside the root.
        parts = key.split("/")
        if not key or key.startswith("/") or "\0" in key or ".." in parts or "." in parts:
            raise StorageError(f"object key escapes the store: {key!r}", reason="bad-key")
        return f"{self._root_text}/{key}"

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
        path = self._file(key)
        folder = path.rpartition("/")[0]
        tmp: str | None = None
        try:
            # The folder is made only when the file cannot be created without it: most writes
            # go into one that is there, and asking first costs a system call each time.
            try:
                tmp, fd = _temporary(folder)
            except FileNotFoundError:
                Path(folder).mkdir(parents=True, exist_ok=True)
                tmp, fd = _temporary(folder)
            with os.fdopen(fd, "wb") as handle:
                handle.write(body)
            os.replace(tmp, path)  # noqa: PTH105 - (text paths: no Path made per write)
        except OSError as exc:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise StorageError(f"cannot write {key}: {exc}") from exc

    def get(self, key: str) -> bytes:
        """Read the object under ``key`` (or the range a segment reference names). Raises
        KeyError when absent."""
        ranged = parse_segment_ref(key)
        if ranged is not None:
            return _in_range(self.get(ranged[0]), key, ranged)
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
        # Only the folder the prefix names is walked, not the whole store: listing a run's
        # few files must not cost a walk over every record written so far.
        folder = prefix.rpartition("/")[0]
        start = self._path(folder) if folder else self.root
        if not start.is_dir():
            return
        keys = sorted(
            path.relative_to(self.root).as_posix()
            for path in start.rglob("*")
            if path.is_file() and not path.name.startswith(".tmp-")
        )
        yield from (key for key in keys if key.startswith(prefix))


def _in_range(whole: bytes, ref: str, ranged: tuple[str, int, int]) -> bytes:
    """The bytes of segment ``whole`` that ``ref`` names; KeyError when it is shorter."""
    _key, offset, length = ranged
    if offset + length > len(whole):
        raise KeyError(ref)
    return whole[offset : offset + length]


class MemoryObjectStore:
    """An object store in a dictionary: what a check writes is gone with it."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Keep ``body`` under ``key`` (replacing what was there)."""
        with self._lock:
            self._objects[key] = bytes(body)

    def get(self, key: str) -> bytes:
        """Return the object under ``key`` (or the range a segment reference names). Raises
        KeyError when absent."""
        ranged = parse_segment_ref(key)
        if ranged is not None:
            return _in_range(self.get(ranged[0]), key, ranged)
        with self._lock:
            return self._objects[key]

    def exists(self, key: str) -> bool:
        """Tell whether ``key`` holds an object."""
        with self._lock:
            return key in self._objects

    def list(self, prefix: str) -> Iterator[str]:
        """Yield the keys under ``prefix`` in key order."""
        with self._lock:
            keys = sorted(key for key in self._objects if key.startswith(prefix))
        yield from keys


class OfflineFetcher:
    """A fetcher that fetches nothing: the check of a document given whole reads no network.

    Every fetch raises PermanentError (reason ``offline``) before any connection.
    """

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        """Refuse ``url``: raises PermanentError (reason ``offline``)."""
        raise PermanentError(
            f"{url} was not fetched: checking a document fetches nothing", reason="offline"
        )


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
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    source_id TEXT,
    started_at TEXT NOT NULL,
    state TEXT NOT NULL,
    entered INTEGER NOT NULL DEFAULT 0,
    settled INTEGER NOT NULL DEFAULT 0,
    sitemaps INTEGER NOT NULL DEFAULT 0,
    outcomes TEXT NOT NULL DEFAULT '{}',
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS run_steps (
    run_id TEXT NOT NULL,
    step TEXT NOT NULL,
    sitemap TEXT,
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS sources (
    source_id TEXT PRIMARY KEY,
    active_run TEXT,
    body TEXT NOT NULL
);
"""
# Columns added after the first release: a catalogue written by an older version is upgraded in
# place when opened (SQLite cannot add a column "if not exists").
_ADDED_COLUMNS = {
    "records": (("changed_at", "TEXT"), ("signposts", "TEXT")),
    "urls": (("last_seen", "TEXT"), ("state", "TEXT NOT NULL DEFAULT '{}'")),
    "url_outcomes": (("step", "TEXT"),),
}
_INDEXES = """
DROP INDEX IF EXISTS records_by_change;
CREATE INDEX IF NOT EXISTS records_by_change_id ON records (source, changed_at, record_id);
CREATE INDEX IF NOT EXISTS urls_by_source ON urls (source, outcome);
CREATE INDEX IF NOT EXISTS runs_by_source ON runs (source_id, started_at);
CREATE INDEX IF NOT EXISTS records_by_resource ON records (json_extract(body, '$.resource_id'));
CREATE INDEX IF NOT EXISTS records_by_source_id ON records (source, record_id);
CREATE INDEX IF NOT EXISTS urls_by_source_url ON urls (source, url);
CREATE INDEX IF NOT EXISTS urls_by_outcome_url ON urls (source, outcome, url);
"""
# The last three serve the listings read a page at a time (SqliteCatalog._stream): each page
# is a range of one index, where without them every page sorted the source's rows again.
# The columns of a run that change as it goes (the rest is in its JSON body).
_RUN_COLUMNS = "run_id, state, entered, settled, sitemaps, outcomes, body"
# The fields of a UrlState that follow every outcome (the rest is the harvest state).
_OUTCOME_FIELDS = ("url", "source", "outcome", "last_run", "last_seen")
# SQLite allows 32,766 host parameters; a URL list is read in chunks well under that.
_IN_CHUNK = 500
# Rows read a query when a long listing is iterated (SqliteCatalog._stream).
_PAGE = 1000


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
        """Insert or replace the entry of ``entry.record_id`` (with no signposts kept)."""
        self._put_record(entry, None)

    def put_record_with_signposts(self, entry: CatalogEntry, signposts: str) -> None:
        """Insert or replace the entry of ``entry.record_id``, keeping ``signposts`` with it
        (see :class:`~cdif_harvester.ports.KeptSignposts`)."""
        self._put_record(entry, signposts)

    def _put_record(self, entry: CatalogEntry, signposts: str | None) -> None:
        # (the whole row is replaced: signposts never outlive the entry they were made with)
        body = json.dumps(entry_to_dict(entry), sort_keys=True)
        self._execute(
            "INSERT OR REPLACE INTO records (record_id, source, changed_at, body, signposts) "
            "VALUES (?, ?, ?, ?, ?)",
            (
                entry.record_id,
                entry.source,
                entry.changed_at or entry.harvested_at,
                body,
                signposts,
            ),
        )

    def kept_signposts(self, source: str) -> Iterator[tuple[str, str]]:
        """Yield the record id and kept signposts of each entry of ``source`` that has them, by
        record id (a page at a time: see :meth:`_stream`)."""
        sql = "SELECT record_id, signposts FROM records WHERE source = ? AND signposts IS NOT NULL"
        for record_id, signposts in self._stream(sql, (source,), "record_id"):
            yield str(record_id), str(signposts)

    def get_record(self, record_id: str) -> CatalogEntry | None:
        """Return the entry of ``record_id``, or None."""
        rows = self._query("SELECT body FROM records WHERE record_id = ?", (record_id,))
        return entry_from_dict(json.loads(rows[0][0])) if rows else None

    def source_names(self) -> list[str]:
        """Return the source keys of every URL harvested into this catalogue, sorted."""
        return [str(row[0]) for row in self._query("SELECT DISTINCT source FROM urls", ())]

    def records_of_resource(self, resource_id: str) -> list[CatalogEntry]:
        """Return the entries of the records describing the resource ``resource_id`` (its DOI
        or other identifier; several sources may describe one resource), by record id."""
        rows = self._query(
            "SELECT body FROM records WHERE json_extract(body, '$.resource_id') = ? "
            "ORDER BY record_id",
            (resource_id,),
        )
        return [entry_from_dict(json.loads(row[0])) for row in rows]

    def records(
        self,
        source: str | None = None,
        *,
        changed_since: str | None = None,
        query: ProfileQuery | None = None,
    ) -> Iterator[CatalogEntry]:
        """Yield the entries of ``source`` (every source when None), changed at or after
        ``changed_since`` and kept by the profile ``query`` when given, ordered by record id
        (read a page at a time: see :meth:`_stream`)."""
        sql = "SELECT record_id, body FROM records WHERE 1 = 1"
        params: list[object] = []
        if source is not None:
            sql += " AND source = ?"
            params.append(source)
        if changed_since is not None:
            sql += " AND changed_at >= ?"
            params.append(changed_since)
        for _, body in self._stream(sql, tuple(params), "record_id"):
            entry = entry_from_dict(json.loads(body))
            if query is None or query.matches(entry):
                yield entry

    def records_page(
        self,
        source: str,
        *,
        limit: int,
        after: str | None = None,
        changed_since: str | None = None,
        query: ProfileQuery | None = None,
    ) -> Page[CatalogEntry]:
        """One page of ``source``'s entries by date of change, then record id (see the port);
        a position is ``[changed_at, record_id]`` as JSON. Raises ValueError for another."""
        start = _change_position(after) if after is not None else None
        sql = "SELECT changed_at, record_id, body FROM records WHERE source = ?"
        params: tuple[object, ...] = (source,)
        if changed_since is not None:
            sql += " AND changed_at >= ?"
            params += (changed_since,)
        # (index records_by_change_id)
        rows = self._stream(sql, params, "changed_at, record_id", after=start)
        listed = (
            (json.dumps([changed_at, record_id]), entry_from_dict(json.loads(body)))
            for changed_at, record_id, body in rows
        )
        return fill_page(listed, limit=limit, keep=keeper(query))

    def put_outcome(
        self, outcome: UrlOutcome, *, state: UrlState | None = None
    ) -> RunStatus | None:
        """Record the outcome of a URL in a run, and as the URL's latest outcome (with its
        harvest ``state``, when given); move the run's counters (in the same transaction)."""
        return self.put_outcomes([outcome], states=() if state is None else (state,))

    def put_outcomes(
        self, outcomes: Sequence[UrlOutcome], *, states: Sequence[UrlState] = ()
    ) -> RunStatus | None:
        """Record the outcomes of URLs of one run, each as the URL's latest outcome too, the
        harvest ``states`` of their URLs, and move the run's counters, all in one transaction.
        Raises ValueError when a state's URL has no outcome."""
        by_url = {state.url: state for state in states}
        stray = by_url.keys() - {outcome.url for outcome in outcomes}
        if stray:
            raise ValueError(f"no outcome to write the state of {min(stray)} with")
        if not outcomes:
            return None
        run_id = outcomes[0].run_id
        moves: list[tuple[str | None, str]] = []
        with self._lock:
            try:
                self._db.execute("BEGIN")
                for outcome in outcomes:
                    moves.append((self._write_outcome(outcome), outcome.outcome.value))
                for state in by_url.values():
                    self._db.execute(
                        "UPDATE urls SET source = ?, state = ? WHERE url = ?",
                        (state.source, _harvest_state(state), state.url),
                    )
                status = self._settle(run_id, moves, outcomes[-1].recorded_at)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise StorageError(
                    f"cannot record outcome of {outcomes[0].url} ({len(outcomes)} outcomes): {exc}"
                ) from exc
        return status

    def _write_outcome(self, outcome: UrlOutcome) -> str | None:
        """Write one outcome (lock held, in a transaction); return the outcome it replaced."""
        body = json.dumps(outcome_to_dict(outcome), sort_keys=True)
        new = outcome.outcome.value
        rows = self._db.execute(
            "SELECT outcome FROM url_outcomes WHERE run_id = ? AND url = ?",
            (outcome.run_id, outcome.url),
        ).fetchall()
        self._db.execute(
            "INSERT OR REPLACE INTO url_outcomes (run_id, url, outcome, body) VALUES (?, ?, ?, ?)",
            (outcome.run_id, outcome.url, new, body),
        )
        self._db.execute(
            "INSERT INTO urls (url, source, last_run, outcome, last_seen, body) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (url) DO UPDATE SET "
            "source = excluded.source, last_run = excluded.last_run, "
            "outcome = excluded.outcome, last_seen = excluded.last_seen, "
            "body = excluded.body",
            (outcome.url, outcome.source, outcome.run_id, new, outcome.recorded_at, body),
        )
        return str(rows[0][0]) if rows else None

    def _settle(
        self, run_id: str, moves: Sequence[tuple[str | None, str]], at: str | None
    ) -> RunStatus | None:
        """Move the run's counters for URLs whose outcome went ``old`` -> ``new`` (lock held)."""
        run = self._run_locked(run_id)
        if run is None:
            return None
        deltas = settle_moves(moves)
        if not deltas:
            return run
        entered = run.entered + deltas.pop("entered", 0)
        settled = run.settled + deltas.pop("settled", 0)
        counts = dict(run.outcomes)
        for name, n in deltas.items():
            counts[name] = counts.get(name, 0) + n
        self._db.execute(
            "UPDATE runs SET entered = ?, settled = ?, outcomes = ?, body = json_set(body, "
            "'$.updated_at', ?) WHERE run_id = ?",
            (entered, settled, json.dumps(counts, sort_keys=True), at, run_id),
        )
        return self._run_locked(run_id)

    def outcomes(self, run_id: str) -> Iterator[UrlOutcome]:
        """Yield the outcomes of ``run_id`` ordered by URL (a page at a time: see
        :meth:`_stream`)."""
        sql = "SELECT url, body FROM url_outcomes WHERE run_id = ? AND outcome != ?"
        for _, body in self._stream(sql, (run_id, QUEUED), "url"):
            yield outcome_from_dict(json.loads(body))

    def outcomes_page(
        self, run_id: str, *, limit: int, after: str | None = None, outcome: str | None = None
    ) -> Page[UrlOutcome]:
        """One page of the run's outcomes by URL (see the port); a position is the last URL
        read, ``_PAGE`` rows a query."""
        sql = "SELECT url, body FROM url_outcomes WHERE run_id = ? AND outcome != ?"
        params: tuple[object, ...] = (run_id, QUEUED)
        if outcome is not None:
            sql += " AND outcome = ?"
            params += (outcome,)
        rows = self._stream(sql, params, "url", after=None if after is None else (after,))
        listed = ((url, outcome_from_dict(json.loads(body))) for url, body in rows)
        return fill_page(listed, limit=limit)

    def get_url(self, url: str) -> UrlState | None:
        """Return what is known about ``url``, or None."""
        rows = self._query(
            "SELECT url, source, outcome, last_run, last_seen, state FROM urls WHERE url = ?",
            (url,),
        )
        return _url_state(rows[0]) if rows else None

    def get_urls(self, urls: Sequence[str]) -> dict[str, UrlState]:
        """Return what is known about each of ``urls``, by URL (one query per 500 URLs)."""
        found: dict[str, UrlState] = {}
        unique = list(dict.fromkeys(urls))
        for start in range(0, len(unique), _IN_CHUNK):
            chunk = unique[start : start + _IN_CHUNK]
            rows = self._query(
                "SELECT url, source, outcome, last_run, last_seen, state FROM urls "
                f"WHERE url IN ({','.join('?' * len(chunk))})",
                tuple(chunk),
            )
            found.update((str(row[0]), _url_state(row)) for row in rows)
        return found

    def put_url(self, state: UrlState) -> None:
        """Store the harvest state of ``state.url``; its outcome fields are not touched."""
        self._execute(
            "INSERT INTO urls (url, source, last_run, outcome, body, state) "
            "VALUES (?, ?, '', '', '{}', ?) ON CONFLICT (url) DO UPDATE SET "
            "source = excluded.source, state = excluded.state",
            (state.url, state.source, _harvest_state(state)),
        )

    def urls(self, source: str, *, outcome: str | None = None) -> Iterator[UrlState]:
        """Yield the state of every URL of ``source`` (with latest outcome ``outcome``),
        ordered by URL (a page at a time: see :meth:`_stream`)."""
        sql = "SELECT url, source, outcome, last_run, last_seen, state FROM urls WHERE source = ?"
        params: tuple[object, ...] = (source,)
        if outcome is not None:
            sql += " AND outcome = ?"
            params = (source, outcome)
        for row in self._stream(sql, params, "url"):
            yield _url_state(row)

    def source_urls(self, source: str) -> Iterator[str]:
        """Yield every URL of ``source``, ordered by URL (a page at a time)."""
        for row in self._stream("SELECT url FROM urls WHERE source = ?", (source,), "url"):
            yield str(row[0])

    # Runs -------------------------------------------------------------------------------

    def start_run(self, run: RunStatus) -> None:
        """Record a new run (an existing run id is left as it is)."""
        data = run_to_dict(run)
        self._execute(
            "INSERT OR IGNORE INTO runs (run_id, source_id, started_at, state, entered, "
            "settled, sitemaps, outcomes, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.run_id,
                run.source_id,
                run.started_at,
                run.state.value,
                run.entered,
                run.settled,
                run.sitemaps,
                json.dumps({k: v for k, v in run.outcomes.items() if v}, sort_keys=True),
                json.dumps(data, sort_keys=True),
            ),
        )

    def get_run(self, run_id: str) -> RunStatus | None:
        """Return the status of ``run_id``, or None."""
        with self._lock:
            try:
                return self._run_locked(run_id)
            except sqlite3.Error as exc:
                raise StorageError(f"catalogue read failed: {exc}") from exc

    def runs(
        self, source_id: str | None = None, *, state: RunState | None = None, limit: int = 100
    ) -> list[RunStatus]:
        """Return runs newest first (of one source, in one state, when given)."""
        sql = f"SELECT {_RUN_COLUMNS} FROM runs WHERE 1 = 1"
        params: list[object] = []
        if source_id is not None:
            sql += " AND source_id = ?"
            params.append(source_id)
        if state is not None:
            sql += " AND state = ?"
            params.append(state.value)
        sql += " ORDER BY started_at DESC, run_id DESC LIMIT ?"
        params.append(limit)
        return [_run_of(row) for row in self._query(sql, tuple(params))]

    def enter_urls(
        self,
        run_id: str,
        urls: Sequence[str],
        *,
        step: str,
        settled: Sequence[UrlOutcome] = (),
    ) -> list[str]:
        """Note that ``urls`` enter the run; return those new to it or entered by ``step``.
        The URLs of ``settled`` enter with their outcome (see the port)."""
        handed: list[str] = []
        outcomes = {outcome.url: outcome for outcome in settled}
        with self._lock:
            try:
                self._db.execute("BEGIN")
                new = 0
                moves: list[tuple[str | None, str]] = []
                for url in dict.fromkeys([*urls, *outcomes]):
                    rows = self._db.execute(
                        "SELECT step, outcome FROM url_outcomes WHERE run_id = ? AND url = ?",
                        (run_id, url),
                    ).fetchall()
                    if url in outcomes:
                        if not rows or (rows[0][0] == step and rows[0][1] == QUEUED):
                            old = self._write_outcome(outcomes[url])
                            self._db.execute(
                                "UPDATE url_outcomes SET step = ? WHERE run_id = ? AND url = ?",
                                (step, run_id, url),
                            )
                            moves.append((old, outcomes[url].outcome.value))
                        continue
                    if not rows:
                        self._db.execute(
                            "INSERT INTO url_outcomes (run_id, url, outcome, body, step) "
                            "VALUES (?, ?, ?, '{}', ?)",
                            (run_id, url, QUEUED, step),
                        )
                        new += 1
                        handed.append(url)
                    elif rows[0][0] == step:
                        handed.append(url)
                self._db.execute(
                    "UPDATE runs SET entered = entered + ? WHERE run_id = ?", (new, run_id)
                )
                if moves:
                    self._settle(run_id, moves, settled[-1].recorded_at)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise StorageError(f"cannot enter URLs into run {run_id}: {exc}") from exc
        return handed

    def count_sitemaps(
        self, run_id: str, delta: int, *, step: str, sitemap: str | None = None
    ) -> RunStatus | None:
        """Add ``delta`` to the pending sitemap jobs once per ``step``."""
        with self._lock:
            try:
                self._db.execute("BEGIN")
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO run_steps (run_id, step, sitemap) VALUES (?, ?, ?)",
                    (run_id, step, sitemap),
                )
                if cursor.rowcount:
                    self._db.execute(
                        "UPDATE runs SET sitemaps = sitemaps + ? WHERE run_id = ?",
                        (delta, run_id),
                    )
                status = self._run_locked(run_id)
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise StorageError(f"cannot count sitemaps of run {run_id}: {exc}") from exc
        return status

    def run_sitemaps(self, run_id: str) -> list[str]:
        """Return the sitemaps the run has read, sorted."""
        rows = self._query(
            "SELECT DISTINCT sitemap FROM run_steps WHERE run_id = ? AND sitemap IS NOT NULL "
            "ORDER BY sitemap",
            (run_id,),
        )
        return [row[0] for row in rows]

    def finish_run(self, run_id: str, *, at: str, state: RunState = RunState.FINISHED) -> bool:
        """Mark a running or stalled run ``state``; True for the one call that did."""
        field_name = "finished_at" if state is RunState.FINISHED else "updated_at"
        with self._lock:
            try:
                cursor = self._db.execute(
                    "UPDATE runs SET state = ?, body = json_set(body, ?, ?) "
                    "WHERE run_id = ? AND state != ? AND state != ?",
                    (state.value, f"$.{field_name}", at, run_id, state.value, "finished"),
                )
            except sqlite3.Error as exc:
                raise StorageError(f"cannot finish run {run_id}: {exc}") from exc
        return cursor.rowcount == 1

    def close_run(self, run_id: str, *, at: str, report_key: str | None) -> None:
        """Note that the end of the run was dealt with."""
        self._execute(
            "UPDATE runs SET body = json_set(body, '$.closed_at', ?, '$.report_key', ?) "
            "WHERE run_id = ?",
            (at, report_key, run_id),
        )

    def recount_run(self, run_id: str, *, at: str) -> RunStatus | None:
        """Set the run's URL counters from its outcome rows."""
        with self._lock:
            try:
                rows = self._db.execute(
                    "SELECT outcome, COUNT(*) FROM url_outcomes WHERE run_id = ? GROUP BY outcome",
                    (run_id,),
                ).fetchall()
                counts = {str(o): int(n) for o, n in rows if o != QUEUED}
                entered = sum(int(n) for _, n in rows)
                self._db.execute(
                    "UPDATE runs SET entered = ?, settled = ?, outcomes = ?, "
                    "body = json_set(body, '$.updated_at', ?) WHERE run_id = ?",
                    (entered, sum(counts.values()), json.dumps(counts), at, run_id),
                )
                return self._run_locked(run_id)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot recount run {run_id}: {exc}") from exc

    def _run_locked(self, run_id: str) -> RunStatus | None:
        rows = self._db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)
        ).fetchall()
        return _run_of(rows[0]) if rows else None

    # Sources ----------------------------------------------------------------------------

    def put_source(self, source: Source) -> None:
        """Insert or replace ``source`` (its run under way is kept as the registry holds it)."""
        self._execute(
            "INSERT INTO sources (source_id, active_run, body) VALUES (?, ?, ?) "
            "ON CONFLICT (source_id) DO UPDATE SET body = excluded.body",
            (source.source_id, source.active_run, json.dumps(source_to_dict(source))),
        )

    def add_source(self, source: Source) -> bool:
        """Insert ``source`` unless its id is registered already."""
        with self._lock:
            try:
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO sources (source_id, active_run, body) VALUES (?, ?, ?)",
                    (source.source_id, source.active_run, json.dumps(source_to_dict(source))),
                )
            except sqlite3.Error as exc:
                raise StorageError(f"cannot add source {source.source_id}: {exc}") from exc
        return cursor.rowcount == 1

    def get_source(self, source_id: str) -> Source | None:
        """Return the source named ``source_id``, or None."""
        rows = self._query("SELECT body, active_run FROM sources WHERE source_id = ?", (source_id,))
        return _source_of(rows[0]) if rows else None

    def sources(self) -> list[Source]:
        """Return every registered source, by id."""
        rows = self._query("SELECT body, active_run FROM sources ORDER BY source_id", ())
        return [_source_of(row) for row in rows]

    def delete_source(self, source_id: str) -> bool:
        """Remove a source; False when there was none."""
        with self._lock:
            try:
                cursor = self._db.execute("DELETE FROM sources WHERE source_id = ?", (source_id,))
            except sqlite3.Error as exc:
                raise StorageError(f"cannot remove source {source_id}: {exc}") from exc
        return cursor.rowcount == 1

    def claim_source(self, source_id: str, run_id: str, *, at: str) -> bool:
        """Make ``run_id`` the source's run under way unless another one is."""
        with self._lock:
            try:
                cursor = self._db.execute(
                    "UPDATE sources SET active_run = ?, body = json_set(body, "
                    "'$.last_run_id', ?, '$.last_run_at', ?) "
                    "WHERE source_id = ? AND (active_run IS NULL OR active_run = ?)",
                    (run_id, run_id, at, source_id, run_id),
                )
            except sqlite3.Error as exc:
                raise StorageError(f"cannot claim source {source_id}: {exc}") from exc
        return cursor.rowcount == 1

    def release_source(self, source_id: str, run_id: str) -> None:
        """End ``run_id`` as the source's run under way."""
        self._execute(
            "UPDATE sources SET active_run = NULL WHERE source_id = ? AND active_run = ?",
            (source_id, run_id),
        )

    def _execute(self, sql: str, params: tuple[object, ...]) -> None:
        with self._lock:
            try:
                self._db.execute(sql, params)
            except sqlite3.Error as exc:
                raise StorageError(f"catalogue write failed: {exc}") from exc

    def _stream(
        self,
        sql: str,
        params: tuple[object, ...],
        key: str,
        *,
        after: tuple[object, ...] | None = None,
    ) -> Iterator[tuple[Any, ...]]:
        """Yield the rows of ``sql`` (a SELECT ending in a WHERE clause, whose first columns are
        the unique ``key``: one column, or several as ``"a, b"``) in ``key`` order, ``_PAGE``
        rows a query, starting after the key ``after`` when given.

        A run's outcomes, a source's URLs or records may be hundreds of thousands of rows: they
        are never all in memory. The lock is held per page only, so the reader may write the
        catalogue between rows (closing a run withdraws URLs as it reads them); each page starts
        after the last key read, so a row is never yielded twice.
        """
        width = key.count(",") + 1
        holders = ", ".join("?" * width)
        while True:
            page = sql if after is None else f"{sql} AND ({key}) > ({holders})"
            args = params if after is None else (*params, *after)
            rows = self._query(f"{page} ORDER BY {key} LIMIT {_PAGE}", args)
            yield from rows
            if len(rows) < _PAGE:
                return
            after = tuple(rows[-1][:width])

    def _query(self, sql: str, params: tuple[object, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return list(self._db.execute(sql, params).fetchall())
            except sqlite3.Error as exc:
                raise StorageError(f"catalogue read failed: {exc}") from exc


def _change_position(after: str) -> tuple[str, str]:
    """The ``[changed_at, record_id]`` a page of :meth:`SqliteCatalog.records_page` gave."""
    try:
        position = json.loads(after)
    except ValueError:
        position = None
    if (
        not isinstance(position, list)
        or len(position) != 2
        or not all(isinstance(part, str) for part in position)
    ):
        raise ValueError(f"not a position of this catalogue's listings: {after[:80]!r}")
    return position[0], position[1]


def _harvest_state(state: UrlState) -> str:
    """The ``state`` column of a URL: its harvest state less the fields that follow outcomes."""
    harvest = {k: v for k, v in url_state_to_dict(state).items() if k not in _OUTCOME_FIELDS}
    return json.dumps(harvest, sort_keys=True)


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


def _run_of(row: tuple[Any, ...]) -> RunStatus:
    run_id, state, entered, settled, sitemaps, outcomes, body = row
    data = json.loads(body)
    data.update(
        run_id=run_id,
        state=state,
        entered=entered,
        settled=settled,
        sitemaps=sitemaps,
        outcomes=json.loads(outcomes or "{}"),
    )
    return run_from_dict(data)


def _source_of(row: tuple[Any, ...]) -> Source:
    body, active_run = row
    data = json.loads(body)
    data["active_run"] = active_run
    return source_from_dict(data)
