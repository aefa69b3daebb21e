"""Benchmark: the memory closing a run takes on DynamoDB, as the source grows (issue 20).

Run from the repository root (needs the ``dev``, ``aws`` and ``bench`` extras: moto with its
server, boto3)::

    .venv/bin/python bench/close_memory_bench.py                    # 5,000 and 40,000 records
    .venv/bin/python bench/close_memory_bench.py --records 2000 8000 --spill-after 1000
    .venv/bin/python bench/close_memory_bench.py --in-process       # moto in this process

For each size N it provisions the stack of template.yaml in moto, starts a run and writes N
record entries of one source (a landing page each, valid, in a segment) and the run's settled
outcome of each page, in the shapes ``DynamoCatalog.put_record`` and ``put_outcomes`` write, as
a first harvest leaves the catalogue (25 items a request: the catalogue's own conditional
writes take minutes in moto at these sizes). Then it measures, with ``tracemalloc`` (Python
allocations made during the call, not what was held before it), the peak of each read closing
a run makes over the catalogue:

- ``records``: walking ``catalog.records(source)`` (the publisher report does it twice);
- ``source_urls``: walking ``catalog.source_urls(source)`` (the vanished-URL check);
- ``withdraw_vanished``: the vanished-URL check itself (the source's URLs against the run's
  outcomes);
- ``held_records``: the publisher report's walk over the records held (reports unread: none are
  stored here, which the report treats as unreadable).

Reported per size: the peak of each in MiB, and the growth per record between the two sizes
(bytes): what a source of a million records would need, against the 512 MB a function has.

By default moto runs as a server in a process of its own (``python -m moto.server`` on
127.0.0.1, reset between sizes), so that what is measured is this process alone, as on Lambda:
the boto3 client and the catalogue's code. With ``--in-process`` moto runs inside this process
(``mock_aws``) and its own work is counted too: it builds each query page from a deep copy of
every item of the index or partition, so every row then grows with the source, where
DynamoDB's pages (1 MB each) do not. The first row, the index's query pages read and dropped,
is the floor the other reads are worth comparing with.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import socket
import subprocess
import sys
import time
import tracemalloc
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import boto3
from botocore.config import Config

from cdif_harvester.adapters.aws import DynamoCatalog, S3ObjectStore
from cdif_harvester.adapters.dynamo_items import record_item
from cdif_harvester.adapters.local import InProcessQueue
from cdif_harvester.cli.moto_stack import ProvisionedStack, mocked_stack, provision
from cdif_harvester.model import CatalogEntry, Outcome, RecordRef, RunStatus, UrlOutcome
from cdif_harvester.stages.finish import held_records, withdraw_vanished
from cdif_harvester.wiring import Wiring

SOURCE = "data.example.org"
RUN = "run-bench"
AT = "2026-12-07T08:00:00+00:00"


class _Clock:
    def now(self) -> Any:
        from datetime import datetime  # noqa: PLC0415

        return datetime.fromisoformat(AT)


class _NoFetcher:
    def fetch(self, url: str, **_: Any) -> Any:
        raise AssertionError(f"closing fetched {url}")


def typical_entry(index: int) -> CatalogEntry:
    """Record ``index`` of the source, with the sizes of a harvest's entries (a DOI, a landing
    page, a segment; also the tests' measure of a spilled entry)."""
    record_id = f"https://doi.org/10.5072/bench.{index:07d}"
    return CatalogEntry(
        record_id=record_id,
        resource_id=record_id,
        source=SOURCE,
        url=f"https://{SOURCE}/datasets/{index:07d}.html",
        title=f"Benchmark dataset {index}: ocean observations along a transect",
        pattern="embedded",
        valid=True,
        conformance="https://w3id.org/cdif/core/1.0",
        date_modified="2025-01-15",
        sd_date_published="2025-01-16",
        content_hash=f"{index:064x}",
        record_key=f"segments/{SOURCE}/2026-12-07/{index // 50:08d}.seg#{index * 3000}+2900",
        report_key=f"segments/{SOURCE}/2026-12-07/{index // 50:08d}.seg#{index * 3000 + 2900}+700",
        run_id=RUN,
        harvested_at=AT,
        changed_at=AT,
        profiles={"core/1.0": "valid"},
    )


def _outcome(entry: CatalogEntry) -> UrlOutcome:
    ref = RecordRef(
        record_id=entry.record_id,
        resource_id=entry.resource_id,
        valid=True,
        errors=(),
        record_key=entry.record_key,
        report_key=entry.report_key,
    )
    return UrlOutcome(
        run_id=RUN,
        source=SOURCE,
        url=entry.url,
        outcome=Outcome.RECORD,
        pattern="embedded",
        records=(ref,),
        recorded_at=AT,
    )


