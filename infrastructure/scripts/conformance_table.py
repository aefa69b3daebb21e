"""Print the CDIF 1.1 conformance table of docs/conformance.md (re-measure it with this).

For each profile and version: of the official 1.1 examples and must-fail tests that claim it,
how many get the official verdict from us, by JSON Schema (the building block's
resolvedSchema.json against ``validate_record(doc, rules=...)``, on the documents as published)
and by SHACL (the building block's rules.shacl against our shapes, on the records as the
harvester holds them), and how often CDIF's validator gives our SHACL verdict.
Needs the ``shacl`` extra and the CDIF reference material beside the repository.

    .venv/bin/python infrastructure/scripts/conformance_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "tests" / "unit"))

import test_conformance_validator as against_validator  # noqa: E402
import test_shacl_11 as shacl_oracle  # noqa: E402
from jsonschema import Draft202012Validator  # noqa: E402

from cdif_harvester.domain.records.normalisation import NormalisationError, normalise  # noqa: E402
from cdif_harvester.domain.records.validation import validate_record  # noqa: E402

BLOCKS = {
    "core": "cdifProfile/cdifCore",
    "discovery": "cdifProfile/cdifDiscovery",
    "data_description": "cdifProfile/cdifDataDescription",
    "data_structure": "cdifProfile/cdifDataStructure",
    "manifest": "cdifProfile/cdifManifest",
    "provenance": "cdifProfile/cdifProvenance",
    "codelist": "cdifProfile/cdifCodelist",
}


def main() -> None:
    """Measure and print the table as Markdown."""
    root = SHARED / "cdif-1.1"
    paths = [*sorted(root.glob("*/*/example*.json")), *sorted(root.glob("*/*/tests/*-fail.json"))]
    records = dict(shacl_oracle.documents(root))
    rows = {p: {"docs": 0, "schema": 0, "shacl": 0, "validator": 0, "judged": 0} for p in BLOCKS}
    for path in paths:
        name = f"{path.parent.name}/{path.name}"
        document = json.loads(path.read_text(encoding="utf-8"))
        record = records[name]
        claims = {p for p, v in shacl_oracle.claimed(record) if v == "1.1"}
        by_validator = against_validator.validator_verdicts(SHARED / "cdif-validator", document)
        for profile in sorted(claims & BLOCKS.keys()):
            row = rows[profile]
            row["docs"] += 1
            schema = json.loads((root / BLOCKS[profile] / "resolvedSchema.json").read_text())
            official = Draft202012Validator(schema).is_valid(document)
            ours = validate_record(document, rules=f"cdif-{profile}-1.1").valid
            row["schema"] += official == ours
            our_shacl = shacl_oracle.our_conforms(profile, "1.1", record)
            row["shacl"] += shacl_oracle.official_conforms(root, profile, record) == our_shacl
            if (profile, "1.1") in by_validator:
                row["judged"] += 1
                row["validator"] += by_validator[(profile, "1.1")][0] == our_shacl
    print(
        "| profile | documents claiming it | JSON Schema: official verdict | "
        "SHACL: official verdict | SHACL: CDIF's validator agrees |"
    )
    print("|---|---|---|---|---|")
    for profile, row in rows.items():
        print(
            f"| {profile} 1.1 | {row['docs']} | {row['schema']}/{row['docs']} | "
            f"{row['shacl']}/{row['docs']} | {row['validator']}/{row['judged']} |"
        )
    every_document()


def every_document() -> None:
    """The second table: every official document (1.1 and 1.0 examples and must-fail tests)
    under every rule set that has an official schema, as published; and, for the profiles each
    1.1 example claims, our verdict on the record the harvester makes of it."""
    root, corpus = SHARED / "cdif-1.1", SHARED / "corpus"
    paths = [
        *sorted(root.glob("*/*/example*.json")),
        *sorted(root.glob("*/*/tests/*-fail.json")),
        *sorted((corpus / "cdif-core-1.0").glob("*/example*.json")),
        *sorted((corpus / "cdif-core-1.0").glob("*/tests/*-fail.json")),
        *sorted((corpus / "cdif-discovery-1.0" / "examples").glob("*.json")),
    ]
    official = {
        f"cdif-{profile}-1.1": root / block / "resolvedSchema.json"
        for profile, block in {**BLOCKS, "conceptscheme": "cdifProfile/cdifConceptScheme"}.items()
    }
    official["cdif-core-1.0"] = corpus / "cdif-core-1.0/cdifCore/resolvedSchema.json"
    official["cdif-discovery-1.0"] = (
        corpus / "cdif-discovery-1.0/CDIFDiscoveryProfileStructuredSchema.json"
    )
    documents = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    print()
    print("| rule set | documents | as published: official verdict |")
    print("|---|---|---|")
    for rules, schema_path in official.items():
        schema = Draft202012Validator(json.loads(schema_path.read_text(encoding="utf-8")))
        agree = sum(
            schema.is_valid(doc) == validate_record(doc, rules=rules).valid for doc in documents
        )
        print(f"| {rules} | {len(documents)} | {agree}/{len(documents)} |")
    _after_normalisation(root)


def _after_normalisation(root: Path) -> None:
    judged = agree = 0
    for path in sorted(root.glob("*/*/example*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        try:
            records = normalise(document, document_url="https://example.org/page")
        except NormalisationError:
            continue  # not a dataset: no record, no verdict (tested as such)
        for item in records:
            for verdict in validate_record(item.record).profiles:
                block = BLOCKS.get(verdict.profile)
                if verdict.version != "1.1" or block is None or not verdict.declared:
                    continue
                schema = json.loads((root / block / "resolvedSchema.json").read_text())
                judged += 1
                agree += Draft202012Validator(schema).is_valid(document) == (
                    verdict.status == "valid"
                )
    print()
    print(
        f"After normalisation (the verdict the harvester reports, per profile claimed): "
        f"{agree}/{judged} equal the official verdict on the document as published."
    )


if __name__ == "__main__":
    main()
