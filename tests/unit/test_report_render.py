"""The publisher report split in two: the model says, the templates show.

Hostile text in any field of the model stays text on the page, and Jinja2 is loaded only when
a page is rendered.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lxml.html

from cdif_harvester.report import ProblemKind, Report, build_report, render_html, render_report
from cdif_harvester.report.model import (
    ChangeCount,
    Disagreement,
    LevelCount,
    OutcomeCount,
    PatternCount,
    Problem,
    ProfileCount,
    RecordRow,
    Signposting,
    UrlRow,
)

ROOT = Path(__file__).resolve().parents[2]

# Breaks out of attributes (both quotes), elements, the title and style elements and comments,
# and carries an entity and control characters.
HOSTILE = (
    "\"'><script>alert(1)</script><img src=x onerror=alert(2)>&amp; &lt;"
    "</title></style><!-- \x00\x1b[31m"
)
SHOWN = HOSTILE.replace("\x00", "").replace("\x1b", "")  # what the page must show of it
BENIGN = "benign-marker"


def _model(text: str) -> Report:
    """A report whose every text field carries ``text`` (its URLs after an http(s) prefix, or
    after ``javascript:``)."""
    url = f"https://data.example.org/{text}"
    script_url = f"javascript:{text}"
    record_kind = ProblemKind(f"required:{text}", f"title {text}", f"fix {text}", "record")
    url_kind = ProblemKind(f"other-reason:{text}", text, text, "url")
    warning_kind = ProblemKind(f"recommended:{text}", f"title {text}", f"fix {text}", "warning")
    return Report(
        label=text,
        run_id=text,
        started_at=text,
        finished_at=text,
        elapsed_seconds=1.5,
        entry_urls=(url, script_url),
        disagreements=(Disagreement(text, text, 1),),
        urls=3,
        records=2,
        valid_records=1,
        invalid_records=1,
        urls_without_valid_record=2,
        outcomes=(OutcomeCount("record", 1, text), OutcomeCount(text, 2, text)),
        patterns=(PatternCount(text, 1, text, text),),
        profiles=(ProfileCount(text, 1, 1, 1, 3),),
        signposting=Signposting(
            urls=2,
            reached=1,
            reached_name=text,
            reached_urls=1,
            below_reached=1,
            next_step=text,
            signmap_urls=1,
            levels=(LevelCount(2, text, 0), LevelCount(1, text, 1), LevelCount(0, text, 1)),
        ),
        problems=(
            Problem(record_kind, 1, 1, text, (url,)),
            Problem(url_kind, 0, 1, text, (script_url,)),
        ),
        problem_kinds=41,
        url_rows=(UrlRow(url, text, text), UrlRow(script_url, text, text)),
        withdrawn=(url,),
        withdrawn_urls=60,
        current_state=True,
        run_records=1,
        changes=(ChangeCount(text, 1, text),),
        record_rows=(
            RecordRow(text, url, False, text, 2, 3, True),
            RecordRow(text, script_url, True, text, 0, 0, False),
        ),
        reports_not_read=1,
        warnings=(Problem(warning_kind, 1, 1, text, (url,)),),
        warning_kinds=41,
        warning_count=3,
        records_with_warnings=1,
    )


def _shape(page: lxml.html.HtmlElement) -> list[tuple[str, list[str]]]:
    """Every element of the page, in order, with the names of its attributes."""
    return [(str(e.tag), sorted(e.attrib)) for e in page.iter() if isinstance(e.tag, str)]


def _strings(page: lxml.html.HtmlElement) -> list[str]:
    """Every text, tail and attribute value of the page."""
    found: list[str] = []
    for element in page.iter():
        found += [element.text or "", element.tail or ""]
        found += [str(value) for value in element.attrib.values()]
    return found


def test_hostile_text_in_every_field_of_the_model_stays_text() -> None:
    benign = lxml.html.document_fromstring(render_html(_model(BENIGN)))
    text = render_html(_model(HOSTILE))
    hostile = lxml.html.document_fromstring(text)

    # The hostile page has exactly the elements and attributes of the benign one: nothing the
    # publisher wrote became markup, whichever field it was in.
    assert _shape(hostile) == _shape(benign)
    assert not hostile.xpath("//script | //img | //body//style | //*[@src]")
    assert not [a for e in hostile.iter() for a in e.attrib if a.lower().startswith("on")]
    assert "<script" not in text and "<img" not in text and "\x00" not in text
    # the page's own jump links to its sections are fragments; every other link is https
    sections = {f"#{found}" for found in hostile.xpath("//@id")}
    hrefs = [href for href in hostile.xpath("//a/@href") if href not in sections]
    assert hrefs and all(str(href).startswith("https://") for href in hrefs)
    # Every place that shows the marker shows the hostile text whole, as text: quotes and
    # "&amp;" read back exactly as given, control characters dropped.
    shown = [s for s in _strings(benign) if BENIGN in s]
    assert len(shown) > 40
    assert [s.replace(BENIGN, SHOWN) for s in shown] == [s for s in _strings(hostile) if SHOWN in s]
    assert hostile.findtext(".//title") == f"Harvest report: {SHOWN} (run {SHOWN})"


def test_the_model_says_what_the_page_shows() -> None:
    base = "https://data.example.org"
    invalid = {"record_id": "a1", "valid": False, "errors": ["schema:name is required (Title, 1)"]}
    outcomes = [
        {"url": f"{base}/a", "outcome": "record", "pattern": "http-link", "records": [invalid]},
        {"url": f"{base}/b", "outcome": "failed", "reason": "http-404: answered 404"},
        {"url": f"{base}/c", "outcome": "unchanged", "pattern": "linkset"},
    ]
    summary = {"run_id": "r1", "urls": 3, "withdrawn": [f"{base}/old"]}

    report = build_report(summary, outcomes)

    assert (report.label, report.run_id, report.urls) == ("data.example.org", "r1", 3)
    assert [(o.outcome, o.urls) for o in report.outcomes][:3] == [
        ("record", 1),
        ("no-metadata", 0),
        ("unchanged", 1),
    ]
    assert (report.records, report.valid_records, report.invalid_records) == (1, 0, 1)
    assert report.urls_without_valid_record == 2  # a made an invalid record, b failed
    assert [(row.url, row.why) for row in report.url_rows] == [
        (f"{base}/a", "a1: schema:name is required (Title, 1)"),
        (f"{base}/b", "http-404: answered 404"),
    ]
    assert [(p.kind.key, p.records, p.urls) for p in report.problems] == [
        ("required:schema:name", 1, 1),
        ("http-404", 0, 1),
    ]
    assert (report.signposting.reached, report.signposting.reached_urls) == (2, 1)
    assert report.withdrawn == (f"{base}/old",) and report.disagreements == ()
    assert render_html(report) == render_report(summary, outcomes)


def test_jinja2_is_loaded_only_when_a_page_is_rendered() -> None:
    # A Lambda cold start imports the handlers and the library; only closing a run renders.
    script = (
        "import sys\n"
        "import functions.scheduler.app, functions.intake.app\n"
        "import cdif_harvester.report, cdif_harvester.stages.finish, cdif_harvester.cli.runner\n"
        "before = 'jinja2' in sys.modules\n"
        "cdif_harvester.report.render_report({}, [])\n"
        "print(before, 'jinja2' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "False True"), done.stderr
