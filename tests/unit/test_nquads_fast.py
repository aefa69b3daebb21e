"""The N-Quads view's fast path gives exactly what pyld's ``to_rdf`` gives, or declines.

Every record goes through ``record_nquads`` with and without the fast path and the texts must
be identical (both are sorted, unique lines). Records: the golden crosswalk records, the
normalised golden documents, the demo site's pages and the benchmark's generated landing pages
(seven publishers' styles). A test also checks that most of them really took the fast path, so
that the comparison is not between pyld and itself.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.demo.server import demo_site_dir
from cdif_harvester.domain.records.contexts import shipped_contexts
from cdif_harvester.domain.records.extraction import find_jsonld_scripts, has_dataset, parse_jsonld
from cdif_harvester.domain.records.normalisation import NormalisationError, normalise
from cdif_harvester.domain.views import nquads
from cdif_harvester.domain.views.nquads import NQuadsError, record_nquads

UNIT = Path(__file__).parent
BENCH = UNIT.parents[1] / "bench" / "extraction_bench.py"
PAGE_URL = "https://pub.example/datasets/page.html"


def _normalised(document: Any) -> Iterator[tuple[dict[str, Any], str]]:
    if not has_dataset(document):
        return
    try:
        results = normalise(copy.deepcopy(document), document_url=PAGE_URL)
    except NormalisationError:
        return
    for result in results:
        yield result.record, result.record_id


def _pages(pages: list[bytes]) -> list[tuple[dict[str, Any], str]]:
    found = []
    for html in pages:
        for block in find_jsonld_scripts(html):
            found.extend(_normalised(parse_jsonld(block.text).data))
    return found


@cache
def _bench_pages(count: int = 120) -> tuple[bytes, ...]:
    spec = importlib.util.spec_from_file_location("extraction_bench", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    return tuple(page.html for page in bench.generate(count))


def _records() -> dict[str, list[tuple[dict[str, Any], str]]]:
    crosswalk = [
        (json.loads(path.read_text(encoding="utf-8")), "https://data.example.org/metadata/x")
        for path in sorted((UNIT / "golden" / "crosswalk").glob("*.record.jsonld"))
    ]
    golden: list[tuple[dict[str, Any], str]] = []
    for path in sorted((UNIT / "golden" / "normalisation").glob("*.input.json")):
        golden.extend(_normalised(json.loads(path.read_text(encoding="utf-8"))))
    demo = Path(str(demo_site_dir()))
    demo_pages = [path.read_bytes() for path in sorted(demo.rglob("*.html"))]
    return {
        "crosswalk golden": crosswalk,
        "normalisation golden": golden,
        "demo site": _pages(demo_pages),
        "benchmark": _pages(list(_bench_pages())),
    }


def _both(record: dict[str, Any], graph: str) -> tuple[str, str]:
    def one(fast: bool) -> str:
        try:
            return record_nquads(record, graph=graph, fast_path=fast)
        except NQuadsError as exc:
            return f"error: {exc}"

    return one(True), one(False)


@pytest.mark.parametrize(
    "name", ["crosswalk golden", "normalisation golden", "demo site", "benchmark"]
)
def test_the_fast_path_gives_pylds_nquads(name: str) -> None:
    records = _records()[name]
    assert records, f"no {name} records"
    for record, graph in records:
        fast, slow = _both(record, graph)
        assert fast == slow, f"{name}: {graph}"


def test_most_records_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = []
    real = nquads._expanded_to_nquads

    def counting(expanded: list[Any]) -> str:
        taken.append(1)
        return real(expanded)

    monkeypatch.setattr(nquads, "_expanded_to_nquads", counting)
    records = [pair for group in _records().values() for pair in group]
    for record, graph in records:
        record_nquads(record, graph=graph)
    assert len(taken) >= 0.9 * len(records), (len(taken), len(records))


def test_a_relative_iri_goes_to_pyld() -> None:
    record = {
        "@context": {"schema": "http://schema.org/"},
        "@id": "relative/thing",
        "@type": "schema:Dataset",
        "schema:name": "A",
        "schema:url": {"@id": "also/relative"},
    }
    fast, slow = _both(record, "https://example.org/g")
    assert fast == slow
    assert nquads._fast_expansion({"@graph": [record]}, shipped_contexts()) is None
