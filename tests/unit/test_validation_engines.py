"""The fast engine (jsonschema-rs) and the reference engine (jsonschema) agree on every verdict.

The product takes its verdict from jsonschema-rs and asks the pure-Python jsonschema only for
the messages of an invalid record, so the two must never disagree. Checked under both schemas
(core and discovery) on the reference corpus, its normalised forms, our golden records, and
many mutated variants: removed required items, wrong types, nil values, 1.0 and 1.1
conformance URIs, and values changed deep inside the tree.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from cdif_harvester.domain.records import validation
from cdif_harvester.domain.records.normalisation import NormalisationError, normalise
from cdif_harvester.domain.records.validation import NIL_VALUES, engine_verdicts, validate_record

GOLDEN = Path(__file__).parent / "golden"
SCHEMAS = ("cdif-core-1.0", "cdif-discovery-1.0")
PROFILES = (
    "https://w3id.org/cdif/core/1.0",
    "https://w3id.org/cdif/core/1.1/",
    "https://w3id.org/cdif/discovery/1.0",
    "https://w3id.org/cdif/discovery/1.1",
)
# Replacement values that break (or, for some keys, still fit) a value of any type.
REPLACEMENTS: tuple[Any, ...] = (
    None,
    5,
    1.5,
    True,
    "",
    "text",
    [],
    {},
    ["text"],
    [{}],
    {"@id": "https://example.org/x"},
    {"@list": []},
    *NIL_VALUES,
    [NIL_VALUES[0]],
    ["nil:notapplicable", "text"],
)


def _documents(corpus: Path) -> Iterator[tuple[str, Any]]:
    core = corpus / "cdif-core-1.0"
    paths = [
        *sorted(core.glob("*/example*.json")),
        *sorted(core.glob("*/tests/*-fail.json")),
        *sorted((corpus / "cdif-discovery-1.0" / "examples").glob("*.json*")),
    ]
    for path in paths:
        document = json.loads(path.read_text(encoding="utf-8"))
        yield path.name, document
        try:
            normalised = normalise(document, document_url=f"https://example.org/{path.name}")
        except NormalisationError:
            continue
        for number, item in enumerate(normalised):
            yield f"{path.name}~normalised{number}", item.record


def _golden_records() -> Iterator[tuple[str, Any]]:
    for path in sorted((GOLDEN / "normalisation").glob("*.expected.json")):
        expected = json.loads(path.read_text(encoding="utf-8"))
        for number, item in enumerate(expected if isinstance(expected, list) else [expected]):
            record = item.get("record") if isinstance(item, dict) else None
            if isinstance(record, dict):
                yield f"{path.name}#{number}", record
    yield "missing_items", json.loads((GOLDEN / "validation/missing_items.input.json").read_text())


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location in a JSON tree (members and array elements), depth first."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield (*prefix, key)
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield (*prefix, index)
            yield from _paths(child, (*prefix, index))


def _set(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    variant = copy.deepcopy(document)
    node = variant
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return variant


def _drop(document: Any, path: tuple[Any, ...]) -> Any:
    variant = copy.deepcopy(document)
    node = variant
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return variant


def _declaring(document: dict[str, Any], profiles: list[str]) -> dict[str, Any]:
    variant = copy.deepcopy(document)
    subject = variant.get("schema:subjectOf")
    if isinstance(subject, dict):
        subject["dcterms:conformsTo"] = [{"@id": iri} for iri in profiles]
    return variant


def _variants(
    document: Any, rng: random.Random, *, per_member: int, deep: int
) -> Iterator[tuple[str, Any]]:
    """Mutated copies of a document, with a label saying what was changed."""
    if not isinstance(document, dict):
        return
    subject = document.get("schema:subjectOf")
    # every member of the root and of the metadata record: removed, and replaced
    shallow: list[tuple[Any, ...]] = [(key,) for key in document]
    if isinstance(subject, dict):
        shallow += [("schema:subjectOf", key) for key in subject]
    for path in shallow:
        yield f"drop {path}", _drop(document, path)
        for value in rng.sample(REPLACEMENTS, per_member):
            yield f"set {path}={value!r}", _set(document, path, value)
    # the conformance URIs, 1.0 and 1.1, core and discovery, alone and in pairs
    if isinstance(subject, dict):
        for number, first in enumerate(PROFILES):
            second = PROFILES[(number + 2) % len(PROFILES)]
            yield f"declares {first}", _declaring(document, [first])
            yield f"declares {first}+{second}", _declaring(document, [first, second])
    # values deep inside the tree: a sample of locations, each removed or replaced
    inner = [path for path in _paths(document) if len(path) > 2]
    for path in rng.sample(inner, min(len(inner), deep)):
        yield f"drop {path}", _drop(document, path)
        value = rng.choice(REPLACEMENTS)
        yield f"set {path}={value!r}", _set(document, path, value)


def _verdicts(cases: list[tuple[str, Any]]) -> dict[str, list[tuple[str, bool, bool]]]:
    """Per schema: each case's name and the verdicts of the fast and the reference engine."""
    return {
        rules: [(name, *engine_verdicts(document, rules)) for name, document in cases]
        for rules in SCHEMAS
    }


