"""Benchmark: what a harvest costs on AWS, per million records (issue 20).

Run from the repository root (needs the ``dev`` and ``aws`` extras: moto, boto3)::

    .venv/bin/python bench/cost_bench.py                 # 200 and 800 pages (a few minutes)
    .venv/bin/python bench/cost_bench.py --pages 50      # smoke run: 50 and 200 pages

It writes a publisher site of N landing pages (the re-harvest benchmark's site: robots.txt, a
sitemap index with ``<lastmod>``, one valid CDIF record of about 3 KB per page; ``--invalid``:
records that are not valid, as before views counted), serves it from a
separate process on 127.0.0.1, provisions the stack of template.yaml in moto, and runs the real
handlers the way Lambda's event source mappings would: the intake API's POST /harvests, then
every queue drained batch by batch (batch sizes of the template, each batch gathered ten
messages per ReceiveMessage as the event source mapping gathers it), each function's batches in
one warm execution environment. Three harvests in a row: **first**, **unchanged** re-harvest,
and **5% changed** (every 20th page rewritten and its lastmod moved on). The same for 4N pages.

Counted exactly (``bench/cost_model.py``: botocore ``before-call``/``after-call`` hooks on every
client the handlers make): every AWS call, S3 request classes, SQS 64 KB chunks, DynamoDB write
and read units by AWS's rules on the measured item sizes (global index writes included), Lambda
invocations, bytes the handlers log. Estimated: Lambda duration, as the CPU time of the process
during each invocation less the CPU spent inside the (moto) AWS calls, at the configured memory;
network waits are not in it (see docs/cost.md). Priced with us-east-1 list prices
(:class:`cost_model.Prices`) and printed per million records, as Markdown.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import reharvest_bench  # noqa: E402
from cost_model import CallCounter, Prices, Usage, price  # noqa: E402

INTAKE_EVENT = REPO / "infrastructure/events/intake-post-harvest.json"
SCHEDULER_EVENT = REPO / "infrastructure/events/scheduler.json"
PLATFORM_LOG_BYTES = 300  # START, END and REPORT lines Lambda writes per invocation (modelled)


class _CountingStream(io.TextIOBase):
    """Stands in for stdout/stderr while the handlers run: counts the bytes, shows nothing."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode("utf-8"))
        if os.environ.get("COST_BENCH_LOGS"):
            sys.__stderr__.write(text)
        return len(text)

    def flush(self) -> None:
        pass


@dataclass
class Harvest:
    """One harvest: its counted calls and its Lambda usage."""

    name: str
    pages: int
    records: int
    usage: Usage
    batches: Counter[str] = field(default_factory=Counter)
    cpu_seconds: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    #: the part of ``usage`` the scheduler tick that closed the run spent
    closing: Usage | None = None
    #: which of the three harvests of a site it is ("first", "unchanged", "changed")
    kind: str = ""


