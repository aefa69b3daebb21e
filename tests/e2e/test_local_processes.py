"""Documents read in other processes (``processes`` above 1): a local harvest ends as it does in
one process, URL by URL and byte for byte; a process that dies loses no URL; the option is
checked; Ctrl-C stops the processes with the run. A copy of the demo site with a few more pages:
malformed JSON-LD, two Datasets on one page, a record too large for an index job's message."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli import processes, runner
from cdif_harvester.cli.main import main
from cdif_harvester.cli.processes import StagePool
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite, demo_site_dir
from cdif_harvester.errors import RetryableError
from cdif_harvester.stages import resolve
from tests.support.httpserver import LocalHTTPServer

pytestmark = pytest.mark.network

KELP = "/datasets/kelp-forest-survey.html"
TWO = "/datasets/two-datasets.html"
BROKEN = "/datasets/broken-json.html"
LARGE = "/datasets/large-record.html"


def _dataset(name: str, description: str = "A dataset.") -> str:
    return json.dumps(
        {
            "@context": "https://schema.org/",
            "@type": "Dataset",
            "@id": f"https://doi.org/10.5072/{name}",
            "name": f"Dataset {name}",
            "description": description,
            "license": "https://creativecommons.org/licenses/by/4.0/",
        }
    )


def _page(*blocks: str, body: str = "") -> str:
    scripts = "".join(f'<script type="application/ld+json">{b}</script>' for b in blocks)
    return f"<html><head>{scripts}</head><body>{body}</body></html>"


def _site(root: Path) -> Path:
    """The demo site with the pages above added to its sitemap."""
    shutil.copytree(str(demo_site_dir()), root)
    pages = {
        TWO: _page(_dataset("first"), _dataset("second")),
        BROKEN: _page('{"@type": "Dataset", "name": '),
        # (a description of 300 KB: its hand-over is staged as an object, not in a message)
        LARGE: _page(_dataset("large", "x" * 300_000)),
    }
    for path, html in pages.items():
        (root / path.lstrip("/")).write_text(html, encoding="utf-8")
    sitemap = root / "sitemap-datasets.xml"
    added = "".join(f"<url><loc>{{{{BASE}}}}{path}</loc></url>" for path in pages)
    sitemap.write_text(sitemap.read_text().replace("</urlset>", added + "</urlset>"))
    return root


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PublisherSite]:
    with PublisherSite(_site(tmp_path_factory.mktemp("site") / "site")) as site:
        yield site


def _harvest(site: PublisherSite, out: Path, count: int, **kwargs: Any) -> LocalHarvester:
    harvester = LocalHarvester(out, allow_loopback=True, processes=count, **kwargs)
    with harvester:
        harvester.harvest(site.url("/robots.txt"))
    return harvester


def _outcomes(out: Path) -> dict[str, dict[str, Any]]:
    lines = (json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines())
    return {line["url"]: line for line in lines}


def _files(out: Path, folder: str) -> dict[str, bytes]:
    return {
        str(path.relative_to(out)): path.read_bytes()
        for path in sorted((out / folder).rglob("*"))
        if path.is_file()
    }


def _report(raw: bytes) -> dict[str, Any]:
    """A report without what differs between two runs (its run, times and answer headers)."""
    report: dict[str, Any] = json.loads(raw)
    provenance = report["provenance"]
    for name in ("run_id", "harvested_at"):
        provenance.pop(name)
    fetched = provenance.get("fetched") or {}
    fetched.pop("at", None)
    fetched.pop("headers", None)
    return report


@pytest.fixture(scope="module")
def reference(
    served: PublisherSite, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, dict[str, Any]], dict[str, bytes], dict[str, bytes]]:
    """The harvest in one process: its outcomes, records and reports."""
    out = tmp_path_factory.mktemp("one") / "out"
    _harvest(served, out, 1)
    return _outcomes(out), _files(out, "records"), _files(out, "reports")


@pytest.fixture
def tasks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every task sent to a document process, as sent."""
    sent: list[bytes] = []
    submit = StagePool.submit

    def counted(pool: StagePool, task_id: int, task: bytes) -> None:
        sent.append(task)
        submit(pool, task_id, task)

    monkeypatch.setattr(StagePool, "submit", counted)
    return sent


