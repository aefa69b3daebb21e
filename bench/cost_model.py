"""What AWS calls cost: a counter of every call the boto3 clients make, and a price model.

:class:`CallCounter` wraps ``botocore.session.Session.create_client`` while it is installed, so
every client made meanwhile (the handlers' own, Powertools' idempotency store) reports each call
through botocore's ``before-call`` / ``after-call`` events: the operation, the request and
response payload sizes, and for DynamoDB the read and write units charged by AWS's published
rules applied to the item sizes (measured on the wire, before and after each write, with a
client of its own that it does not count). :class:`Prices` holds us-east-1 list prices and
:func:`price` turns counts into dollars. See docs/cost.md and
docs/decisions/0076-measuring-what-a-record-costs.md.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import botocore.session

KB = 1024

# S3 request classes (https://aws.amazon.com/s3/pricing/): these are billed as PUT-class
# requests; DeleteObject is free; everything else is a GET-class request.
S3_PUT_CLASS = frozenset(
    {
        "PutObject",
        "CopyObject",
        "PostObject",
        "ListObjects",
        "ListObjectsV2",
        "ListObjectVersions",
        "ListBuckets",
        "CreateMultipartUpload",
        "UploadPart",
        "UploadPartCopy",
        "CompleteMultipartUpload",
        "PutObjectTagging",
        "PutObjectAcl",
    }
)
S3_FREE = frozenset({"DeleteObject", "DeleteObjects", "AbortMultipartUpload"})
DYNAMO_WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem"})


@dataclass(frozen=True)
class Prices:
    """us-east-1 list prices in dollars, as published on the services' pricing pages."""

    as_of: str = "2026-11-25"
    s3_put_per_1000: float = 0.005  # PUT, COPY, POST, LIST
    s3_get_per_1000: float = 0.0004  # GET and all other requests
    sqs_per_million: float = 0.40  # standard queue, per 64 KB chunk of each request
    # On-demand throughput has cost half its old price ($1.25 and $0.25) since AWS's reduction
    # of November 2024; the figures recorded before 2026-11-25 10:00 UTC used the old prices.
    dynamo_wru_per_million: float = 0.625  # on-demand write request units
    dynamo_rru_per_million: float = 0.125  # on-demand read request units
    lambda_requests_per_million: float = 0.20
    lambda_gb_second: float = 0.0000166667  # x86_64
    logs_per_gb: float = 0.50  # CloudWatch Logs ingestion


# ----------------------------------------------------------------------------- item sizes


def _number_size(text: str) -> int:
    """Bytes of a DynamoDB number: about one byte per two significant digits, plus one."""
    digits = text.lstrip("-").replace(".", "").lstrip("0").rstrip("0") or "0"
    return (len(digits) + 1) // 2 + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value in DynamoDB's wire format (``{"S": "..."}`` and so on),
    by AWS's rules for item size (strings and binaries by their length, numbers by their
    significant digits, 3 bytes plus 1 per element for lists and maps)."""
    ((kind, data),) = value.items()
    if kind == "S":
        return len(str(data).encode("utf-8"))
    if kind == "N":
        return _number_size(str(data))
    if kind == "B":
        return len(str(data)) * 3 // 4  # base64 on the wire
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(item).encode("utf-8")) for item in data)
    if kind == "NS":
        return sum(_number_size(str(item)) for item in data)
    if kind == "BS":
        return sum(len(str(item)) * 3 // 4 for item in data)
    if kind == "L":
        return 3 + sum(value_size(item) + 1 for item in data)
    if kind == "M":
        return 3 + sum(len(k.encode("utf-8")) + value_size(v) + 1 for k, v in data.items())
    raise ValueError(f"unknown DynamoDB type {kind}")


def item_size(item: Mapping[str, Any] | None) -> int:
    """Bytes of a DynamoDB item in wire format (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode("utf-8")) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    """Write request units for one write of an item of ``size`` bytes (1 per KB, at least 1)."""
    return max(1, math.ceil(size / KB))


def read_units(size: int, *, consistent: bool) -> float:
    """Read request units for reading ``size`` bytes (4 KB per unit strongly consistent, half
    that eventually consistent; at least one unit's worth)."""
    units = max(1, math.ceil(size / (4 * KB)))
    return float(units) if consistent else units / 2


