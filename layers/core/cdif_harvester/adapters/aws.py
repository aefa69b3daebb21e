"""AWS adapters: S3 as object store, DynamoDB as catalogue and host gate, SQS as job queue.

Clients are passed in (built lazily by :mod:`cdif_harvester.aws_runtime`), never created at
import time. Every call runs inside :func:`~cdif_harvester.adapters.aws_errors.aws_errors`, which
wraps botocore errors in :class:`~cdif_harvester.errors.StorageError`, a retryable error; only the
codes that are answers (a missing object, a failed condition) are caught by name, where they are
asked for. The catalogue is one DynamoDB table (``pk``/``sk``, index ``gsi1``) keyed by the
hashes of :mod:`cdif_harvester.keys`.

See docs/decisions/0003-dynamodb-single-table.md for the table layout and
docs/decisions/0042-one-aws-error-mapper.md for the error mapping.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from cdif_harvester.adapters.aws_errors import (
    CONDITION_FAILED,
    aws_errors,
)
from cdif_harvester.adapters.batch_sends import packs
from cdif_harvester.adapters.dynamo_items import (
    entry_of,
    entry_url,
    outcome_body,
    outcome_of,
    record_item,
    state_body,
    state_of,
)
from cdif_harvester.adapters.dynamo_runs import (
    ENTRY_FIELDS,
    DynamoRuns,
    DynamoSources,
    settle_slot,
    settle_uncounted,
)
from cdif_harvester.errors import StorageError
from cdif_harvester.external_sort import sorted_pairs
from cdif_harvester.keys import parse_segment_ref, record_hash, url_hash
from cdif_harvester.model import (
    QUEUED,
    CatalogEntry,
    Page,
    ProfileQuery,
    RunStatus,
    UrlOutcome,
    UrlState,
    fill_page,
    keeper,
    settle_moves,
)
from cdif_harvester.ports import HostSlot, Wait

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_sqs.client import SQSClient

__all__ = ["DynamoCatalog", "DynamoHostGate", "S3ObjectStore", "SqsQueue"]

SQS_BATCH_ENTRIES = 10  # SendMessageBatch takes at most ten entries
#: The classic SQS limit on one message and on the sum of the messages of one SendMessageBatch
#: (bodies and attributes). Our messages stay under MAX_MESSAGE_BYTES (200 KiB) of contracts.py.
SQS_REQUEST_BYTES = 256 * 1024
_BATCH_GET = 100  # BatchGetItem takes at most 100 keys
_URL_STATE_CHUNK = 10 * _BATCH_GET  # URLs whose states are read before they are yielded
_BATCH_TRIES = 8
_TRANSACTION_ITEMS = 100  # the DynamoDB limit on one TransactWriteItems call
# Outcome writes read the items, then write them conditionally; a redelivered job racing this
# one can make the condition fail, and then it is read again (a few times at most).
_SETTLE_TRIES = 5
# Record entries whose URL a catalogue remembers (about 200 bytes each): an index job reads
# or writes a few hundred before it writes its URLs' states, which use them up.
_NAMED_MEMO = 20_000
_SQS_MAX_DELAY = 900  # seconds, the SQS limit on DelaySeconds
_SQS_MAX_VISIBILITY = 43_200  # seconds, the SQS limit on a message's visibility timeout
# The codes S3 answers for a key that holds no object: GetObject says NoSuchKey (or a bare 404
# through some endpoints); HeadObject has no body, so only its status: 404 / NotFound.
_NO_SUCH_KEY = frozenset({"NoSuchKey", "404"})
_NOT_FOUND = frozenset({"404", "NoSuchKey", "NotFound"})


class S3ObjectStore:
    """Objects in one S3 bucket, under the documented key layout."""

    def __init__(self, client: S3Client, bucket: str) -> None:
        self.client = client
        self.bucket = bucket

    def put(
        self,
        key: str,
        body: bytes,
        *,
        content_type: str = "application/octet-stream",
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Put ``body`` under ``key``. Raises StorageError."""
        with aws_errors(f"S3 put {key}"):
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType=content_type,
                Metadata=dict(metadata or {}),
            )

    def get(self, key: str) -> bytes:
        """Get the object under ``key``, or the range of a segment a reference
        ``<key>#<offset>-<length>`` names (one ranged GET). Raises KeyError when absent (or the
        segment is shorter than the range), StorageError otherwise."""
        ranged = parse_segment_ref(key)
        passing = _NO_SUCH_KEY if ranged is None else _NO_SUCH_KEY | {"InvalidRange"}
        try:
            with aws_errors(f"S3 get {key}", passing=passing):
                if ranged is None:
                    response = self.client.get_object(Bucket=self.bucket, Key=key)
                    return response["Body"].read()
                segment, offset, length = ranged
                last = offset + length - 1
                response = self.client.get_object(
                    Bucket=self.bucket, Key=segment, Range=f"bytes={offset}-{last}"
                )
                body = response["Body"].read()
        except ClientError as exc:  # no object under that key: the port's KeyError
            raise KeyError(key) from exc
        if len(body) != length:  # (S3 answers what it has of a range past the end)
            raise KeyError(key)
        return body

    def exists(self, key: str) -> bool:
        """Tell whether ``key`` holds an object (HEAD). Raises StorageError."""
        try:
            with aws_errors(f"S3 head {key}", passing=_NOT_FOUND):
                self.client.head_object(Bucket=self.bucket, Key=key)
            return True
        except ClientError:  # no object under that key (a HEAD answer has no body, only 404)
            return False

    def list(self, prefix: str) -> Iterator[str]:
        """Yield the keys under ``prefix`` (S3 lists in key order). Raises StorageError."""
        with aws_errors(f"S3 list {prefix}"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield item["Key"]


class DynamoCatalog(DynamoRuns, DynamoSources):
    """The catalogue in one DynamoDB table (see the module docstring for the item layout, and
    :mod:`cdif_harvester.adapters.dynamo_runs` for runs and sources)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        # Record id -> (URL, source) its entry named when this catalogue last read or wrote
        # it: what tells, when a URL's state is written, whether a record entry lists the URL
        # already (then its LATEST item stays out of gsi1: decision 0102).
        self._named: dict[str, tuple[str, str]] = {}

    def put_record(self, entry: CatalogEntry) -> None:
        """Insert or replace the entry of ``entry.record_id``. An entry that named another URL
        before puts that URL back in the source's listing (decision 0102)."""
        old = self._put(record_item(entry), returning=True)
        self._note(entry)
        if old is None or "body" not in old:
            return
        try:
            before = entry_of(old)
        except (TypeError, KeyError, ValueError):  # an item no reader can read named no URL
            return
        if before.url and (before.url, before.source) != (entry.url, entry.source):
            self._relist(before.url, before.source)

    def get_record(self, record_id: str) -> CatalogEntry | None:
        """Return the entry of ``record_id``, or None."""
        found = self._get({"pk": f"RECORD#{record_hash(record_id)}", "sk": "RECORD"})
        return self._note(entry_of(found)) if found else None

    def peek_record(self, record_id: str) -> CatalogEntry | None:
        """:meth:`get_record`, eventually consistent (half the read units)."""
        key = {"pk": f"RECORD#{record_hash(record_id)}", "sk": "RECORD"}
        found = self._get(key, consistent=False)
        return self._note(entry_of(found)) if found else None

    def _note(self, entry: CatalogEntry) -> CatalogEntry:
        """Remember which URL ``entry`` names (a bounded memo: forgetting costs a write unit
        at most, an index entry kept that a record entry made needless)."""
        if len(self._named) >= _NAMED_MEMO:
            self._named.clear()
        self._named[entry.record_id] = (entry.url, entry.source)
        return entry

    def _named_by_records(self, state: UrlState) -> bool:
        """Whether an entry of one of ``state``'s records names its URL (in its source), as
        this catalogue last read or wrote the entries; the memo's entries are used up."""
        named = [self._named.pop(record_id, None) for record_id in state.record_ids]
        return (state.url, state.source) in named

    def _relist(self, url: str, source: str) -> None:
        """Put ``url``'s LATEST item back in ``gsi1`` (a record entry that named it names
        another URL now); a URL without a LATEST item is left alone."""
        try:
            with aws_errors(f"DynamoDB relist {url}", passing={CONDITION_FAILED}):
                self.table.update_item(
                    Key={"pk": f"URL#{url_hash(url)}", "sk": "LATEST"},
                    UpdateExpression="SET gsi1pk = :pk, gsi1sk = :sk",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={
                        ":pk": f"SOURCE#{source}",
                        ":sk": f"URL#{url_hash(url)}",
                    },
                )
        except ClientError:  # the condition failed: no LATEST item to list
            return

    def records(
        self,
        source: str,
        *,
        changed_since: str | None = None,
        query: ProfileQuery | None = None,
    ) -> Iterator[CatalogEntry]:
        """Yield the entries of ``source`` (changed at or after ``changed_since``, kept by the
        profile ``query``), by id. The query is applied to the entries read: a DynamoDB filter
        would cost the same reads."""
        condition, values = _records_condition(source, changed_since)
        # The index yields them by date of change: ordered by id on local disk past 10,000
        # (external_sort), so a large source is not held in memory to be sorted (decision 0104).
        kept = (
            entry
            for entry in map(entry_of, self._index_items(condition, values))
            if query is None or query.matches(entry)
        )
        for _, entry in sorted_pairs((entry.record_id, entry) for entry in kept):
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
        """One page of ``source``'s entries in ``gsi1``'s order (date of change, then the
        index's own), read from where the page before ended (see the port): no more than the
        page needs, where :meth:`records` reads the whole source to order it by id. A position
        is the index keys of an entry, ``[gsi1sk, pk]`` as JSON. Raises ValueError for
        another, or one outside ``changed_since``."""
        condition, values = _records_condition(source, changed_since)
        start = _index_start(after, values) if after is not None else None
        keep = keeper(query)
        items = self._index_items(
            condition, values, start=start, size=_query_size(limit, filtered=keep is not None)
        )
        listed = ((json.dumps([item["gsi1sk"], item["pk"]]), entry_of(item)) for item in items)
        return fill_page(listed, limit=limit, keep=keep)

    def put_outcome(
        self, outcome: UrlOutcome, *, state: UrlState | None = None
    ) -> RunStatus | None:
        """Record the outcome of a URL in a run, and as the URL's latest outcome (with its
        harvest ``state``, when given); move the run's counters once (see
        :meth:`put_outcomes`)."""
        return self.put_outcomes([outcome], states=() if state is None else (state,))

    def put_outcomes(
        self, outcomes: Sequence[UrlOutcome], *, states: Sequence[UrlState] = ()
    ) -> RunStatus | None:
        """Record the outcomes of URLs of one run and move the run's counters: each item is a
        put conditional on the item it replaces, and each chunk of 99 moves the counters in one
        small transaction with a marker naming the items it counts, so a retry after any crash
        moves the counters exactly once (decision 0094). Then the URLs' latest outcomes, each
        with its URL's state of ``states`` in the same UpdateItem (decision 0092); return the
        run's status (None when it is not tracked).

        Raises StorageError when a write fails (a transaction cancelled by a conflict
        included), ValueError when a state's URL has no outcome.
        """
        by_url = {state.url: state for state in states}
        if not outcomes:
            if by_url:
                raise ValueError(f"no outcome to write the state of {next(iter(by_url))} with")
            return None
        run_id = outcomes[0].run_id
        # One item per URL in a chunk: the last outcome given for a URL is the one kept.
        latest = list({outcome.url: outcome for outcome in outcomes}.values())
        stray = by_url.keys() - {outcome.url for outcome in latest}
        if stray:
            raise ValueError(f"no outcome to write the state of {min(stray)} with")
        # (a chunk's items are slots of one marker; a count of items replaced before they
        # were counted holds a marker for each chunk that wrote them, and the run)
        step = _TRANSACTION_ITEMS - 1
        for start in range(0, len(latest), step):
            self._settle_outcomes(run_id, latest[start : start + step])
        self._write_latests(latest, by_url)
        return self.get_run(run_id)

    def _settle_entered(self, late: Sequence[UrlOutcome], mine: Sequence[UrlOutcome]) -> None:
        """After :meth:`enter_urls`: settle ``late`` as :meth:`put_outcomes` does, and write the
        URLs' latest outcomes of ``mine`` (entered settled)."""
        if late:
            self.put_outcomes(late)
        self._write_latests(mine)

    def _write_latests(
        self, outcomes: Sequence[UrlOutcome], states: Mapping[str, UrlState] | None = None
    ) -> None:
        """Write each of ``outcomes`` as its URL's latest outcome, with its state of ``states``
        (by URL): always when there is a state, else unless the item holds the outcome."""
        states = states or {}
        held = self._latest_outcomes([o.url for o in outcomes if o.url not in states])
        for outcome in outcomes:
            state = states.get(outcome.url)
            if state is not None:
                # A state is news whatever the outcome (at least its harvest run; after a crash
                # between the run's transaction and this write, the state the retry brings).
                # A URL one of whose record entries names it is listed through that entry.
                self._write_latest(outcome, state, listed=not self._named_by_records(state))
                continue
            found = held.get(outcome.url)
            # The same outcome again (an unchanged URL re-harvested) changes nothing the item
            # says but its run and time: not written, so a re-harvest pays a read, not a write.
            if found is None or found[0] != outcome.outcome.value:
                # (an item held out of gsi1 stays out: its state, and so the record entries
                # that list it, did not change)
                self._write_latest(outcome, listed=True if found is None else found[1])

    def _settle_outcomes(self, run_id: str, outcomes: Sequence[UrlOutcome]) -> None:
        """Write the run's items of ``outcomes`` (one chunk) and move the run's counters once.

        Each item is a plain put conditional on the item it replaces (read just before), naming
        this chunk and its slot there (``settle``: ``<chunk>#<slot>``) and the outcome it
        replaced (``was``); one small transaction then counts the chunk's moves with a
        ``SETTLE#`` marker naming the slots counted. An item replaced before its move was
        counted (a crash between a put and its count) is counted first: its move would be lost
        with it. A put refused (a redelivered job racing this one) is read again. See
        docs/decisions/0094-settling-at-one-write-unit.md.
        """
        at = outcomes[-1].recorded_at or ""
        for attempt in range(_SETTLE_TRIES):
            # Read eventually consistent first (half the price): every write below is
            # conditional on the item read, so an item read stale is refused and read again,
            # strongly, as one a racing job changed is.
            urls = [outcome.url for outcome in outcomes]
            found = self._held_items(run_id, urls, consistent=attempt > 0)
            # The held items whose move may not be counted yet: counted now, before any is
            # replaced (an untracked run counts nothing).
            uncounted = {url: item for url, item in found.items() if settle_uncounted(item)}
            if uncounted:
                self._count_slots(
                    run_id,
                    {url: settle_slot(item) for url, item in uncounted.items()},
                    prefix="SETTLE#",
                    fresh=(),
                    adds=partial(_moves_of, uncounted),
                    at=at,
                    what=f"record outcomes of run {run_id}",
                )
            items = [self._outcome_item(outcome) for outcome in outcomes]
            digest = _settle_digest(items, [found.get(outcome.url) for outcome in outcomes])
            puts: list[tuple[dict[str, Any], str, dict[str, Any]]] = []
            for slot, item in enumerate(items):
                held = found.get(str(item["url"]))
                if held is not None:
                    if held["outcome"] == item["outcome"] and held.get("body") == item["body"]:
                        continue  # the item holds this outcome already: nothing to write
                    item.update({name: held[name] for name in ENTRY_FIELDS if name in held})
                    if held["outcome"] != QUEUED:  # (left out for the usual one: 1 KB items)
                        item["was"] = str(held["outcome"])
                else:
                    item["was"] = ""  # it enters the run as it settles
                item["settle"] = f"{digest}#{slot}"
                puts.append((item, *_replacing(held)))
            refused = [
                old
                for (item, _, _), old in zip(
                    puts, self._put_all(puts, what="record outcome"), strict=True
                )
                # (a put refused because it was made already, by a copy of this very try
                # or by a retry of the call, holds this try's chunk and slot: put)
                if old is not None and old.get("settle") != item["settle"]
            ]
            if refused:
                continue  # an item changed since it was read: read again (what was put is
                # counted then, as held items not counted yet)
            moved = {str(item["url"]): item for item, _, _ in puts if settle_uncounted(item)}
            if moved:
                # (this chunk's markers are not read first: they cannot exist yet, unless a
                # racing copy counted, whose marker then refuses this one)
                self._count_slots(
                    run_id,
                    {url: settle_slot(item) for url, item in moved.items()},
                    prefix="SETTLE#",
                    fresh=(digest,),
                    adds=partial(_moves_of, moved),
                    at=at,
                    what=f"record outcomes of run {run_id}",
                )
            return
        raise StorageError(
            f"DynamoDB record outcomes of run {run_id} failed: the items kept changing"
        )

    def _held_items(
        self, run_id: str, urls: Sequence[str], *, consistent: bool = True
    ) -> dict[str, dict[str, Any]]:
        """Each URL's item of the run that holds an outcome (``queued`` included), by URL."""
        keys = [{"pk": f"RUN#{run_id}", "sk": f"URL#{url_hash(url)}"} for url in urls]
        return {
            str(item["url"]): item
            for item in self._batch_get(keys, consistent=consistent)
            if "url" in item and "outcome" in item
        }

    @staticmethod
    def _outcome_item(outcome: UrlOutcome) -> dict[str, Any]:
        return {
            "pk": f"RUN#{outcome.run_id}",
            "sk": f"URL#{url_hash(outcome.url)}",
            "url": outcome.url,
            "outcome": outcome.outcome.value,
            "body": outcome_body(outcome),
        }

    def _latest_outcomes(self, urls: Sequence[str]) -> dict[str, tuple[str, bool | None]]:
        """The latest outcome each URL's LATEST item holds and whether the item is in
        ``gsi1`` (True) or left out of it (None: left as it is), by URL (URLs without one left
        out).

        Read eventually consistent (half the units): a value read is one the item held, so a
        write skipped on a read a moment old is a write that came before a concurrent job's,
        an order concurrent jobs may have anyway.
        """
        held: dict[str, tuple[str, bool | None]] = {}
        urls = list(dict.fromkeys(urls))
        for start in range(0, len(urls), _BATCH_GET):
            keys = [
                {"pk": f"URL#{url_hash(url)}", "sk": "LATEST"}
                for url in urls[start : start + _BATCH_GET]
            ]
            for item in self._batch_get(keys, consistent=False):
                if "url" in item and "outcome" in item:
                    listed = True if "gsi1sk" in item else None
                    held[str(item["url"])] = (str(item["outcome"]), listed)
        return held

    def _write_latest(
        self, outcome: UrlOutcome, state: UrlState | None = None, *, listed: bool | None
    ) -> None:
        """Write ``outcome`` as the URL's latest outcome, and ``state`` as its harvest state
        when given (else the state held is kept): one UpdateItem either way.

        ``listed`` puts the item in ``gsi1`` (True), takes it out (False: a record entry lists
        the URL, decision 0102) or leaves it as it is (None). The index key leaves the outcome
        out, so a changed outcome does not move the URL in ``gsi1`` (a delete and a put there);
        the source is the index key's. Older items' outcome body and source attribute go.
        """
        values = {
            "url": outcome.url,
            "outcome": outcome.outcome.value,
            "last_run": outcome.run_id,
            "last_seen": outcome.recorded_at or "",
            "gsi1pk": f"SOURCE#{outcome.source}",
        }
        if listed:
            values["gsi1sk"] = f"URL#{url_hash(outcome.url)}"
        if state is not None:
            values["state"] = state_body(state)
        self._update(
            {"pk": f"URL#{url_hash(outcome.url)}", "sk": "LATEST"},
            values,
            remove=("body", "source") if listed is not False else ("body", "source", "gsi1sk"),
        )

    def outcomes(self, run_id: str) -> Iterator[UrlOutcome]:
        """Yield every outcome of ``run_id`` (paginated query on the run's partition)."""
        for _, outcome in self._run_urls(run_id, None):
            if outcome is not None:
                yield outcome

    def outcomes_page(
        self, run_id: str, *, limit: int, after: str | None = None, outcome: str | None = None
    ) -> Page[UrlOutcome]:
        """One page of the run's outcomes in its partition's order (by URL hash), from where
        the page before ended (see the port); a position is a URL item's ``sk``
        (``URL#<hash>``). Raises ValueError for another."""
        if after is not None and not _URL_SK.fullmatch(after):
            raise ValueError(f"not a position of this listing: {after[:80]!r}")
        listed = self._run_urls(
            run_id, after, size=_query_size(limit, filtered=outcome is not None)
        )
        return fill_page(
            listed,
            limit=limit,
            keep=None if outcome is None else (lambda item: item.outcome.value == outcome),
        )

    def _run_urls(
        self, run_id: str, after: str | None, *, size: int | None = None
    ) -> Iterator[tuple[str, UrlOutcome | None]]:
        """The run's URL items after the ``sk`` ``after``, each with its ``sk`` and its outcome
        (None while queued), a page (1 MB, or ``size`` items) a query."""
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :url)",
            "ExpressionAttributeValues": {":pk": f"RUN#{run_id}", ":url": "URL#"},
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = {"pk": f"RUN#{run_id}", "sk": after}
        if size is not None:
            kwargs["Limit"] = size
        while True:
            with aws_errors(f"DynamoDB query run {run_id}"):
                page = self.table.query(**kwargs)
            for item in page.get("Items", []):
                queued = item.get("outcome") == QUEUED
                yield str(item["sk"]), None if queued else outcome_of(item, run_id)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def get_url(self, url: str) -> UrlState | None:
        """Return what is known about ``url``, or None."""
        found = self._get({"pk": f"URL#{url_hash(url)}", "sk": "LATEST"})
        return state_of(found) if found else None

    def peek_url(self, url: str) -> UrlState | None:
        """:meth:`get_url`, eventually consistent (half the read units)."""
        found = self._get({"pk": f"URL#{url_hash(url)}", "sk": "LATEST"}, consistent=False)
        return state_of(found) if found else None

    def peek_urls(self, urls: Sequence[str]) -> dict[str, UrlState]:
        """:meth:`get_urls`, eventually consistent (half the read units)."""
        return self.get_urls(urls, consistent=False)

    def get_urls(self, urls: Sequence[str], *, consistent: bool = True) -> dict[str, UrlState]:
        """Return what is known about each of ``urls``, by URL (consistent BatchGetItem reads
        unless not ``consistent``, 100 keys a call; keys DynamoDB leaves unprocessed are asked
        again)."""
        found: dict[str, UrlState] = {}
        unique = list(dict.fromkeys(urls))
        for start in range(0, len(unique), _BATCH_GET):
            keys = [
                {"pk": f"URL#{url_hash(url)}", "sk": "LATEST"}
                for url in unique[start : start + _BATCH_GET]
            ]
            for item in self._batch_get(keys, consistent=consistent):
                if "url" in item:
                    found[str(item["url"])] = state_of(item)
        return found

    def _batch_get(
        self, keys: list[dict[str, Any]], *, consistent: bool = True
    ) -> Iterator[dict[str, Any]]:
        # The table's client is the resource's: it takes and gives plain Python values.
        client = self.table.meta.client
        name = self.table.name
        request: dict[str, Any] = {name: {"Keys": keys, "ConsistentRead": consistent}}
        for attempt in range(_BATCH_TRIES):
            with aws_errors("DynamoDB batch get of URLs"):
                response = client.batch_get_item(RequestItems=request)
            yield from response.get("Responses", {}).get(name, [])
            unprocessed = response.get("UnprocessedKeys") or {}
            if not unprocessed.get(name):
                return
            request = dict(unprocessed)
            time.sleep(min(0.05 * 2**attempt, 1.0))  # back off as DynamoDB asks
        raise StorageError("DynamoDB batch get of URLs left keys unprocessed after retries")

    def put_url(self, state: UrlState) -> None:
        """Store the harvest state of ``state.url``; its outcome attributes are not touched (a
        state that goes with an outcome is written with it: :meth:`put_outcomes`)."""
        self._update(
            {"pk": f"URL#{url_hash(state.url)}", "sk": "LATEST"},
            {
                "url": state.url,
                "state": state_body(state),
                "gsi1pk": f"SOURCE#{state.source}",  # (the source: see _write_latest)
            },
            remove=("source",),
        )

    def urls(self, source: str, *, outcome: str | None = None) -> Iterator[UrlState]:
        """Yield the state of every URL of ``source`` (with latest outcome ``outcome``), by URL:
        the states are read a batch at a time as the URLs are listed, not all held."""
        # The index is eventually consistent; read the items themselves for the latest state
        # (the outcome is asked of them too: older index keys held it, newer ones do not).
        listed = iter(self.source_urls(source))
        while chunk := list(itertools.islice(listed, _URL_STATE_CHUNK)):
            states = self.get_urls(chunk)
            for url in chunk:  # (in URL order, as listed)
                state = states.get(url)
                if state is not None and (outcome is None or state.outcome == outcome):
                    yield state

    def source_urls(self, source: str) -> Iterator[str]:
        """Yield every URL of ``source`` once, ordered by URL: read from ``gsi1`` alone, with
        no read of the items themselves. A URL is there as its LATEST item's entry (projecting
        the URL; keys URL#<url hash>, URL#<outcome>#<url hash> in older items) or, when one of
        its record entries names it, as that entry (decision 0102). Ordered on local disk past
        10,000 (external_sort): a large source is not held in memory (decision 0104)."""

        def listed(prefix: str) -> Iterator[dict[str, Any]]:
            return self._index_items(
                "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
                {":pk": f"SOURCE#{source}", ":prefix": prefix},
            )

        urls = itertools.chain(
            (str(item["url"]) for item in listed("URL#") if "url" in item),
            (url for url in map(entry_url, listed("RECORD#")) if url is not None),
        )
        for url, _ in sorted_pairs(((url, None) for url in urls), unique=True):
            yield url

    def _get(self, key: dict[str, str], *, consistent: bool = True) -> dict[str, Any] | None:
        with aws_errors(f"DynamoDB get {key['pk']}"):
            item = self.table.get_item(Key=key, ConsistentRead=consistent)
        return item.get("Item")

    def _update(
        self, key: dict[str, str], values: Mapping[str, str], *, remove: Sequence[str] = ()
    ) -> None:
        names = {f"#a{i}": name for i, name in enumerate(values)}
        expression = "SET " + ", ".join(f"#a{i} = :v{i}" for i in range(len(values)))
        if remove:
            names.update({f"#r{i}": name for i, name in enumerate(remove)})
            expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(remove)))
        with aws_errors(f"DynamoDB update {key['pk']}"):
            self.table.update_item(
                Key=key,
                UpdateExpression=expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={f":v{i}": v for i, v in enumerate(values.values())},
            )

    def _index_items(
        self,
        condition: str,
        values: dict[str, str],
        *,
        start: dict[str, str] | None = None,
        size: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The items of a ``gsi1`` query, read a page (1 MB, or ``size`` items) at a time as
        they are taken, after the index keys ``start`` when given."""
        kwargs: dict[str, Any] = {
            "IndexName": "gsi1",
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if start is not None:
            kwargs["ExclusiveStartKey"] = start
        if size is not None:
            kwargs["Limit"] = size
        while True:
            with aws_errors(f"DynamoDB query {values[':pk']}"):
                page = self.table.query(**kwargs)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _put(self, item: dict[str, Any], *, returning: bool = False) -> dict[str, Any] | None:
        """Put ``item``; with ``returning``, return the item it replaced (None: none), which
        DynamoDB gives at no extra cost."""
        with aws_errors(f"DynamoDB put {item['pk']}"):
            if not returning:
                self.table.put_item(Item=item)
                return None
            answer = self.table.put_item(Item=item, ReturnValues="ALL_OLD")
        return answer.get("Attributes") or None


def _query_size(limit: int, *, filtered: bool) -> int:
    """The items one query of a page reads (``Limit``): the page and the one item that says
    more follow; with a filter, at least 100 (fewer round trips; a page may read again what the
    query before it read past its end, so not the 1 MB a query would read without a limit)."""
    return limit + 1 if not filtered else max(limit + 1, 100)


_URL_SK = re.compile(r"URL#[0-9a-f]{32}")  # a run's URL item: URL# and the URL's hash


def _records_condition(source: str, changed_since: str | None) -> tuple[str, dict[str, str]]:
    """The ``gsi1`` key condition (and its values) of ``source``'s record entries, changed at or
    after ``changed_since`` when given."""
    if changed_since is None:
        condition = "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)"
        return condition, {":pk": f"SOURCE#{source}", ":prefix": "RECORD#"}
    # "~" sorts after every character of an ISO date, so this is "from then on".
    condition = "gsi1pk = :pk AND gsi1sk BETWEEN :since AND :end"
    return condition, {
        ":pk": f"SOURCE#{source}",
        ":since": f"RECORD#{changed_since}",
        ":end": "RECORD#~",
    }


def _index_start(after: str, values: Mapping[str, str]) -> dict[str, str]:
    """The ``ExclusiveStartKey`` of the position ``after`` (see records_page), checked to be a
    record entry's place in the listing of ``values``: DynamoDB refuses a start outside the
    query's keys, and that refusal would read as a fault, not as a bad request."""
    try:
        position = json.loads(after)
    except ValueError:
        position = None
    if isinstance(position, list) and len(position) == 2:
        index_key, key = position
        low, high = values.get(":since", "RECORD#"), values.get(":end", "RECORD#~")
        if (
            isinstance(index_key, str)
            and isinstance(key, str)
            and low <= index_key <= high
            and index_key.startswith("RECORD#")
            and key.startswith("RECORD#")
        ):
            return {"gsi1pk": values[":pk"], "gsi1sk": index_key, "pk": key, "sk": "RECORD"}
    raise ValueError(f"not a position of this listing: {after[:80]!r}")


class SqsQueue:
    """Sends to the stage queues, addressed by logical name (sitemap, url, document, index,
    render: each one whose URL is configured)."""

    def __init__(self, client: SQSClient, urls: Mapping[str, str]) -> None:
        self.client = client
        self.urls = dict(urls)

    def send(
        self, queue: str, bodies: Sequence[str], *, delays: Sequence[int] | None = None
    ) -> None:
        """Send ``bodies`` in order, in SendMessageBatch requests of at most ten messages and
        :data:`SQS_REQUEST_BYTES` together; any entry SQS rejects raises StorageError (the
        requests before it were sent).

        ``delays`` (seconds, one per body) become each entry's DelaySeconds, capped at 900.
        """
        try:
            url = self.urls[queue]
        except KeyError as exc:
            raise StorageError(f"no queue URL configured for {queue!r}") from exc
        sizes = [len(body.encode("utf-8")) for body in bodies]
        for pack in packs(sizes, entries=SQS_BATCH_ENTRIES, request_bytes=SQS_REQUEST_BYTES):
            entries: list[dict[str, Any]] = [
                {"Id": str(i), "MessageBody": bodies[index]} for i, index in enumerate(pack)
            ]
            if delays is not None:
                for entry, index in zip(entries, pack, strict=True):
                    entry["DelaySeconds"] = max(0, min(_SQS_MAX_DELAY, int(delays[index])))
            with aws_errors(f"SQS send to {queue}"):
                response = self.client.send_message_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
            failed = response.get("Failed", [])
            if failed:
                raise StorageError(f"SQS rejected {len(failed)} message(s) to {queue}: {failed}")

    def send_later(
        self, queue: str, body: str, *, delay: float, attributes: Mapping[str, str] | None = None
    ) -> None:
        """Send one message not to be delivered before ``delay`` seconds (rounded up, at most
        900), with string message ``attributes``. Raises StorageError."""
        url = self._url(queue)
        seconds = max(0, min(_SQS_MAX_DELAY, math.ceil(delay)))
        message_attributes = {
            name: {"DataType": "String", "StringValue": value}
            for name, value in (attributes or {}).items()
        }
        with aws_errors(f"SQS send to {queue}"):
            self.client.send_message(
                QueueUrl=url,
                MessageBody=body,
                DelaySeconds=seconds,
                MessageAttributes=message_attributes,  # type: ignore[arg-type]
            )

    def retry_later(self, queue: str, receipt_handle: str, *, delay: float) -> None:
        """Make a received message visible again only after ``delay`` seconds (rounded up,
        within the SQS limit of 12 hours). Raises StorageError."""
        url = self._url(queue)
        seconds = max(0, min(_SQS_MAX_VISIBILITY, math.ceil(delay)))
        with aws_errors(f"SQS visibility change on {queue}"):
            self.client.change_message_visibility(
                QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
            )

    def _url(self, queue: str) -> str:
        try:
            return self.urls[queue]
        except KeyError as exc:
            raise StorageError(f"no queue URL configured for {queue!r}") from exc


class DynamoHostGate:
    """The :class:`~cdif_harvester.ports.HostGate` of every Lambda at once: one DynamoDB item per
    host in the catalogue table, changed only by conditional writes.

    Item ``pk = HOST#<origin>``, ``sk = GATE`` (no catalogue key starts with ``HOST#``):

    - ``slot0`` ... ``slot<N-1>``: the lease expiry (epoch seconds) of each taken slot; a slot is
      free when absent or expired, so a slot of a Lambda that died frees itself after ``lease``;
    - ``next_at``: the earliest start of the next request (last start + ``crawl_delay``);
    - ``held_until``: the host's ``Retry-After``;
    - ``crawl_delay``, ``last_at``, ``origin``.

    Taking a slot is one conditional UpdateItem: "this slot is free, ``next_at`` and
    ``held_until`` have passed" -> set the slot's lease, ``last_at`` and ``next_at``. When the
    condition fails DynamoDB returns the item as it is (ReturnValuesOnConditionCheckFailure), which
    says either how long to wait or which slot is free, and the next attempt tries that slot.
    A slot kept between requests (:meth:`reuse`) starts each further request with one
    eventually consistent read, or with one conditional write when the host has a crawl delay or
    the lease has less than ``renew_within`` seconds (one fetch's deadline) left; see
    docs/decisions/0088-host-gate-per-batch.md and 0097. Times are wall-clock seconds: Lambda
    hosts keep their clocks synchronised far below the delays at stake.
    """

    def __init__(
        self,
        table: Table,
        *,
        lease: float = 60.0,
        busy_wait: float = 2.0,
        renew_within: float = 30.0,
        clock: Callable[[], float] = time.time,
        choose: Callable[[Sequence[int]], int] = random.choice,
    ) -> None:
        self.table = table
        self.lease = lease
        self.busy_wait = busy_wait
        self.renew_within = renew_within
        self._clock = clock
        self._choose = choose
        self._lock = threading.Lock()
        # The slots this gate took and has not given back, and the holds it set: what a
        # reused slot can be checked against without asking DynamoDB.
        self._slots: dict[tuple[str, int, str], _KeptSlot] = {}
        self._holds: dict[str, float] = {}

    @staticmethod
    def _key(host: str) -> dict[str, str]:
        return {"pk": f"HOST#{host}", "sk": "GATE"}

    def acquire(self, host: str, *, slots: int) -> HostSlot | Wait:
        """Take a slot on ``host`` or say how long to wait. Raises StorageError."""
        slots = max(1, slots)
        now = self._clock()
        index = self._choose(range(slots))
        for _ in range(slots + 1):
            until = _decimal(now + self.lease)
            try:
                with aws_errors(f"DynamoDB gate of {host}", passing={CONDITION_FAILED}):
                    response = self.table.update_item(
                        Key=self._key(host),
                        UpdateExpression=(
                            "SET #slot = :until, #last = :now, #origin = :origin, "
                            "#next = if_not_exists(#delay, :zero) + :now"
                        ),
                        ConditionExpression=(
                            "(attribute_not_exists(#slot) OR #slot <= :now) AND "
                            "(attribute_not_exists(#next) OR #next <= :now) AND "
                            "(attribute_not_exists(#held) OR #held <= :now)"
                        ),
                        ExpressionAttributeNames={
                            "#slot": f"slot{index}",
                            "#last": "last_at",
                            "#origin": "origin",
                            "#next": "next_at",
                            "#delay": "crawl_delay",
                            "#held": "held_until",
                        },
                        ExpressionAttributeValues={
                            ":until": until,
                            ":now": _decimal(now),
                            ":origin": host,
                            ":zero": Decimal(0),
                        },
                        # (the item as written, free: it tells a kept slot the crawl delay)
                        ReturnValues="ALL_NEW",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    )
                slot = HostSlot(host=host, index=index, token=str(until))
                self._keep(slot, now, dict(response.get("Attributes", {})))
                return slot
            except ClientError as exc:
                # The condition failed: the slot is taken or the host is not due yet. DynamoDB
                # sent the item as it is, which says how long to wait or which slot is free.
                item = _item_of(exc) or self._read(host)
            wait = _wait_of(now, float(item.get("held_until", 0)), float(item.get("next_at", 0)))
            if wait is not None:
                return wait
            free = [i for i in range(slots) if float(item.get(f"slot{i}", 0)) <= now]
            if not free:
                return Wait(self.busy_wait, "busy")
            index = self._choose(free)
        return Wait(self.busy_wait, "busy")

    def reuse(self, slot: HostSlot, *, slots: int) -> HostSlot | Wait | None:
        """Start another request within ``slot``, kept since its last request, or say how long
        to wait; None when the slot is no longer this gate's. Raises StorageError.

        The slot's last start, the host's crawl delay as last seen and the holds this gate set
        are known here: a wait they impose costs no call. Otherwise, on a host with a crawl
        delay, or when the lease would not outlast one more fetch, one conditional write
        records the start (``last_at``, ``next_at``, for every worker) and renews the lease
        (under a new token); on any other host one eventually consistent read (strongly
        again when it does not show the slot's token) checks that the slot is still this
        gate's and that no other worker has held the host or moved its next start.
        """
        now = self._clock()
        key = (slot.host, slot.index, slot.token)
        with self._lock:
            kept = self._slots.get(key)
            held = self._holds.get(slot.host, 0.0)
        if kept is None:
            return None
        wait = _wait_of(now, held, kept.last_start + kept.interval)
        if wait is not None:
            return wait
        if kept.interval > 0 or kept.lease_until - now < self.renew_within:
            return self._start_within(slot, kept, now)
        # Eventually consistent (half the price): the lease keeps the slot this gate's, and a
        # hold or a Crawl-delay another worker wrote a moment ago may be missed by this start
        # as it is by a start already made when it was written. A read that does not show
        # this gate's token may be older than its own write of the slot: read again, strongly.
        item = self._read(slot.host, consistent=False)
        if not _holds_slot(item, slot):
            item = self._read(slot.host)
        if not _holds_slot(item, slot):
            self._forget(key)
            return None
        kept.interval = float(item.get("crawl_delay", 0))
        next_at = max(float(item.get("next_at", 0)), kept.last_start + kept.interval)
        wait = _wait_of(now, float(item.get("held_until", 0)), next_at)
        if wait is not None:
            return wait
        if kept.interval > 0:  # a crawl delay recorded since the slot's last start
            return self._start_within(slot, kept, now)
        kept.last_start, kept.on_item = now, False
        return slot

    def release(self, slot: HostSlot) -> None:
        """Free ``slot`` unless its lease ran out and another worker holds it now. A start made
        within the kept slot that only this gate knows of goes on the item as the slot is freed
        (``last_at``, and ``next_at`` from it), unless another worker has started since."""
        key = (slot.host, slot.index, slot.token)
        with self._lock:
            kept = self._slots.pop(key, None)
        if kept is not None and not kept.on_item:
            last = _decimal(kept.last_start)
            try:
                with aws_errors(f"DynamoDB gate of {slot.host}", passing={CONDITION_FAILED}):
                    self.table.update_item(
                        Key=self._key(slot.host),
                        UpdateExpression=(
                            "REMOVE #slot SET #last = :last, "
                            "#next = if_not_exists(#delay, :zero) + :last"
                        ),
                        ConditionExpression=(
                            "#slot = :token AND (attribute_not_exists(#last) OR #last <= :last)"
                        ),
                        ExpressionAttributeNames={
                            "#slot": f"slot{slot.index}",
                            "#last": "last_at",
                            "#next": "next_at",
                            "#delay": "crawl_delay",
                        },
                        ExpressionAttributeValues={
                            ":token": Decimal(slot.token),
                            ":last": last,
                            ":zero": Decimal(0),
                        },
                        ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    )
                return
            except ClientError as exc:
                old = _item_of(exc)
                if old and not _holds_slot(old, slot):
                    return  # taken again since its lease ran out: nothing of ours to free
                # Another worker started later: its next_at stands; only free the slot.
        self._update_if(
            slot.host,
            "REMOVE #slot",
            "#slot = :until",
            {"#slot": f"slot{slot.index}"},
            {":until": Decimal(slot.token)},
        )

    def hold(self, host: str, seconds: float) -> None:
        """Start no request on ``host`` for ``seconds`` (a longer hold already set stays)."""
        now = self._clock()
        until = _decimal(now + max(0.0, seconds))
        with self._lock:  # (also known here, for the slots this gate keeps)
            self._holds = {name: end for name, end in self._holds.items() if end > now}
            self._holds[host] = max(self._holds.get(host, 0.0), float(until))
        self._update_if(
            host,
            "SET #held = :until, #origin = :origin",
            "attribute_not_exists(#held) OR #held < :until",
            {"#held": "held_until", "#origin": "origin"},
            {":until": until, ":origin": host},
        )

    def set_interval(self, host: str, seconds: float) -> None:
        """Record the host's Crawl-delay; the last start already counts."""
        delay = _decimal(max(0.0, seconds))
        with self._lock:
            for (name, _, _), kept in self._slots.items():
                if name == host:
                    kept.interval = float(delay)
        with aws_errors(f"DynamoDB gate of {host}"):
            response = self.table.update_item(
                Key=self._key(host),
                UpdateExpression="SET #delay = :delay, #origin = :origin",
                ExpressionAttributeNames={"#delay": "crawl_delay", "#origin": "origin"},
                ExpressionAttributeValues={":delay": delay, ":origin": host},
                ReturnValues="ALL_NEW",
            )
        item = response.get("Attributes", {})
        if "last_at" not in item:
            return
        candidate = Decimal(str(item["last_at"])) + delay
        self._update_if(
            host,
            "SET #next = :next",
            "attribute_not_exists(#next) OR #next < :next",
            {"#next": "next_at"},
            {":next": candidate},
        )

    def _start_within(self, slot: HostSlot, kept: _KeptSlot, now: float) -> HostSlot | Wait | None:
        """Start a request within the kept ``slot`` with one conditional write: the slot is still
        this gate's, ``next_at`` and ``held_until`` have passed -> a new lease, ``last_at``
        and ``next_at``."""
        until = _decimal(now + self.lease)
        try:
            with aws_errors(f"DynamoDB gate of {slot.host}", passing={CONDITION_FAILED}):
                response = self.table.update_item(
                    Key=self._key(slot.host),
                    UpdateExpression=(
                        "SET #slot = :until, #last = :now, "
                        "#next = if_not_exists(#delay, :zero) + :now"
                    ),
                    ConditionExpression=(
                        "#slot = :token AND "
                        "(attribute_not_exists(#next) OR #next <= :now) AND "
                        "(attribute_not_exists(#held) OR #held <= :now)"
                    ),
                    ExpressionAttributeNames={
                        "#slot": f"slot{slot.index}",
                        "#last": "last_at",
                        "#next": "next_at",
                        "#delay": "crawl_delay",
                        "#held": "held_until",
                    },
                    ExpressionAttributeValues={
                        ":until": until,
                        ":now": _decimal(now),
                        ":token": Decimal(slot.token),
                        ":zero": Decimal(0),
                    },
                    ReturnValues="ALL_NEW",
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
        except ClientError as exc:
            item = _item_of(exc) or self._read(slot.host)
            if not _holds_slot(item, slot):
                self._forget((slot.host, slot.index, slot.token))
                return None
            kept.interval = float(item.get("crawl_delay", 0))
            held, next_at = float(item.get("held_until", 0)), float(item.get("next_at", 0))
            return _wait_of(now, held, next_at) or Wait(self.busy_wait, "busy")
        self._forget((slot.host, slot.index, slot.token))
        renewed = HostSlot(host=slot.host, index=slot.index, token=str(until))
        self._keep(renewed, now, dict(response.get("Attributes", {})))
        return renewed

    def _keep(self, slot: HostSlot, now: float, item: Mapping[str, Any]) -> None:
        """Remember a slot just taken (or renewed) at ``now``, ``item`` the gate item after."""
        kept = _KeptSlot(
            last_start=now,
            on_item=True,
            interval=float(item.get("crawl_delay", 0)),
            lease_until=float(Decimal(slot.token)),
        )
        with self._lock:
            self._slots[(slot.host, slot.index, slot.token)] = kept

    def _forget(self, key: tuple[str, int, str]) -> None:
        with self._lock:
            self._slots.pop(key, None)

    def _update_if(
        self,
        host: str,
        update: str,
        condition: str,
        names: dict[str, str],
        values: dict[str, Any],
    ) -> None:
        """One conditional UpdateItem; a failed condition means there is nothing to do."""
        try:
            with aws_errors(f"DynamoDB gate of {host}", passing={CONDITION_FAILED}):
                self.table.update_item(
                    Key=self._key(host),
                    UpdateExpression=update,
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
        except ClientError:  # the condition failed: a longer hold, a later start, another lease
            return

    def _read(self, host: str, *, consistent: bool = True) -> dict[str, Any]:
        with aws_errors(f"DynamoDB gate of {host}"):
            found = self.table.get_item(Key=self._key(host), ConsistentRead=consistent)
        return dict(found.get("Item", {}))


@dataclass
class _KeptSlot:
    """What a gate knows of a slot it holds: its last start (on the item or only known here),
    the host's crawl delay as last seen, and when its lease runs out (epoch seconds)."""

    last_start: float
    on_item: bool
    interval: float
    lease_until: float


def _move_of(item: Mapping[str, Any]) -> tuple[str | None, str]:
    """The move of a settled item: from the outcome it replaced (None: it entered the run
    with it) to its own."""
    was = str(item.get("was", QUEUED))
    return (was or None), str(item["outcome"])


def _moves_of(items: Mapping[str, Mapping[str, Any]], urls: Sequence[str]) -> Counter[str]:
    """How the run's counters move for the settled ``items`` of ``urls``."""
    return settle_moves(_move_of(items[url]) for url in urls)


def _replacing(held: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The condition of a put on the run's item ``held`` (read before) and its values: that
    item is still the one there. An item written by a settling is that one write (its chunk
    and slot, never written twice: see _settle_digest); one written at entry, or before
    settlings named their slot, is the only one without a slot, and holds what was read."""
    if held is None:
        return "attribute_not_exists(pk)", {}
    if "settle" in held:
        return "#settle = :settle", {":settle": held["settle"]}
    return "#outcome = :outcome AND attribute_not_exists(#settle)", {":outcome": held["outcome"]}


def _settle_digest(
    items: Sequence[Mapping[str, Any]], held: Sequence[Mapping[str, Any] | None]
) -> str:
    """The name of a settling chunk: each item put (URL, outcome, body) and the item it
    replaces (by its own chunk and slot, or the outcome of an item without one).

    Naming what is replaced makes every chunk's slot one write of one item: an item's writes
    form a chain from its first put, so the same chunk cannot be put again after another
    replaced it, and a marker that counted a slot never counts another write of it.
    """
    lines = []
    for item, old in zip(items, held, strict=True):
        if old is None:
            before = "-"
        elif "settle" in old:
            before = str(old["settle"])
        else:
            before = f"={old['outcome']}"
        lines.append("\t".join([str(item["url"]), str(item["outcome"]), str(item["body"]), before]))
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()[:16]


def _wait_of(now: float, held: float, next_at: float) -> Wait | None:
    """The wait a hold until ``held`` and a next start at ``next_at`` impose at ``now``."""
    if held > now or next_at > now:
        return Wait(max(held, next_at) - now, "held" if held >= next_at else "interval")
    return None


def _holds_slot(item: Mapping[str, Any], slot: HostSlot) -> bool:
    """Whether the gate ``item`` still has ``slot`` under its token."""
    value = item.get(f"slot{slot.index}")
    return value is not None and Decimal(str(value)) == Decimal(slot.token)


def _decimal(seconds: float) -> Decimal:
    """Seconds as DynamoDB takes numbers (microsecond resolution)."""
    return Decimal(f"{seconds:.6f}")


def _item_of(exc: ClientError) -> dict[str, Any]:
    """The item a failed conditional write returned (low-level form), as plain values."""
    raw: Any = dict(exc.response).get("Item")
    if not isinstance(raw, dict) or not raw:
        return {}
    deserializer = TypeDeserializer()
    return {name: deserializer.deserialize(value) for name, value in raw.items()}
