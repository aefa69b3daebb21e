"""Our CDIF data_description 1.1 and data_structure 1.1 rules agree with the official blocks.

Each single profile's official ``resolvedSchema.json`` (the 1.1 building blocks beside the
repository) judges every 1.1 example and test document, every core 1.0 example and test, and
mutated variants of the valid examples (required members dropped where the profile asks for
them, wrong types, wrong ``@type`` of a variable or of a structure component); our verdict
under ``cdif-data_description-1.1`` and ``cdif-data_structure-1.1`` must be the same, and both
of our engines must agree. See docs/decisions/0058-cdif-11-data-description-and-structure-rules.md.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cdif_harvester.domain.records.validation import engine_verdicts, validate_record

DATA_DESCRIPTION = "cdif-data_description-1.1"
DATA_STRUCTURE = "cdif-data_structure-1.1"
OFFICIAL = {
    DATA_DESCRIPTION: "cdifProfile/cdifDataDescription/resolvedSchema.json",
    DATA_STRUCTURE: "cdifProfile/cdifDataStructure/resolvedSchema.json",
}
DD_11 = "https://w3id.org/cdif/data_description/1.1"
DS_11 = "https://w3id.org/cdif/data_structure/1.1"
STRUCTURES = (
    "cdi:DataStructure",
    "cdi:DimensionalDataStructure",
    "cdi:LongDataStructure",
    "cdi:WideDataStructure",
)

# A mutation changes a copy of a document in place and says whether it found its target.
Mutation = Callable[[Any], bool]


# --- the documents ---------------------------------------------------------------------------


def _official(cdif_11: Path) -> dict[str, Any]:
    from jsonschema import Draft202012Validator

    return {
        rules: Draft202012Validator(json.loads((cdif_11 / path).read_text(encoding="utf-8")))
        for rules, path in OFFICIAL.items()
    }


def _documents(cdif_11: Path) -> list[tuple[str, Any]]:
    """Every 1.1 example and test document, and every core 1.0 example and test."""
    corpus = cdif_11.parent / "corpus" / "cdif-core-1.0"
    paths = [
        *sorted(cdif_11.glob("*/*/example*.json")),
        *sorted(cdif_11.glob("*/*/tests/*.json")),
        *sorted(corpus.glob("*/example*.json")),
        *sorted(corpus.glob("*/tests/*.json")),
    ]
    root = cdif_11.parent
    return [
        (str(path.relative_to(root)), json.loads(path.read_text(encoding="utf-8")))
        for path in paths
    ]


# --- mutations -------------------------------------------------------------------------------


def _nodes(value: Any) -> Iterator[dict[str, Any]]:
    """Every object in a JSON tree, depth first, the root first."""
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _nodes(child)


def _types(node: dict[str, Any]) -> list[Any]:
    kinds = node.get("@type")
    return kinds if isinstance(kinds, list) else [kinds]


def _typed(*kinds: str) -> Callable[[dict[str, Any]], bool]:
    return lambda node: any(kind in _types(node) for kind in kinds)


def _having(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda node: key in node


def _on_first(
    where: Callable[[dict[str, Any]], bool], change: Callable[[dict[str, Any]], None]
) -> Mutation:
    """Apply ``change`` to the first object of the document that ``where`` picks."""

    def apply(document: Any) -> bool:
        node = next((each for each in _nodes(document) if where(each)), None)
        if node is None:
            return False
        change(node)
        return True

    return apply


def _drop(*keys: str) -> Callable[[dict[str, Any]], None]:
    def change(node: dict[str, Any]) -> None:
        for key in keys:
            node.pop(key, None)

    return change


def _put(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(node: dict[str, Any]) -> None:
        node[key] = copy.deepcopy(value)

    return change


def _variable(document: Any) -> dict[str, Any] | None:
    variables = document.get("schema:variableMeasured") if isinstance(document, dict) else None
    if isinstance(variables, list) and variables and isinstance(variables[0], dict):
        return variables[0]
    return None


def _on_variable(change: Callable[[dict[str, Any]], None]) -> Mutation:
    """Apply ``change`` to the first variable measured of the record."""

    def apply(document: Any) -> bool:
        variable = _variable(document)
        if variable is None:
            return False
        change(variable)
        return True

    return apply


def _on_record(change: Callable[[dict[str, Any]], None]) -> Mutation:
    def apply(document: Any) -> bool:
        if not isinstance(document, dict):
            return False
        change(document)
        return True

    return apply


def _conforms_to(value: Any) -> Mutation:
    """Replace the profiles the metadata record declares."""

    def apply(document: Any) -> bool:
        subject = document.get("schema:subjectOf") if isinstance(document, dict) else None
        if not isinstance(subject, dict):
            return False
        subject["dcterms:conformsTo"] = copy.deepcopy(value)
        return True

    return apply


def _without_type(kind: str) -> Callable[[dict[str, Any]], None]:
    def change(node: dict[str, Any]) -> None:
        node["@type"] = [each for each in _types(node) if each != kind] or ["schema:Thing"]

    return change


def _first_component(change: Callable[[dict[str, Any]], None]) -> Mutation:
    """Apply ``change`` to the first component of the first data structure."""

    def apply(document: Any) -> bool:
        structure = next((n for n in _nodes(document) if _typed(*STRUCTURES)(n)), None)
        components = structure.get("cdi:has_DataStructureComponent") if structure else None
        if not isinstance(components, list) or not components:
            return False
        if not isinstance(components[0], dict):
            return False
        change(components[0])
        return True

    return apply


def _twice_identified(document: Any) -> bool:
    """A long data structure with its identifier component given twice."""
    structure = next((n for n in _nodes(document) if _typed("cdi:LongDataStructure")(n)), None)
    components = structure.get("cdi:has_DataStructureComponent") if structure else None
    identifiers = [
        c for c in components or [] if isinstance(c, dict) and _typed("cdi:IdentifierComponent")(c)
    ]
    if not identifiers or not isinstance(components, list):
        return False
    components.append(copy.deepcopy(identifiers[0]))
    return True


DATA_DESCRIPTION_MUTATIONS: dict[str, Mutation] = {
    "drop-variableMeasured": _on_record(_drop("schema:variableMeasured")),
    "variableMeasured-not-array": _on_record(
        lambda record: record.update({"schema:variableMeasured": _variable(record) or {}})
    ),
    "variable-drop-id": _on_variable(_drop("@id")),
    "variable-drop-name": _on_variable(_drop("schema:name")),
    "variable-drop-type": _on_variable(_drop("@type")),
    "variable-type-without-InstanceVariable": _on_variable(_without_type("cdi:InstanceVariable")),
    "variable-type-without-PropertyValue": _on_variable(_without_type("schema:PropertyValue")),
    "variable-type-as-string": _on_variable(_put("@type", "schema:PropertyValue")),
    "variable-name-not-string": _on_variable(_put("schema:name", 5)),
    "variable-role-unknown": _on_variable(_put("cdif:role", "Weight")),
    "variable-physicalDataType-number": _on_variable(_put("cdif:physicalDataType", 5)),
    "variable-minValue-string": _on_variable(_put("schema:minValue", "0")),
    "variable-unit-of-measure-as-string": _on_variable(_put("cdi:describedUnitOfMeasure", "m")),
    "variable-sentinel-domain-empty": _on_variable(
        _put("cdi:takesSentinelValuesFrom", [{"@type": ["cdif:SentinelValueDomain"]}])
    ),
    "variable-substantive-data-type-unknown": _on_variable(
        _put(
            "cdi:takesSubstantiveValuesFrom",
            {"@type": ["cdif:SubstantiveValueDomain"], "cdif:recommendedDataType": ["xsd:real"]},
        )
    ),
    "conformsTo-without-data-description": _conforms_to(
        [{"@id": "https://w3id.org/cdif/core/1.1"}]
    ),
    "conformsTo-not-array": _conforms_to({"@id": DD_11}),
    "conformsTo-item-with-extra-member": _conforms_to([{"@id": DD_11, "schema:name": "DD"}]),
    "primaryKey-drop-components": _on_first(_typed("cdif:Key"), _drop("cdif:isComposedOf")),
    "primaryKey-position-not-integer": _on_first(
        _typed("cdi:ComponentPosition"), _put("cdi:value", "1")
    ),
    "primaryKey-not-a-key": _on_record(_put("cdif:hasPrimaryKey", {"@type": ["cdif:Key"]})),
    "statistics-empty-item": _on_record(_put("cdif:statistics", [{}])),
    "mapping-index-negative": _on_first(_having("cdif:index"), _put("cdif:index", -1)),
    "mapping-variable-not-reference": _on_first(
        _having("cdif:formats_InstanceVariable"), _put("cdif:formats_InstanceVariable", "v1")
    ),
    "fingerprint-without-value": _on_first(
        _typed("schema:DataDownload"),
        _put("cdi:fingerprint", {"cdi:algorithmSpecification": "MD5"}),
    ),
    "tabular-hasHeader-not-boolean": _on_first(
        _typed("cdi:TabularTextDataSet"), _put("cdi:hasHeader", "yes")
    ),
    "context-cdi-wrong": _on_record(
        lambda record: (
            record.get("@context", {}).update({"cdi": "http://example.org/cdi/"})
            if isinstance(record.get("@context"), dict)
            else None
        )
    ),
}

DATA_STRUCTURE_MUTATIONS: dict[str, Mutation] = {
    "drop-subjectOf": _on_first(_having("schema:subjectOf"), _drop("schema:subjectOf")),
    "drop-conformsTo": _on_first(_having("dcterms:conformsTo"), _drop("dcterms:conformsTo")),
    "conformsTo-without-data-structure": _conforms_to([{"@id": DD_11}]),
    "conformsTo-item-with-extra-member": _conforms_to([{"@id": DS_11, "schema:name": "DS"}]),
    "distribution-not-array": _on_first(
        _having("schema:distribution"),
        lambda record: record.update({"schema:distribution": {"cdi:isStructuredBy": "s"}}),
    ),
    "isStructuredBy-string": _on_first(
        _having("cdi:isStructuredBy"), _put("cdi:isStructuredBy", "#structure")
    ),
    "structure-drop-components": _on_first(
        _typed(*STRUCTURES), _drop("cdi:has_DataStructureComponent")
    ),
    "structure-no-components": _on_first(
        _typed(*STRUCTURES), _put("cdi:has_DataStructureComponent", [])
    ),
    "structure-unknown-type": _on_first(_typed(*STRUCTURES), _put("@type", ["cdi:Structure"])),
    "component-unknown-type": _first_component(_put("@type", ["cdi:Component"])),
    "component-type-as-string": _first_component(_put("@type", "cdi:IdentifierComponent")),
    "identifier-component-drop-variable": _on_first(
        _typed("cdi:IdentifierComponent"), _drop("cdif:isDefinedBy_RepresentedVariable")
    ),
    "dimension-component-drop-variable": _on_first(
        _typed("cdi:DimensionComponent"), _drop("cdif:isDefinedBy_RepresentedVariable")
    ),
    "measure-component-name-string": _on_first(
        _typed("cdi:MeasureComponent"), _put("cdif:name", "temperature")
    ),
    "component-semantic-empty": _on_first(_having("cdi:semantic"), _put("cdi:semantic", [])),
    "descriptor-component-drop-variable": _on_first(
        _typed("cdi:VariableDescriptorComponent"), _drop("cdif:isDefinedBy_DescriptorVariable")
    ),
    "long-structure-two-identifiers": _twice_identified,
    "represented-variable-wrong-type": _on_first(
        _typed("cdi:RepresentedVariable"), _put("@type", ["cdi:InstanceVariable"])
    ),
    "represented-variable-no-sentinels": _on_first(
        _typed("cdi:RepresentedVariable"), _put("cdi:takesSentinelValuesFrom", [])
    ),
    "value-domain-without-values": _on_first(
        _typed("cdi:RepresentedVariable"),
        _put("cdi:takesSubstantiveValuesFrom", {"@type": ["cdif:SubstantiveValueDomain"]}),
    ),
    "primaryKey-position-zero": _on_first(_typed("cdi:ComponentPosition"), _put("cdi:value", 0)),
    "primaryKey-drop-components": _on_first(_typed("cdif:PrimaryKey"), _drop("cdif:isComposedOf")),
    "foreignKey-member-without-position": _on_first(
        _typed("cdi:DataStructure", "cdi:DimensionalDataStructure", "cdi:WideDataStructure"),
        _put(
            "cdi:has_ForeignKey",
            [
                {
                    "@type": ["cdi:ForeignKey"],
                    "cdi:isComposedOf": [{"@type": ["cdi:RepresentedVariable"]}],
                }
            ],
        ),
    ),
}


def _also_measure(component: dict[str, Any]) -> None:
    component["@type"] = [*_types(component), "cdi:MeasureComponent"]
    component.pop("cdif:isDefinedBy_RepresentedVariable", None)


def _specification(variable: dict[str, Any]) -> None:
    variable["@type"] = [
        "schema:PropertyValueSpecification" if kind == "schema:PropertyValue" else kind
        for kind in _types(variable)
    ]


# Changes the profiles allow: the official verdict stays "valid" for some documents, and ours
# must follow (they sit next to the rules we state twice for the sake of the messages).
ALLOWED_CHANGES: dict[str, Mutation] = {
    "component-also-measure-without-variable": _first_component(_also_measure),
    "variable-typed-as-specification": _on_variable(_specification),
    "variable-as-reference-in-key": _on_first(
        _typed("cdi:ComponentPosition"), _put("cdi:indexes", {"@id": "#v"})
    ),
    "conformsTo-with-another-profile": _conforms_to(
        [{"@id": DD_11}, {"@id": DS_11}, {"@id": "https://w3id.org/cdif/core/1.1"}]
    ),
    "isStructuredBy-reference": _on_first(
        _having("cdi:isStructuredBy"), _put("cdi:isStructuredBy", {"@id": "#structure"})
    ),
}


def _cases(cdif_11: Path) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """The documents, and the mutated variants of those valid under either profile."""
    official = _official(cdif_11)
    documents = _documents(cdif_11)
    variants: list[tuple[str, Any]] = []
    for name, document in documents:
        for rules, mutations in (
            (DATA_DESCRIPTION, DATA_DESCRIPTION_MUTATIONS | ALLOWED_CHANGES),
            (DATA_STRUCTURE, DATA_STRUCTURE_MUTATIONS | ALLOWED_CHANGES),
        ):
            if not official[rules].is_valid(document):
                continue
            for label, mutate in mutations.items():
                variant = copy.deepcopy(document)
                if mutate(variant):
                    variants.append((f"{name}+{label}", variant))
    return documents, variants


# --- agreement -------------------------------------------------------------------------------


def _disagreements(official: dict[str, Any], cases: list[tuple[str, Any]]) -> list[Any]:
    return [
        (rules, name, validator.is_valid(document))
        for name, document in cases
        for rules, validator in official.items()
        if validate_record(document, rules=rules).valid != validator.is_valid(document)
    ]


def test_every_document_gets_the_official_verdict(cdif_11: Path) -> None:
    official = _official(cdif_11)
    documents, _ = _cases(cdif_11)
    assert len(documents) >= 40
    assert _disagreements(official, documents) == []
    # both verdicts occur under both profiles (the test can fail either way)
    for validator in official.values():
        verdicts = {validator.is_valid(document) for _, document in documents}
        assert verdicts == {True, False}


def test_every_mutation_gets_the_official_verdict(cdif_11: Path) -> None:
    official = _official(cdif_11)
    _, variants = _cases(cdif_11)
    assert _disagreements(official, variants) == []
    # every mutation really breaks some document under its profile
    for rules, mutations in (
        (DATA_DESCRIPTION, DATA_DESCRIPTION_MUTATIONS),
        (DATA_STRUCTURE, DATA_STRUCTURE_MUTATIONS),
    ):
        assert len(mutations) >= 15
        for label in mutations:
            broken = [
                name
                for name, variant in variants
                if name.endswith(f"+{label}") and not official[rules].is_valid(variant)
            ]
            assert broken, f"{label} broke no document under {rules}"
    for label in ALLOWED_CHANGES:
        kept = [
            name
            for name, variant in variants
            if name.endswith(f"+{label}") and any(v.is_valid(variant) for v in official.values())
        ]
        assert kept, f"{label} kept no document valid"


def test_both_engines_agree_on_every_case(cdif_11: Path) -> None:
    documents, variants = _cases(cdif_11)
    split = [
        (rules, name, fast, full)
        for name, document in documents + variants
        for rules in OFFICIAL
        for fast, full in [engine_verdicts(document, rules)]
        if fast != full
    ]
    assert len(documents + variants) > 300
    assert split == []


def test_our_schemas_are_not_the_official_files(cdif_11: Path) -> None:
    from importlib import resources

    for rules, path in OFFICIAL.items():
        ours = resources.files("cdif_harvester").joinpath(f"schemas/{rules}.schema.json")
        assert json.loads(ours.read_text()) != json.loads((cdif_11 / path).read_text())


# --- messages --------------------------------------------------------------------------------


def _example(cdif_11: Path, path: str) -> dict[str, Any]:
    document = json.loads((cdif_11 / path).read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


DD_EXAMPLE = "cdifProfile/cdifDataDescription/exampleCdifDataDescriptionMinimal.json"
DS_EXAMPLE = "cdifProfile/cdifDataStructure/exampleCdifDataStructureMinimal.json"
DS_RECORD = (
    "cdifCompositeProfile/DiscoveryDataDescriptionStructure/exampleCDIFDataStructureMinimal.json"
)


def _messages(document: dict[str, Any], rules: str) -> dict[str, str]:
    report = validate_record(document, rules=rules)
    assert not report.valid
    return {issue.pointer: issue.message for issue in report.errors}


def test_a_missing_variable_identifier_is_named(cdif_11: Path) -> None:
    record = _example(cdif_11, DD_EXAMPLE)
    del record["schema:variableMeasured"][0]["@id"]
    assert _messages(record, DATA_DESCRIPTION) == {
        "/schema:variableMeasured/0/@id": (
            "schema:variableMeasured/0/@id is required (Variable measured, 0..*)"
        )
    }


def test_a_record_not_declaring_the_profile_is_told_which_uri(cdif_11: Path) -> None:
    record = _example(cdif_11, DD_EXAMPLE)
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": "https://w3id.org/cdif/core/1.1"}]
    (message,) = _messages(record, DATA_DESCRIPTION).values()
    assert DD_11 in message and message.startswith("schema:subjectOf/dcterms:conformsTo must")
    record = _example(cdif_11, DS_RECORD)
    record["schema:subjectOf"]["dcterms:conformsTo"] = [{"@id": DD_11}]
    (message,) = _messages(record, DATA_STRUCTURE).values()
    assert DS_11 in message


def test_a_variable_of_the_wrong_type_names_the_types_wanted(cdif_11: Path) -> None:
    record = _example(cdif_11, DD_EXAMPLE)
    variable = record["schema:variableMeasured"][0]
    variable["@type"] = ["cdi:InstanceVariable"]
    assert _messages(record, DATA_DESCRIPTION) == {
        "/schema:variableMeasured/0/@type": (
            "schema:variableMeasured/0/@type must include one of schema:PropertyValue, "
            "schema:PropertyValueSpecification (Variable measured, 0..*)"
        )
    }
    variable["@type"] = ["schema:PropertyValue"]
    assert _messages(record, DATA_DESCRIPTION) == {
        "/schema:variableMeasured/0/@type": (
            "schema:variableMeasured/0/@type must include cdi:InstanceVariable "
            "(Variable measured, 0..*)"
        )
    }


def test_a_component_of_an_unknown_type_is_reported_at_its_type(cdif_11: Path) -> None:
    record = _example(cdif_11, DS_RECORD)
    structure = record["schema:distribution"][0]["cdi:isStructuredBy"]
    structure["cdi:has_DataStructureComponent"][0]["@type"] = ["cdi:Component"]
    pointer = "/schema:distribution/0/cdi:isStructuredBy/cdi:has_DataStructureComponent/0/@type"
    message = _messages(record, DATA_STRUCTURE)[pointer]
    assert message.startswith(
        "schema:distribution/0/cdi:isStructuredBy/cdi:has_DataStructureComponent/0/@type "
        "must include one of cdi:IdentifierComponent, cdi:MeasureComponent"
    )


def test_a_component_missing_its_variable_is_named(cdif_11: Path) -> None:
    structure = _example(cdif_11, DS_EXAMPLE)
    component = structure["cdi:has_DataStructureComponent"][0]
    assert component["@type"] == ["cdi:IdentifierComponent"]
    del component["cdif:isDefinedBy_RepresentedVariable"]
    pointer = "/cdi:has_DataStructureComponent/0/cdif:isDefinedBy_RepresentedVariable"
    assert _messages(structure, DATA_STRUCTURE)[pointer] == (
        "cdi:has_DataStructureComponent/0/cdif:isDefinedBy_RepresentedVariable is required"
    )
