"""Harvest runs and the sources registry in the catalogue's DynamoDB table.

Items ``RUN#<run id>`` (the run, its URLs, its sitemap steps, its entry and settling markers) and
``SOURCE#<source id>``. Run counters are top-level numbers changed with ``ADD``; what could make a
run look finished too early is written in one transaction with the item that justifies it (a
step's marker, the marker naming the URLs an entry counts: a URL is handed on only once counted;
the marker naming the settled URLs a count moves), and :meth:`DynamoRuns.recount_run` repairs
counters a crash left behind. SDK errors are mapped by
:func:`~cdif_harvester.adapters.aws_errors.aws_errors` (to the retryable StorageError); a failed
condition, the answer many of these writes ask for, is caught by name.

See docs/decisions/0003-dynamodb-single-table.md, docs/decisions/0004-run-counting.md,
docs/decisions/0042-one-aws-error-mapper.md, docs/decisions/0091-urls-enter-at-one-write-unit.md
and docs/decisions/0094-settling-at-one-write-unit.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from cdif_harvester.adapters.aws_errors import (
    CONDITION_FAILED,
    CONDITION_FAILED_REASON,
    TRANSACTION_CANCELED,
    aws_errors,
    cancellation_codes,
)
from cdif_harvester.adapters.dynamo_items import outcome_body
from cdif_harvester.errors import StorageError
from cdif_harvester.keys import url_hash
from cdif_harvester.model import (
    QUEUED,
    Outcome,
    RunState,
    RunStatus,
    Source,
    UrlOutcome,
    run_from_dict,
    run_to_dict,
    settle_moves,
    source_from_dict,
    source_to_dict,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.service_resource import Table

__all__ = ["ENTRY_FIELDS", "DynamoRuns", "DynamoSources", "settle_slot", "settle_uncounted"]

#: The fields of a run's URL item that say how it entered the run (its step, the chunk and
#: slot an ``ENTER#`` marker counts, the outcome it entered with when settled at entry): kept
#: when the item is settled (see DynamoCatalog.put_outcomes).
ENTRY_FIELDS = ("step", "enter", "slot", "entered_as")
_TRANSACTION_ITEMS = 100  # the DynamoDB limit on one TransactWriteItems call
_BATCH_GET = 100  # BatchGetItem takes at most 100 keys
_BATCH_TRIES = 8
_ENTER_CHUNK = _TRANSACTION_ITEMS - 1  # URLs per count: a marker each at most, and the run
_COUNT_TRIES = 8  # counts refused by markers written meanwhile, before giving up
_PUT_WORKERS = 8  # concurrent puts of one chunk (within botocore's 10 pooled connections)
_SEQUENTIAL_PUTS = 16  # smaller chunks are put one by one: threads would cost more
_DESERIALIZE = TypeDeserializer()
_STATIC_RUN_FIELDS = ("entry_urls", "trigger", "source_id", "started_at")


@dataclass
class _Entered:
    """What became of a chunk's URLs: handed on, settled at entry, to settle (see enter_urls)."""

    handed: list[str] = field(default_factory=list)
    mine: list[UrlOutcome] = field(default_factory=list)
    late: list[UrlOutcome] = field(default_factory=list)


