"""The publisher report: figures, escaping, grouping of problems, Signposting levels, sources."""

from __future__ import annotations

from collections import Counter
from html.parser import HTMLParser
from typing import Any

import pytest

from cdif_harvester.report import (
    FIXES,
    MAX_URL_ROWS,
    classify_error,
    classify_reason,
    render_report,
    signposting_level,
)

BASE = "https://data.example.org"


class _Page(HTMLParser):
    """What a test needs from a rendered page: tags, data-count values, text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.counts: dict[str, list[str]] = {}  # every element's text, per data-count name
        self.text: list[str] = []
        self._open: list[tuple[str | None, list[str]]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag not in ("meta", "br", "hr", "img", "input", "link", "rect"):
            self._open.append((attributes.get("data-count"), []))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("rect",) or not self._open:
            return
        name, parts = self._open.pop()
        if name is not None:
            self.counts.setdefault(name, []).append("".join(parts).strip())

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, parts in self._open:
            parts.append(data)

    def count(self, name: str) -> int:
        """The number shown as ``name``; where it is shown twice, both must say the same."""
        values = set(self.counts.get(name, []))
        assert len(values) == 1, f"{name}: {self.counts.get(name)}"
        return int(values.pop())

    @property
    def all_text(self) -> str:
        return " ".join(self.text)

    def names(self) -> set[str]:
        return {tag for tag, _ in self.tags}


def _record(record_id: str, *, valid: bool = True, errors: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "record_id": record_id,
        "resource_id": record_id + "#resource",
        "valid": valid,
        "errors": list(errors),
        "record": None,
        "report": "reports/x.json",
        "views": {},
    }


def _outcome(
    url: str,
    outcome: str,
    *,
    reason: str | None = None,
    pattern: str | None = None,
    records: list[dict[str, Any]] | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "url": url,
        "outcome": outcome,
        "reason": reason,
        "pattern": pattern,
        "records": records or [],
    }
    if source is not None:
        line["source"] = source
    return line


def _summary_of(outcomes: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """summary.json as the local runner writes it for these outcomes."""
    kinds = Counter(o["outcome"] for o in outcomes)
    records = [r for o in outcomes for r in o["records"]]
    valid = sum(1 for r in records if r["valid"])
    summary: dict[str, Any] = {
        "run_id": "20260101T000000Z-abcdef12",
        "entry_url": f"{BASE}/robots.txt",
        "entry_urls": [f"{BASE}/robots.txt"],
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
        "elapsed_seconds": 60.0,
        "urls": len(outcomes),
        "outcomes": {
            k: kinds.get(k, 0)
            for k in ("record", "no-metadata", "unchanged", "disallowed", "blocked", "failed")
        },
        "patterns": dict(sorted(Counter(o["pattern"] for o in outcomes if o["pattern"]).items())),
        "records": len(records),
        "valid_records": valid,
        "invalid_records": len(records) - valid,
        "views": 0,
        "crosswalk_errors": [],
        "withdrawn": [],
        "signmaps": [],
        "files": {"outcomes": "outcomes.jsonl", "catalog": "catalog.sqlite"},
    }
    summary.update(extra)
    return summary


def _mixed_run() -> list[dict[str, Any]]:
    missing_license = "schema:license or schema:conditionsOfAccess is required (Rights, 1..*)"
    return [
        _outcome(f"{BASE}/a.html", "record", pattern="embedded-script", records=[_record("a")]),
        _outcome(f"{BASE}/b.html", "record", pattern="http-link", records=[_record("b")]),
        _outcome(
            f"{BASE}/c.html",
            "record",
            pattern="linkset",
            records=[_record("c1"), _record("c2", valid=False, errors=(missing_license,))],
        ),
        _outcome(f"{BASE}/d.html", "unchanged", reason="lastmod: not newer"),
        _outcome(f"{BASE}/e.html", "no-metadata", reason="no-metadata: no CDIF metadata found"),
        _outcome(f"{BASE}/f.html", "failed", reason=f"http-404: {BASE}/f.html answered 404"),
        _outcome(f"{BASE}/private/g.html", "disallowed", reason="robots-txt: disallowed"),
        _outcome("http://10.0.0.1/h.html", "blocked", reason="private-address: refused 10.0.0.1"),
    ]


# --- figures -------------------------------------------------------------------------------


def test_every_figure_is_summary_jsons_and_readable_from_data_count() -> None:
    outcomes = _mixed_run()
    summary = _summary_of(outcomes, withdrawn=[f"{BASE}/old.html"])

    page = _Page(render_report(summary, outcomes))

    assert page.count("urls") == summary["urls"] == 8
    for kind, value in summary["outcomes"].items():
        assert page.count(f"outcome-{kind}") == value
        assert page.count(f"chart-outcome-{kind}") == value  # the chart's labels agree
    for pattern, value in summary["patterns"].items():
        assert page.count(f"pattern-{pattern}") == value
    assert not {n for n in page.counts if n.startswith("pattern-")} - {
        f"pattern-{p}" for p in summary["patterns"]
    }
    assert page.count("records") == summary["records"] == 4
    assert page.count("valid-records") == summary["valid_records"] == 3
    assert page.count("invalid-records") == summary["invalid_records"] == 1
    assert page.count("withdrawn") == 1
    # c.html has an invalid record; e, f, g, h yielded none; d is unchanged, a and b are fine
    assert page.count("urls-without-valid-record") == 5
    assert page.count("urls-listed") == 5
    assert 'role="alert"' not in render_report(summary, outcomes)


def test_figures_that_disagree_with_summary_json_are_pointed_out() -> None:
    outcomes = _mixed_run()
    summary = _summary_of(outcomes)
    summary["urls"] = 9
    summary["outcomes"]["failed"] = 2

    text = render_report(summary, outcomes)
    page = _Page(text)

    assert 'role="alert"' in text
    assert page.count("summary-json-urls") == 9 and page.count("counted-urls") == 8
    assert page.count("summary-json-outcomes.failed") == 2
    assert page.count("counted-outcomes.failed") == 1


def test_an_empty_run_renders_a_whole_page_with_zeros() -> None:
    summary = _summary_of([])

    text = render_report(summary, [])
    page = _Page(text)

    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    assert page.count("urls") == 0 and page.count("records") == 0
    assert all(page.count(f"outcome-{kind}") == 0 for kind in summary["outcomes"])
    assert "svg" in page.names()  # the chart is drawn, with empty bars
    assert "No URL was harvested in this run." in page.all_text
    assert "no Signposting level can be judged" in page.all_text
    assert "Nothing to fix" in page.all_text
    assert 'role="alert"' not in text


def test_the_page_is_self_contained_and_has_no_script() -> None:
    outcomes = _mixed_run()
    text = render_report(_summary_of(outcomes), outcomes)
    page = _Page(text)

    assert "script" not in page.names()
    assert not [attrs for _, attrs in page.tags if "src" in attrs]  # nothing loaded
    assert "link" not in page.names()  # no stylesheet from elsewhere
    assert "style" in page.names()
    csp = [a for t, a in page.tags if t == "meta" and a.get("http-equiv")]
    assert csp and "default-src 'none'" in str(csp[0]["content"])
    chart = next(a for t, a in page.tags if t == "svg")
    assert chart["role"] == "img" and chart["id"] == "outcome-chart"
    assert ("title", {"id": "outcome-chart-title"}) in page.tags


# --- escaping ------------------------------------------------------------------------------


HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def test_hostile_publisher_text_cannot_inject_markup() -> None:
    outcomes = [
        _outcome(f"{BASE}/{HOSTILE}", "failed", reason=f"http-404: {HOSTILE} answered 404"),
        _outcome(
            f"{BASE}/r.html?q={HOSTILE}",
            "record",
            pattern="embedded-script",
            records=[
                _record(f"{BASE}/{HOSTILE}", valid=False, errors=(f"{HOSTILE} is required",)),
                _record(
                    "x", valid=False, errors=(f"schema:name: {HOSTILE} is not of type 'string'",)
                ),
            ],
        ),
        _outcome("javascript:alert(3)", "failed", reason=f"weird-code: {HOSTILE}"),
    ]
    summary = _summary_of(
        outcomes,
        run_id=HOSTILE,
        entry_urls=[f"{BASE}/{HOSTILE}"],
        started_at=HOSTILE,
        withdrawn=[f"{BASE}/{HOSTILE}"],
    )

    text = render_report(summary, outcomes)
    page = _Page(text)

    assert "script" not in page.names() and "img" not in page.names()
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert HOSTILE in page.all_text  # shown, as text
    hrefs = [str(a["href"]) for t, a in page.tags if t == "a"]
    # the page's own jump links to its sections are fragments; every other link is http(s)
    sections = {f"#{a['id']}" for _, a in page.tags if "id" in a}
    hrefs = [h for h in hrefs if h not in sections]
    assert hrefs and all(h.startswith(("http://", "https://")) for h in hrefs)
    assert not [a for _, a in page.tags if any(k.startswith("on") for k in a)]


def test_control_characters_are_dropped() -> None:
    outcomes = [_outcome(f"{BASE}/x", "failed", reason="http-500: bad\x00\x1b[31m answer")]
    text = render_report(_summary_of(outcomes), outcomes)
    assert "\x00" not in text and "\x1b" not in text and "bad[31m answer" in text


# --- what to fix ---------------------------------------------------------------------------


def test_errors_are_grouped_by_kind_ranked_by_records_hit_with_fixes() -> None:
    license_missing = "schema:license or schema:conditionsOfAccess is required (Rights, 1..*)"
    outcomes = [
        _outcome(
            f"{BASE}/{n}.html",
            "record",
            pattern="embedded-script",
            records=[
                _record(
                    f"r{n}",
                    valid=False,
                    errors=(
                        license_missing,
                        f"schema:creator/{n}/schema:name is required (Originators, 0..*)",
                    )
                    if n < 2
                    else (license_missing,),
                )
            ],
        )
        for n in range(5)
    ]
    outcomes.append(_outcome(f"{BASE}/gone.html", "failed", reason="http-404: answered 404"))

    page = _Page(render_report(_summary_of(outcomes), outcomes))
    text = page.all_text

    assert page.count("problem-required:schema:license-records") == 5
    assert page.count("problem-required:schema:license-urls") == 5
    # the list positions are taken out: creator/0 and creator/1 are one kind
    assert page.count("problem-required:schema:creator/*/schema:name-records") == 2
    assert page.count("problem-http-404-urls") == 1
    first = text.index("Neither schema:license nor schema:conditionsOfAccess")
    assert first < text.index("Missing required property schema:creator/*/schema:name")
    assert text.index("schema:creator/*/schema:name") < text.index("Page not found (HTTP 404)")
    assert "creativecommons.org/licenses/by/4.0/" in text  # the licence fix
    # at most three example URLs per kind
    license_item = text[first : text.index("Missing required property")]
    assert license_item.count(f"{BASE}/") == 3


@pytest.mark.parametrize(
    ("message", "key", "fix_says"),
    [
        ("schema:name is required (Title, 1)", "required:schema:name", '"name"'),
        (
            "schema:identifier is required (Resource identifier, 1)",
            "required:schema:identifier",
            "persistent identifier",
        ),
        (
            "schema:description: 42 is not of type 'string' (Description, 0..1)",
            "type:schema:description",
            "text (a JSON string)",
        ),
        (
            "schema:datePublished: '31/05/2024' is not a 'date' (Publication Date, 0..1)",
            "date:schema:datePublished",
            "ISO 8601",
        ),
        (
            "schema:dateModified: 'May 2024' does not match '^\\d{4}' (Modification Date, 1)",
            "date:schema:dateModified",
            "ISO 8601",
        ),
        (
            "@id must not be a nil value (nil:missing); this item is not nilable "
            "(Resource identifier, 1)",
            "nil:@id",
            "nil:missing",
        ),
        (
            "prov:wasDerivedFrom/0 must not be a nil value (nil:missing); leave an optional item "
            "out instead (Provenance (input datasets), 0..*)",
            "nil:prov:wasDerivedFrom/*",
            "leave an optional item out",
        ),
        (
            "schema:spatialCoverage/2 needs one of schema:name, schema:geo (Geographic extent, "
            "0..*)",
            "needs-one-of:schema:spatialCoverage/*",
            "schema:name, schema:geo",
        ),
        (
            "schema:subjectOf/dcterms:conformsTo must include https://w3id.org/cdif/core/1.0 "
            "(or core/1.1) (Metadata profile identifier, 1..*)",
            "must-include:schema:subjectOf/dcterms:conformsTo",
            "https://w3id.org/cdif/core/1.0",
        ),
        (
            "schema:distribution/0 does not match any allowed form; closest: "
            "schema:distribution/0/schema:contentUrl is required (Distribution, 1)",
            "required:schema:distribution/*/schema:contentUrl",
            "contentUrl",
        ),
        (
            "@type/1: 'x' is not one of ['schema:CreativeWork', 'schema:Dataset'] "
            "(Resource type, 1)",
            "enum:@type/*",
            "allowed",
        ),
        (
            "schema:creator names https://orcid.org/0000-0001, an agent the record does not "
            "describe: give it an @type",
            "undescribed-agent:schema:creator",
            '"name"',
        ),
        (
            'schema:temporalCoverage "2020/2019" ends before it starts: give the interval',
            "temporal-order",
            "start/end",
        ),
        ("no schema:Dataset node found in the document", "no-dataset", '"@type": "Dataset"'),
        (
            "JSON-LD expansion failed (loading remote context failed): x",
            "jsonld-processing",
            "@context",
        ),
    ],
)
def test_validation_messages_fall_into_kinds_with_a_fix(
    message: str, key: str, fix_says: str
) -> None:
    kind = classify_error(message)
    assert kind.key == key and kind.scope == "record"
    assert fix_says in kind.fix
    assert "{" + "path}" not in kind.fix and "{" + "item}" not in kind.fix


def test_unknown_messages_are_grouped_without_their_specific_parts() -> None:
    one = classify_error("odd thing at https://a.example/1 with 'x' and 17 items")
    two = classify_error("odd thing at https://b.example/2 with 'y' and 3 items")
    assert one.key == two.key == "other:odd thing at <URL> with <value> and <n> items"
    assert one.fix == FIXES["other"]
    assert classify_reason("odd-code: at https://a.example/1", "failed").key == (
        "other-reason:odd-code: at <URL>"
    )


def test_a_message_quoting_a_huge_value_is_still_classified_cheaply() -> None:
    huge = "x" * 1_000_000
    kind = classify_error(f"schema:name: '{huge}' is not of type 'string' (Title, 1)")
    assert kind.key == "type:schema:name"
    odd = classify_error(f"odd {huge}")
    assert odd.key.startswith("other:odd x") and len(odd.key) < 200


@pytest.mark.parametrize(
    ("reason", "outcome", "kind", "fix_says"),
    [
        (
            "no-metadata: no CDIF metadata found in text/html",
            "no-metadata",
            "no-metadata",
            "describedby",
        ),
        ("no-dataset: no Dataset node in this block", "no-metadata", "no-dataset-block", "Dataset"),
        ("robots-txt: disallowed for cdif-harvester", "disallowed", "robots-txt", "Allow"),
        ("http-404: https://x/ answered 404", "failed", "http-404", "sitemap"),
        ("http-410: https://x/ answered 410", "failed", "http-410", "tombstone"),
        ("http-503: https://x/ answered 503", "failed", "http-5xx", "server"),
        ("http-403: https://x/ answered 403", "failed", "http-auth", "logging in"),
        ("body-too-large: body over 10485760 bytes", "failed", "too-large", "10 MiB"),
        ("redirect-loop: https://x/ redirects to itself", "failed", "redirect", "loop"),
        ("loopback-address: refused 127.0.0.1", "blocked", "blocked", "public"),
        ("cloud-metadata-address: refused", "blocked", "blocked", "public"),
        ("total-timeout: https://x/: 30 s exceeded", "failed", "timeout", "30 s"),
        ("too-slow: https://x/: 30 s exceeded while ...", "failed", "timeout", "too slow"),
        ("headers-too-large: response head exceeds 32768 bytes", "failed", "too-large", "linkset"),
        (
            "malformed-json: malformed JSON-LD at line 3, column 5: Expecting ',' delimiter "
            "(after repairs: removed comments)",
            "failed",
            "malformed-json",
            "trailing commas",
        ),
        (
            "cross-host-location: the sitemap on a may not list b",
            "disallowed",
            "cross-host-location",
            "robots.txt",
        ),
        (
            "cross-host-sitemap: the sitemap index on a may not list sitemaps of b",
            "disallowed",
            "cross-host-sitemap",
            "other host's robots.txt",
        ),
        (
            "robots-unavailable: http://b/robots.txt could not be read (read-timeout: ...)",
            "failed",
            "robots-unavailable",
            "timeout",
        ),
        ("invalid-url: 'http://[::1/x' cannot be parsed", "failed", "invalid-url", "escaping"),
        ("internal-error: KeyError: 'x'", "failed", "internal-error", "bug"),
        (None, "blocked", "blocked", "public"),
    ],
)
def test_failure_reasons_fall_into_kinds_with_a_fix(
    reason: str | None, outcome: str, kind: str, fix_says: str
) -> None:
    found = classify_reason(reason, outcome)
    assert found.key == kind and found.scope == "url"
    assert fix_says in found.fix


def test_a_malformed_json_example_keeps_the_repairs_tried() -> None:
    reason = (
        "malformed-json: malformed JSON-LD at line 3, column 5: Expecting ',' delimiter "
        "(after repairs: removed comments, removed trailing commas)"
    )
    outcomes = [_outcome(f"{BASE}/{n}.html", "failed", reason=reason) for n in range(2)]
    page = _Page(render_report(_summary_of(outcomes), outcomes))
    assert page.count("problem-malformed-json-urls") == 2
    assert "after repairs: removed comments, removed trailing commas" in page.all_text


def test_unchanged_urls_are_not_problems() -> None:
    outcomes = [_outcome(f"{BASE}/a.html", "unchanged", reason="lastmod: not newer")]
    page = _Page(render_report(_summary_of(outcomes), outcomes))
    assert "Nothing to fix" in page.all_text and page.count("urls-listed") == 0


def test_the_url_table_is_capped_and_says_how_many_more() -> None:
    outcomes = [
        _outcome(f"{BASE}/{n:04}.html", "failed", reason="http-404: answered 404")
        for n in range(MAX_URL_ROWS + 5)
    ]
    text = render_report(_summary_of(outcomes), outcomes)
    page = _Page(text)
    rows = [a for t, a in page.tags if t == "td" and a.get("class") == "url"]
    assert len(rows) == MAX_URL_ROWS
    assert page.count("urls-not-listed") == 5
    assert page.count("urls-listed") == MAX_URL_ROWS + 5


# --- FAIR Signposting ---------------------------------------------------------------------


def test_signposting_levels_of_the_patterns() -> None:
    assert signposting_level("linkset") == 2
    assert signposting_level("http-link") == signposting_level("html-link") == 1
    for pattern in (
        "embedded-script",
        "signmap",
        "content-type",
        "item-list",
        "format-parameter",
        "content-negotiation",
        "html-meta",
        "legacy-meta",
        None,
    ):
        assert signposting_level(pattern) == 0


def test_the_source_level_is_the_highest_reached_with_how_many_urls() -> None:
    outcomes = _mixed_run()  # linkset, http-link, embedded-script

    page = _Page(render_report(_summary_of(outcomes), outcomes))

    assert "This source reached Level 2: a linkset on 1 of 3 URLs with metadata." in (
        " ".join(page.all_text.split())
    )
    assert page.count("signposting-level-2") == 1
    assert page.count("signposting-level-1") == 1
    assert page.count("signposting-level-0") == 1
    assert page.count("signposting-urls") == 3
    assert page.count("signposting-below-reached") == 2
    assert "Level 2 is the highest" in page.all_text


@pytest.mark.parametrize(
    ("patterns", "level", "next_step"),
    [
        (["embedded-script", "content-type"], 0, "To reach level 1"),
        (["html-link", "embedded-script"], 1, "To reach level 2"),
        (["http-link"], 1, 'rel="linkset"'),
    ],
)
def test_the_next_level_is_explained(patterns: list[str], level: int, next_step: str) -> None:
    outcomes = [
        _outcome(f"{BASE}/{n}.html", "record", pattern=p, records=[_record(str(n))])
        for n, p in enumerate(patterns)
    ]
    page = _Page(render_report(_summary_of(outcomes), outcomes))
    assert page.count(f"signposting-level-{level}") >= 1
    assert next_step in page.all_text


def test_a_signmap_is_said_to_help_but_is_no_level() -> None:
    outcomes = [
        _outcome(f"{BASE}/a.html", "record", pattern="signmap", records=[_record("a")]),
    ]
    page = _Page(render_report(_summary_of(outcomes), outcomes))
    assert page.count("signposting-level-0") == 1
    assert page.count("signposting-signmap") == 1
    assert "Signmap" in page.all_text and "To reach level 1" in page.all_text


# --- sources -------------------------------------------------------------------------------


def test_a_source_report_covers_that_source_only() -> None:
    other = "https://other.example.net"
    outcomes = [
        *_mixed_run(),
        _outcome(
            f"{other}/x.html", "failed", reason="http-500: answered 500", source="other.example.net"
        ),
        _outcome(f"{other}/y.html", "record", pattern="linkset", records=[_record("y")]),
    ]
    summary = _summary_of(
        outcomes,
        entry_urls=[f"{BASE}/robots.txt", f"{other}/robots.txt"],
        withdrawn=[f"{other}/old.html", f"{BASE}/old.html", f"{BASE}/older.html"],
    )

    text = render_report(summary, outcomes, source="other.example.net")
    page = _Page(text)

    assert page.count("urls") == 2
    assert page.count("outcome-failed") == 1 and page.count("outcome-record") == 1
    assert page.count("pattern-linkset") == 1 and "pattern-http-link" not in page.counts
    assert page.count("records") == 1 and page.count("valid-records") == 1
    assert page.count("withdrawn") == 1
    assert f"{BASE}/" not in page.all_text  # nothing of data.example.org
    assert 'role="alert"' not in text  # the source's figures are its own, not summary's
    # the whole run's report of the same data adds both sources up
    assert _Page(render_report(summary, outcomes)).count("urls") == 10


def test_a_source_can_be_named_by_host_and_port_or_url() -> None:
    outcomes = [
        _outcome("http://127.0.0.1:8000/a.html", "failed", reason="http-404: x"),
        _outcome("http://127.0.0.1:9000/b.html", "failed", reason="http-404: y"),
    ]
    summary = _summary_of(outcomes)
    for name in ("127.0.0.1:8000", "127.0.0.1_8000", "http://127.0.0.1:8000/robots.txt"):
        page = _Page(render_report(summary, outcomes, source=name))
        assert page.count("urls") == 1, name
        assert "127.0.0.1:8000/a.html" in page.all_text
