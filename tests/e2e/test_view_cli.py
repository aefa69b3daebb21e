"""``cdif-harvest view`` and ``history`` on a harvest of the demo site (served on 127.0.0.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.cli.runner import LocalHarvester
from cdif_harvester.demo.server import PublisherSite
from cdif_harvester.domain.views.pidkernel import pid_kernel_view

pytestmark = pytest.mark.network

KELP = "/datasets/kelp-forest-survey.html"
DRAFT = "/datasets/sediment-cores-draft.html"


@pytest.fixture
def harvested(site: PublisherSite, tmp_path: Path) -> tuple[PublisherSite, Path]:
    out = tmp_path / "out"
    with LocalHarvester(out, allow_loopback=True) as harvester:
        harvester.harvest(site.url("/robots.txt"))
    return site, out


def _record_line(out: Path, url: str) -> dict[str, object]:
    for line in (out / "outcomes.jsonl").read_text().splitlines():
        outcome = json.loads(line)
        if outcome["url"] == url:
            (record,) = outcome["records"]
            assert isinstance(record, dict)
            return record
    raise AssertionError(f"no outcome for {url}")


def _run(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, bytes, bytes]:
    capsysbinary.readouterr()
    code = main(list(argv))
    captured = capsysbinary.readouterr()
    return code, captured.out, captured.err


def test_a_record_is_found_by_id_resource_and_url_alike(
    harvested: tuple[PublisherSite, Path], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    site, out = harvested
    record = _record_line(out, site.url(KELP))
    stored = (out / str(record["record"])).read_bytes()
    kernel = json.dumps(pid_kernel_view(json.loads(stored)), indent=2, ensure_ascii=False)
    for wanted in (str(record["record_id"]), str(record["resource_id"]), site.url(KELP)):
        assert _run(capsysbinary, "view", "--out", str(out), wanted) == (0, kernel.encode(), b"")
    # the stored documents themselves, as they are
    code, printed, _ = _run(
        capsysbinary, "view", "--out", str(out), site.url(KELP), "--view", "record"
    )
    assert (code, printed) == (0, stored)
    code, printed, _ = _run(
        capsysbinary, "view", "--out", str(out), site.url(KELP), "--view", "report"
    )
    assert (code, printed) == (0, (out / str(record["report"])).read_bytes())


def test_an_invalid_record_has_its_report_and_no_view(
    harvested: tuple[PublisherSite, Path], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    site, out = harvested
    code, printed, err = _run(capsysbinary, "view", "--out", str(out), site.url(DRAFT))
    assert (code, printed) == (1, b"") and b"not valid" in err
    code, printed, _ = _run(
        capsysbinary, "view", "--out", str(out), site.url(DRAFT), "--view", "report"
    )
    assert code == 0 and json.loads(printed)["valid"] is False


def test_unknown_records_and_missing_catalogues_are_refused(
    harvested: tuple[PublisherSite, Path],
    capsysbinary: pytest.CaptureFixture[bytes],
    tmp_path: Path,
) -> None:
    _, out = harvested
    code, printed, err = _run(capsysbinary, "view", "--out", str(out), "https://nowhere.example/x")
    assert (code, printed) == (1, b"") and b"no record" in err
    code, _, err = _run(capsysbinary, "history", "--out", str(tmp_path / "empty"), "x")
    assert code == 2 and b"no catalogue" in err


def test_the_history_of_a_record_harvested_once_is_its_latest_version(
    harvested: tuple[PublisherSite, Path], capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    site, out = harvested
    record = _record_line(out, site.url(KELP))
    code, printed, _ = _run(capsysbinary, "history", "--out", str(out), site.url(KELP))
    assert code == 0
    (line,) = [json.loads(text) for text in printed.decode().splitlines()]
    assert line["key"] == record["record"] and line["latest"] is True
