"""Golden files for every repair: a page or document in, the records and reports out.

Each ``golden/repairs/<case>.input.html`` (its JSON-LD script blocks) or ``<case>.input.json``
(one document) goes through the product's public functions, as the extractor stage uses them:
``find_jsonld_scripts`` -> ``parse_jsonld`` -> ``normalise`` -> ``validate_record``. The
result, one entry per block and record (repairs, normalisation notes, identities, the
normalised record and its validation report; or the reason a block yielded nothing), must equal
``<case>.expected.json``.

To regenerate the expected files after a deliberate change, run with
``CDIF_REGENERATE_GOLDEN=1`` and review the diff; without it a missing or different expected
file fails. Beside the files, each case asserts the repair it exists for, so a careless
regeneration cannot hide a lost repair.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.records.extraction import (
    ExtractionError,
    find_jsonld_scripts,
    parse_jsonld,
)
from cdif_harvester.domain.records.normalisation import NormalisationError, normalise
from cdif_harvester.domain.records.validation import validate_record

GOLDEN = Path(__file__).parent / "golden" / "repairs"
REGENERATE = os.environ.get("CDIF_REGENERATE_GOLDEN") == "1"
INPUTS = sorted([*GOLDEN.glob("*.input.html"), *GOLDEN.glob("*.input.json")])

# The repair (or normalisation note) each case is about: case -> text that must be recorded.
PURPOSE = {
    "html_entities": "unescaped HTML entities",
    "cdata": "removed CDATA or HTML comment wrapper",
    "trailing_commas": "removed trailing commas",
    "comments": "removed comments",
    "control_characters": "escaped control characters in strings",
    "stray_brace": "removed a stray closing brace or bracket",
    "string_context_misspelled": "@context '//www.schema.org' read as https://schema.org/",
    "string_context_json": "string-valued @context parsed as JSON",
    "missing_context": "no @context: read with the schema.org context",
    "https_namespace": "https://schema.org/ IRIs mapped to http://schema.org/",
}


def _case(path: Path) -> str:
    return path.name.split(".input.")[0]


def _harvest(path: Path) -> list[dict[str, Any]]:
    """What the extractor makes of one golden input: an entry per block and record."""
    body = path.read_bytes()
    document_url = f"https://data.example.org/{_case(path)}"
    if path.suffix == ".html":
        blocks: list[tuple[int, str | bytes]] = [
            (block.index, block.text) for block in find_jsonld_scripts(body)
        ]
    else:
        blocks = [(0, body)]
    entries: list[dict[str, Any]] = []
    for index, text in blocks:
        try:
            parsed = parse_jsonld(text)
        except ExtractionError as exc:
            entries.append({"block": index, "error": exc.reason, "message": str(exc)})
            continue
        try:
            records = normalise(parsed.data, document_url=document_url)
        except NormalisationError as exc:
            entries.append(
                {
                    "block": index,
                    "repairs": list(parsed.repairs),
                    "error": exc.reason,
                    "message": str(exc),
                }
            )
            continue
        for item in records:
            entries.append(
                {
                    "block": index,
                    "repairs": list(parsed.repairs),
                    "notes": list(item.notes),
                    "record_id": item.record_id,
                    "resource_id": item.resource_id,
                    "identity_fallback": item.identity_fallback,
                    "record": item.record,
                    "report": validate_record(item.record).to_dict(),
                }
            )
    return entries


@pytest.mark.parametrize("path", INPUTS, ids=_case)
def test_repair_golden(path: Path) -> None:
    actual = _harvest(path)
    expected_path = GOLDEN / f"{_case(path)}.expected.json"
    if REGENERATE:
        expected_path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
        pytest.skip(f"regenerated {expected_path.name}: review the diff")
    if not expected_path.exists():
        pytest.fail(f"{expected_path.name} is missing: run with CDIF_REGENERATE_GOLDEN=1")
    assert actual == json.loads(expected_path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", sorted(PURPOSE))
def test_each_case_records_its_repair_and_yields_a_valid_record(case: str) -> None:
    (path,) = [p for p in INPUTS if _case(p) == case]
    (entry,) = _harvest(path)
    assert PURPOSE[case] in [*entry["repairs"], *entry["notes"]]
    # the repair saves the record: CDIF-shaped, with the CDIF context object, and valid
    assert entry["record"]["@context"]["schema"] == "http://schema.org/"
    assert entry["report"]["valid"] is True, entry["report"]["errors"]


def test_a_string_context_comes_out_as_the_cdif_context_object() -> None:
    (entry,) = _harvest(GOLDEN / "string_context.input.json")
    # "http://schema.org" is valid JSON-LD, served offline: nothing to repair in the text,
    # and the record gets the CDIF context object like every normalised record
    assert entry["repairs"] == []
    assert isinstance(entry["record"]["@context"], dict)
    assert entry["record"]["schema:name"] == "Snow depth, Alpine transect"
    assert entry["report"]["valid"] is True


def test_a_broken_block_does_not_spoil_its_valid_neighbours() -> None:
    entries = _harvest(GOLDEN / "broken_between_valid.input.html")
    assert [(e["block"], "error" in e) for e in entries] == [(0, False), (1, True), (2, False)]
    assert entries[1]["error"] == "malformed-json"
    assert [e["record"]["schema:name"] for e in (entries[0], entries[2])] == [
        "Sea level, tide gauge A",
        "Sea level, tide gauge B",
    ]
    assert entries[0]["report"]["valid"] and entries[2]["report"]["valid"]


def test_every_input_has_an_expected_file_and_no_expected_file_is_orphaned() -> None:
    cases = {_case(path) for path in INPUTS}
    expected = {p.name.removesuffix(".expected.json") for p in GOLDEN.glob("*.expected.json")}
    assert cases >= set(PURPOSE) | {"string_context", "broken_between_valid"}
    assert expected == cases
