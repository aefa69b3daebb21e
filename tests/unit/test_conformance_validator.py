"""Our per-profile SHACL verdicts compared with CDIF's own validator, record by record.

CDIF's validator (``ConformanceValidate.py`` beside the repository, ``--source local``: its
schema map and its ``ShaclValidation/*.ttl`` shapes) is run on every 1.1 example and must-fail
test; each profile it judges is compared with our verdict for that profile. Where it differs
from us (and from the building blocks), each difference is named with why; an unnamed one
fails. Skips cleanly when the validator or its imports are absent. See
docs/decisions/0062-shacl-per-profile.md and docs/conformance.md.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.records.shacl import shapes_file

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pyshacl") is None, reason="pyshacl (the shacl extra) not installed"
)

# Known differences: name -> (a phrase of the validator's message, why it differs from us).
KNOWN_DIFFERENCES = {
    "iri-propertyID": (
        "An identifier for the documented resource must be provided",
        "its core shapes share the building block's identifier rule, which refuses a "
        "PropertyValue identifier whose schema:propertyID is an IRI (see the building block "
        "oracle); we accept it, as the rule's own message recommends a URI",
    ),
    "curie-string-additionalType": (
        "serialized as a string literal",
        "its shapes add a rule absent from the building blocks: any schema:additionalType "
        "string that looks like a CURIE is refused, wherever it is (variables, distributions); "
        "we refuse the string only on the catalog record, as the core 1.1 rules do",
    ),
    "composite-dataset-rules": (
        "",
        "its shapes for data_description, data_structure, manifest and provenance carry core's "
        "dataset rules and a catalog-record exclusion written with the string "
        '"dcat:CatalogRecord", so they judge the catalog record (typed by the IRI) and nested '
        "nodes as datasets; the single-profile building blocks do not, and neither do we",
    ),
}
CORE_LIKE = {"core", "discovery"}


@cache
def _validator(folder: Path) -> Any:
    """The validator module and its local resolver, or a skip when absent or not importable."""
    script = folder / "ConformanceValidate.py"
    if not script.is_file():
        pytest.skip("CDIF's validator (../shared/cdif-validator) not present")
    sys.path.insert(0, str(folder))
    try:
        module = importlib.import_module("ConformanceValidate")
    except ImportError as exc:
        pytest.skip(f"CDIF's validator cannot be imported: {exc}")
    finally:
        sys.path.remove(str(folder))
    return module, module.build_resolver("local")


def validator_verdicts(
    folder: Path, document: Any
) -> dict[tuple[str, str], tuple[bool, list[str]]]:
    """(profile, version) -> (its SHACL verdict, its violation messages) for one document."""
    module, resolver = _validator(folder)
    # its rdflib calls are deprecated ones, which this suite turns into errors
    with contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = module.run_conformance(document, resolver, do_schema=False)
    verdicts = {}
    for entry in result["profiles"]:
        profile, _, version = entry["uri"].split("/cdif/")[-1].partition("/")
        messages = [
            str(error.get("Message", error.get("message", "")))
            for error in entry["shacl"]["errors"]
        ]
        verdicts[(profile, version)] = (entry["shacl"]["status"] == "passed", messages)
    return verdicts


def explain(profile: str, messages: list[str]) -> str | None:
    """The known difference that accounts for every message, or None."""
    causes = set()
    for message in messages:
        for name, (phrase, _) in KNOWN_DIFFERENCES.items():
            if phrase and phrase in message:
                causes.add(name)
                break
        else:
            if profile in CORE_LIKE:
                return None
            causes.add("composite-dataset-rules")
    return "+".join(sorted(causes)) if causes else None


@cache
def comparison(root: Path, folder: Path) -> tuple[int, dict[str, int], list[str]]:
    """(verdicts compared, disagreements by known difference, unexplained disagreements)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import test_shacl_11 as ours  # noqa: PLC0415

    records = dict(ours.documents(root))
    paths = [*sorted(root.glob("*/*/example*.json")), *sorted(root.glob("*/*/tests/*-fail.json"))]
    checked, explained, unexplained = 0, dict.fromkeys(KNOWN_DIFFERENCES, 0), []
    for path in paths:
        name = f"{path.parent.name}/{path.name}"
        document = json.loads(path.read_text(encoding="utf-8"))
        for (profile, version), (passed, messages) in validator_verdicts(folder, document).items():
            if shapes_file(profile, version) is None:
                continue
            checked += 1
            if passed == ours.our_conforms(profile, version, records[name]):
                continue
            cause = explain(profile, messages) if not passed else None
            if cause is None:
                unexplained.append(
                    f"{name} {profile}/{version}: validator {passed}: {messages[:3]}"
                )
            for part in (cause or "").split("+"):
                if part:
                    explained[part] += 1
    return checked, explained, unexplained


def test_the_validator_agrees_with_us_but_for_named_differences(
    cdif_11: Path, shared_validator: Path
) -> None:
    checked, explained, unexplained = comparison(cdif_11, shared_validator)
    assert checked >= 30
    assert not unexplained, "\n".join(unexplained)


@pytest.mark.parametrize("difference", sorted(KNOWN_DIFFERENCES))
def test_each_known_difference_still_occurs(
    cdif_11: Path, shared_validator: Path, difference: str
) -> None:
    # a difference the validator no longer makes is taken off the list (and the docs)
    _, explained, _ = comparison(cdif_11, shared_validator)
    assert explained[difference] > 0, KNOWN_DIFFERENCES[difference][1]


@pytest.fixture
def shared_validator(cdif_11: Path) -> Path:
    folder = cdif_11.parent / "cdif-validator"
    if not folder.is_dir():
        pytest.skip("CDIF's validator (../shared/cdif-validator) not present")
    return folder
