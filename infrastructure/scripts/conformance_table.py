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


if __name__ == "__main__":
    main()