# ----------------------------------------------------------------------------- the counter


@dataclass
class Tally:
    """Exact counts of what the counted clients did."""

    calls: Counter[str] = field(default_factory=Counter)  # "service.Operation" -> calls
    s3_put_bytes: int = 0
    sqs_chunks: int = 0  # 64 KB chunks over every SQS request
    sqs_messages_sent: int = 0
    wru: Counter[str] = field(default_factory=Counter)  # table (or "table/gsi") -> units
    rru: Counter[str] = field(default_factory=Counter)  # table -> units
    item_sizes: Counter[str] = field(default_factory=Counter)  # size band -> written items
    largest_items: dict[str, int] = field(default_factory=dict)  # item kind -> bytes
    #: "Operation table:kind" -> write units (the index writes under "table/gsiN:kind")
    wru_by_kind: Counter[str] = field(default_factory=Counter)
    #: "Operation table:kind" -> read units (queries of an index under "table/gsiN:kind"; a
    #: query's kind is that of the first item it returned)
    rru_by_kind: Counter[str] = field(default_factory=Counter)

    def s3_put_class(self) -> int:
        """PUT-class S3 requests."""
        return sum(n for op, n in self.calls.items() if op.removeprefix("s3.") in S3_PUT_CLASS)

    def s3_get_class(self) -> int:
        """GET-class (and other non-free) S3 requests."""
        return sum(
            n
            for op, n in self.calls.items()
            if op.startswith("s3.")
            and op.removeprefix("s3.") not in S3_PUT_CLASS
            and op.removeprefix("s3.") not in S3_FREE
        )

    def minus(self, before: Tally) -> Tally:
        """What happened since ``before`` (a :meth:`copy` taken earlier)."""
        return Tally(
            calls=self.calls - before.calls,
            s3_put_bytes=self.s3_put_bytes - before.s3_put_bytes,
            sqs_chunks=self.sqs_chunks - before.sqs_chunks,
            sqs_messages_sent=self.sqs_messages_sent - before.sqs_messages_sent,
            wru=self.wru - before.wru,
            rru=self.rru - before.rru,
            item_sizes=self.item_sizes - before.item_sizes,
            largest_items=dict(self.largest_items),
            wru_by_kind=self.wru_by_kind - before.wru_by_kind,
            rru_by_kind=self.rru_by_kind - before.rru_by_kind,
        )

    def copy(self) -> Tally:
        """A snapshot."""
        return self.minus(Tally())


def _band(size: int) -> str:
    return f"{math.ceil(size / KB)} KB" if size > KB else "<= 1 KB"


def _item_kind(item: Mapping[str, Any]) -> str:
    """A catalogue item's kind: its sort key's leading word (``url#…`` gives ``url``)."""
    for name in ("sk", "id"):
        value = item.get(name, {})
        if "S" in value:
            text = str(value["S"])
            return name + ":" + (text.split("#", 1)[0] if "#" in text else text[:12])
    return "?"