def _job_of(task: bytes) -> dict[str, Any]:
    """The document job a task carries: a task is its head's JSON on one line, then the job's
    message as the queue holds it."""
    job: dict[str, Any] = json.loads(task.partition(b"\n")[2])
    return job


def _kill_on(monkeypatch: pytest.MonkeyPatch, path: str, *, times: int) -> Callable[[], list[int]]:
    """Kill the process a task reading ``path`` is sent to, the first ``times`` times; one task
    per process at a time, so it is the task running there. Returns the killed ones' ids."""
    monkeypatch.setattr(processes, "_DEPTH", 1)
    killed: list[int] = []
    submit = StagePool.submit

    def killing(pool: StagePool, task_id: int, task: bytes) -> None:
        if path not in _job_of(task)["url"] or len(killed) >= times:
            submit(pool, task_id, task)
            return
        # Every process ready (one killed while starting would count as a broken installation)
        # and stopped, so that the one sent the task cannot answer it before it is killed
        deadline = time.monotonic() + 30
        while set(pool.ready_pids()) != set(pool.pids()):
            assert time.monotonic() < deadline, "the processes never got ready"
            time.sleep(0.01)
        stopped = pool.pids()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        submit(pool, task_id, task)
        target = pool.pid_of(task_id)
        assert target is not None
        os.kill(target, signal.SIGKILL)
        killed.append(target)
        for pid in stopped:
            if pid != target:
                os.kill(pid, signal.SIGCONT)

    monkeypatch.setattr(StagePool, "submit", killing)
    return lambda: killed


def test_a_harvest_in_processes_ends_as_in_one_byte_for_byte(
    served: PublisherSite,
    tmp_path: Path,
    reference: tuple[dict[str, dict[str, Any]], dict[str, bytes], dict[str, bytes]],
    tasks: list[bytes],
) -> None:
    outcomes, records, reports = reference
    # (the site gives every kind of outcome the extractor decides)
    kinds = {line["outcome"] for line in outcomes.values()}
    assert {"record", "no-metadata", "failed", "disallowed"} <= kinds
    assert "malformed-json" in outcomes[served.url(BROKEN)]["reason"]
    assert len(outcomes[served.url(TWO)]["records"]) == 2

    out = tmp_path / "out"
    _harvest(served, out, 2)

    assert tasks, "no document was read in another process"
    assert _outcomes(out) == outcomes
    assert _files(out, "records") == records
    assert {k: _report(v) for k, v in _files(out, "reports").items()} == {
        k: _report(v) for k, v in reports.items()
    }
    # the large record's hand-over went by the staging area, which the run then removed
    assert not (out / "staging").exists()


def test_index_jobs_are_done_with_the_work_their_process_prepared(
    served: PublisherSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reference: tuple[dict[str, dict[str, Any]], dict[str, bytes], dict[str, bytes]],
) -> None:
    outcomes, records, _ = reference
    calls: dict[str, list[str]] = {"prepared": [], "whole": []}
    prepared, whole = runner.index_prepared, runner.index_records

    def noting_prepared(wiring: Any, work: Any) -> Any:
        calls["prepared"].append(work.job.url)
        return prepared(wiring, work)

    def noting_whole(wiring: Any, job: Any) -> Any:
        calls["whole"].append(job.url)
        return whole(wiring, job)

    monkeypatch.setattr(runner, "index_prepared", noting_prepared)
    monkeypatch.setattr(runner, "index_records", noting_whole)
    out = tmp_path / "out"
    _harvest(served, out, 2)

    with_records = {url for url, line in outcomes.items() if line["records"]}
    assert sorted(calls["prepared"]) == sorted(with_records)  # (the large one's staged too)
    assert calls["whole"] == []
    assert _outcomes(out) == outcomes
    assert _files(out, "records") == records