def _check_agreement(cases: list[tuple[str, Any]]) -> None:
    verdicts = _verdicts(cases)
    disagreements = [
        (rules, name, fast, full)
        for rules, found in verdicts.items()
        for name, fast, full in found
        if fast != full
    ]
    assert disagreements == []
    # the cases exercise both verdicts under both schemas (the test can fail)
    for found in verdicts.values():
        assert {full for _, _, full in found} == {True, False}


def test_engines_agree_on_the_corpus_and_its_variants(corpus: Path) -> None:
    # Python validation of a corpus record takes milliseconds: every record and its
    # normalised form as they are, and a seeded sample of their variants.
    rng = random.Random(5)
    bases = [*_documents(corpus), *_golden_records()]
    variants = [
        (f"{name}: {label}", variant)
        for name, document in bases
        for label, variant in _variants(document, rng, per_member=2, deep=10)
    ]
    assert len(variants) > 4000
    cases = bases + rng.sample(variants, 1200)
    _check_agreement(cases)


def test_engines_agree_on_golden_records_without_the_corpus() -> None:
    rng = random.Random(11)
    cases = []
    for name, document in _golden_records():
        cases.append((name, document))
        variants = _variants(document, rng, per_member=len(REPLACEMENTS), deep=40)
        cases.extend((f"{name}: {label}", variant) for label, variant in variants)
    assert len(cases) > 1000
    _check_agreement(cases)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda r: r.pop("schema:name"),
        lambda r: r.update({"schema:name": "nil:missing"}),
        lambda r: r.update({"schema:license": "https://spdx.org/licenses/CC0-1.0"}),
    ],
)
def test_the_fast_verdict_rejects_and_the_report_explains(
    mutate: Callable[[dict[str, Any]], Any],
) -> None:
    record = json.loads((GOLDEN / "normalisation/cdif_shaped.input.json").read_text())
    assert engine_verdicts(record) == (True, True)
    mutate(record)
    assert engine_verdicts(record) == (False, False)
    report = validate_record(record)
    assert report.valid is False
    assert report.errors


def test_unknown_rule_set_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown rule set"):
        engine_verdicts({}, "cdif-core-9.9")


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_numbers_json_does_not_have_are_judged_by_the_reference_engine(number: float) -> None:
    # Python's json module reads NaN and Infinity from a publisher's text; the Rust engine
    # does not take them for numbers. The known disagreement, and the fallback that settles it.
    record = json.loads((GOLDEN / "normalisation/cdif_shaped.input.json").read_text())
    record["schema:version"] = number
    assert engine_verdicts(record) == (False, True)
    report = validate_record(record)
    assert (report.valid, report.errors) == (True, ())


def _reference_issues(document: dict[str, Any], rules: str) -> tuple[Any, ...]:
    """The issues as the Python engine finds them in the whole record (white box)."""
    from cdif_harvester.domain.records.validation import RULE_SETS, _compiled, _issue

    errors = _compiled(RULE_SETS[rules].schema).full.iter_errors(dict(document))
    issues = sorted((_issue(e) for e in errors), key=lambda i: (i.pointer, i.keyword, i.message))
    return tuple(dict.fromkeys(issues))


def test_the_report_looks_only_where_the_errors_are_and_misses_none() -> None:
    # The Python engine is run on the members the fast engine flagged (and those the root's
    # presence rules need): the report must equal that of the whole record.
    rng = random.Random(3)
    cases = []
    for name, document in _golden_records():
        cases.append((name, document))
        variants = _variants(document, rng, per_member=4, deep=20)
        cases.extend((f"{name}: {label}", variant) for label, variant in variants)
    compared = 0
    for name, document in cases:
        if not isinstance(document, dict):
            continue
        for rules in SCHEMAS:
            report = validate_record(document, rules=rules)
            assert report.errors == _reference_issues(document, rules), (name, rules)
            compared += not report.valid
    assert compared > 500


@pytest.mark.parametrize("name", validation._SCHEMA_FILES)
def test_every_schema_is_a_valid_2020_12_schema(name: str) -> None:
    """The schemas are compiled without a check against the metaschema (it cost a third of a
    document process's start): this is that check."""
    Draft202012Validator.check_schema(validation._schema_document(name))


# The script prints, at each step, whether the reference engine (jsonschema) is imported.
_LAZY_PROBE = """
import json, sys
from cdif_harvester.domain.records.validation import validate_record
seen = {"imported": "jsonschema" in sys.modules}
valid = validate_record(json.loads(sys.argv[1]))
seen["after a valid record"] = "jsonschema" in sys.modules
invalid = validate_record(json.loads(sys.argv[2]))
seen["after an invalid record"] = "jsonschema" in sys.modules
seen["verdicts"] = [valid.valid, invalid.valid, len(invalid.errors) > 0]
print(json.dumps(seen))
"""


def test_the_reference_engine_is_loaded_only_for_a_record_that_needs_its_messages() -> None:
    # A cold start that validates only valid records (or none: the intake API on most
    # requests) does not import jsonschema; the first invalid record does, and gets its errors.
    valid, invalid = (
        json.dumps(
            json.loads((GOLDEN / f"normalisation/{name}.expected.json").read_text())[0]["record"]
        )
        for name in ("cdif_shaped", "plain_schemaorg")
    )
    done = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE, valid, invalid],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == {
        "imported": False,
        "after a valid record": False,
        "after an invalid record": True,
        "verdicts": [True, False, True],
    }