class Bench:
    """The stack, the driver and the counters for one site."""

    def __init__(
        self,
        stack: Any,
        counter: CallCounter,
        logs: _CountingStream,
        env: dict[str, str] | None = None,
    ) -> None:
        import boto3

        self.stack = stack
        self.env = dict(env or {})  # set in every stage's environment (--env)
        self.counter = counter
        self.logs = logs
        self.sqs = boto3.client("sqs", region_name=stack.region)  # the driver's: not counted
        template = cost_model_template()
        globals_ = template.get("Globals", {}).get("Function", {})
        self.memory_mb = {
            lid: int(
                template["Resources"][lid]["Properties"].get(
                    "MemorySize", globals_.get("MemorySize", 128)
                )
            )
            for lid in stack.function_timeouts
        }

    def harvest(self, name: str, site_url: str, pages: int) -> Harvest:
        """POST /harvests for the site, then drain every queue; returns what it cost."""
        from tests.support.lambda_driver import FakeLambdaContext
        from tests.support.pipeline import function_environment, handler_of

        before = self.counter.tally.copy()
        logs_before = self.logs.bytes
        invocations = 0
        gb_seconds = 0.0
        batches: Counter[str] = Counter()
        cpu: Counter[str] = Counter()
        started = time.perf_counter()

        def call(function: str, event: dict[str, Any]) -> dict[str, Any]:
            nonlocal invocations, gb_seconds
            aws_before = self.counter.aws_cpu
            cpu_before = time.process_time()
            result = handler_of(self.stack, function)(
                event, FakeLambdaContext(function_name=function)
            )
            spent = (time.process_time() - cpu_before) - (self.counter.aws_cpu - aws_before)
            invocations += 1
            cpu[function] += spent
            gb_seconds += self.memory_mb[function] / 1024 * max(spent, 0.001)
            return result

        event: dict[str, Any] = json.loads(INTAKE_EVENT.read_text(encoding="utf-8"))
        event["body"] = json.dumps({"url": f"{site_url}/robots.txt"})
        operator = event["requestContext"]["identity"]["apiKeyId"]
        with function_environment(self.stack, "IntakeFunction", OPERATOR_API_KEY_IDS=operator):
            response = call("IntakeFunction", event)
        assert response["statusCode"] == 202, response
        run_id = json.loads(response["body"])["run_id"]

        delivery_requests = self._drain(call, batches)
        # The run is finished: the next scheduler tick closes it (withdrawals, the Signmap of
        # each source with new records, the run's summary and publisher report). Part of what
        # a harvest costs, shown apart as well.
        drained = self.counter.tally.copy()
        logs_drained, invocations_drained, gb_drained = self.logs.bytes, invocations, gb_seconds
        with function_environment(self.stack, "SchedulerFunction", **self.env):
            tick = call("SchedulerFunction", json.loads(SCHEDULER_EVENT.read_text("utf-8")))
        assert run_id in tick.get("closed", []), tick
        seconds = time.perf_counter() - started
        usage = Usage(
            tally=self.counter.tally.minus(before),
            lambda_requests=invocations,
            gb_seconds=gb_seconds,
            log_bytes=self.logs.bytes - logs_before + PLATFORM_LOG_BYTES * invocations,
            sqs_delivery_requests=delivery_requests,
        )
        closing = Usage(
            tally=self.counter.tally.minus(drained),
            lambda_requests=invocations - invocations_drained,
            gb_seconds=gb_seconds - gb_drained,
            log_bytes=self.logs.bytes - logs_drained + PLATFORM_LOG_BYTES,
            sqs_delivery_requests=0,
        )
        return Harvest(
            name, pages, self._records(run_id), usage, batches, cpu, seconds, closing=closing
        )

    def _drain(
        self, call: Callable[[str, dict[str, Any]], dict[str, Any]], batches: Counter[str]
    ) -> int:
        """Deliver every queue's messages to its function, in batches as the template's event
        source mappings gather them, until all are empty; return the mappings' SQS requests
        (ReceiveMessage and DeleteMessageBatch)."""
        from tests.support.aws import sqs_event
        from tests.support.lambda_driver import Route, gather
        from tests.support.pipeline import STAGE_FUNCTIONS, function_environment

        delivery_requests = 0
        busy = True
        while busy:
            busy = False
            for function in STAGE_FUNCTIONS:  # later stages first, as the local runner
                source = self.stack.sqs_event_sources[function]
                route = Route(
                    source.queue_url,
                    source.queue_arn,
                    lambda e, c: {},
                    name=function,
                    batch_size=source.batch_size,  # the template's, as the mapping gathers
                )
                batch = gather(self.sqs, route)
                if not batch.messages:
                    continue
                busy = True
                # one warm execution environment per function while its queue has work
                with function_environment(self.stack, function, ALLOW_LOOPBACK="true", **self.env):
                    while batch.messages:
                        batches[function] += 1
                        result = call(function, sqs_event(batch.messages, source.queue_arn))
                        failed = {i["itemIdentifier"] for i in result.get("batchItemFailures", [])}
                        assert not failed, (function, failed)
                        for message in batch.messages:
                            self.sqs.delete_message(
                                QueueUrl=source.queue_url, ReceiptHandle=message["ReceiptHandle"]
                            )
                        # the mapping's ReceiveMessage calls that brought messages, billed
                        # per started 64 KiB of what each returned, and one DeleteMessageBatch
                        # per 10 messages done (its empty polls are a fixed cost per queue, not
                        # per record)
                        delivery_requests += batch.billed_receives + -(-len(batch.messages) // 10)
                        batch = gather(self.sqs, route)
        return delivery_requests

    def _records(self, run_id: str) -> int:
        import boto3

        from cdif_harvester.adapters.aws import DynamoCatalog
        from cdif_harvester.model import Outcome

        catalog = DynamoCatalog(
            boto3.resource("dynamodb", region_name=self.stack.region).Table(self.stack.table_name)
        )
        return sum(1 for o in catalog.outcomes(run_id) if o.outcome is Outcome.RECORD)


def cost_model_template() -> dict[str, Any]:
    """template.yaml as plain data."""
    from cdif_harvester.cli.moto_stack import load_template

    return load_template(REPO / "template.yaml")


def _change_pages(site_dir: Path, pages: int) -> int:
    """Rewrite every 20th page (5%) and move its sitemap lastmod on; returns how many."""
    changed = 0
    for index in range(0, pages, 20):
        page = site_dir / "datasets" / f"{index:05d}.html"
        text = page.read_text(encoding="utf-8")
        # a new name, and a new sdDatePublished (else the extractor rightly calls it unchanged)
        text = text.replace("Benchmark dataset", "Benchmark dataset (revised)")
        text = text.replace(
            '"schema:sdDatePublished": "2025-01-16"', '"schema:sdDatePublished": "2025-03-01"'
        )
        page.write_text(text, encoding="utf-8")
        changed += 1
    for sitemap in site_dir.glob("sitemap-[ab].xml"):
        text = sitemap.read_text(encoding="utf-8")

        def bump(match: re.Match[str]) -> str:
            index = int(match.group(1))
            lastmod = "2025-03-01" if index % 20 == 0 else "2025-01-16"
            return f"/datasets/{match.group(1)}.html</loc><lastmod>{lastmod}</lastmod>"

        text = re.sub(r"/datasets/(\d{5})\.html</loc><lastmod>[^<]*</lastmod>", bump, text)
        sitemap.write_text(text, encoding="utf-8")
    time.sleep(0.01)
    return changed


def run_site(
    pages: int,
    work: Path,
    counter: CallCounter,
    logs: _CountingStream,
    *,
    valid: bool = True,
    env: dict[str, str] | None = None,
) -> list[Harvest]:
    """The three harvests of a site of ``pages`` pages (valid CDIF records unless not
    ``valid``; ``env`` set in every stage's environment)."""
    from cdif_harvester.cli.moto_stack import mocked_stack

    site_dir = work / f"site-{pages}"
    reharvest_bench.write_site(site_dir, pages, lastmod=True, valid=valid)
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from cdif_harvester.demo.server import PublisherSite\n"
            "site = PublisherSite(sys.argv[1]).start()\n"
            "print(site.base_url, flush=True)\n"
            "time.sleep(86400)\n",
            str(site_dir),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        with mocked_stack(REPO / "template.yaml") as stack:
            bench = Bench(stack, counter, logs, env)
            with counter.installed():
                harvests = [
                    replace(bench.harvest("first", base_url, pages), kind="first"),
                    replace(bench.harvest("unchanged", base_url, pages), kind="unchanged"),
                ]
                changed = _change_pages(site_dir, pages)
                harvest = bench.harvest(f"{changed} changed (5%)", base_url, pages)
                harvests.append(replace(harvest, kind="changed (5%)"))
        return harvests
    finally:
        server.terminate()
        server.wait(timeout=10)


# ----------------------------------------------------------------------------- report


def per_million(harvest: Harvest, prices: Prices, usage: Usage | None = None) -> dict[str, float]:
    """Dollars per million records of the site (re-harvests: per million records re-visited)
    of the harvest, or of ``usage``, a part of it."""
    spent = price(usage or harvest.usage, prices)
    return {k: v * 1e6 / harvest.pages for k, v in spent.items()}


def report(harvests: list[Harvest], prices: Prices) -> str:
    """The Markdown tables."""
    lines = [
        "| pages | harvest | new records | S3 PUT-class / record | S3 GET-class / record | "
        "SQS chunks / record | DynamoDB WRU / record | DynamoDB RRU / record | "
        "Lambda invocations / record | "
        "est. CPU ms / record | log bytes / record | $ per million records |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for h in harvests:
        t, n = h.usage.tally, h.pages
        total = sum(per_million(h, prices).values())
        put, get = t.s3_put_class() / n, t.s3_get_class() / n
        sqs = (t.sqs_chunks + h.usage.sqs_delivery_requests) / n
        wru, rru = sum(t.wru.values()) / n, sum(t.rru.values()) / n
        lines.append(
            f"| {n} | {h.name} | {h.records} | {put:.2f} | {get:.2f} | {sqs:.2f} | {wru:.2f} | "
            f"{rru:.2f} | {h.usage.lambda_requests / n:.3f} | "
            f"{sum(h.cpu_seconds.values()) * 1000 / n:.1f} | {h.usage.log_bytes / n:.0f} | "
            f"**{total:.2f}** |"
        )
    items = list(per_million(harvests[0], prices))
    lines += ["", "Dollars per million records, by line item:", ""]
    lines.append("| line item | " + " | ".join(f"{h.pages} {h.name}" for h in harvests) + " |")
    lines.append("| --- |" + " ---: |" * len(harvests))
    for item in items:
        lines.append(
            f"| {item} | "
            + " | ".join(f"{per_million(h, prices)[item]:.2f}" for h in harvests)
            + " |"
        )
    lines.append(
        "| **total** | "
        + " | ".join(f"**{sum(per_million(h, prices).values()):.2f}**" for h in harvests)
        + " |"
    )
    lines += ["", *_marginal(harvests, prices)]
    lines += [
        "",
        "Of which closing the run (the scheduler tick after the queues drained), dollars per "
        "million records:",
        "",
        "| line item | " + " | ".join(f"{h.pages} {h.name}" for h in harvests) + " |",
        "| --- |" + " ---: |" * len(harvests),
    ]
    closings = [per_million(h, prices, h.closing) if h.closing else {} for h in harvests]
    for item in items:
        if any(closing.get(item) for closing in closings):
            lines.append(
                f"| {item} | " + " | ".join(f"{c.get(item, 0.0):.2f}" for c in closings) + " |"
            )
    lines.append(
        "| **closing** | " + " | ".join(f"**{sum(c.values()):.2f}**" for c in closings) + " |"
    )
    biggest = max(harvests, key=lambda h: (h.name == "first", h.pages))
    n = biggest.pages
    t = biggest.usage.tally
    lines += [
        "",
        f"Calls per record, {n} pages, first harvest:",
        "",
        "| call | per record |",
        "| --- | ---: |",
    ]
    for op, count in sorted(t.calls.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {op} | {count / n:.2f} |")
    lines += ["", "| DynamoDB write units by table | per record |", "| --- | ---: |"]
    for table, units in sorted(t.wru.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {_short(table)} | {units / n:.2f} |")
    lines += ["", "| DynamoDB items written, by size | items per record |", "| --- | ---: |"]
    for band, count in sorted(t.item_sizes.items()):
        lines.append(f"| {band} | {count / n:.2f} |")
    lines += ["", "| DynamoDB write units, by call and item kind | per record |", "| --- | ---: |"]
    for kind, units in sorted(t.wru_by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {_short(kind)} | {units / n:.2f} |")
    lines += ["", "| DynamoDB read units, by call and item kind | per record |", "| --- | ---: |"]
    for kind, units in sorted(t.rru_by_kind.items(), key=lambda kv: (-kv[1], kv[0])):
        lines.append(f"| {_short(kind)} | {units / n:.2f} |")
    lines += ["", "| largest item written, by kind | bytes |", "| --- | ---: |"]
    for kind, size in sorted(t.largest_items.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {_short(kind)} | {size} |")
    return "\n".join(lines)


def _marginal(harvests: list[Harvest], prices: Prices) -> list[str]:
    """What one more record costs, by kind of harvest: the slope between the two sites' whole
    costs, which leaves out what a run costs whatever its size (its sitemaps, its summary
    objects). The publisher report reads at most 1,000 records' reports per run: below that
    its reads are in the slope (one GET per record, $0.40 per million), above it they are not."""
    rows = ["| harvest | pages | $ per million more records |", "| --- | --- | ---: |"]
    for kind in sorted({h.kind for h in harvests}):
        pair = sorted((h for h in harvests if h.kind == kind), key=lambda h: h.pages)
        if len(pair) != 2:  # noqa: PLR2004
            continue
        small, large = pair
        cost = [sum(price(h.usage, prices).values()) for h in pair]
        slope = (cost[1] - cost[0]) / (large.pages - small.pages) * 1e6
        rows.append(f"| {kind} | {small.pages} to {large.pages} | **{slope:.2f}** |")
    return [
        "Dollars per million records at scale (the slope from the smaller site to the larger):",
        "",
        *rows,
    ]


def _short(name: str) -> str:
    """A table's logical role rather than its generated name."""
    return re.sub(r"cdif-test-(\w+?)Table-\w+", r"\1", name)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=200, help="N: the runs use N and 4N pages")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument(
        "--invalid",
        action="store_true",
        help="records that are not valid CDIF (no metadata record type), as the benchmark had "
        "until views were counted: an invalid record has no views",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in every stage's environment, e.g. RECORD_SEGMENTS=true (repeatable)",
    )
    args = parser.parse_args(argv)
    env = dict(item.split("=", 1) for item in args.env)
    out = sys.stdout
    prices = Prices()
    counter = CallCounter()
    logs = _CountingStream()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["POWERTOOLS_TRACE_DISABLED"] = "true"
    work = Path(tempfile.mkdtemp(prefix="cdif-cost-bench-"))
    harvests: list[Harvest] = []
    started = time.perf_counter()
    # The handlers' loggers bind stdout when they are first imported: from here on it counts.
    sys.stdout = sys.stderr = logs  # type: ignore[assignment]
    try:
        for pages in (args.pages, 4 * args.pages):
            harvests += run_site(pages, work, counter, logs, valid=not args.invalid, env=env)
    finally:
        sys.stdout, sys.stderr = out, sys.__stderr__
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(
        f"Pages: {args.pages} and {4 * args.pages}; Python {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} CPUs; whole run {elapsed:.0f} s; "
        f"prices: us-east-1 list prices as of {prices.as_of}"
        + "".join(f"; {name}={value}" for name, value in sorted(env.items()))
        + ".\n"
    )
    print(report(harvests, prices))
    if args.json:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "pages": h.pages,
                        "harvest": h.name,
                        "records": h.records,
                        "calls": dict(h.usage.tally.calls),
                        "wru": dict(h.usage.tally.wru),
                        "rru": dict(h.usage.tally.rru),
                        "lambda_requests": h.usage.lambda_requests,
                        "gb_seconds": h.usage.gb_seconds,
                        "log_bytes": h.usage.log_bytes,
                        "per_million": per_million(h, prices),
                    }
                    for h in harvests
                ],
                indent=1,
            ),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