def test_a_prepared_index_job_that_fails_is_tried_again_from_its_message(
    served: PublisherSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reference: tuple[dict[str, dict[str, Any]], dict[str, bytes], dict[str, bytes]],
) -> None:
    outcomes, records, _ = reference
    whole_for: list[str] = []
    prepared, whole = runner.index_prepared, runner.index_records

    def failing_once(wiring: Any, work: Any) -> Any:
        if work.job.url == served.url(TWO):
            raise RetryableError("the disk is busy", reason="busy")
        return prepared(wiring, work)

    def noting_whole(wiring: Any, job: Any) -> Any:
        whole_for.append(job.url)
        return whole(wiring, job)

    monkeypatch.setattr(runner, "index_prepared", failing_once)
    monkeypatch.setattr(runner, "index_records", noting_whole)
    out = tmp_path / "out"
    said = io.StringIO()
    _harvest(served, out, 2, jitter=lambda low, high: 0.0, progress=said)

    assert whole_for == [served.url(TWO)]  # (its second attempt: the message decoded)
    assert f"retrying {served.url(TWO)}" in said.getvalue()
    assert _outcomes(out) == outcomes
    assert _files(out, "records") == records


def test_shacl_runs_in_the_processes_as_in_one(served: PublisherSite, tmp_path: Path) -> None:
    pytest.importorskip("pyshacl")
    for count in (1, 2):
        _harvest(served, tmp_path / f"out-{count}", count, shacl=True)

    one, two = tmp_path / "out-1", tmp_path / "out-2"
    assert _outcomes(two) == _outcomes(one)
    reports = {k: _report(v) for k, v in _files(one, "reports").items()}
    assert {k: _report(v) for k, v in _files(two, "reports").items()} == reports
    assert all(report["shacl"] is True for report in reports.values() if "shacl" in report)
    assert any("shacl" in report for report in reports.values())


def test_an_unchanged_page_is_found_unchanged_in_processes_as_in_one(
    tmp_path: Path, tasks: list[bytes]
) -> None:
    site_dir = _site(tmp_path / "site")
    with PublisherSite(site_dir) as site:
        for count in (1, 2):
            _harvest(site, tmp_path / f"out-{count}", count)
        # The page changes, its JSON-LD blocks do not
        page = site_dir / TWO.lstrip("/")
        page.write_text(page.read_text().replace("<body>", "<body>new text"))
        sent = len(tasks)
        for count in (1, 2):
            _harvest(site, tmp_path / f"out-{count}", count)
        two_url = site.url(TWO)

    one, two = _outcomes(tmp_path / "out-1"), _outcomes(tmp_path / "out-2")
    assert two == one
    assert one[two_url]["outcome"] == "unchanged"
    assert "JSON-LD blocks are the same" in one[two_url]["reason"]
    # it was read in a process, which compared the blocks with the state its job carries (the
    # runner sent no blocks of its own: it read no state for it)
    again = [task for task in tasks[sent:] if TWO in _job_of(task)["url"]]
    assert len(again) == 1
    assert "held" not in json.loads(again[0].partition(b"\n")[0])
    assert _job_of(again[0])["state_read"] is True
    assert _job_of(again[0])["state"]["blocks"]


def test_a_job_without_its_state_is_compared_with_the_state_the_runner_reads(
    tmp_path: Path, tasks: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a job whose state would not fit in its message goes without it)
    message = resolve._message
    monkeypatch.setattr(
        resolve, "_message", lambda job: message(replace(job, state=None, state_read=False))
    )
    site_dir = _site(tmp_path / "site")
    with PublisherSite(site_dir) as site:
        _harvest(site, tmp_path / "out", 2)
        page = site_dir / TWO.lstrip("/")
        page.write_text(page.read_text().replace("<body>", "<body>new text"))
        sent = len(tasks)
        _harvest(site, tmp_path / "out", 2)
        two_url = site.url(TWO)
    assert _outcomes(tmp_path / "out")[two_url]["outcome"] == "unchanged"
    again = [task for task in tasks[sent:] if TWO in _job_of(task)["url"]]
    assert len(again) == 1
    assert _job_of(again[0])["state_read"] is False
    assert json.loads(again[0].partition(b"\n")[0])["held"]["blocks"]


