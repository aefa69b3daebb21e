"""What the harvester reports for the official CDIF 1.1 examples equals the official verdicts.

Each official 1.1 example (../shared/cdif-1.1, skipped when absent) is normalised as the
extractor does, and each record judged per profile (``validate_record(record).profiles``). For
every profile the example claims, our verdict after normalisation must equal the official one:
the profile's single-profile ``resolvedSchema.json`` on the raw document. The one exception is
listed: a document the official core rejects that normalisation repairs, each repair named in the
record's notes. Examples that are not datasets, and the official must-fail documents, give no
record, so nothing is called valid. See docs/decisions/0064-conformance-after-normalisation.md.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from cdif_harvester.domain.records.normalisation import NormalisationError, normalise
from cdif_harvester.domain.records.validation import ProfileVerdict, validate_record

DOCUMENT_URL = "https://example.org/page"
# profile path segment -> the folder of its official single-profile building block
BLOCKS = {
    "core": "cdifCore",
    "discovery": "cdifDiscovery",
    "data_description": "cdifDataDescription",
    "data_structure": "cdifDataStructure",
    "manifest": "cdifManifest",
    "provenance": "cdifProvenance",
}
_CLAIM = re.compile(r"https?://w3id\.org/cdif/([a-z_]+)/1\.1")
_REQUIRED = re.compile(r"^'(.+)' is a required property$")

# (example, profile): the official schema rejects the raw document, normalisation repairs it and
# names each repair in the record's notes. The cdifDiscovery example is a discovery-module
# fragment whose @context does not bind prov; the record is written with our context.
REPAIRED_BY_NORMALISATION = {("cdifProfile/cdifDiscovery/exampleCdifDiscovery.json", "core")}


@cache
def _official(root: Path, profile: str) -> Draft202012Validator:
    path = root / "cdifProfile" / BLOCKS[profile] / "resolvedSchema.json"
    return Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def _examples(root: Path) -> list[Path]:
    return sorted(root.glob("*/*/example*.json"))


def _name(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _claims(document: Any) -> list[str]:
    """The 1.1 profiles a document claims, read from its text (not by the code under test)."""
    return sorted(set(_CLAIM.findall(json.dumps(document))))


def _verdicts(document: Any, fast_path: bool = True) -> list[tuple[dict[str, ProfileVerdict], Any]]:
    """Per record of the normalised document: its verdicts by profile key, and its notes."""
    found = []
    for result in normalise(document, document_url=DOCUMENT_URL, fast_path=fast_path):
        report = validate_record(result.record)
        found.append(({verdict.key: verdict for verdict in report.profiles}, result.notes))
    return found


def _named(error: ValidationError) -> list[str]:
    """The keys an official error is about: its path's names and a missing property."""
    names = [step for step in error.absolute_path if isinstance(step, str)]
    missing = _REQUIRED.match(error.message)
    return [*names, *([missing[1]] if missing else [])]


# --- every claimed profile, after normalisation ---------------------------------------------


@pytest.mark.parametrize("fast_path", [True, False])
def test_verdicts_after_normalisation_equal_the_official_ones(
    cdif_11: Path, fast_path: bool
) -> None:
    compared, disagreements, repaired = 0, [], set()
    for path in _examples(cdif_11):
        document, name = _load(path), _name(cdif_11, path)
        claims = _claims(document)
        if not claims:
            continue
        records = _verdicts(document, fast_path)
        assert len(records) == 1, name
        ((verdicts, notes),) = records
        for profile in claims:
            official = _official(cdif_11, profile).is_valid(document)
            verdict = verdicts[f"{profile}/1.1"]
            assert verdict.declared, (name, profile)
            ours = verdict.status == "valid"
            compared += 1
            if (name, profile) in REPAIRED_BY_NORMALISATION and not official and ours:
                repaired.add((name, profile))
                continue
            if ours != official:
                errors = [issue.message for issue in verdict.errors][:3]
                disagreements.append(f"{name} {profile}: official {official}, ours {ours} {errors}")
    assert not disagreements, "\n".join(disagreements)
    assert repaired == REPAIRED_BY_NORMALISATION
    assert compared >= 45


def test_what_normalisation_repairs_is_named_in_the_notes(cdif_11: Path) -> None:
    for name, profile in sorted(REPAIRED_BY_NORMALISATION):
        document = _load(cdif_11 / name)
        errors = list(_official(cdif_11, profile).iter_errors(document))
        assert errors, name
        ((verdicts, notes),) = _verdicts(document)
        assert verdicts[f"{profile}/1.1"].status == "valid"
        for error in errors:
            keys = _named(error)
            assert keys, error.message
            assert any(all(key in note for key in keys) for note in notes), (keys, notes)


def test_valid_examples_claiming_core_stay_valid_under_our_core(cdif_11: Path) -> None:
    checked = 0
    for path in _examples(cdif_11):
        document = _load(path)
        if "core" not in _claims(document) or not _official(cdif_11, "core").is_valid(document):
            continue
        ((verdicts, _),) = _verdicts(document)
        core = verdicts["core/1.1"]
        assert core.status == "valid", (path.name, [issue.message for issue in core.errors])
        checked += 1
    assert checked >= 10


# --- documents that are not datasets ----------------------------------------------------------


def test_examples_claiming_nothing_are_not_datasets_and_give_no_record(cdif_11: Path) -> None:
    # The standalone data structures, the codelist and the concept scheme claim no profile URI
    # and hold no schema:Dataset: the harvester reports no record for them, so no verdict.
    checked = 0
    for path in _examples(cdif_11):
        document = _load(path)
        if _claims(document):
            continue
        assert "schema:Dataset" not in json.dumps(document), path.name
        with pytest.raises(NormalisationError) as raised:
            normalise(document, document_url=DOCUMENT_URL)
        assert raised.value.reason == "no-dataset", path.name
        checked += 1
    assert checked >= 4


def test_must_fail_documents_give_no_record(cdif_11: Path) -> None:
    failing = sorted(cdif_11.glob("*/*/tests/*-fail.json"))
    assert len(failing) >= 3
    for path in failing:
        document = _load(path)
        # the official schema of the folder rejects it ...
        schema = _load(path.parents[1] / "resolvedSchema.json")
        assert not Draft202012Validator(schema).is_valid(document), path
        # ... and the harvester finds no dataset in it: no record, nothing called valid
        with pytest.raises(NormalisationError) as raised:
            normalise(document, document_url=DOCUMENT_URL)
        assert raised.value.reason == "no-dataset", path