class DynamoRuns:
    """Run items and their counters (a mixin of the DynamoDB catalogue)."""

    table: Table

    def start_run(self, run: RunStatus) -> None:
        """Record a new run (an existing run id is left as it is)."""
        data = run_to_dict(run)
        item: dict[str, Any] = {
            "pk": f"RUN#{run.run_id}",
            "sk": "RUN",
            "gsi1pk": "RUNS",
            "gsi1sk": f"{run.started_at}#{run.run_id}",
            "run_id": run.run_id,
            "state": run.state.value,
            "entered": run.entered,
            "settled": run.settled,
            "sitemaps": run.sitemaps,
            "body": json.dumps({k: data[k] for k in _STATIC_RUN_FIELDS}, sort_keys=True),
            **{f"n_{_attr(kind)}": int(n) for kind, n in run.outcomes.items() if n},
        }
        if run.source_id:
            item["source_id"] = run.source_id
        try:
            with aws_errors(f"DynamoDB start run {run.run_id}", passing={CONDITION_FAILED}):
                self.table.put_item(Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError:  # the condition failed: the run exists already and is kept
            return

    def get_run(self, run_id: str) -> RunStatus | None:
        """Return the status of ``run_id``, or None."""
        with aws_errors(f"DynamoDB get run {run_id}"):
            found = self.table.get_item(Key=_run_key(run_id), ConsistentRead=True).get("Item")
        return _run_of(found) if found else None

    def runs(
        self, source_id: str | None = None, *, state: RunState | None = None, limit: int = 100
    ) -> list[RunStatus]:
        """Return runs newest first (of one source, in one state, when given)."""
        kwargs: dict[str, Any] = {
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk",
            "ExpressionAttributeValues": {":pk": "RUNS"},
            "ScanIndexForward": False,
        }
        found: list[RunStatus] = []
        while len(found) < limit:
            with aws_errors("DynamoDB query runs"):
                page = self.table.query(**kwargs)
            listed = [
                str(item["pk"])
                for item in page.get("Items", [])
                if source_id is None or item.get("source_id") == source_id
            ]
            if state is None:
                listed = listed[: limit - len(found)]  # read no more runs than are asked for
            # The index holds a run's keys, source and static body, not its counters and state
            # (moved by every job: projected, each move would be a second write there), so the
            # runs are read from the table, eventually consistent as the index is: a lag only
            # delays what the tick does with a run to its next turn.
            for item in self._runs_by_key(listed):
                if state is None or item.get("state") == state.value:
                    found.append(_run_of(item))
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return found[:limit]

    def _runs_by_key(self, pks: Sequence[str]) -> list[dict[str, Any]]:
        """The RUN items of ``pks``, in that order (BatchGetItem, 100 keys a call; runs gone
        since the index listed them are left out)."""
        client = self.table.meta.client
        name = self.table.name
        found: dict[str, dict[str, Any]] = {}
        for start in range(0, len(pks), _BATCH_GET):
            request: dict[str, Any] = {
                name: {"Keys": [{"pk": pk, "sk": "RUN"} for pk in pks[start : start + _BATCH_GET]]}
            }
            for attempt in range(_BATCH_TRIES):
                with aws_errors("DynamoDB batch get of runs"):
                    response = client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(name, []):
                    found[str(item["pk"])] = item
                unprocessed = response.get("UnprocessedKeys") or {}
                if not unprocessed.get(name):
                    break
                request = dict(unprocessed)
                time.sleep(min(0.05 * 2**attempt, 1.0))  # back off as DynamoDB asks
            else:
                raise StorageError("DynamoDB batch get of runs left keys unprocessed")
        return [found[pk] for pk in pks if pk in found]

    def enter_urls(
        self,
        run_id: str,
        urls: Sequence[str],
        *,
        step: str,
        settled: Sequence[UrlOutcome] = (),
    ) -> list[str]:
        """Note that ``urls`` enter the run; return those new to it or entered by ``step``.

        Each URL's item is a plain conditional put (one write unit; a refused put returns the
        item held). The ``entered`` count (and, for URLs settled at entry, the outcome counters)
        of a chunk then moves in one small transaction with an ``ENTER#`` marker naming the
        chunk's slots it counts, so no slot is counted twice, and no URL is handed on before it
        is counted. A URL this step put before but never counted (a crash) is counted by the
        retry; one another step put and never counted is counted and handed on here. See
        docs/decisions/0091-urls-enter-at-one-write-unit.md.
        """
        outcomes = {outcome.url: outcome for outcome in settled}
        handed: list[str] = []
        mine: list[UrlOutcome] = []  # settled at entry by this step (now or before)
        late: list[UrlOutcome] = []  # entered queued by this step before: to settle
        pending = list(dict.fromkeys([*urls, *outcomes]))
        # An untracked run counts nothing: checked first, so nothing is written for it.
        tracked = bool(pending) and self._tracked(run_id)
        for start in range(0, len(pending), _ENTER_CHUNK) if tracked else ():
            entered = self._enter_chunk(
                run_id, pending[start : start + _ENTER_CHUNK], step, outcomes
            )
            if entered is None:  # the run went away meanwhile
                tracked = False
                break
            handed.extend(entered.handed)
            mine.extend(entered.mine)
            late.extend(entered.late)
        if not tracked:  # nothing to count: hand everything on
            self._settle_entered(list(outcomes.values()), [])
            return [url for url in dict.fromkeys(urls) if url not in outcomes]
        self._settle_entered(late, mine)
        order = {url: index for index, url in enumerate(urls)}
        return sorted(set(handed), key=order.__getitem__)

    def _settle_entered(self, late: Sequence[UrlOutcome], mine: Sequence[UrlOutcome]) -> None:
        """Record ``late`` (entered queued, to settle) and the URLs' latest outcomes of ``mine``
        (settled at entry): the catalogue's part (see DynamoCatalog)."""
        raise NotImplementedError

    def _tracked(self, run_id: str) -> bool:
        with aws_errors(f"DynamoDB get run {run_id}"):
            found = self.table.get_item(
                Key=_run_key(run_id), ConsistentRead=True, ProjectionExpression="pk"
            ).get("Item")
        return found is not None

    def _enter_chunk(
        self, run_id: str, chunk: list[str], step: str, outcomes: Mapping[str, UrlOutcome]
    ) -> _Entered | None:
        """Put ``chunk``'s items, count those not counted yet; None when the run is gone."""
        entries = {url: outcomes[url].outcome.value if url in outcomes else QUEUED for url in chunk}
        digest = _chunk_digest(step, entries)
        held = self._put_urls(run_id, chunk, step=step, digest=digest, outcomes=outcomes)
        # Each URL's slot (chunk, slot in it, outcome put): of this chunk when put now, else as
        # its item says (an item without one was counted when it was written).
        slots: dict[str, tuple[str, int, str]] = {}
        for slot, url in enumerate(chunk):
            old = held.get(url)
            if old is None:
                slots[url] = (digest, slot, entries[url])
            elif "enter" in old and "slot" in old:
                # (counted with the outcome it was put with: a later settling moved the
                # counters from that one, whether or not this entry was counted yet)
                entered_as = str(old.get("entered_as", QUEUED))
                slots[url] = (str(old["enter"]), int(old["slot"]), entered_as)
        stamps = [outcomes[url].recorded_at for url in chunk if url in outcomes]
        counted = self._count_entries(
            run_id,
            slots,
            digest=digest,
            # an earlier try of this chunk put some of its items: it may have counted them
            retried=any(url in held and slots[url][0] == digest for url in slots),
            at=(stamps[-1] or None) if stamps else None,
        )
        if counted is None:
            return None
        # URLs another step put but never counted (a crash), counted here: handed on from here
        adopted = {url for url in counted if url in held and held[url].get("step") != step}
        entered = _Entered()
        for url in chunk:
            old = held.get(url)
            ours = old is None or old.get("step") == step or url in adopted
            if url not in outcomes:
                if ours and (old is None or old.get("outcome") == QUEUED):
                    entered.handed.append(url)  # new, or entered by this step before
            elif old is None:
                entered.mine.append(outcomes[url])
            elif ours and old.get("outcome") == QUEUED:
                entered.late.append(outcomes[url])
            elif old.get("outcome") == entries[url] and settle_uncounted(old):
                # settled already by an earlier try that may have crashed before counting its
                # move: settled again, which counts that move first (and writes what is left)
                entered.late.append(outcomes[url])
            elif old.get("outcome") == entries[url]:
                # settled already (by an earlier try, whose latest-outcome writes may not have
                # been made: written again, when they differ)
                entered.mine.append(outcomes[url])
        return entered

    def _put_urls(
        self,
        run_id: str,
        chunk: Sequence[str],
        *,
        step: str,
        digest: str,
        outcomes: Mapping[str, UrlOutcome],
    ) -> dict[str, dict[str, Any]]:
        """Put each URL's run item unless it exists; return the items held, by URL.

        Each item names its chunk and slot (``enter``, ``slot``): what the ``ENTER#`` markers
        count. The puts of a large chunk go out a few at a time (the client is thread-safe).
        """
        items: list[dict[str, Any]] = []
        for slot, url in enumerate(chunk):
            item: dict[str, Any] = {
                "pk": f"RUN#{run_id}",
                "sk": f"URL#{url_hash(url)}",
                "url": url,
                "outcome": outcomes[url].outcome.value if url in outcomes else QUEUED,
                "step": step,
                "enter": digest,
                "slot": slot,
            }
            if url in outcomes:
                item["body"] = outcome_body(outcomes[url])
                item["entered_as"] = item["outcome"]
            items.append(item)
        found = self._put_all(
            [(item, "attribute_not_exists(pk)", {}) for item in items], what="enter"
        )
        return {url: old for url, old in zip(chunk, found, strict=True) if old is not None}

    def _put_all(
        self, puts: Sequence[tuple[dict[str, Any], str, Mapping[str, Any]]], *, what: str
    ) -> list[dict[str, Any] | None]:
        """Make each conditional put of ``puts`` (item, condition, its values); return for each
        None when it was put, else the item held (which the refusal returns at no extra cost).

        The puts of a large chunk go out a few at a time (the client is thread-safe).
        """
        if len(puts) <= _SEQUENTIAL_PUTS:
            return [self._put_if(*put, what=what) for put in puts]
        with ThreadPoolExecutor(_PUT_WORKERS) as pool:
            return list(pool.map(lambda put: self._put_if(*put, what=what), puts))

    def _put_if(
        self, item: dict[str, Any], condition: str, values: Mapping[str, Any], *, what: str
    ) -> dict[str, Any] | None:
        """Put ``item`` if ``condition`` holds (``values``: its ``:name`` values, each
        ``#name`` the attribute ``name``); None when it was put, else the item held."""
        extra: dict[str, Any] = {}
        if values:
            extra["ExpressionAttributeValues"] = dict(values)
        names = re.findall(r"#(\w+)", condition)
        if names:
            extra["ExpressionAttributeNames"] = {f"#{name}": name for name in names}
        try:
            with aws_errors(
                f"DynamoDB {what} {item['sk']} in {item['pk']}", passing={CONDITION_FAILED}
            ):
                self.table.meta.client.put_item(
                    TableName=self.table.name,
                    Item=item,
                    ConditionExpression=condition,
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                    **extra,
                )
        except ClientError as exc:  # the condition failed: the item held is another
            old: Mapping[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
            # (in the wire format: the resource's deserialisation skips error answers)
            return {name: _DESERIALIZE.deserialize(value) for name, value in old.items()}
        return None

    def _count_entries(
        self,
        run_id: str,
        slots: Mapping[str, tuple[str, int, str]],
        *,
        digest: str,
        retried: bool,
        at: str | None,
    ) -> list[str] | None:
        """Count the URLs of ``slots`` (url -> chunk, slot, outcome put) no marker counts yet;
        return those counted here, None when the run is gone.

        The markers of ``digest`` (this try's chunk) are read only when ``retried``: slots all
        put by this try cannot be named yet (unless a try racing this one named them: its
        marker then refuses this one's). See :meth:`_count_slots`.
        """
        return self._count_slots(
            run_id,
            {url: (name, slot) for url, (name, slot, _) in slots.items()},
            prefix="ENTER#",
            fresh=() if retried else (digest,),
            adds=lambda urls: _entry_adds([slots[url][2] for url in urls]),
            at=at,
            what=f"enter URLs of run {run_id}",
        )

    def _count_slots(
        self,
        run_id: str,
        slots: Mapping[str, tuple[str, int]],
        *,
        prefix: str,
        fresh: Collection[str],
        adds: Callable[[Sequence[str]], Mapping[str, int]],
        at: str | None,
        what: str,
    ) -> list[str] | None:
        """Count the writes of ``slots`` (key -> chunk, slot in it) no marker counts yet; return
        the keys counted here, None when the run is gone.

        A chunk's markers ``<prefix><chunk>#<n>`` (n = 0, 1, ...) each name the slots they
        counted (a bit mask); the slots not named yet are counted in one transaction with the
        next marker of each chunk concerned (``attribute_not_exists``) and the run's ``ADD`` of
        ``adds`` of their keys. A refused marker (another writer counted meanwhile) is read
        again. The markers of the chunks in ``fresh`` are not read on the first try (none can
        exist yet on the usual path: a refusal says otherwise). A slot is counted once: a
        marker is written once, and only after the markers before it were read.
        """
        unread = set(fresh)
        for _attempt in range(_COUNT_TRIES):
            chains = {
                name: (0, 0) if name in unread else self._marker_chain(run_id, prefix + name)
                for name in {slot[0] for slot in slots.values()}
            }
            counting = [
                key for key, (name, slot) in slots.items() if not chains[name][0] >> slot & 1
            ]
            if not counting:
                return []
            marks: dict[str, int] = {}
            for key in counting:
                name, slot = slots[key]
                marks[name] = marks.get(name, 0) | 1 << slot
            items: list[dict[str, Any]] = [
                {
                    "Put": {
                        "TableName": self.table.name,
                        "Item": {
                            "pk": f"RUN#{run_id}",
                            "sk": f"{prefix}{name}#{chains[name][1]}",
                            "slots": format(mask, "x"),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
                for name, mask in marks.items()
            ]
            items.append(self._counter_update(run_id, adds(counting), at))
            try:
                with aws_errors(f"DynamoDB {what}", passing={TRANSACTION_CANCELED}):
                    self.table.meta.client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
            except ClientError as exc:
                # Cancelled: only failed conditions are answers (the run is gone, or a marker
                # was written meanwhile: read again); a conflict with another transaction is a
                # fault (StorageError, retried), never "counted".
                codes = cancellation_codes(exc, f"DynamoDB {what}")
                if codes[-1] == CONDITION_FAILED_REASON:
                    return None
                unread.clear()
                continue
            return counting
        raise StorageError(f"DynamoDB {what} failed: the markers kept changing")

    def _marker_chain(self, run_id: str, name: str) -> tuple[int, int]:
        """The slots the markers ``<name>#<n>`` counted (a bit mask), and their number."""
        markers = self._run_items(run_id, f"{name}#")
        mask = 0
        for marker in markers:
            mask |= int(str(marker["slots"]), 16)
        return mask, len(markers)

    def _counter_update(
        self, run_id: str, adds: Mapping[str, int], at: str | None
    ) -> dict[str, Any]:
        """The transaction's Update of the run's counters (``entered``, ``settled``, an
        outcome's count) by ``adds``, conditional on the run."""
        adds = dict(adds) or {"settled": 0}  # (moves that cancel out: the update still checks)
        names = {
            f"#c{i}": name if name in ("entered", "settled") else f"n_{_attr(name)}"
            for i, name in enumerate(adds)
        }
        values: dict[str, Any] = {f":c{i}": n for i, n in enumerate(adds.values())}
        expression = "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(adds)))
        if at is not None:
            expression += " SET updated_at = :at"
            values[":at"] = at
        return {
            "Update": {
                "TableName": self.table.name,
                "Key": _run_key(run_id),
                "UpdateExpression": expression,
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def count_sitemaps(
        self, run_id: str, delta: int, *, step: str, sitemap: str | None = None
    ) -> RunStatus | None:
        """Add ``delta`` to the pending sitemap jobs, once per ``step`` (one transaction with
        the step's marker)."""
        marker: dict[str, Any] = {"pk": f"RUN#{run_id}", "sk": f"STEP#{step}"}
        if sitemap is not None:
            marker["sitemap"] = sitemap
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self.table.name,
                    "Item": marker,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self.table.name,
                    "Key": _run_key(run_id),
                    "UpdateExpression": "ADD sitemaps :n",
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeValues": {":n": delta},
                }
            },
        ]
        try:
            with aws_errors(f"DynamoDB count sitemaps of {run_id}", passing={TRANSACTION_CANCELED}):
                self.table.meta.client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as exc:
            # Cancelled by a condition: the step was counted already, or the run is not tracked.
            # A conflict with another transaction is not an answer: cancellation_codes raises
            # StorageError and the job is retried, so the count is never lost.
            cancellation_codes(exc, f"DynamoDB count sitemaps of {run_id}")
        return self.get_run(run_id)

    def run_sitemaps(self, run_id: str) -> list[str]:
        """Return the sitemaps the run has read, sorted."""
        items = self._run_items(run_id, "STEP#")
        return sorted({str(item["sitemap"]) for item in items if item.get("sitemap")})

    def finish_run(self, run_id: str, *, at: str, state: RunState = RunState.FINISHED) -> bool:
        """Mark a running or stalled run ``state``; True for the one call that did."""
        field_name = "finished_at" if state is RunState.FINISHED else "updated_at"
        try:
            with aws_errors(f"DynamoDB finish run {run_id}", passing={CONDITION_FAILED}):
                self.table.update_item(
                    Key=_run_key(run_id),
                    UpdateExpression="SET #s = :s, #t = :t",
                    ConditionExpression="attribute_exists(pk) AND #s <> :s AND #s <> :finished",
                    ExpressionAttributeNames={"#s": "state", "#t": field_name},
                    ExpressionAttributeValues={
                        ":s": state.value,
                        ":t": at,
                        ":finished": RunState.FINISHED.value,
                    },
                )
        except ClientError:  # the condition failed: no such run, in that state or finished
            return False
        return True

    def close_run(self, run_id: str, *, at: str, report_key: str | None) -> None:
        """Note that the end of the run was dealt with."""
        values: dict[str, Any] = {":at": at}
        expression = "SET closed_at = :at"
        if report_key is not None:
            expression += ", report_key = :report"
            values[":report"] = report_key
        self._update_run(run_id, expression, values)

    def recount_run(self, run_id: str, *, at: str) -> RunStatus | None:
        """Set the run's URL counters from its URL items."""
        if self.get_run(run_id) is None:
            return None
        counts: dict[str, int] = {}
        entered = 0
        for item in self._run_items(run_id, "URL#"):
            entered += 1
            outcome = str(item.get("outcome"))
            if outcome != QUEUED:
                counts[outcome] = counts.get(outcome, 0) + 1
        values: dict[str, Any] = {
            ":entered": entered,
            ":settled": sum(counts.values()),
            ":at": at,
            **{f":n{i}": counts.get(kind.value, 0) for i, kind in enumerate(Outcome)},
        }
        assignments = ", ".join(f"n_{_attr(kind.value)} = :n{i}" for i, kind in enumerate(Outcome))
        self._update_run(
            run_id,
            f"SET entered = :entered, settled = :settled, updated_at = :at, {assignments}",
            values,
        )
        return self.get_run(run_id)

    def _update_run(self, run_id: str, expression: str, values: Mapping[str, Any]) -> None:
        try:
            with aws_errors(f"DynamoDB update run {run_id}", passing={CONDITION_FAILED}):
                self.table.update_item(
                    Key=_run_key(run_id),
                    UpdateExpression=expression,
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues=dict(values),
                )
        except ClientError:  # the condition failed: a run that is not tracked, nothing to note
            return

    def _run_items(self, run_id: str, prefix: str) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": f"RUN#{run_id}", ":prefix": prefix},
            "ConsistentRead": True,
        }
        items: list[dict[str, Any]] = []
        while True:
            with aws_errors(f"DynamoDB query run {run_id}"):
                page = self.table.query(**kwargs)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


class DynamoSources:
    """Source items (a mixin of :class:`~cdif_harvester.adapters.aws.DynamoCatalog`)."""

    table: Table

    def put_source(self, source: Source) -> None:
        """Insert or replace ``source`` (its run under way is kept as the registry holds it)."""
        self._write_source(source, only_new=False)

    def add_source(self, source: Source) -> bool:
        """Insert ``source`` unless its id is registered already (a conditional write)."""
        return self._write_source(source, only_new=True)

    def _write_source(self, source: Source, *, only_new: bool) -> bool:
        extra: dict[str, Any] = (
            {"ConditionExpression": "attribute_not_exists(pk)"} if only_new else {}
        )
        # Only a write made conditional asks the question a failed condition answers.
        passing = {CONDITION_FAILED} if only_new else set()
        try:
            with aws_errors(f"DynamoDB put source {source.source_id}", passing=passing):
                self.table.update_item(
                    Key=_source_key(source.source_id),
                    UpdateExpression="SET body = :body, gsi1pk = :pk, gsi1sk = :id",
                    ExpressionAttributeValues={
                        ":body": json.dumps(source_to_dict(source), sort_keys=True),
                        ":pk": "SOURCES",
                        ":id": source.source_id,
                    },
                    **extra,
                )
        except ClientError:  # the condition failed: the id is registered already
            return False
        return True

    def get_source(self, source_id: str) -> Source | None:
        """Return the source named ``source_id``, or None."""
        with aws_errors(f"DynamoDB get source {source_id}"):
            found = self.table.get_item(Key=_source_key(source_id), ConsistentRead=True)
        item = found.get("Item")
        return _source_of(item) if item else None

    def sources(self) -> list[Source]:
        """Return every registered source, by id."""
        kwargs: dict[str, Any] = {
            "IndexName": "gsi1",
            "KeyConditionExpression": "gsi1pk = :pk",
            "ExpressionAttributeValues": {":pk": "SOURCES"},
        }
        found: list[Source] = []
        while True:
            with aws_errors("DynamoDB query sources"):
                page = self.table.query(**kwargs)
            # (the index projects a source's body and run attributes: no read per source)
            found.extend(_source_of(item) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return sorted(found, key=lambda s: s.source_id)
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def delete_source(self, source_id: str) -> bool:
        """Remove a source; False when there was none."""
        with aws_errors(f"DynamoDB delete source {source_id}"):
            response = self.table.delete_item(Key=_source_key(source_id), ReturnValues="ALL_OLD")
        return bool(response.get("Attributes"))

    def claim_source(self, source_id: str, run_id: str, *, at: str) -> bool:
        """Make ``run_id`` the source's run under way unless another one is (conditional)."""
        try:
            with aws_errors(f"DynamoDB claim source {source_id}", passing={CONDITION_FAILED}):
                self.table.update_item(
                    Key=_source_key(source_id),
                    UpdateExpression="SET active_run = :run, last_run_id = :run, last_run_at = :at",
                    ConditionExpression="attribute_exists(pk) AND "
                    "(attribute_not_exists(active_run) OR active_run = :run)",
                    ExpressionAttributeValues={":run": run_id, ":at": at},
                )
        except ClientError:  # the condition failed: no such source, or another run holds it
            return False
        return True

    def release_source(self, source_id: str, run_id: str) -> None:
        """End ``run_id`` as the source's run under way."""
        try:
            with aws_errors(f"DynamoDB release source {source_id}", passing={CONDITION_FAILED}):
                self.table.update_item(
                    Key=_source_key(source_id),
                    UpdateExpression="REMOVE active_run",
                    ConditionExpression="active_run = :run",
                    ExpressionAttributeValues={":run": run_id},
                )
        except ClientError:  # the condition failed: another run (or none) holds it; leave it
            return


def settle_uncounted(item: Mapping[str, Any]) -> bool:
    """Whether the run's URL ``item`` was written by a settling whose move a ``SETTLE#``
    marker may not count yet (an item that moved nothing needs no count; one without a slot
    was counted when written). See docs/decisions/0094-settling-at-one-write-unit.md."""
    return "settle" in item and item.get("was", QUEUED) != item["outcome"]


def settle_slot(item: Mapping[str, Any]) -> tuple[str, int]:
    """The chunk and slot a settled item names (its ``settle``: ``<chunk>#<slot>``)."""
    chunk, slot = str(item["settle"]).rsplit("#", 1)
    return chunk, int(slot)


def _entry_adds(entries: Sequence[str]) -> dict[str, int]:
    """How the run's counters move for URLs entering with ``entries`` (their outcomes as put:
    ``queued`` or settled at entry)."""
    adds = dict(settle_moves([(None, entry) for entry in entries if entry != QUEUED]))
    adds["entered"] = len(entries)  # the settled ones, and the queued ones
    return adds


def _chunk_digest(step: str, entries: Mapping[str, str]) -> str:
    """The name of a chunk: its step, its URLs in order and the outcome each enters with (every
    try of the same chunk puts the same items in the same slots)."""
    text = "\n".join([step, *(f"{url}\t{entry}" for url, entry in entries.items())])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _run_key(run_id: str) -> dict[str, str]:
    return {"pk": f"RUN#{run_id}", "sk": "RUN"}


def _source_key(source_id: str) -> dict[str, str]:
    return {"pk": f"SOURCE#{source_id}", "sk": "SOURCE"}


def _attr(outcome: str) -> str:
    """The counter attribute suffix of an outcome (``no-metadata`` -> ``no_metadata``)."""
    return outcome.replace("-", "_")


def _run_of(item: Mapping[str, Any]) -> RunStatus:
    data: dict[str, Any] = json.loads(str(item.get("body") or "{}"))
    data.update(
        run_id=item.get("run_id") or str(item["pk"]).removeprefix("RUN#"),
        state=item.get("state", RunState.RUNNING.value),
        entered=int(item.get("entered", 0)),
        settled=int(item.get("settled", 0)),
        sitemaps=int(item.get("sitemaps", 0)),
        outcomes={kind.value: int(item.get(f"n_{_attr(kind.value)}", 0)) for kind in Outcome},
    )
    for name in ("updated_at", "finished_at", "closed_at", "report_key", "source_id"):
        if item.get(name) is not None:
            data[name] = str(item[name])
    return run_from_dict(data)


def _source_of(item: Mapping[str, Any]) -> Source:
    data: dict[str, Any] = json.loads(str(item["body"]))
    # The run under way and the last run are kept as attributes of their own (claimed and
    # released atomically); a source imported with a last run keeps it in its body.
    data["active_run"] = str(item["active_run"]) if item.get("active_run") else None
    for name in ("last_run_id", "last_run_at"):
        if item.get(name) is not None:
            data[name] = str(item[name])
    return source_from_dict(data)
