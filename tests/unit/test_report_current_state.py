"""The publisher report shows the source's records as they stand, not only what one run read:
the records held (with what the run changed marked), their warnings grouped like errors, the
source's host in the heading and the robots.txt path that was refused in its fix."""

from __future__ import annotations

from typing import Any

from cdif_harvester.report import HeldRecord, build_report, classify_reason, render_report
from cdif_harvester.report.model import MAX_RECORD_ROWS, classify_warning

BASE = "http://127.0.0.1:8765"
MISSING_LICENSE = "schema:license is required (License, 1)"
NO_KEYWORDS = "schema:keywords is recommended (Keyword, 0..*)"
NO_CREATOR = "schema:creator is recommended (Originators, required but nilable)"


def _unchanged_run() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A re-harvest where nothing changed: every URL unchanged, not one record read."""
    outcomes = [
        {"url": f"{BASE}/a.html", "outcome": "unchanged", "source": "127.0.0.1_8765"},
        {"url": f"{BASE}/b.html", "outcome": "unchanged", "source": "127.0.0.1_8765"},
    ]
    summary = {"run_id": "r2", "urls": 2, "records": 0, "valid_records": 0, "invalid_records": 0}
    return summary, outcomes


HELD = [
    HeldRecord(
        "doi:a",
        f"{BASE}/a.html",
        valid=False,
        change="unchanged",
        errors=(MISSING_LICENSE,),
        warnings=(("recommended", NO_KEYWORDS), ("recommended", NO_CREATOR)),
        profiles=(("core 1.1", "invalid", 1),),
    ),
    HeldRecord(
        "doi:b",
        f"{BASE}/b.html",
        valid=True,
        change="unchanged",
        warnings=(("recommended", NO_KEYWORDS),),
        profiles=(("core 1.1", "valid", 0), ("discovery 1.1", "unknown", 0)),
    ),
    HeldRecord("doi:c", f"{BASE}/c.html", valid=True, change="withdrawn"),
]


def test_an_unchanged_reharvest_still_shows_the_invalid_records_held() -> None:
    summary, outcomes = _unchanged_run()

    report = build_report(summary, outcomes, held=HELD)

    assert report.current_state and report.run_records == 0
    # the records held now, not those this run read (none); the withdrawn one is not held
    assert (report.records, report.valid_records, report.invalid_records) == (2, 1, 1)
    assert [(p.kind.key, p.records, p.example_urls) for p in report.problems] == [
        ("required:schema:license", 1, (f"{BASE}/a.html",))
    ]
    assert [(r.url, r.why) for r in report.url_rows] == [
        (f"{BASE}/a.html", f"doi:a: {MISSING_LICENSE}")
    ]
    assert report.urls_without_valid_record == 1
    assert {c.change: c.records for c in report.changes} == {
        "new": 0,
        "changed": 0,
        "unchanged": 2,
        "withdrawn": 1,
    }
    assert [(r.record_id, r.valid, r.errors, r.warnings) for r in report.record_rows] == [
        ("doi:a", False, 1, 2),
        ("doi:b", True, 0, 1),
    ]


def test_without_the_records_held_the_unchanged_run_has_nothing_to_fix() -> None:
    # What the report said before it was given the catalogue's state.
    summary, outcomes = _unchanged_run()
    report = build_report(summary, outcomes)
    assert not report.current_state and report.records == 0 and report.problems == ()


def test_warnings_are_grouped_by_kind_most_records_first() -> None:
    summary, outcomes = _unchanged_run()

    report = build_report(summary, outcomes, held=HELD)

    assert (report.warning_count, report.records_with_warnings) == (3, 2)
    assert [(w.kind.key, w.records, w.urls) for w in report.warnings] == [
        ("recommended:schema:keywords", 2, 2),
        ("recommended:schema:creator", 1, 1),
    ]
    assert report.warnings[0].kind.scope == "warning"
    assert "schema:keywords" in report.warnings[0].kind.fix


def test_the_page_shows_warnings_below_the_errors_and_what_to_fix_first_at_the_top() -> None:
    summary, outcomes = _unchanged_run()

    page = render_report(summary, outcomes, held=HELD)

    fix, warnings = page.index('id="problems"'), page.index('id="warnings"')
    records, outcome_table = page.index('id="records"'), page.index('id="outcomes"')
    assert fix < warnings < records < outcome_table
    assert page.index('id="overview"') < fix
    assert 'href="#problems"' in page.split("</header>")[0]  # the jump link at the top
    assert MISSING_LICENSE in page and NO_KEYWORDS in page
    assert 'data-count="warning-recommended:schema:keywords-records">2<' in page


def test_profiles_count_the_records_held() -> None:
    summary, outcomes = _unchanged_run()
    report = build_report(summary, outcomes, held=HELD)
    assert [(p.profile, p.valid, p.invalid, p.unknown, p.errors) for p in report.profiles] == [
        ("core 1.1", 1, 1, 0, 1),
        ("discovery 1.1", 0, 0, 1, 0),
    ]


def test_a_record_whose_report_was_not_read_is_counted_not_grouped() -> None:
    summary, outcomes = _unchanged_run()
    unread = HeldRecord("doi:d", f"{BASE}/d.html", valid=False, change="new", read=False)

    report = build_report(summary, outcomes, held=[*HELD, unread])

    assert report.invalid_records == 2 and report.reports_not_read == 1
    assert [p.records for p in report.problems] == [1]  # only the report read is grouped
    assert "report not read" in {r.url: r.why for r in report.url_rows}[f"{BASE}/d.html"]


def test_the_records_table_is_capped_and_says_how_many_more() -> None:
    summary, outcomes = _unchanged_run()
    many = [
        HeldRecord(f"doi:{n}", f"{BASE}/{n}.html", valid=True, change="new")
        for n in range(MAX_RECORD_ROWS + 7)
    ]
    report = build_report(summary, outcomes, held=many)
    assert len(report.record_rows) == MAX_RECORD_ROWS and report.records_not_listed == 7


def test_the_heading_names_the_host_not_the_source_key() -> None:
    summary, outcomes = _unchanged_run()
    report = build_report(summary, outcomes, held=HELD)
    assert report.label == "127.0.0.1:8765"
    assert build_report(summary, outcomes, source="127.0.0.1:8765").label == "127.0.0.1:8765"
    page = render_report(summary, outcomes)
    assert "<title>Harvest report: 127.0.0.1:8765 (run r2)</title>" in page
    assert "127.0.0.1_8765" not in page


def test_the_robots_fix_names_the_path_disallowed() -> None:
    kind = classify_reason(
        "robots-txt: disallowed for cdif-harvester: /private/whales.html", "disallowed"
    )
    assert kind.key == "robots-txt"
    assert "Allow: /private/whales.html" in kind.fix and "User-agent: cdif-harvester" in kind.fix
    # a reason of before, without the path, still reads
    older = classify_reason("robots-txt: disallowed for CDIF1.0", "disallowed")
    assert "User-agent: CDIF1.0" in older.fix and "Allow: /" not in older.fix


def test_warnings_of_no_known_form_are_grouped_by_keyword_and_message() -> None:
    one = classify_warning("page cut at 1048576 bytes", "truncated")
    two = classify_warning("page cut at 2097152 bytes", "truncated")
    assert one.key == two.key and one.scope == "warning"
    assert classify_warning(NO_KEYWORDS).key == "recommended:schema:keywords"
