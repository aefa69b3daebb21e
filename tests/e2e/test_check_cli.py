"""``cdif-harvest check``, end to end: the real command on files and on URLs of a real server.

Files: a valid CDIF 1.0 record, a CDIF 1.1 record that meets core but breaks a discovery rule it
claims, an HTML page with an embedded record, broken JSON and a document with no Dataset. URLs:
a publisher site on 127.0.0.1 (Signposting, an embedded record, a 404), and addresses the
fetcher must refuse before any packet is sent (see docs/decisions/0072-the-publisher-checker.md).
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.cli.main import main
from cdif_harvester.demo.server import PublisherSite
from tests.support import netguard

pytestmark = pytest.mark.network

GOLDEN = Path(__file__).parents[1] / "unit" / "golden" / "normalisation"
HTML = {"Content-Type": "text/html; charset=utf-8"}
JSONLD = {"Content-Type": "application/ld+json"}


def record_10() -> dict[str, Any]:
    """A CDIF 1.0 record that meets core and discovery 1.0."""
    data = json.loads((GOLDEN / "cdif_shaped.input.json").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def record_11(page: str) -> dict[str, Any]:
    """A CDIF 1.1 record that meets core 1.1 but gives discovery 1.1 a string for a place."""
    return {
        "@context": {
            "schema": "http://schema.org/",
            "dcterms": "http://purl.org/dc/terms/",
            "dcat": "http://www.w3.org/ns/dcat#",
        },
        "@id": "https://doi.org/10.5072/soil-11",
        "@type": ["schema:Dataset"],
        "schema:name": "Soil moisture, Bay of Biscay",
        "schema:identifier": "https://doi.org/10.5072/soil-11",
        "schema:url": page,
        "schema:dateModified": "2026-01-12",
        "schema:license": ["https://creativecommons.org/publicdomain/zero/1.0/"],
        "schema:spatialCoverage": "somewhere in the bay",
        "schema:subjectOf": {
            "@id": page + "#metadata",
            "@type": ["schema:Dataset"],
            "schema:additionalType": [{"@id": "dcat:CatalogRecord"}],
            "schema:about": {"@id": "https://doi.org/10.5072/soil-11"},
            "dcterms:conformsTo": [
                {"@id": "https://w3id.org/cdif/core/1.1"},
                {"@id": "https://w3id.org/cdif/discovery/1.1"},
            ],
        },
    }


def nameless_10() -> dict[str, Any]:
    """The CDIF 1.0 record without its title: core 1.0 requires one."""
    data = record_10()
    del data["schema:name"]
    return data


def page_of(record: dict[str, Any]) -> str:
    script = json.dumps(record).replace("</", "<\\/")
    return (
        "<!doctype html><html><head><title>A dataset</title>"
        f'<script type="application/ld+json">{script}</script></head><body>x</body></html>'
    )


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed command line as a publisher would."""
    return subprocess.run(
        [sys.executable, "-m", "cdif_harvester.cli.main", "check", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def checked(*args: str) -> tuple[int, dict[str, Any]]:
    done = cli(*args, "--json")
    return done.returncode, json.loads(done.stdout)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {
        "valid-10.jsonld": json.dumps(record_10()),
        "discovery-11.json": json.dumps(record_11("https://soil.example.org/11.html")),
        # an HTML page whatever its name says: the checker sniffs the content
        "landing.txt": page_of(record_10()),
        "broken.json": '{"@context": "https://schema.org/", "@type": "Dataset", "name": "x",,\n',
        "person.json": json.dumps(
            {"@context": "https://schema.org/", "@type": "Person", "name": "A. Author"}
        ),
    }
    for name, text in made.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return {name: tmp_path / name for name in made}


# --------------------------------------------------------------------------- files


def test_a_valid_cdif_10_record_passes_with_its_warnings_and_fixes(files: dict[str, Path]) -> None:
    path = files["valid-10.jsonld"]
    done = cli(str(path))
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first == f"{path.resolve().as_uri()}: valid"
    assert "  core 1.0 valid" in done.stdout.splitlines()
    # The warnings (recommended properties) are shown, each with what to do.
    assert "warnings (" in done.stdout
    status, report = checked(str(path))
    assert status == 0
    assert report["verdict"] == "valid"
    (record,) = report["records"]
    assert record["resource_id"] == record_10()["@id"]
    assert [p["summary"] for p in record["profiles"]][0] == "core 1.0 valid"
    assert record["errors"] == []
    assert record["warnings"], "the record lacks recommended properties"
    assert all(w["fix"] and w["pointer"] for w in record["warnings"])
    assert report["counts"]["warnings"] == len(record["warnings"])


def test_a_broken_profile_the_record_claims_fails_the_check(files: dict[str, Path]) -> None:
    done = cli(str(files["discovery-11.json"]))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "  core 1.1 valid" in lines
    assert "  discovery 1.1: 1 error" in lines
    assert any(line.startswith("    /schema:spatialCoverage/0: ") for line in lines)
    status, report = checked(str(files["discovery-11.json"]))
    assert status == 1
    (record,) = report["records"]
    # The harvester keeps it as valid (core decides); the publisher's check does not pass it.
    assert (record["valid"], record["verdict"], report["verdict"]) == (True, "invalid", "invalid")
    discovery = record["profiles"][1]
    assert (discovery["profile"], discovery["status"]) == ("discovery", "invalid")
    assert [e["pointer"] for e in discovery["errors"]] == ["/schema:spatialCoverage/0"]
    assert discovery["errors"][0]["fix"]
    assert report["counts"]["profile_errors"] == 1


def test_a_page_with_an_embedded_record_is_read_as_html(files: dict[str, Path]) -> None:
    status, report = checked(str(files["landing.txt"]))
    assert status == 0, report
    (record,) = report["records"]
    assert record["resource_id"] == record_10()["@id"]
    # The same record as the JSON-LD file on its own, with the same verdicts.
    _, alone = checked(str(files["valid-10.jsonld"]))
    assert record["profiles"] == alone["records"][0]["profiles"]


def test_broken_json_is_malformed_with_where_and_how_to_fix(files: dict[str, Path]) -> None:
    done = cli(str(files["broken.json"]))
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].endswith(": malformed")
    status, report = checked(str(files["broken.json"]))
    assert (status, report["verdict"], report["records"]) == (1, "malformed", [])
    assert report["reason"].startswith("malformed-json: ")
    assert "line 1" in report["reason"]
    assert "line and column" in report["fix"]


def test_a_document_without_a_dataset_has_no_metadata(files: dict[str, Path]) -> None:
    status, report = checked(str(files["person.json"]))
    assert (status, report["verdict"]) == (1, "no-metadata")
    assert "no Dataset" in report["reason"]
    assert '"@type": "Dataset"' in report["fix"]


def test_a_missing_file_or_bad_usage_judges_nothing(tmp_path: Path) -> None:
    done = cli(str(tmp_path / "nowhere.json"))
    assert (done.returncode, done.stdout) == (2, "")
    assert "cannot read" in done.stderr and "nowhere.json" in done.stderr
    assert cli().returncode == 2  # no FILE|URL


def test_standard_input_and_the_publishing_url(files: dict[str, Path]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cdif_harvester.cli.main", "check", "-", "--json"],
        input=files["valid-10.jsonld"].read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == "valid"
    url = "https://soil.example.org/meta/11.json"
    _, report = checked(str(files["discovery-11.json"]), "--url", url)
    assert report["target"] == url


def test_shacl_finds_what_json_schema_cannot(tmp_path: Path) -> None:
    pytest.importorskip("pyshacl")
    record = record_10()
    record["schema:temporalCoverage"] = "2021-05-01/2020-01-01"  # ends before it starts
    path = tmp_path / "backwards.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    status, report = checked(str(path))
    assert (status, report["verdict"], report["shacl"]) == (0, "valid", False)
    status, report = checked(str(path), "--shacl")
    assert (status, report["verdict"], report["shacl"]) == (1, "invalid", True)
    (error,) = report["records"][0]["errors"]
    assert error["keyword"].startswith("shacl:")
    assert "ends before it starts" in error["message"]


# --------------------------------------------------------------------------- URLs


@pytest.fixture
def publisher() -> Iterator[PublisherSite]:
    with PublisherSite(None) as site:
        yield site


def test_a_landing_page_is_resolved_through_its_signposting(publisher: PublisherSite) -> None:
    # Given a landing page that announces its metadata in a Link header only
    publisher.add_route(
        "/datasets/4",
        headers=[
            ("Content-Type", "text/html; charset=utf-8"),
            ("Link", '</meta/4.jsonld>; rel="describedby"; type="application/ld+json"'),
        ],
        body="<html><head><title>4</title></head><body>no metadata here</body></html>",
    )
    publisher.add_route("/meta/4.jsonld", headers=JSONLD, body=json.dumps(record_10()))
    url = publisher.url("/datasets/4")
    # When the publisher checks the page
    done = cli(url, "--allow-loopback")
    # Then the metadata is found as a harvest finds it, and judged
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == [
        f"{url}: valid",
        "  found by: http-link (a describedby link in the HTTP Link header)",
    ]
    status, report = checked(url, "--allow-loopback")
    assert (status, report["pattern"]) == (0, "http-link")
    (record,) = report["records"]
    assert record["document"] == publisher.url("/meta/4.jsonld")
    paths = [target for method, target, _ in publisher.requests if method == "GET"]
    assert "/meta/4.jsonld" in paths


def test_an_embedded_invalid_record_fails_with_its_errors_and_fixes(
    publisher: PublisherSite,
) -> None:
    publisher.add_route("/datasets/draft", headers=HTML, body=page_of(nameless_10()))
    url = publisher.url("/datasets/draft")
    done = cli(url, "--allow-loopback")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  errors (1):" in done.stdout.splitlines()
    status, report = checked(url, "--allow-loopback")
    assert (status, report["verdict"], report["pattern"]) == (1, "invalid", "embedded-script")
    (record,) = report["records"]
    (error,) = record["errors"]
    assert error["message"].startswith("schema:name is required")
    assert "title" in error["fix"]
    assert record["profiles"][0]["summary"] == "core 1.0: 1 error"


def test_a_page_that_cannot_be_read_judges_nothing(publisher: PublisherSite) -> None:
    publisher.add_route("/gone", status=404, headers=HTML, body="<p>not here</p>")
    status, report = checked(publisher.url("/gone"), "--allow-loopback")
    assert (status, report["verdict"]) == (2, "failed")
    assert report["reason"].startswith("http-404: ")
    assert report["fix"]


def test_loopback_is_refused_unless_allowed_before_any_request(publisher: PublisherSite) -> None:
    publisher.add_route("/datasets/4", headers=HTML, body=page_of(record_10()))
    status, report = checked(publisher.url("/datasets/4"))
    assert (status, report["verdict"]) == (2, "failed")
    assert "loopback" in report["reason"]
    assert publisher.requests == []


def test_a_private_address_is_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In process, so the network guard and a spy on every socket see what the check does.
    connects: list[Any] = []
    real_connect = socket.socket.connect

    def spy(self: socket.socket, address: Any) -> None:
        connects.append(address)
        real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", spy)
    escapes_before = len(netguard.attempts)
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(["check", "http://10.20.30.40/datasets/4", "--json", "--allow-loopback"])
    report = json.loads(out.getvalue())
    assert (status, report["verdict"]) == (2, "failed")
    assert report["reason"].startswith("private-address: ")
    assert connects == []
    assert len(netguard.attempts) == escapes_before