def test_the_runner_reads_no_state_for_a_job_that_carries_it(
    served: PublisherSite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tasks: list[bytes]
) -> None:
    read: list[str] = []
    comparable = runner.comparable_state

    def counted(wiring: Any, url: str, run_id: str) -> Any:
        read.append(url)
        return comparable(wiring, url, run_id)

    monkeypatch.setattr(runner, "comparable_state", counted)
    _harvest(served, tmp_path / "out", 2)
    _harvest(served, tmp_path / "out", 2)  # (the second finds states to compare with)
    assert tasks
    assert all(_job_of(task)["state_read"] for task in tasks)
    assert read == []


def test_a_killed_process_loses_no_url(
    served: PublisherSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reference: tuple[dict[str, dict[str, Any]], dict[str, bytes], dict[str, bytes]],
) -> None:
    killed = _kill_on(monkeypatch, KELP, times=1)
    out = tmp_path / "out"

    _harvest(served, out, 2)

    assert len(killed()) == 1
    outcomes, records, _ = reference
    assert _outcomes(out) == outcomes
    assert _files(out, "records") == records


def test_a_page_whose_process_dies_every_time_ends_failed_after_its_attempts(
    served: PublisherSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reference: tuple[dict[str, dict[str, Any]], dict[str, bytes], dict[str, bytes]],
) -> None:
    killed = _kill_on(monkeypatch, KELP, times=99)
    out = tmp_path / "out"

    said = io.StringIO()

    _harvest(served, out, 2, max_attempts=3, jitter=lambda low, high: 0.0, progress=said)

    assert len(killed()) == 3  # one per attempt, then no more
    assert "cannot start" not in said.getvalue()  # (a bad document, not a broken pool)
    outcomes, _, _ = reference
    got = _outcomes(out)
    kelp = served.url(KELP)
    assert got[kelp]["outcome"] == "failed"
    assert got[kelp]["reason"].startswith("worker-died")
    assert {url: line for url, line in got.items() if url != kelp} == {
        url: line for url, line in outcomes.items() if url != kelp
    }


def test_processes_that_cannot_start_leave_the_documents_to_the_runner(
    served: PublisherSite,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reference: tuple[dict[str, dict[str, Any]], dict[str, bytes], dict[str, bytes]],
) -> None:
    monkeypatch.setattr(
        processes, "command", lambda out_dir, shacl: [sys.executable, "-c", "raise SystemExit(3)"]
    )
    out = tmp_path / "out"
    said = io.StringIO()

    _harvest(served, out, 2, progress=said)

    outcomes, records, _ = reference
    assert _outcomes(out) == outcomes
    assert _files(out, "records") == records
    assert "processes cannot start; reading documents here" in said.getvalue()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "must be from 1 to 64, not 0"),
        ("65", "must be from 1 to 64, not 65"),
        ("two", "expected a whole number"),
    ],
)
def test_the_processes_option_is_checked(
    value: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["harvest", "http://127.0.0.1:1/", "--out", str(tmp_path), "--processes", value]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert f"--processes: {message}" in capsys.readouterr().err
    with pytest.raises(ValueError, match="processes must be from 1 to 64"):
        LocalHarvester(tmp_path, processes=0)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_ctrl_c_stops_the_document_processes_with_the_run(tmp_path: Path) -> None:
    pages = 12
    with LocalHTTPServer() as server:
        locs = "".join(f"<url><loc>{server.url(f'/p-{n}.html')}</loc></url>" for n in range(pages))
        server.route(
            "/sitemap.xml",
            body=f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{locs}</urlset>'.encode(),
            headers=[("Content-Type", "application/xml")],
        )
        server.route("/robots.txt", status=404)
        for n in range(pages):
            server.route(
                f"/p-{n}.html",
                body=_page(_dataset(f"slow-{n}")).encode(),
                headers=[("Content-Type", "text/html")],
                headers_delay=0.5,
            )
        command = [
            sys.executable,
            "-m",
            "cdif_harvester.cli.main",
            "harvest",
            server.url("/sitemap.xml"),
            "--out",
            str(tmp_path / "out"),
            "--allow-loopback",
            "--quiet",
            "--workers",
            "1",
            "--processes",
            "2",
        ]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while sum(p.startswith("/p-") for p in server.paths()) < 3:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the harvest never reached the pages"
            time.sleep(0.05)
        # (the processes start beside the fetching: on a loaded machine, later than 3 pages)
        while len(children := _children(process.pid)) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, f"the processes never started: {children}"
            time.sleep(0.05)
        assert len(children) == 2

        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)

    assert process.returncode == 130
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in children):
        assert time.monotonic() < deadline, "a document process outlived its run"
        time.sleep(0.05)


