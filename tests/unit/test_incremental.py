"""Incremental harvesting: the checks that decide whether a URL or a record is unchanged.

A wrong "unchanged" loses data (a changed record is never stored); a wrong "changed" re-harvests
and rewrites. The hashes below are also held in the catalogue between harvests, so their value
for a given input must not drift from one release to the next.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from cdif_harvester.domain.discovery.incremental import (
    block_hash,
    fingerprint,
    lastmod_not_newer,
    lastmod_reason,
    record_digest,
    sd_dates,
)

# --- fingerprint -------------------------------------------------------------------------


def test_fingerprint_is_the_hash_of_the_pattern_and_the_document_keys() -> None:
    keys = ["raw/ab12.json", "raw/cd34.json"]
    expected = hashlib.sha256(b"describedby\nraw/ab12.json\nraw/cd34.json").hexdigest()
    assert fingerprint("describedby", keys) == expected
    assert fingerprint("describedby", iter(keys)) == expected  # any iterable


def test_fingerprint_tells_apart_pattern_documents_and_their_order() -> None:
    base = fingerprint("describedby", ["raw/a", "raw/b"])
    assert fingerprint("describedby", ["raw/a", "raw/b"]) == base
    assert fingerprint("embedded", ["raw/a", "raw/b"]) != base
    assert fingerprint("describedby", ["raw/a"]) != base
    assert fingerprint("describedby", ["raw/a", "raw/c"]) != base
    assert fingerprint("describedby", ["raw/b", "raw/a"]) != base
    # the separator keeps the keys apart: ["raw/a", "raw/b"] is not ["raw/araw/b"]
    assert fingerprint("describedby", ["raw/araw/b"]) != base
    assert fingerprint("describedby", []) == hashlib.sha256(b"describedby").hexdigest()


def test_fingerprint_of_non_ascii_keys() -> None:
    expected = hashlib.sha256("p\nraw/café".encode()).hexdigest()
    assert fingerprint("p", ["raw/café"]) == expected


# --- lastmod ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "held", "skipped"),
    [
        pytest.param("2024-05-01", "2024-05-01", True, id="same-day"),
        pytest.param("2024-04-30", "2024-05-01", True, id="older"),
        pytest.param("2024-05-02", "2024-05-01", False, id="newer"),
        pytest.param("2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00Z", True, id="same-instant"),
        pytest.param("2024-05-01T12:00:01+02:00", "2024-05-01T10:00:00Z", False, id="1s-newer"),
        pytest.param("2024-05-01T10:00:00.5Z", "2024-05-01T10:00:00.4Z", False, id="sub-second"),
        pytest.param("2024-05-01T10:00:00.4Z", "2024-05-01T10:00:00.5Z", True, id="sub-second-old"),
        pytest.param(None, "2024-05-01", False, id="no-lastmod-in-sitemap"),
        pytest.param("2024-05-01", None, False, id="held-url-without-stored-lastmod"),
        pytest.param(None, None, False, id="neither"),
        pytest.param("yesterday", "2024-05-01", False, id="unreadable-new"),
        pytest.param("2024-05-01", "", False, id="empty-held"),
    ],
)
def test_a_url_is_skipped_only_when_both_lastmods_are_known_and_not_newer(
    new: str | None, held: str | None, skipped: bool
) -> None:
    assert lastmod_not_newer(new, held) is skipped


def test_lastmod_reason_names_both_dates() -> None:
    assert lastmod_reason("2024-05-01T00:00:00Z", "2024-06-01T00:00:00Z") == (
        "lastmod: the sitemap's lastmod 2024-05-01T00:00:00Z is not newer than "
        "2024-06-01T00:00:00Z, when its records were harvested (nothing fetched)"
    )


# --- block_hash ----------------------------------------------------------------------------


def test_block_hash_ignores_key_order_and_formatting() -> None:
    one = {"@id": "https://a.example/d/1", "@type": "Dataset", "name": "Kelp", "n": [1, 2]}
    other = {"n": [1, 2], "name": "Kelp", "@type": "Dataset", "@id": "https://a.example/d/1"}
    assert block_hash(one) == block_hash(other)
    assert block_hash({"a": {"y": 1, "x": 2}}) == block_hash({"a": {"x": 2, "y": 1}})


def test_block_hash_sees_every_change_of_content() -> None:
    block = {"@type": "Dataset", "name": "Kelp", "n": [1, 2]}
    assert block_hash(block) != block_hash({**block, "name": "Kelp forest"})
    assert block_hash(block) != block_hash({**block, "n": [2, 1]})  # list order is content
    assert block_hash(block) != block_hash({**block, "extra": None})
    assert block_hash([block]) != block_hash(block)


def test_block_hash_is_stable_across_releases() -> None:
    # The canonical form: sorted keys, no spaces, non-ASCII as UTF-8 (not \u escapes).
    block = {"name": "Café", "@type": "Dataset", "n": [1, 2.5, None, True]}
    canonical = '{"@type":"Dataset","n":[1,2.5,null,true],"name":"Café"}'.encode()
    assert block_hash(block) == hashlib.sha256(canonical).hexdigest()


# --- sdDatePublished -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        pytest.param({"sdDatePublished": "2024-05-01"}, ("2024-05-01",), id="plain"),
        pytest.param({"schema:sdDatePublished": "2024-05-01"}, ("2024-05-01",), id="prefixed"),
        pytest.param(
            {"http://schema.org/sdDatePublished": "2024-05-01"}, ("2024-05-01",), id="full-iri"
        ),
        pytest.param(
            {"sdDatePublished": ["2024-05-02", "2024-05-01", "2024-05-02"]},
            ("2024-05-01", "2024-05-02"),
            id="array-sorted-and-deduplicated",
        ),
        pytest.param(
            {"sdDatePublished": {"@value": "2024-05-01", "@type": "Date"}},
            ("2024-05-01",),
            id="value-object",
        ),
        pytest.param(
            {"sdDatePublished": [{"@value": "2024-05-01"}, "2024-05-03"]},
            ("2024-05-01", "2024-05-03"),
            id="array-of-value-objects-and-strings",
        ),
        pytest.param({"sdDatePublished": "  2024-05-01\n"}, ("2024-05-01",), id="stripped"),
        pytest.param(
            {"sdDatePublished": ["", "  ", None, 20240501, {"@value": 1}, {"@id": "x"}]},
            (),
            id="blank-and-non-strings-ignored",
        ),
        pytest.param(
            {
                "@graph": [
                    {"@type": "Dataset", "sdDatePublished": "2024-05-02"},
                    {"@type": "Dataset", "isPartOf": {"sdDatePublished": "2024-05-01"}},
                ]
            },
            ("2024-05-01", "2024-05-02"),
            id="nested-in-graph",
        ),
        pytest.param(
            [{"sdDatePublished": "2024-05-02"}, [{"sdDatePublished": "2024-05-01"}]],
            ("2024-05-01", "2024-05-02"),
            id="top-level-list",
        ),
        pytest.param({"datePublished": "2024-05-01", "name": "x"}, (), id="other-dates-not"),
        pytest.param({"sdDatePublishedX": "2024-05-01"}, (), id="similar-key-not"),
        pytest.param("2024-05-01", (), id="a-bare-string-is-no-block"),
    ],
)
def test_sd_dates_reads_every_form(block: Any, expected: tuple[str, ...]) -> None:
    assert sd_dates(block) == expected


# --- record_digest -------------------------------------------------------------------------

RECORD = {"@id": "https://a.example/d/1", "@type": "schema:Dataset", "schema:name": "Kelp"}
REPORT: dict[str, Any] = {
    "valid": True,
    "conformance": "https://w3id.org/cdif/core/1.0",
    "rules": "cdif-core-1.0",
    "errors": [],
    "warnings": [{"path": "$.schema:license", "message": "no licence"}],
}
LINKS = [{"href": "https://a.example/d/1.json", "rel": "describedby"}]
AUTHORITY = {"origin": "https://a.example", "verified": True}


def digest(**changes: Any) -> str:
    parts = {"record": RECORD, "report": REPORT, "links": LINKS, "authority": AUTHORITY}
    parts.update(changes)
    return record_digest(parts["record"], parts["report"], parts["links"], parts["authority"])


def test_record_digest_is_stable_across_releases() -> None:
    # Held in the catalogue: the same record must give the same digest after an upgrade.
    verdict = {key: REPORT[key] for key in ("valid", "conformance", "errors", "warnings", "rules")}
    canonical = (
        '[{"@id":"https://a.example/d/1","@type":"schema:Dataset","schema:name":"Kelp"},'
        '{"conformance":"https://w3id.org/cdif/core/1.0","errors":[],"rules":"cdif-core-1.0",'
        '"valid":true,"warnings":[{"message":"no licence","path":"$.schema:license"}]},'
        '[{"href":"https://a.example/d/1.json","rel":"describedby"}],'
        '{"origin":"https://a.example","verified":true}]'
    )
    assert verdict == REPORT
    assert digest() == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.parametrize(
    ("name", "changed"),
    [
        ("valid", False),
        ("conformance", "https://w3id.org/cdif/discovery/1.0"),
        ("rules", "cdif-discovery-1.0"),
        ("errors", [{"path": "$.schema:name", "message": "missing"}]),
        ("warnings", []),
    ],
)
def test_a_record_whose_verdict_changed_is_rewritten(name: str, changed: Any) -> None:
    # The record itself is the same, but its report says something else: the stored report
    # (and the record's validity in the catalogue) must be replaced.
    assert digest(report={**REPORT, name: changed}) != digest()


def test_a_verdict_part_appearing_or_disappearing_changes_the_digest() -> None:
    without_rules = {key: value for key, value in REPORT.items() if key != "rules"}
    assert digest(report=without_rules) != digest()
    assert digest(report={**without_rules, "rules": None}) != digest(report=without_rules)


def test_the_record_its_links_and_its_authority_are_in_the_digest() -> None:
    assert digest(record={**RECORD, "schema:name": "Kelp forest"}) != digest()
    assert digest(record=None) != digest()
    assert digest(links=[]) != digest()
    assert digest(authority={**AUTHORITY, "verified": False}) != digest()
    assert digest(authority=None) != digest()


def test_what_is_not_the_verdict_does_not_force_a_rewrite() -> None:
    # A report carries when and how it was made; only its verdict decides a rewrite.
    noisy = {"checked_at": "2026-01-01T00:00:00Z", "engine": "jsonschema-rs", **REPORT}
    assert digest(report=noisy) == digest()
    reordered = dict(reversed(list(REPORT.items())))
    assert digest(report=reordered) == digest()
    assert digest(record=dict(reversed(list(RECORD.items())))) == digest()
