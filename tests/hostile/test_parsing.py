"""Hostile documents and pages through the parsers: each ends in a clear answer, in bounded memory
and time (measured in a fresh process, tests/support/bounds.py).

Each case is a snippet that builds its input, runs the domain function a stage runs on it and
prints what came out; the same snippets give the figures in
docs/decisions/0050-parsing-in-bounded-memory.md.
"""

from __future__ import annotations

import json
import re
import textwrap
from typing import Any

import pytest

from tests.support.bounds import measure

# Generous for a loaded 2-core machine, tight enough to catch the old blow-ups (0.6 to 8 GB,
# minutes of CPU). The child's address space is capped too, so a regression fails with a
# MemoryError instead of taking the machine's memory.
MAX_RSS_MIB = 256
MAX_CPU_SECONDS = 10.0
_ADDRESS_SPACE = 2 * 1024 * 1024 * 1024

_PRELUDE = f"""
import json, resource
resource.setrlimit(resource.RLIMIT_AS, ({_ADDRESS_SPACE}, {_ADDRESS_SPACE}))
from cdif_harvester.domain.records.extraction import (
    ExtractionError, find_jsonld_scripts, parse_jsonld,
)
try:
    from cdif_harvester.domain.records.extraction import read_jsonld_scripts
except ImportError:  # code from before the cap, measured for the figures
    from types import SimpleNamespace
    def read_jsonld_scripts(page):
        return SimpleNamespace(blocks=find_jsonld_scripts(page), note=lambda: None)
from cdif_harvester.domain.resolution.weblinks import (
    parse_html_head, parse_link_header, parse_linkset_json, parse_linkset_text,
)

def outcome_of_parse(text):
    try:
        parsed = parse_jsonld(text)
    except ExtractionError as exc:
        return {{"error": exc.reason, "message": str(exc)[:300]}}
    return {{"repairs": list(parsed.repairs), "type": type(parsed.data).__name__}}

def report(value):
    print(json.dumps(value))
"""

# The resolver and the extractor on local adapters, with a fetcher (a fake of our own port) that
# serves one page at BASE/p.html and 404 for everything else.
_STAGES = """
import tempfile
from pathlib import Path
from cdif_harvester.adapters.local import (
    DirectoryObjectStore, InProcessQueue, SqliteCatalog, SystemClock,
)
from cdif_harvester.contracts import DocumentJob, UrlJob
from cdif_harvester.errors import HarvestError
from cdif_harvester.model import FetchResponse
from cdif_harvester.stages.extract import extract_documents
from cdif_harvester.stages.resolve import resolve_url
from cdif_harvester.wiring import Wiring

BASE = "https://pub.example.org"

class OnePage:
    def __init__(self, page):
        self.page = page
    def fetch(self, url, *, method="GET", headers=None, max_bytes=None, truncate=False):
        if url == BASE + "/p.html":
            head = (("content-type", "text/html; charset=utf-8"),)
            return FetchResponse(url=url, status=200, headers=head, body=self.page)
        return FetchResponse(url=url, status=404, headers=(), body=b"")

def harvest(page):
    scratch = Path(tempfile.mkdtemp())
    wiring = Wiring(
        store=DirectoryObjectStore(scratch), catalog=SqliteCatalog(scratch / "c.sqlite"),
        queue=InProcessQueue(), fetcher=OnePage(page), clock=SystemClock(),
    )
    try:
        done = resolve_url(wiring, UrlJob(run_id="r", source="s", url=BASE + "/p.html"))
        if isinstance(done, DocumentJob):
            done = extract_documents(wiring, done)
    except HarvestError as exc:
        return {"raised": type(exc).__name__, "reason": exc.reason, "message": str(exc)[:300]}
    return {"type": type(done).__name__, "outcome": str(getattr(done, "outcome", "")),
            "reason": getattr(done, "reason", "")[:300]}
"""
# Indented as the cases are, so that the two dedent together.
_STAGES = textwrap.indent(_STAGES, " " * 8)

_DATASET_HEAD = '{"@context": "https://schema.org/", "@type": "Dataset", "name": "x", '