def test_fetching_waits_while_fetched_documents_wait_to_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cdif_harvester.adapters.local import InProcessQueue
    from cdif_harvester.cli import runner
    from cdif_harvester.contracts import DOCUMENT_QUEUE, INDEX_QUEUE

    # Given a site of many pages, fetched far faster than two processes (slow to start) read them
    root = _site(tmp_path / "site")
    pages = [f"/datasets/many-{n}.html" for n in range(150)]
    for n, path in enumerate(pages):
        (root / path.lstrip("/")).write_text(_page(_dataset(f"many-{n}")), encoding="utf-8")
    sitemap = root / "sitemap-datasets.xml"
    added = "".join(f"<url><loc>{{{{BASE}}}}{path}</loc></url>" for path in pages)
    sitemap.write_text(sitemap.read_text().replace("</urlset>", added + "</urlset>"))
    waiting: list[int] = []
    send = InProcessQueue.send

    def watched(queue: InProcessQueue, name: str, bodies: Any, **kwargs: Any) -> None:
        send(queue, name, bodies, **kwargs)
        waiting.append(queue.pending(DOCUMENT_QUEUE) + queue.pending(INDEX_QUEUE))

    monkeypatch.setattr(InProcessQueue, "send", watched)
    # When it is harvested with two document processes
    with PublisherSite(root) as site:
        out = tmp_path / "out"
        _harvest(site, out, 2)
        urls = [site.url(path) for path in pages]
    # Then fetching paused while the fetched documents waited: at most the bound, plus what
    # the fetch workers and the processes had under way when it was reached, waited at any time
    bound = runner._WAITING_PER_PROCESS * 2 + runner.DEFAULT_WORKERS + processes._DEPTH * 2
    assert max(waiting) <= bound
    # and every page still ended in a record
    outcomes = _outcomes(out)
    assert [outcomes[url]["outcome"] for url in urls] == ["record"] * len(urls)


def _pipe_max() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except OSError:
        return 0


@pytest.mark.skipif(
    not hasattr(processes, "fcntl")
    or not hasattr(getattr(processes, "fcntl", None), "F_GETPIPE_SZ")
    or _pipe_max() < processes.PIPE_BYTES,
    reason="pipe sizes are set on Linux, up to pipe-max-size",
)
def test_the_pipes_to_and_from_each_process_hold_many_tasks(tmp_path: Path) -> None:
    import fcntl  # noqa: PLC0415 - (Linux only: see the skip)
    import threading  # noqa: PLC0415

    pool = StagePool(2, tmp_path, shacl=False, wake=threading.Event())
    try:
        sizes = {
            fcntl.fcntl(pipe.fileno(), fcntl.F_GETPIPE_SZ)
            for child in pool._children
            for pipe in (child.process.stdin, child.process.stdout)
            if pipe is not None
        }
    finally:
        pool.close()
    # (a task is about 8 KB, an answer about 30: the default 64 KiB holds a handful)
    assert sizes == {processes.PIPE_BYTES}