def _peak_mib(work: Callable[[], object]) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def _walk(items: Any) -> None:
    for _ in items:
        pass


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """Run moto's server in a process of its own on 127.0.0.1; yield its endpoint URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1):  # noqa: S310
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(
                        "moto's server did not start: install the bench extra (moto[server])"
                    ) from None
                time.sleep(0.2)
        yield endpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()  # (werkzeug may finish a slow answer first)
            server.wait()


@contextlib.contextmanager
def _stack(endpoint: str | None) -> Iterator[ProvisionedStack]:
    """The template's stack: in moto's server at ``endpoint`` (emptied first), else in-process."""
    if endpoint is None:
        with mocked_stack() as stack:
            yield stack
        return
    reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=30).close()  # noqa: S310 - the server started above
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,  # every boto3 client made from here on talks to it
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",  # noqa: S105 - moto's, not a secret
        AWS_DEFAULT_REGION="us-east-1",
    )
    yield provision()


def measure(records: int, endpoint: str | None = None) -> dict[str, float]:
    """Fill a fresh catalogue with ``records`` entries and outcomes; the peaks in MiB.

    ``endpoint``: moto's server (else moto runs in this process, and its work is counted)."""
    with _stack(endpoint) as stack:
        # (moto's server takes long over a large index: each page is built from all of it)
        patient = Config(read_timeout=900, retries={"max_attempts": 1})
        dynamodb = boto3.resource("dynamodb", region_name=stack.region, config=patient)
        table = dynamodb.Table(stack.table_name)
        catalog = DynamoCatalog(table)
        store = S3ObjectStore(boto3.client("s3", region_name=stack.region), stack.bucket_name)
        catalog.start_run(RunStatus(run_id=RUN, entry_urls=(f"https://{SOURCE}/",), started_at=AT))
        # The items the catalogue writes for a record and for a settled URL (put_record's and
        # _settle_outcomes' shapes), written 25 at a time: moto takes minutes through the
        # catalogue's own conditional writes at these sizes. Closing reads nothing else.
        with table.batch_writer() as batch:
            for index in range(records):
                entry = typical_entry(index)
                batch.put_item(Item=record_item(entry))
                batch.put_item(Item=DynamoCatalog._outcome_item(_outcome(entry)))  # noqa: SLF001
        wiring = Wiring(
            store=store,
            catalog=catalog,
            queue=InProcessQueue(),
            fetcher=_NoFetcher(),  # type: ignore[arg-type]
            clock=_Clock(),  # type: ignore[arg-type]
        )

        def pages() -> None:
            # (the index's pages alone, each dropped when the next is read)
            query: dict[str, Any] = {
                "IndexName": "gsi1",
                "KeyConditionExpression": "gsi1pk = :pk AND begins_with(gsi1sk, :prefix)",
                "ExpressionAttributeValues": {":pk": f"SOURCE#{SOURCE}", ":prefix": "RECORD#"},
            }
            while "LastEvaluatedKey" in (page := table.query(**query)):
                query["ExclusiveStartKey"] = page["LastEvaluatedKey"]

        return {
            "query pages alone": _peak_mib(pages),
            "records": _peak_mib(lambda: _walk(catalog.records(SOURCE))),
            "source_urls": _peak_mib(lambda: _walk(catalog.source_urls(SOURCE))),
            "withdraw_vanished": _peak_mib(
                lambda: withdraw_vanished(wiring, RUN, sitemaps=(), entry_urls=())
            ),
            "held_records": _peak_mib(lambda: _walk(held_records(wiring, RUN, [SOURCE], ()))),
        }


def main() -> int:
    """Measure each size; print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs=2, default=[5000, 40000])
    parser.add_argument(
        "--spill-after",
        type=int,
        help="pairs held in memory before a listing is ordered on disk (external_sort)",
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run moto inside this process (its own work is then counted too)",
    )
    args = parser.parse_args()
    if args.spill_after is not None:
        try:
            from cdif_harvester import external_sort  # noqa: PLC0415
        except ImportError:  # (code from before the listings were ordered on disk)
            print("(--spill-after: this code holds every listing in memory)")
        else:
            external_sort.SPILL_AFTER = args.spill_after
    small, large = args.records
    where = "in this process" if args.in_process else "as a server of its own"
    print(
        f"python {platform.python_version()}, records {small} and {large}, moto {where}",
        flush=True,
    )
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        endpoint = None if args.in_process else stack.enter_context(moto_server())
        peaks = {size: measure(size, endpoint) for size in (small, large)}
    print(f"(filled and measured in {time.perf_counter() - started:.0f} s)")
    print()
    print(
        f"| read | peak MiB at {small:,} | peak MiB at {large:,} | bytes per record | "
        "MiB at 1,000,000 |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in peaks[small]:
        grow = (peaks[large][name] - peaks[small][name]) * 2**20 / (large - small)
        million = (peaks[large][name] * 2**20 + grow * (1_000_000 - large)) / 2**20
        print(
            f"| {name} | {peaks[small][name]:.1f} | {peaks[large][name]:.1f} | {grow:,.0f} | "
            f"{million:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