# Each case: its snippet (it prints one JSON value, the outcome).
CASES: dict[str, str] = {
    # 49 MiB of JSON that never closes (a describedby target that inflated from 48 KiB of gzip):
    # over the size the repairs are tried on, it is reported as it is.
    "huge-malformed-document": f"""
        body = ('{_DATASET_HEAD}"keywords": [' + '"k", ' * (49 * 1024 * 1024 // 5)).encode()
        report(outcome_of_parse(body))
    """,
    # 9 MiB, under that size: every repair runs over it (a comment, a control character, a
    # trailing comma, unterminated comments), and it still is not JSON.
    "large-malformed-document-every-repair": f"""
        body = (
            '{_DATASET_HEAD}"description": "tab\\there", // a comment\\n "keywords": ['
            + '"k", /*x ' * (9 * 1024 * 1024 // 10)
            + '"last",]'
        )
        report(outcome_of_parse(body))
    """,
    # A 4.7 MiB malformed JSON-LD block in a landing page, read as the resolver and the
    # extractor read it.
    "malformed-block-in-page": f"""
        block = '{_DATASET_HEAD}"keywords": [' + '"k", ' * (47 * 1024 * 1024 // 50)
        page = ('<html><head><script type="application/ld+json">' + block
                + '</script></head><body></body></html>').encode()
        report([outcome_of_parse(b.text) for b in find_jsonld_scripts(page)])
    """,
    # 70,000 <link> elements.
    "many-links": """
        links = "".join(
            f'<link rel="describedby" type="application/ld+json" href="/m/{i}.jsonld">'
            for i in range(70_000)
        )
        page = f"<html><head>{links}</head><body></body></html>".encode()
        head = parse_html_head(page, "https://data.example.org/landing")
        report({"links": len(head.links), "notes": list(getattr(head, "notes", ()))})
    """,
    # The same page through the resolver (it reads the links and meta tags of the page).
    "many-links-resolver": _STAGES
    + """
        links = "".join(
            f'<link rel="describedby" type="application/ld+json" href="/m/{i}.jsonld">'
            for i in range(70_000)
        )
        report(harvest(f"<html><head>{links}</head><body></body></html>".encode()))
    """,
    # The 4.7 MiB malformed block, and 100,000 blocks, through the resolver and the extractor.
    "malformed-block-stages": _STAGES
    + f"""
        block = '{_DATASET_HEAD}"keywords": [' + '"k", ' * (47 * 1024 * 1024 // 50)
        page = ('<html><head><script type="application/ld+json">' + block
                + '</script></head><body></body></html>').encode()
        report(harvest(page))
    """,
    "many-scripts-stages": _STAGES
    + f"""
        good = '<script type="application/ld+json">{_DATASET_HEAD}"description": "d"}}</script>'
        bad = '<script type="application/ld+json">{{"broken": </script>'
        report(harvest(("<html><head>" + bad * 100_000 + good + "</head></html>").encode()))
    """,
    # 70,000 <meta> elements.
    "many-meta": """
        metas = "".join(f'<meta name="dc.subject" content="k{i}">' for i in range(70_000))
        page = f"<html><head>{metas}</head><body></body></html>".encode()
        head = parse_html_head(page, "https://data.example.org/landing")
        report({"meta": len(head.meta), "notes": list(getattr(head, "notes", ()))})
    """,
    # 1.46 MiB of unterminated "/*" after a record (removing them was quadratic).
    "unterminated-comments": f"""
        text = '{_DATASET_HEAD}"a": 1}}' + "/*x" * (1_460_000 // 3)
        report(outcome_of_parse(text))
    """,
    # 100,000 JSON-LD blocks in one page, none of them JSON.
    "many-scripts": """
        page = ("<html><head>" + '<script type="application/ld+json">{"broken": </script>'
                * 100_000 + "</head></html>").encode()
        scripts = read_jsonld_scripts(page)
        outcomes = {json.dumps(outcome_of_parse(b.text)) for b in scripts.blocks}
        report({"read": len(scripts.blocks), "note": scripts.note(), "outcomes": len(outcomes)})
    """,
    # 8 MiB on one line: a description with raw tabs, repaired.
    "huge-single-line": f"""
        text = '{_DATASET_HEAD}"description": "' + "word\\t" * (8 * 1024 * 1024 // 5) + '"}}'
        report(outcome_of_parse(text))
    """,
    # A record followed by 9 MiB of stray "}" (a template loop gone wrong), repaired.
    "stray-closers": f"""
        report(outcome_of_parse('{_DATASET_HEAD}"a": 1}}' + "}}" * (9 * 1024 * 1024)))
    """,
    # 100,000 "[" (Python's json raises RecursionError at about 1,000).
    "deep-json": """
        report(outcome_of_parse("[" * 100_000 + "]" * 100_000))
    """,
    # 100,000 "{" in a page's block, unclosed.
    "deep-json-in-page": """
        page = ('<script type="application/ld+json">' + '{"a":' * 100_000 + "</script>").encode()
        report([outcome_of_parse(b.text) for b in find_jsonld_scripts(page)])
    """,
    # Bytes that are not UTF-8 in a JSON-LD document and in a page.
    "invalid-utf8": f"""
        document = '{_DATASET_HEAD}"description": "caf'.encode() + b"\\xe9\\xff\\xfe" + b'"}}'
        page = b'<html><head><meta charset="utf-8"><link rel="describedby" href="/m\\xff.json">'
        page += b'<script type="application/ld+json">' + document + b"</script></head></html>"
        head = parse_html_head(page, "https://data.example.org/landing")
        report({{
            "document": outcome_of_parse(document),
            "block": [outcome_of_parse(b.text) for b in find_jsonld_scripts(page)],
            "links": [link.href for link in head.links],
        }})
    """,
    # Attributes of 4 MiB: on a <link>, on a <meta>, on a <script> (one page each: libxml2 gives
    # up on what follows a few of them).
    "huge-attributes": """
        huge = "a" * (4 * 1024 * 1024)
        link = f'<html><head><link rel="describedby {huge}" href="/{huge}"></head></html>'
        meta = f'<html><head><meta name="dc.title" content="{huge}"></head></html>'
        script = f'<script type="application/ld+json" profile="{huge}">{{"a": 1}}</script>'
        base = "https://data.example.org/landing"
        links = parse_html_head(link.encode(), base).links
        report({
            "links": [(len(x.rel), len(x.href)) for x in links],
            "meta": [len(tag.content) for tag in parse_html_head(meta.encode(), base).meta],
            "blocks": [len(block.profile or "") for block in find_jsonld_scripts(script.encode())],
        })
    """,
    # A Link header of 1 MiB: unclosed "<" and quotes, and 100,000 link-values.
    "huge-link-headers": """
        unclosed = "<a " * 300_000
        quotes = '</x>; title="' + '\\\\"' * 300_000
        many = ", ".join(f"</m/{i}>; rel=item" for i in range(100_000))
        values = [parse_link_header([h], "https://a.example/") for h in (unclosed, quotes, many)]
        report([(len(v.links), v.repairs) for v in values])
    """,
    # Linksets of 6 MiB: one link context with 200,000 targets, and a text linkset of
    # 300,000 empty list elements.
    "huge-linksets": """
        targets = [{"href": f"/m/{i}"} for i in range(200_000)]
        body = json.dumps({"linkset": [{"anchor": "https://a.example/", "item": targets}]})
        as_json = parse_linkset_json(body.encode(), "https://a.example/")
        as_text = parse_linkset_text(b"," * 300_000, "https://a.example/")
        report([(len(v.links), len(v.repairs), v.repairs[-1]) for v in (as_json, as_text)])
    """,
}


