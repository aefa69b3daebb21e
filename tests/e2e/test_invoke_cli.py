"""``cdif-harvest invoke`` end to end: every event file of infrastructure/events/ runs its real
handler in a process of its own, against the template's stack in moto, with no network beyond
loopback; the printed report says what the handler returned and wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.demo.server import demo_site_dir

pytestmark = [pytest.mark.aws, pytest.mark.network]

REPO_ROOT = Path(__file__).resolve().parents[2]
EVENTS = REPO_ROOT / "infrastructure" / "events"
PUBLISHER = "https://data.example.org"
OPERATOR = json.loads((EVENTS.parent / "env.json").read_text(encoding="utf-8"))["IntakeFunction"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cdif_harvester.cli.main", "invoke", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _invoke(function: str, event: str, *extra: str) -> dict[str, Any]:
    done = _cli(function, "--event", str(EVENTS / event), *extra)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["function"] == function
    assert report["network"] == "loopback"
    assert "refused" not in report
    # the one-line summary on stderr counts what the report lists
    wrote = report["wrote"]
    assert (
        f"wrote {len(wrote['objects'])} objects, {len(wrote['messages'])} messages, "
        f"{len(wrote['items'])} items"
    ) in done.stderr
    return report


def _kinds(report: dict[str, Any], queue: str) -> list[str]:
    return [m["body"]["kind"] for m in report["wrote"]["messages"] if m["queue"] == queue]


def _keys(report: dict[str, Any]) -> list[str]:
    return [o["key"] for o in report["wrote"]["objects"]]


@pytest.fixture
def raw_page(tmp_path: Path) -> list[str]:
    """``--put`` of the document the extractor event names: the demo's landing page, as the
    publisher of the event files serves it."""
    event = json.loads((EVENTS / "extractor.json").read_text(encoding="utf-8"))
    key = json.loads(event["Records"][0]["body"])["documents"][0]["key"]
    page = (demo_site_dir() / "datasets" / "north-atlantic-ctd-2021.html").read_text()
    path = tmp_path / "page.html"
    path.write_text(page.replace("{{BASE}}", PUBLISHER), encoding="utf-8")
    return ["--put", f"{key}={path}"]


def _before(function: str, event: str) -> list[str]:
    return ["--before", f"{function}={EVENTS / event}"]


def test_every_event_file_runs_and_the_report_says_what_it_wrote(raw_page: list[str]) -> None:
    operator = ["--env", f"OPERATOR_API_KEY_IDS={OPERATOR['OPERATOR_API_KEY_IDS']}"]
    ran = set()

    # the fetching stages, against the bundled demo site standing in for the publisher
    report = _invoke("SitemapExpanderFunction", "sitemap-expander.json", "--demo-site")
    ran.add("sitemap-expander.json")
    assert report["result"] == {"batchItemFailures": []}
    assert "url-job" in _kinds(report, "UrlResolverQueue")
    # (the page is kept under raw/ only when the deployment asks for it)
    keep = ["--env", "KEEP_BODIES=true"]
    report = _invoke("UrlResolverFunction", "url-resolver.json", "--demo-site", *keep)
    ran.add("url-resolver.json")
    assert _kinds(report, "ExtractorQueue") == ["document-job"]
    assert any(key.startswith("raw/") for key in _keys(report))

    # extractor -> indexer -> crosswalk, each prepared by the ones before it
    report = _invoke("ExtractorFunction", "extractor.json", *raw_page)
    ran.add("extractor.json")
    assert _kinds(report, "IndexerQueue") == ["index-job"]
    # (the staged records travel in the index job's message: nothing is staged in the bucket)
    staged = json.loads((EVENTS / "indexer.json").read_text())["Records"][0]["body"]
    (sent,) = (m["body"] for m in report["wrote"]["messages"] if m["queue"] == "IndexerQueue")
    assert sent == json.loads(staged) and sent["staged"]
    assert not [key for key in _keys(report) if key.startswith("staging/")]
    extracted = _before("ExtractorFunction", "extractor.json")
    # (the crosswalk's event is the notification of a record stored as an object of its own:
    # the indexer writes per-record objects here; with segments, the default, it writes none)
    per_record = ["--env", "RECORD_SEGMENTS=false"]
    report = _invoke("IndexerFunction", "indexer.json", *raw_page, *extracted, *per_record)
    ran.add("indexer.json")
    notification = json.loads(
        json.loads((EVENTS / "crosswalk.json").read_text())["Records"][0]["body"]
    )
    record_key = notification["Records"][0]["s3"]["object"]["key"]
    assert record_key in _keys(report)
    assert report["wrote"]["items"]
    indexed = [*extracted, *_before("IndexerFunction", "indexer.json")]
    report = _invoke("CrosswalkFunction", "crosswalk.json", *raw_page, *indexed)
    ran.add("crosswalk.json")
    assert report["result"] == {"batchItemFailures": []}
    assert report["wrote"]["objects"] == []  # views are made on read: none is stored

    # intake: an operator starts a harvest, registers a source; the publisher harvests it
    report = _invoke("IntakeFunction", "intake-post-harvest.json", *operator)
    ran.add("intake-post-harvest.json")
    assert report["result"]["statusCode"] == 202
    assert _kinds(report, "SitemapExpanderQueue") == ["sitemap-job"]
    report = _invoke("IntakeFunction", "intake-post-source.json", *operator)
    ran.add("intake-post-source.json")
    assert report["result"]["statusCode"] == 201
    assert report["wrote"]["items"]
    registered = _before("IntakeFunction", "intake-post-source.json")
    report = _invoke("IntakeFunction", "intake-post-source-harvest.json", *operator, *registered)
    ran.add("intake-post-source-harvest.json")
    assert report["result"]["statusCode"] == 202
    (message,) = report["wrote"]["messages"]
    assert message["body"]["url"] == f"{PUBLISHER}/sitemap-datasets.xml"

    # the scheduler starts the registered source, which is due
    report = _invoke("SchedulerFunction", "scheduler.json", *operator, *registered)
    ran.add("scheduler.json")
    assert [run["source_id"] for run in report["result"]["started"]] == ["data-example-org"]
    assert _kinds(report, "SitemapExpanderQueue") == ["sitemap-job"]

    # the publisher of the registered source reads the linkset of the record, made on read
    crosswalked = [*registered, *indexed, *_before("CrosswalkFunction", "crosswalk.json")]
    report = _invoke(
        "IntakeFunction", "intake-get-record-linkset.json", *operator, *raw_page, *crosswalked
    )
    ran.add("intake-get-record-linkset.json")
    assert report["result"]["statusCode"] == 200
    assert report["result"]["multiValueHeaders"]["Content-Type"] == ["application/linkset"]
    assert report["wrote"] == {"objects": [], "messages": [], "items": []}

    # renderer.json belongs to the renderer's own stack (functions/renderer/template.yaml), which
    # `invoke` does not read: tests/e2e/test_aws_rendering.py feeds it to that handler
    assert ran == {path.name for path in EVENTS.glob("*.json")} - {"renderer.json"}


def test_the_handler_reaches_no_address_beyond_loopback() -> None:
    # the event names https://data.example.org: without --demo-site or --allow-network the
    # lookup is refused in the process before any packet leaves, and the report says so
    done = _cli("UrlResolverFunction", "--event", str(EVENTS / "url-resolver.json"))
    report = json.loads(done.stdout)
    assert report["refused"] == ["data.example.org"]
    assert "--allow-network" in done.stderr
    assert report["wrote"]["messages"] == []


def test_usage_errors() -> None:
    done = _cli("NoSuchFunction", "--event", str(EVENTS / "scheduler.json"))
    assert done.returncode == 2
    assert "SchedulerFunction" in done.stderr  # the functions there are are listed
    done = _cli("SchedulerFunction", "--event", str(EVENTS / "missing.json"))
    assert done.returncode == 2
