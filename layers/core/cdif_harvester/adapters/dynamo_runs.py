"""Harvest runs and the sources registry in the catalogue's DynamoDB table.

Items ``RUN#<run id>`` (the run, its URLs, its sitemap steps) and ``SOURCE#<source id>``. Run
counters are top-level numbers changed with ``ADD``; what could make a run look finished too
early is written in one transaction with the item that justifies it, and
:meth:`DynamoRuns.recount_run` repairs counters a crash left behind. SDK errors are mapped by
:func:`~cdif_harvester.adapters.aws_errors.aws_errors` (to the retryable StorageError); a failed
condition, the answer many of these writes ask for, is caught by name.

See docs/decisions/0003-dynamodb-single-table.md, docs/decisions/0004-run-counting.md and
docs/decisions/0042-one-aws-error-mapper.md.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

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

__all__ = ["DynamoRuns", "DynamoSources"]

_TRANSACTION_ITEMS = 100  # the DynamoDB limit on one TransactWriteItems call
_BATCH_GET = 100  # BatchGetItem takes at most 100 keys
_BATCH_TRIES = 8
_STATIC_RUN_FIELDS = ("entry_urls", "trigger", "source_id", "started_at")


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

        Each chunk of URLs goes in one transaction with the ``entered`` count, so the count is
        never behind the items. A URL already in the run cancels the transaction; it is taken
        out (and handed on only when this same step entered it) and the rest is tried again.
        The URLs of ``settled`` enter with their outcome, in the same transactions, their
        counters moved with ``entered``: one write each instead of an entry and a settling.
        """
        outcomes = {outcome.url: outcome for outcome in settled}
        handed: list[str] = []
        mine: list[UrlOutcome] = []  # settled at entry by this step (now or before)
        late: list[UrlOutcome] = []  # entered queued by this step before: to settle
        pending = list(dict.fromkeys([*urls, *outcomes]))
        while pending:
            chunk, pending = pending[: _TRANSACTION_ITEMS - 1], pending[_TRANSACTION_ITEMS - 1 :]
            while chunk:
                taken = self._enter_chunk(run_id, chunk, step, outcomes)
                if taken is None:
                    handed.extend(url for url in chunk if url not in outcomes)
                    mine.extend(outcomes[url] for url in chunk if url in outcomes)
                    break
                if not taken:  # the run is not tracked: nothing to count, hand everything on
                    self._settle_entered(list(outcomes.values()), [])
                    return [url for url in dict.fromkeys(urls) if url not in outcomes]
                for url in taken:
                    chunk.remove(url)
                    held = self._run_url(run_id, url) or {}
                    ours = held.get("step") == step and held.get("outcome") == QUEUED
                    if url not in outcomes:
                        if ours:  # entered by this step before: on its way again
                            handed.append(url)
                    elif ours:
                        late.append(outcomes[url])
                    elif held.get("outcome") == outcomes[url].outcome.value:
                        # settled already (by an earlier try, whose latest-outcome writes may
                        # not have been made: written again, when they differ)
                        mine.append(outcomes[url])
        self._settle_entered(late, mine)
        order = {url: index for index, url in enumerate(urls)}
        return sorted(set(handed), key=order.__getitem__)

    def _settle_entered(self, late: Sequence[UrlOutcome], mine: Sequence[UrlOutcome]) -> None:
        """Record ``late`` (entered queued, to settle) and the URLs' latest outcomes of ``mine``
        (settled at entry): the catalogue's part (see DynamoCatalog)."""
        raise NotImplementedError

    def _enter_chunk(
        self, run_id: str, chunk: list[str], step: str, outcomes: Mapping[str, UrlOutcome]
    ) -> list[str] | None:
        """Enter ``chunk`` in one transaction; None when it went through, else the URLs that
        were already in the run (which cancelled it): none when the run is not tracked."""
        table = self.table.name
        items: list[dict[str, Any]] = []
        moves: list[tuple[str | None, str]] = []
        for url in chunk:
            item: dict[str, Any] = {
                "pk": f"RUN#{run_id}",
                "sk": f"URL#{url_hash(url)}",
                "url": url,
                "outcome": QUEUED,
                "step": step,
            }
            if url in outcomes:
                item["outcome"] = outcomes[url].outcome.value
                item["body"] = outcome_body(outcomes[url])
                moves.append((None, item["outcome"]))
            items.append(
                {
                    "Put": {
                        "TableName": table,
                        "Item": item,
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        adds = {
            name if name in ("entered", "settled") else f"n_{_attr(name)}": n
            for name, n in settle_moves(moves).items()
        }
        adds["entered"] = len(chunk)  # the settled ones, and the queued ones
        values: dict[str, Any] = {f":c{i}": n for i, n in enumerate(adds.values())}
        expression = "ADD " + ", ".join(f"#c{i} :c{i}" for i in range(len(adds)))
        stamps = [outcomes[url].recorded_at for url in chunk if url in outcomes]
        if stamps and stamps[-1]:
            expression += " SET updated_at = :at"
            values[":at"] = stamps[-1]
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": _run_key(run_id),
                    "UpdateExpression": expression,
                    "ConditionExpression": "attribute_exists(pk)",
                    "ExpressionAttributeNames": {f"#c{i}": name for i, name in enumerate(adds)},
                    "ExpressionAttributeValues": values,
                }
            }
        )
        try:
            with aws_errors(f"DynamoDB enter URLs of run {run_id}", passing={TRANSACTION_CANCELED}):
                self.table.meta.client.transact_write_items(TransactItems=items)  # type: ignore[arg-type]
        except ClientError as exc:
            # Cancelled: CancellationReasons says why, item by item (the mapper lets the
            # cancellation through only when it carries them). Only failed conditions are
            # answers; a conflict with another transaction is a fault (StorageError, retried).
            codes = cancellation_codes(exc, f"DynamoDB enter URLs of run {run_id}")
            if codes[-1] == CONDITION_FAILED_REASON:
                return []  # the run item does not exist
            return [
                url
                for url, code in zip(chunk, codes, strict=False)
                if code == CONDITION_FAILED_REASON
            ]
        return None

    def _run_url(self, run_id: str, url: str) -> dict[str, Any] | None:
        key = {"pk": f"RUN#{run_id}", "sk": f"URL#{url_hash(url)}"}
        with aws_errors(f"DynamoDB get {key['pk']}"):
            found = self.table.get_item(Key=key, ConsistentRead=True).get("Item")
        return dict(found) if found else None

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