def run_case(name: str) -> tuple[Any, float, float]:
    """Run one case in a fresh process: its printed outcome, peak RSS (MiB) and CPU seconds."""
    measured = measure(_PRELUDE + textwrap.dedent(CASES[name]), timeout=60.0)
    assert measured.returncode == 0, measured.stderr[-3000:]
    return json.loads(measured.stdout), measured.peak_rss_mib, measured.cpu_seconds


def _bounded(name: str) -> Any:
    outcome, rss, cpu = run_case(name)
    assert rss < MAX_RSS_MIB, f"{name}: peak RSS {rss:.0f} MiB"
    assert cpu < MAX_CPU_SECONDS, f"{name}: {cpu:.1f} s of CPU"
    return outcome


def test_a_huge_malformed_document_is_reported_unrepaired() -> None:
    outcome = _bounded("huge-malformed-document")
    assert outcome["error"] == "malformed-json"
    assert re.search(r"not repaired: \d+ characters, over the 10485760 ", outcome["message"])


def test_every_repair_runs_over_a_large_document_in_linear_time() -> None:
    outcome = _bounded("large-malformed-document-every-repair")
    assert outcome["error"] == "malformed-json"
    assert (
        "after repairs: removed comments, escaped control characters in strings, "
        "removed trailing commas" in outcome["message"]
    )


def test_a_large_malformed_block_in_a_page() -> None:
    [outcome] = _bounded("malformed-block-in-page")
    assert outcome["error"] == "malformed-json"


def test_many_links_are_read_up_to_the_cap_and_the_cut_is_noted() -> None:
    outcome = _bounded("many-links")
    assert outcome == {
        "links": 1000,
        "notes": ["html: the page has 70000 <link> elements; only the first 1000 were read"],
    }