class CallCounter:
    """Counts every AWS call of the clients created while it is installed (see module doc)."""

    def __init__(self) -> None:
        self.tally = Tally()
        self._original: Any = None
        self._peek: Any = None  # an uncounted DynamoDB client to read items before/after writes
        self._indexes: dict[str, list[tuple[str, ...]]] = {}
        # table -> each global index's projection: None for ALL, else the non-key attributes
        self._projections: dict[str, list[frozenset[str] | None]] = {}
        self._local = threading.local()  # the DynamoDB request in flight, per thread
        #: CPU seconds spent inside counted calls (moto serving them, and this counter), so
        #: that a handler's own CPU time can be told apart from the emulated service's
        self.aws_cpu = 0.0

    # -- installation

    @contextmanager
    def installed(self) -> Iterator[CallCounter]:
        """Count the calls of every client created inside the ``with`` block."""
        original = botocore.session.Session.create_client
        counter = self
        self._original = original

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            counter.attach(client)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        try:
            yield self
        finally:
            botocore.session.Session.create_client = original  # type: ignore[method-assign]

    def attach(self, client: Any) -> None:
        """Count the calls of ``client``."""
        service = client.meta.service_model.service_name
        if service == "dynamodb" and self._peek is None:
            # made from a fresh session, so its own calls are not hooked
            create = self._original or botocore.session.Session.create_client
            self._peek = create(
                botocore.session.Session(), "dynamodb", region_name=client.meta.region_name
            )
        client.meta.events.register(f"before-call.{service}", self._before)
        client.meta.events.register(f"after-call.{service}", self._after)

    # -- hooks

    def _before(self, model: Any, params: Mapping[str, Any], **_: Any) -> None:
        self._local.started = time.thread_time()
        service = model.service_model.service_name
        operation = model.name
        self.tally.calls[f"{service}.{operation}"] += 1
        body = params.get("body") or b""
        size = _body_size(body)
        if service == "s3" and operation in ("PutObject", "UploadPart"):
            self.tally.s3_put_bytes += size
        if service == "sqs":
            self.tally.sqs_chunks += max(1, math.ceil(size / (64 * KB)))
            payload = _json(body)
            self.tally.sqs_messages_sent += len(payload.get("Entries", [])) + (
                1 if operation == "SendMessage" else 0
            )
        if service == "dynamodb":
            self._local.writes = self._writes_before(operation, _json(body))

    def _after(self, model: Any, http_response: Any, **_: Any) -> None:
        try:
            if model.service_model.service_name == "dynamodb":
                self._dynamo_after(model.name, http_response)
        finally:
            self.aws_cpu += time.thread_time() - getattr(self._local, "started", time.thread_time())

    def _dynamo_after(self, operation: str, http_response: Any) -> None:
        writes = self._local.writes
        old_items = self._local.old_items
        request = self._local.request
        failed = int(http_response.status_code) >= 400
        transaction = operation == "TransactWriteItems"
        for table, key, old in writes:
            kind = f"{operation} {table}:{_key_kind(key)}"
            if failed:
                # a refused conditional write still consumes the units of the item it judged
                self.tally.wru[table] += write_units(old)
                self.tally.wru_by_kind[kind + " (refused)"] += write_units(old)
                continue
            new_item = self._get(table, key)
            new = item_size(new_item)
            units = write_units(max(old, new)) * (2 if transaction else 1)
            self.tally.wru[table] += units
            self.tally.wru_by_kind[kind] += units
            if new_item:
                self.tally.item_sizes[_band(new)] += 1
                kind = f"{table}:{_item_kind(new_item)}"
                self.tally.largest_items[kind] = max(self.tally.largest_items.get(kind, 0), new)
            self._index_writes(table, old_items.get((table, _dump(key))), new_item, _key_kind(key))
        if failed:
            return
        self._reads(operation, request, _json(http_response.content))

    def _reads(
        self, operation: str, request: Mapping[str, Any], content: Mapping[str, Any]
    ) -> None:
        """Read units of a read that succeeded, by table and by call and item kind. Every key
        asked for costs at least one read's worth, found or not (AWS charges a read of a
        missing item); a batch's consistency is each table's own, and the keys DynamoDB left
        unprocessed are not charged (they are asked again)."""
        if operation == "GetItem":
            table = request["TableName"]
            units = read_units(
                item_size(content.get("Item")), consistent=bool(request.get("ConsistentRead"))
            )
            self._read(f"{operation} {table}:{_key_kind(request.get('Key', {}))}", table, units)
        elif operation in ("Query", "Scan"):
            table = request["TableName"]
            items = content.get("Items", [])
            size = sum(item_size(item) for item in items)
            units = read_units(size, consistent=bool(request.get("ConsistentRead")))
            kind = _key_kind(items[0]) if items else "?"
            where = f"{table}/{request['IndexName']}" if "IndexName" in request else table
            self._read(f"{operation} {where}:{kind}", table, units)
        elif operation == "BatchGetItem":
            responses = content.get("Responses", {})
            unprocessed = content.get("UnprocessedKeys") or {}
            for table, asked in request.get("RequestItems", {}).items():
                consistent = bool(asked.get("ConsistentRead"))
                schema = self._schema(table)[0]
                found = {
                    _dump({k: item[k] for k in schema}): item for item in responses.get(table, [])
                }
                left = {_dump(key) for key in unprocessed.get(table, {}).get("Keys", [])}
                for key in asked.get("Keys", []):
                    if _dump(key) in left:
                        continue
                    size = item_size(found.get(_dump(key)))
                    units = read_units(size, consistent=consistent)
                    self._read(f"{operation} {table}:{_key_kind(key)}", table, units)

    def _read(self, kind: str, table: str, units: float) -> None:
        self.tally.rru[table] += units
        self.tally.rru_by_kind[kind] += units

    # -- DynamoDB item sizes

    def _writes_before(
        self, operation: str, request: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any], int]]:
        """(table, key, size before) of every item the request writes."""
        self._local.request = request
        old_items: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._local.old_items = old_items
        targets: list[tuple[str, dict[str, Any]]] = []
        if operation in DYNAMO_WRITES:
            table = request["TableName"]
            targets.append((table, self._key_of(table, request.get("Key") or request["Item"])))
        elif operation == "BatchWriteItem":
            for table, entries in request.get("RequestItems", {}).items():
                for entry in entries:
                    if "PutRequest" in entry:
                        item = entry["PutRequest"]["Item"]
                    else:
                        item = entry["DeleteRequest"]["Key"]
                    targets.append((table, self._key_of(table, item)))
        elif operation == "TransactWriteItems":
            for entry in request.get("TransactItems", []):
                ((_, action),) = entry.items()
                table = action["TableName"]
                targets.append((table, self._key_of(table, action.get("Key") or action["Item"])))
        result = []
        for table, key in targets:
            old_item = self._get(table, key)
            old_items[(table, _dump(key))] = old_item
            result.append((table, key, item_size(old_item)))
        return result

    def _schema(self, table: str) -> list[tuple[str, ...]]:
        """The table's key attributes first, then each global index's key attributes."""
        if table not in self._indexes:
            described = self._peek.describe_table(TableName=table)["Table"]
            keys = [tuple(k["AttributeName"] for k in described["KeySchema"])]
            projections: list[frozenset[str] | None] = []
            for index in described.get("GlobalSecondaryIndexes", []):
                keys.append(tuple(k["AttributeName"] for k in index["KeySchema"]))
                projection = index.get("Projection", {})
                if projection.get("ProjectionType", "ALL") == "ALL":
                    projections.append(None)
                else:  # KEYS_ONLY, or INCLUDE with its non-key attributes
                    projections.append(frozenset(projection.get("NonKeyAttributes", ())))
            self._indexes[table] = keys
            self._projections[table] = projections
        return self._indexes[table]

    def _key_of(self, table: str, item: Mapping[str, Any]) -> dict[str, Any]:
        return {name: item[name] for name in self._schema(table)[0]}

    def _get(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        response = self._peek.get_item(TableName=table, Key=_to_wire(key), ConsistentRead=True)
        item = response.get("Item")
        return _to_wire(item) if item else None

    def _index_writes(
        self,
        table: str,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        kind: str = "?",
    ) -> None:
        """Write units of the global indexes: an index entry is the item's table and index keys
        and its projected attributes (the whole item for ALL), plus 100 bytes of overhead;
        changing an index key is a delete and a put, and a write that changes neither an index
        key nor a projected attribute is not written to the index."""
        schema = self._schema(table)
        for position, keys in enumerate(schema[1:], start=1):
            projection = self._projections[table][position - 1]
            old_entry = _index_entry(old, schema[0], keys, projection)
            new_entry = _index_entry(new, schema[0], keys, projection)
            name = f"{table}/gsi{position}"
            before = self.tally.wru[name]
            if old_entry is not None and new_entry is not None:
                if any(old_entry[k] != new_entry[k] for k in keys):
                    self.tally.wru[name] += write_units(item_size(old_entry) + 100)
                    self.tally.wru[name] += write_units(item_size(new_entry) + 100)
                elif old_entry != new_entry:
                    size = max(item_size(old_entry), item_size(new_entry))
                    self.tally.wru[name] += write_units(size + 100)
            elif old_entry is not None:
                self.tally.wru[name] += write_units(item_size(old_entry) + 100)
            elif new_entry is not None:
                self.tally.wru[name] += write_units(item_size(new_entry) + 100)
            if self.tally.wru[name] != before:
                self.tally.wru_by_kind[f"index {name}:{kind}"] += self.tally.wru[name] - before


def _key_kind(key: Mapping[str, Any]) -> str:
    """An item's kind from its key: the leading word of the sort key, else of the partition
    key (``{"pk": "URL#…", "sk": "LATEST"}`` gives ``LATEST``; Powertools' ``id`` gives
    ``idempotency``)."""
    if "sk" in key:
        return _item_kind({"sk": key["sk"]}).removeprefix("sk:")
    return "idempotency" if "id" in key else "?"


def _index_entry(
    item: dict[str, Any] | None,
    table_keys: tuple[str, ...],
    index_keys: tuple[str, ...],
    projection: frozenset[str] | None,
) -> dict[str, Any] | None:
    """The entry ``item`` has in a global index (None when it lacks an index key)."""
    if item is None or not all(k in item for k in index_keys):
        return None
    if projection is None:
        return item
    kept = {*table_keys, *index_keys, *projection}
    return {name: value for name, value in item.items() if name in kept}


def _body_size(body: Any) -> int:
    """Bytes of a request body: bytes, text, or a file object (S3 streams its bodies)."""
    if isinstance(body, bytes):
        return len(body)
    if isinstance(body, str):
        return len(body.encode("utf-8"))
    if hasattr(body, "seek") and hasattr(body, "tell"):
        position = body.tell()
        end = body.seek(0, 2)
        body.seek(position)
        return int(end)
    return 0


def _json(body: Any) -> dict[str, Any]:
    if not body or not isinstance(body, (bytes, str)):
        return {}
    try:
        loaded = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _dump(key: Mapping[str, Any]) -> str:
    return json.dumps(key, sort_keys=True, default=str)


def _to_wire(item: Any) -> Any:
    """botocore's client parses DynamoDB values into ``{"S": "…"}`` dicts already, but numbers
    may come back as text or Decimal and binaries as bytes; normalise them to the JSON wire."""
    if isinstance(item, dict):
        return {k: _to_wire(v) for k, v in item.items()}
    if isinstance(item, list):
        return [_to_wire(v) for v in item]
    if isinstance(item, Decimal):
        return str(item)
    if isinstance(item, bytes):
        import base64  # noqa: PLC0415

        return base64.b64encode(item).decode("ascii")
    return item


# ----------------------------------------------------------------------------- pricing


@dataclass(frozen=True)
class Usage:
    """Counts of one harvest (exact) and its Lambda compute (estimated from CPU time)."""

    tally: Tally
    lambda_requests: int  # handler invocations
    gb_seconds: float  # sum over invocations of configured GB x measured CPU seconds
    log_bytes: int  # bytes written to stdout/stderr by the handlers (CloudWatch Logs)
    sqs_delivery_requests: int = 0  # the event source mappings' ReceiveMessage + DeleteMessageBatch


def price(usage: Usage, prices: Prices = Prices()) -> dict[str, float]:
    """Dollars per line item for ``usage``."""
    tally = usage.tally
    return {
        "S3 PUT-class requests": tally.s3_put_class() * prices.s3_put_per_1000 / 1000,
        "S3 GET-class requests": tally.s3_get_class() * prices.s3_get_per_1000 / 1000,
        "SQS requests (handlers)": tally.sqs_chunks * prices.sqs_per_million / 1e6,
        "SQS requests (event source mapping)": usage.sqs_delivery_requests
        * prices.sqs_per_million
        / 1e6,
        "DynamoDB writes": sum(tally.wru.values()) * prices.dynamo_wru_per_million / 1e6,
        "DynamoDB reads": sum(tally.rru.values()) * prices.dynamo_rru_per_million / 1e6,
        "Lambda requests": usage.lambda_requests * prices.lambda_requests_per_million / 1e6,
        "Lambda duration (estimated)": usage.gb_seconds * prices.lambda_gb_second,
        "CloudWatch Logs ingestion": usage.log_bytes * prices.logs_per_gb / 1024**3,
    }
