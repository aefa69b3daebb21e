"""The command line as cron, CI and an operator at a terminal use it: exit statuses that tell a
harvest that read nothing from one that ran, ``--fail-on``, quiet and verbose output, a live
progress line on a terminal (and ``NO_COLOR``), ``--out`` before or after the subcommand, sources
named as people write them, records found by their resource's DOI, and one-line errors."""

from __future__ import annotations

import json
import os
import pty
import select
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.demo.server import PublisherSite

pytestmark = pytest.mark.network

INVALID_PAGE = "/datasets/sediment-cores-draft.html"  # the demo's one invalid record
VALID_PAGE = "/datasets/kelp-forest-survey.html"
FAILING_PAGE = "/datasets/retired-mooring-2009.html"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _jsonl(out: str) -> list[Any]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _closed_port() -> int:
    """A port on 127.0.0.1 nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- exit statuses ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["refused", "not-found", "blocked"])
def test_a_harvest_that_cannot_read_its_entry_url_exits_3(
    case: str, site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if case == "refused":
        entry, loopback = f"http://127.0.0.1:{_closed_port()}/sitemap.xml", ["--allow-loopback"]
    elif case == "not-found":
        entry, loopback = site.url("/no-such-sitemap.xml"), ["--allow-loopback"]
    else:  # a loopback address without --allow-loopback is blocked
        entry, loopback = site.url("/sitemap.xml"), []
    argv = ["harvest", entry, "--out", str(tmp_path / "out"), *loopback]

    code, out, err = _run(capsys, *argv)

    assert code == 3
    assert json.loads(out)["records"] == 0  # the summary is still printed
    assert "cdif-harvest: " in err and ("could not be read" in err or "nothing harvested" in err)
    # --fail-on never keeps the old behaviour: the harvest ran, exit 0
    assert _run(capsys, *argv, "--fail-on", "never")[0] == 0


def test_a_page_without_metadata_harvests_nothing_and_exits_3(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = site.url("/datasets/glider-mission-notes.html")  # the demo's page with no metadata
    code, _, err = _run(capsys, "harvest", page, "--out", str(tmp_path), "--allow-loopback")
    assert code == 3 and "nothing harvested" in err


def test_fail_on_failed_and_invalid_exit_1_default_exits_0(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    base = ["harvest", site.url("/robots.txt"), "--out", out, "--allow-loopback", "-q"]
    # The demo site holds a failing page and an invalid record, and harvests records.
    assert _run(capsys, *base)[0] == 0
    code, _, err = _run(capsys, *base, "--fail-on", "failed")
    assert code == 1 and FAILING_PAGE in err
    assert _run(capsys, *base, "--fail-on", "invalid")[0] == 1


def test_fail_on_invalid_sees_invalid_records_an_unchanged_page_still_holds(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    invalid = ["harvest", site.url(INVALID_PAGE), "--out", out, "--allow-loopback", "-q"]
    assert _run(capsys, *invalid, "--fail-on", "failed")[0] == 0  # nothing failed
    code, _, err = _run(capsys, *invalid, "--fail-on", "invalid")
    assert code == 1 and "invalid record" in err
    # harvested again, the page is unchanged: its record is still invalid
    code, summary, _ = _run(capsys, *invalid, "--fail-on", "invalid")
    assert json.loads(summary)["outcomes"]["unchanged"] == 1
    assert code == 1
    valid = ["harvest", site.url(VALID_PAGE), "--out", out, "--allow-loopback", "-q"]
    assert _run(capsys, *valid, "--fail-on", "invalid")[0] == 0


def test_schedule_exits_3_when_a_due_source_read_nothing(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    down = f"http://127.0.0.1:{_closed_port()}/sitemap.xml"
    for name, entry in (("demo", site.url("/robots.txt")), ("down", down)):
        add = ["source", "add", name, "--out", out, "--entry-url", entry, "--schedule", "1d"]
        assert _run(capsys, *add)[0] == 0
    code, result, err = _run(capsys, "schedule", "--out", out, "--allow-loopback")
    assert code == 3
    runs = {run["source_id"]: run for run in json.loads(result)["runs"]}
    assert "error" not in runs["demo"] and "could not be read" in runs["down"]["error"]
    assert "cdif-harvest: down: entry URL" in err


def test_help_documents_the_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["harvest", "--help"])
    text = capsys.readouterr().out
    assert "exit status:" in text and "--fail-on" in text
    for code in ("0 ", "1 ", "2 ", "3 ", "130"):
        assert f"\n  {code}" in text


# -- quiet, verbose, the live line -------------------------------------------------------------


def test_quiet_prints_only_errors_on_stderr(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["harvest", site.url("/robots.txt"), "--out", str(tmp_path), "--allow-loopback"]
    code, _, err = _run(capsys, *argv)  # not a terminal, not quiet: the line log
    assert code == 0
    assert "URLs done" in err and "\r" not in err and "\x1b[" not in err
    code, out, err = _run(capsys, *argv, "-q")
    assert code == 0 and err == ""
    assert json.loads(out)["urls"] == 8  # stdout keeps the result
    code, _, err = _run(capsys, *argv, "--quiet", "--fail-on", "failed")
    assert code == 1 and err.count("\n") == 1 and err.startswith("cdif-harvest: ")


def test_verbose_prints_every_urls_outcome(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["harvest", site.url("/robots.txt"), "--out", str(tmp_path), "--allow-loopback", "-v"]
    code, _, err = _run(capsys, *argv)
    assert code == 0
    outcomes = [json.loads(line) for line in (tmp_path / "outcomes.jsonl").read_text().splitlines()]
    lines = err.splitlines()
    for outcome in outcomes:
        (said,) = [line for line in lines if line.split()[1:2] == [outcome["url"]]]
        assert said.split()[0] == outcome["outcome"]
    assert "\r" not in err  # not a terminal: no live line


def _on_a_terminal(argv: Sequence[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the command with stdout and stderr on a pseudo-terminal; its exit status and all
    it wrote there."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "cdif_harvester.cli.main", *argv],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    written = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal's other end closed
                    break
                if not chunk:
                    break
                written += chunk
            elif process.poll() is not None:
                break
        return process.wait(timeout=60), written.decode()
    finally:
        os.close(master)


@pytest.mark.parametrize("no_color", [False, True])
def test_a_terminal_gets_a_live_line_cleared_at_the_end(tmp_path: Path, no_color: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm", COLUMNS="200")
    if no_color:
        env["NO_COLOR"] = "1"
    code, text = _on_a_terminal(["demo", "--out", str(tmp_path), "--port", "0"], env)
    assert code == 0
    assert "\r\x1b[K" in text  # redrawn in place, and cleared
    assert "URLs done" not in text  # not the line log
    summary = json.loads((tmp_path / "summary.json").read_text())
    status = text.rsplit("\r\x1b[K", 1)[0].rsplit("\r\x1b[K", 1)[-1]  # the last line drawn
    assert f"{summary['urls']}/{summary['urls']} URLs" in status and "/s" in status
    assert "ETA" in status
    # cleared before the summary: the summary starts a line of its own
    assert text.split("\r\x1b[K")[-1].lstrip().startswith("{")
    coloured = "\x1b[32mrecord\x1b[0m" in text
    assert coloured is not no_color
    if no_color:
        assert "\x1b[3" not in text


# -- consistency -----------------------------------------------------------------------------


@pytest.fixture
def harvested(
    site: PublisherSite, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[PublisherSite, str]:
    """The demo site harvested into an output directory (as a registered source)."""
    out = str(tmp_path / "out")
    entry = site.url("/robots.txt")
    assert _run(capsys, "source", "add", "demo", "--out", out, "--entry-url", entry)[0] == 0
    assert _run(capsys, "harvest", "--source", "demo", "--out", out, "--allow-loopback")[0] == 0
    return site, out


def test_out_goes_before_or_after_the_subcommand(
    harvested: tuple[PublisherSite, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = harvested
    for group, sub in (("catalog", ["records"]), ("source", ["list"]), ("run", ["list"])):
        before = _run(capsys, group, "--out", out, *sub)
        after = _run(capsys, group, *sub, "--out", out)
        assert before[0] == after[0] == 0
        assert before[1] == after[1] and _jsonl(before[1])
    with pytest.raises(SystemExit) as stop:  # a usage error, as argparse reports them
        main(["catalog", "records"])
    assert stop.value.code == 2 and "required: --out" in capsys.readouterr().err


def test_a_source_is_named_by_host_origin_key_or_source_id(
    harvested: tuple[PublisherSite, str], capsys: pytest.CaptureFixture[str]
) -> None:
    site, out = harvested
    summary = json.loads((Path(out) / "summary.json").read_text())
    records = summary["records"]
    host_port = f"127.0.0.1:{site.port}"
    for name in (host_port, f"127.0.0.1_{site.port}", site.base_url + "/", "127.0.0.1", "demo"):
        code, rows, _ = _run(capsys, "catalog", "--out", out, "records", "--source", name)
        assert code == 0 and len(_jsonl(rows)) == records, name
        code, rows, _ = _run(capsys, "catalog", "--out", out, "urls", "--source", name)
        assert code == 0 and len(_jsonl(rows)) == summary["urls"], name
    code, rows, err = _run(capsys, "catalog", "--out", out, "records", "--source", "nowhere.org")
    assert code == 0 and rows == "" and f"127.0.0.1_{site.port}" in err


def test_changed_since_must_be_a_date(
    harvested: tuple[PublisherSite, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = harvested
    with pytest.raises(SystemExit) as stop:
        main(["catalog", "--out", out, "records", "--changed-since", "notadate"])
    assert stop.value.code == 2
    assert "not an ISO 8601 date" in capsys.readouterr().err
    code, rows, _ = _run(
        capsys, "catalog", "--out", out, "records", "--changed-since", "2000-01-01"
    )
    assert code == 0 and _jsonl(rows)
    code, rows, _ = _run(
        capsys, "catalog", "--out", out, "records", "--changed-since", "2999-01-01T00:00:00Z"
    )
    assert code == 0 and rows == ""


def test_catalog_record_by_record_id_or_resource_doi(
    harvested: tuple[PublisherSite, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = harvested
    _, rows, _ = _run(capsys, "catalog", "--out", out, "records")
    entry = _jsonl(rows)[0]
    doi = entry["resource_id"]
    assert doi.startswith("https://doi.org/10.")
    for wanted in (entry["record_id"], doi, "doi:" + doi.removeprefix("https://doi.org/")):
        code, found, _ = _run(capsys, "catalog", "--out", out, "record", wanted)
        assert code == 0 and _jsonl(found) == [entry], wanted
    code, _, err = _run(capsys, "catalog", "--out", out, "record", "https://doi.org/10.5072/none")
    assert code == 1 and "no record" in err


def test_run_status_names_the_report_it_wrote(
    harvested: tuple[PublisherSite, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, out = harvested
    run_id = json.loads((Path(out) / "summary.json").read_text())["run_id"]
    code, rows, _ = _run(capsys, "run", "status", run_id, "--out", out)
    (run,) = _jsonl(rows)
    assert code == 0 and run["report_key"]
    assert (Path(out) / run["report_key"]).is_file()
    assert run["report_key"].startswith(f"runs/{run_id}/")


def test_out_pointing_at_a_file_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a directory")
    for argv in (
        ["harvest", "http://127.0.0.1:1/sitemap.xml", "--out", str(file)],
        ["source", "list", "--out", str(file / "below")],
        ["catalog", "--out", str(file), "records"],
        ["schedule", "--out", str(file)],
    ):
        code, _, err = _run(capsys, *argv)
        assert code == 2, argv
        assert err.count("\n") == 1 and "is a file, not a directory" in err, argv


def test_dlq_without_a_region_is_a_one_line_error(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE")
    }
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "cdif_harvester.cli.main", "dlq", "redrive"]
        + ["--stack", "harvester", "--queue", "indexer"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert "region" in done.stderr