def test_a_page_of_many_links_costs_the_resolver_little() -> None:
    outcome = _bounded("many-links-resolver")
    assert outcome["outcome"] == "no-metadata"
    assert (
        "tried: embedded script, html: the page has 70000 <link> elements; only the first 1000 "
        "were read, describedby in HTML <link>" in outcome["reason"]
    )


def test_a_large_malformed_block_through_the_stages() -> None:
    outcome = _bounded("malformed-block-stages")
    assert outcome["outcome"] == "no-metadata"
    assert outcome["reason"].startswith("no-metadata: no CDIF metadata found in text/html")


def test_many_scripts_through_the_stages() -> None:
    # The Dataset block past the cap is not read, and the outcome says why.
    outcome = _bounded("many-scripts-stages")
    assert outcome["outcome"] == "no-metadata"
    assert (
        "tried: embedded script (too-many-scripts: the page has 100001 JSON-LD blocks; only the "
        "first 10000 were read; 10000 of 10000 unreadable: malformed-json)" in outcome["reason"]
    )


def test_many_meta_tags_are_read_up_to_the_cap_and_the_cut_is_noted() -> None:
    outcome = _bounded("many-meta")
    assert outcome == {
        "meta": 1000,
        "notes": ["html: the page has 70000 <meta> elements; only the first 1000 were read"],
    }


def test_unterminated_comments_are_removed_in_linear_time() -> None:
    outcome = _bounded("unterminated-comments")
    assert outcome["error"] == "malformed-json"
    assert "Extra data" in outcome["message"]


def test_many_scripts_are_read_up_to_the_cap_and_the_cut_is_noted() -> None:
    outcome = _bounded("many-scripts")
    assert outcome == {
        "read": 10_000,
        "note": "too-many-scripts: the page has 100000 JSON-LD blocks; only the first 10000 "
        "were read",
        "outcomes": 1,
    }


def test_a_huge_single_line_is_repaired() -> None:
    outcome = _bounded("huge-single-line")
    assert outcome == {"repairs": ["escaped control characters in strings"], "type": "dict"}


def test_stray_closers_are_removed_in_bounded_memory() -> None:
    outcome = _bounded("stray-closers")
    assert outcome == {"repairs": ["removed a stray closing brace or bracket"], "type": "dict"}


@pytest.mark.parametrize("name", ["deep-json", "deep-json-in-page"])
def test_deep_json_is_a_permanent_error_not_a_recursion_error(name: str) -> None:
    outcome = _bounded(name)
    first = outcome[0] if isinstance(outcome, list) else outcome
    assert first["error"] == "json-too-deep"
    assert "JSON nested too deeply to be parsed; at most 100 levels are read" in first["message"]


def test_invalid_utf8_is_decoded_never_a_crash() -> None:
    outcome = _bounded("invalid-utf8")
    assert outcome["document"] == {
        "repairs": ["decoded as Latin-1: not UTF-8 (byte 88)"],
        "type": "dict",
    }
    assert outcome["block"] == [{"repairs": [], "type": "dict"}]
    assert outcome["links"] == ["https://data.example.org/m\ufffd.json"]


def test_huge_attribute_values_are_read_in_bounded_memory() -> None:
    outcome = _bounded("huge-attributes")
    href = 4 * 1024 * 1024 + len("https://data.example.org/")
    assert outcome["links"] == [[len("describedby"), href], [4 * 1024 * 1024, href]]
    assert outcome["meta"] == [4 * 1024 * 1024]
    assert outcome["blocks"] == [4 * 1024 * 1024]


def test_huge_link_headers_are_read_in_linear_time() -> None:
    cut = "link-header: only the first 10000 link-values read; the rest ignored"
    (unclosed, unclosed_notes), (quotes, quotes_notes), (many, many_notes) = _bounded(
        "huge-link-headers"
    )
    # the first 1,000 link-values give links; the rest of the first 10,000 are only counted
    kept = "link-header: the first 1000 link-values kept; 9000 more read and dropped"
    assert (unclosed, len(unclosed_notes)) == (0, 103)
    assert unclosed_notes[100:102] == [cut, kept]
    assert re.fullmatch(r"\d+ more repair notes not listed", unclosed_notes[102])
    assert quotes == 0
    assert len(quotes_notes) <= 101
    assert (many, many_notes) == (1_000, [cut, kept])


def test_huge_linksets_are_read_up_to_the_cap() -> None:
    as_json, as_text = _bounded("huge-linksets")
    assert as_json == [10_000, 1, "linkset: links read up to 10000; any more ignored"]
    assert as_text == [0, 101, "299901 more repair notes not listed"]
