"""SHACL validation with our shapes: each shape breaks and holds, the corpus conforms, no pyshacl.

Records are made by normalising small plain schema.org documents; where normalisation itself
repairs what a shape checks (identities, ``schema:about``), the normalised record is then
altered, as a record from elsewhere could be.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.records import shacl
from cdif_harvester.domain.records.normalisation import normalise
from cdif_harvester.domain.records.shacl import (
    ShaclUnavailable,
    check_shacl_available,
    shacl_issues,
)
from cdif_harvester.domain.records.validation import ValidationIssue, validate_record
from cdif_harvester.errors import PermanentError

# Everything but the tests of the missing-pyshacl path needs pyshacl (the shacl extra)
needs_pyshacl = pytest.mark.skipif(
    importlib.util.find_spec("pyshacl") is None, reason="pyshacl (the shacl extra) not installed"
)

RESOURCE = "https://data.example/ds/4"
RECORD = "https://data.example/ds/4#metadata"
PAGE = "https://data.example/ds/4.html"
ORGANISATION = "https://ror.org/000000001"


def _document(**changes: Any) -> dict[str, Any]:
    """A plain schema.org Dataset with its catalog record; keyword arguments replace members."""
    document: dict[str, Any] = {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": RESOURCE,
        "name": "Soil moisture, field station 4",
        "identifier": "https://doi.org/10.5555/ds4",
        "url": PAGE,
        "dateModified": "2024-02-02",
        "license": "https://spdx.org/licenses/CC-BY-4.0",
        "temporalCoverage": "2019-03-01/2021-10-31",
        # the second creator is given by @id only and described as the publisher
        "creator": [
            {"@id": "https://orcid.org/0000-0003-0000-0004", "@type": "Person", "name": "Roe, R."},
            {"@id": ORGANISATION},
        ],
        "publisher": {"@id": ORGANISATION, "@type": "Organization", "name": "Field Stations"},
        "distribution": [
            {
                "@type": "DataDownload",
                "contentUrl": "https://data.example/ds/4.csv",
                "provider": {"@id": ORGANISATION},
            }
        ],
        "subjectOf": {
            "@id": RECORD,
            "@type": "Dataset",
            "additionalType": "dcat:CatalogRecord",
            "about": {"@id": RESOURCE},
            "dcterms:conformsTo": {"@id": "https://w3id.org/cdif/core/1.0"},
        },
    }
    document.update(changes)
    return document


def _record(**changes: Any) -> dict[str, Any]:
    [result] = normalise(_document(**changes), document_url=PAGE)
    return result.record


def _altered(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    record = _record()
    change(record)
    return record


def _only(issues: list[ValidationIssue]) -> ValidationIssue:
    assert len(issues) == 1, issues
    return issues[0]


# --- the record that keeps every shape --------------------------------------------------


@needs_pyshacl
def test_a_record_that_keeps_every_shape_conforms() -> None:
    # Given a record using what the shapes look at (agents by @id, an interval, about)
    record = _record()
    assert validate_record(record).valid
    assert record["schema:creator"]["@list"][1] == {"@id": ORGANISATION}
    # Then no shape finds anything
    assert shacl_issues(record) == []


@needs_pyshacl
def test_the_record_is_not_changed() -> None:
    record = _record()
    before = copy.deepcopy(record)
    shacl_issues(record)
    assert record == before


# --- identifiers ------------------------------------------------------------------------


@needs_pyshacl
@pytest.mark.parametrize(
    ("written", "shown"),
    [(None, "missing"), ("_:b0", '"_:b0"')],
    ids=["missing", "blank-node"],
)
def test_resource_id_must_be_an_iri(written: str | None, shown: str) -> None:
    def change(record: dict[str, Any]) -> None:
        record.pop("@id")
        if written is not None:
            record["@id"] = written

    issues = shacl_issues(_altered(change))
    # and schema:about, which still names the IRI, no longer names the resource
    assert [(i.pointer, i.keyword) for i in issues] == [
        ("/@id", "shacl:nodeKind"),
        ("/schema:subjectOf/schema:about", "shacl:or"),
    ]
    assert issues[0].message == (
        "the resource @id must be an IRI (e.g. https://doi.org/10.1234/abcd), not a blank node;"
        f" it is {shown}"
    )


@needs_pyshacl
def test_metadata_record_id_must_be_an_iri() -> None:
    def change(record: dict[str, Any]) -> None:
        record["schema:subjectOf"]["@id"] = "_:record"

    issue = _only(shacl_issues(_altered(change)))
    assert issue == ValidationIssue(
        "/schema:subjectOf/@id",
        "the metadata record (schema:subjectOf) @id must be an IRI (e.g. the landing page URL"
        ' with #metadata), not a blank node; it is "_:record"',
        "shacl:nodeKind",
    )


@needs_pyshacl
def test_relative_references_are_not_judged() -> None:
    # A published document may say "#metadata" and about "" (itself): both resolve against
    # the document's URL, which a record does not carry, so they cannot be judged here
    def change(record: dict[str, Any]) -> None:
        record["schema:subjectOf"]["@id"] = "#metadata"
        record["schema:subjectOf"]["schema:about"] = {"@id": ""}

    assert shacl_issues(_altered(change)) == []


@needs_pyshacl
def test_metadata_record_and_resource_need_their_own_ids() -> None:
    def change(record: dict[str, Any]) -> None:
        record["schema:subjectOf"]["@id"] = RESOURCE

    issue = _only(shacl_issues(_altered(change)))
    assert issue == ValidationIssue(
        "/schema:subjectOf/@id",
        "the metadata record (schema:subjectOf) has the same @id as the resource it describes"
        f' ("{RESOURCE}"): give the record its own IRI (e.g. the landing page URL with'
        " #metadata)",
        "shacl:not",
    )


# --- schema:about points back at the root -----------------------------------------------


@needs_pyshacl
def test_about_must_name_the_root() -> None:
    def change(record: dict[str, Any]) -> None:
        record["schema:subjectOf"]["schema:about"] = {"@id": "https://data.example/ds/5"}

    record = _altered(change)
    # JSON Schema cannot tell: it only asks for an @id
    assert validate_record(record).valid
    issue = _only(shacl_issues(record))
    assert issue == ValidationIssue(
        "/schema:subjectOf/schema:about",
        "schema:subjectOf/schema:about must give the @id of the resource the record describes"
        " (the root @id), not https://data.example/ds/5",
        "shacl:or",
    )


@needs_pyshacl
def test_about_may_name_the_root_with_a_curie() -> None:
    # Read as RDF, "ds:4" is the root IRI: a string comparison would wrongly fail this
    def change(record: dict[str, Any]) -> None:
        record["@context"]["ds"] = "https://data.example/ds/"
        record["schema:subjectOf"]["schema:about"] = {"@id": "ds:4"}

    assert shacl_issues(_altered(change)) == []


@needs_pyshacl
def test_a_missing_about_is_left_to_json_schema() -> None:
    # one fault is reported once: JSON Schema reports the missing member, the shapes do not
    record = _altered(lambda record: record["schema:subjectOf"].pop("schema:about"))
    assert "/schema:subjectOf/schema:about" in [e.pointer for e in validate_record(record).errors]
    assert shacl_issues(record) == []


# --- agents given by @id only -----------------------------------------------------------


@needs_pyshacl
def test_creator_given_by_id_only_must_be_described() -> None:
    # Given a creator named by ORCID only, described nowhere in the record
    creators = [
        {"@id": "https://orcid.org/0000-0003-0000-0004", "@type": "Person", "name": "Roe, R."},
        {"@id": "https://orcid.org/0000-0002-0000-0009"},
    ]
    record = _record(creator=creators)
    assert validate_record(record).valid
    issue = _only(shacl_issues(record))
    assert issue == ValidationIssue(
        "/schema:creator/@list/1",
        "schema:creator names https://orcid.org/0000-0002-0000-0009, an agent the record does"
        " not describe: give it an @type (schema:Person or schema:Organization) and a"
        " schema:name where it first appears",
        "shacl:node",
    )


@needs_pyshacl
def test_creator_not_written_as_a_list_is_checked_too() -> None:
    def change(record: dict[str, Any]) -> None:
        record["schema:creator"] = [{"@id": "https://orcid.org/0000-0002-0000-0009"}]

    issue = _only(shacl_issues(_altered(change)))
    assert (issue.pointer, issue.keyword) == ("/schema:creator/0", "shacl:or")


@needs_pyshacl
def test_nested_provider_given_by_id_only_must_be_described() -> None:
    # Given a distribution provider named by @id only, and no publisher that describes it
    record = _record(publisher={"@id": "https://ror.org/0000000aa", "@type": "Organization"})
    issues = shacl_issues(record)
    assert [(i.pointer, i.keyword) for i in issues] == [
        ("/schema:creator/@list/1", "shacl:node"),
        ("/schema:distribution/0/schema:provider/0", "shacl:node"),
    ]
    assert issues[1].message.startswith(f"schema:provider names {ORGANISATION}, an agent")


@needs_pyshacl
@pytest.mark.parametrize("key", ["contributor", "publisher", "provider"])
def test_other_agent_properties_given_by_id_only_must_be_described(key: str) -> None:
    record = _record(**{key: [{"@id": "https://orcid.org/0000-0002-0000-0009"}]})
    issue = _only([i for i in shacl_issues(record) if f"schema:{key} " in i.message])
    assert issue.pointer.startswith(f"/schema:{key}")
    assert issue.message.startswith(f"schema:{key} names https://orcid.org/0000-0002-0000-0009")


@needs_pyshacl
def test_funder_given_by_id_only_must_be_described() -> None:
    funding = [
        {"@type": "MonetaryGrant", "name": "Grant 7", "funder": {"@id": "https://ror.org/x1"}}
    ]
    issue = _only(shacl_issues(_record(funding=funding)))
    assert (issue.pointer, issue.keyword) == ("/schema:funding/0/schema:funder", "shacl:node")


@needs_pyshacl
def test_inline_agents_and_literals_are_left_to_json_schema() -> None:
    # an inline Person without @id is described where it stands; a nil value is a literal
    creators = [{"@type": "Person", "name": "Roe, R."}, "nil:unknown"]
    distribution = [{"@type": "DataDownload", "contentUrl": "https://data.example/ds/4.csv"}]
    record = _record(creator=creators, publisher=None, distribution=distribution)
    assert shacl_issues(record) == []


# --- temporal coverage in order ---------------------------------------------------------


@needs_pyshacl
@pytest.mark.parametrize(
    "interval",
    [
        "2021-10-31/2019-03-01",
        "2021/2020",
        "2020-03/2020-02-28",
        "2020-01-02T01:00Z/2020-01-01T21:00Z",
        "2020-01-02/2020-01-01T23:00Z",
    ],
)
def test_temporal_coverage_must_not_end_before_it_starts(interval: str) -> None:
    record = _record(temporalCoverage=interval)
    assert validate_record(record).valid
    issue = _only(shacl_issues(record))
    assert issue == ValidationIssue(
        "/schema:temporalCoverage",
        f'schema:temporalCoverage "{interval}" ends before it starts: give the interval as'
        " start/end",
        "shacl:sparql",
    )


@needs_pyshacl
@pytest.mark.parametrize(
    "interval",
    [
        "2019-03-01/2021-10-31",
        "2007/2007",
        "2019-12-20/2019-12",  # the end month contains the start day
        "2019-12/2019-12-05",
        "2020-01-02T01:00+05:00/2020-01-01T21:00Z",  # 20:00Z before 21:00Z
        "../2020",
        "2020-01-01",
        "Late Jurassic",
    ],
)
def test_temporal_coverage_in_order_or_not_judged(interval: str) -> None:
    assert shacl_issues(_record(temporalCoverage=interval)) == []


@needs_pyshacl
def test_temporal_coverage_pointer_names_the_interval_in_an_array() -> None:
    def change(record: dict[str, Any]) -> None:
        record["schema:temporalCoverage"] = ["2019/2020", "2020/2019"]

    issue = _only(shacl_issues(_altered(change)))
    assert issue.pointer == "/schema:temporalCoverage/1"


# --- records that are not JSON-LD -------------------------------------------------------


@needs_pyshacl
def test_a_record_that_is_not_json_ld_is_reported_not_raised() -> None:
    # a remote context is never fetched: the record cannot be read as RDF
    record = _altered(lambda record: record.update({"@context": "https://ctx.example/c.jsonld"}))
    issue = _only(shacl_issues(record))
    assert (issue.pointer, issue.keyword) == ("", "shacl:jsonld")
    assert "SHACL checks were not run" in issue.message


# --- the official corpus ----------------------------------------------------------------


def _corpus_documents(corpus: Path) -> list[tuple[str, Any]]:
    paths = [
        *sorted((corpus / "cdif-core-1.0").glob("*/example*.json")),
        *sorted((corpus / "cdif-discovery-1.0" / "examples").glob("*.json*")),
    ]
    return [(path.name, json.loads(path.read_text(encoding="utf-8"))) for path in paths]


@needs_pyshacl
def test_corpus_records_valid_per_json_schema_conform(corpus: Path) -> None:
    # Given every official example, as published and as normalised
    judged = []
    for name, document in _corpus_documents(corpus):
        candidates = [(name, document)]
        if isinstance(document, dict) and any(k in document for k in ("@type", "@graph")):
            with contextlib.suppress(PermanentError):  # catalog-record-only examples
                candidates += [
                    (f"{name} (normalised)", r.record)
                    for r in normalise(document, document_url=f"https://corpus.example/{name}")
                ]
        for label, record in candidates:
            if isinstance(record, dict) and validate_record(record).valid:
                judged.append((label, record))
    assert len(judged) >= 20
    # Then none of them breaks our shapes
    assert [(label, shacl_issues(record)) for label, record in judged if shacl_issues(record)] == []
    # and the check can fail: one of them with a wrong schema:about does not conform
    label, record = judged[0]
    broken = copy.deepcopy(record)
    broken["schema:subjectOf"]["schema:about"] = {"@id": "https://elsewhere.example/x"}
    assert [i.keyword for i in shacl_issues(broken)] == ["shacl:or"]


# --- without pyshacl --------------------------------------------------------------------


def test_without_pyshacl_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given pyshacl cannot be imported (None in sys.modules makes "import pyshacl" fail)
    monkeypatch.setitem(sys.modules, "pyshacl", None)
    with pytest.raises(ShaclUnavailable) as raised:
        shacl_issues(_record())
    # the hint names what pip can install: pyshacl (the harvester is not on a registry)
    assert "pip install 'pyshacl>=0.26'" in str(raised.value)
    assert "cdif-harvester[" not in str(raised.value)
    assert isinstance(raised.value, PermanentError)
    assert raised.value.reason == "shacl-unavailable"
    with pytest.raises(ShaclUnavailable):
        check_shacl_available()


def test_the_product_imports_without_pyshacl_or_rdflib() -> None:
    # In a fresh interpreter where neither can be imported, the module and JSON Schema
    # validation still load and work; only asking for SHACL fails, with our error
    script = (
        "import sys\n"
        "sys.modules['pyshacl'] = None\n"
        "sys.modules['rdflib'] = None\n"
        "from cdif_harvester.domain.records.shacl import ShaclUnavailable, shacl_issues\n"
        "from cdif_harvester.domain.records.validation import validate_record\n"
        "validate_record({})\n"
        "try:\n"
        "    shacl_issues({})\n"
        "except ShaclUnavailable:\n"
        "    print('unavailable')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "unavailable"), done.stderr


# --- cost -------------------------------------------------------------------------------


@needs_pyshacl
def test_sparql_text_is_parsed_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from rdflib.plugins.sparql import processor

    record = _record()
    shacl_issues(record)  # warm: shapes and query prepared
    parsed: list[str] = []
    real = processor.parseQuery

    def counting(text: str) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(processor, "parseQuery", counting)
    shacl_issues(record)
    shacl_issues(_record(temporalCoverage="2021/2020"))
    assert parsed == []
    assert shacl._data_graph_class() is shacl._data_graph_class()
