"""The PID Kernel view checked row by row against CDIF discoverability Appendix 2.

Each row of the table that has a CDIF source is one case: the source alone produces the
attribute with the expected value, and a record with every other row's source but not this
one does not have it (missing sources are left out, never invented).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cdif_harvester.domain.views.pidkernel import KERNEL_ATTRIBUTES, pid_kernel_view

CONTEXT = {
    "schema": "http://schema.org/",
    "dcterms": "http://purl.org/dc/terms/",
    "dcat": "http://www.w3.org/ns/dcat#",
    "spdx": "http://spdx.org/rdf/terms#",
}
ORCID = "https://orcid.org/0000-0002-1825-0097"
ROR = "https://ror.org/05example1"


@dataclass(frozen=True)
class Row:
    """One Appendix 2 row: the record keys it reads and what each attribute must be."""

    label: str
    source: dict[str, Any]
    expected: dict[str, Any]
    # Sources this row shares an attribute with (removed too when checking absence).
    shared: tuple[str, ...] = field(default=())


ROWS = [
    Row(
        "FDO Creator",
        {
            "schema:creator": {
                "@list": [
                    {"@id": ORCID, "@type": ["schema:Person"], "schema:name": "Fjeld, Ane"},
                    {"@type": ["schema:Person"], "schema:name": "Nilsen, Bo"},
                ]
            }
        },
        {
            "creator": [
                {"id": ORCID, "name": "Fjeld, Ane", "type": ["http://schema.org/Person"]},
                {"name": "Nilsen, Bo", "type": ["http://schema.org/Person"]},
            ]
        },
    ),
    Row(
        "FDO Responsible Organisation (Resource)",
        {
            "schema:provider": [
                {
                    "@id": ROR,
                    "@type": ["schema:Organization"],
                    "schema:name": "Fjord Institute",
                    "schema:contactPoint": {"schema:email": "info@fjord.example.org"},
                }
            ]
        },
        {
            "responsibleOrganisation": [
                {
                    "id": ROR,
                    "name": "Fjord Institute",
                    "type": ["http://schema.org/Organization"],
                    "contactInformation": [{"email": "info@fjord.example.org"}],
                }
            ]
        },
    ),
    Row(
        "RDA checksum",
        {
            "spdx:checksum": {
                "@type": ["spdx:Checksum"],
                "spdx:algorithm": "checksumAlgorithm_md5",
                "spdx:checksumValue": "d41d8cd98f00b204e9800998ecf8427e",
            }
        },
        {
            "etag": [
                {
                    "algorithm": "checksumAlgorithm_md5",
                    "checksumValue": "d41d8cd98f00b204e9800998ecf8427e",
                }
            ]
        },
    ),
    *(
        Row(
            label,
            {
                "schema:publishingPrinciples": [
                    {"@type": ["schema:CreativeWork"], "schema:url": "https://x.example/policy"}
                ]
            },
            {attribute: ["https://x.example/policy"]},
        )
        for label, attribute in (
            ("FDOF digitalObject-Mutability", "digitalObjectMutability"),
            ("FDOF Persistency-Policy", "persistencyPolicy"),
            ("RDA digitalObject-Policy", "digitalObjectPolicy"),
        )
    ),
    Row(
        "FDOF Responsible-Organisation (Technical Management)",
        {"schema:maintainer": {"@type": ["schema:Organization"], "schema:name": "Data Desk"}},
        {
            "technicalManagement": [
                {"name": "Data Desk", "type": ["http://schema.org/Organization"]}
            ]
        },
    ),
    Row(
        "FDOF rightsRecord (license)",
        {"schema:license": [{"@id": "https://spdx.org/licenses/CC0-1.0"}]},
        {"rightsRecord": ["https://spdx.org/licenses/CC0-1.0"]},
        shared=("schema:conditionsOfAccess",),
    ),
    Row(
        "FDOF rightsRecord (conditionsOfAccess)",
        {"schema:conditionsOfAccess": ["Registration required."]},
        {"rightsRecord": ["Registration required."]},
        shared=("schema:license",),
    ),
    Row(
        "FDOF ScientificDomain",
        {
            "schema:keywords": [
                "salinity",
                {
                    "@type": ["schema:DefinedTerm"],
                    "schema:name": "Argo",
                    "schema:identifier": "https://vocab.nerc.ac.uk/collection/L06/current/46/",
                },
            ]
        },
        {
            "scientificDomain": [
                "salinity",
                {
                    "name": "Argo",
                    "identifier": "https://vocab.nerc.ac.uk/collection/L06/current/46/",
                },
            ]
        },
    ),
    Row(
        "Profile",
        {
            "schema:subjectOf": {
                "@id": "https://x.example/metadata/1",
                "dcterms:conformsTo": [{"@id": "https://w3id.org/cdif/core/1.0"}],
            }
        },
        {"kernelInformationProfile": ["https://w3id.org/cdif/core/1.0"]},
    ),
    Row(
        "FDOF digitalObjectType (@type)",
        {"@type": ["schema:Dataset"]},
        {"digitalObjectType": ["http://schema.org/Dataset"]},
        shared=("schema:additionalType",),
    ),
    Row(
        "FDOF digitalObjectType (additionalType)",
        {"schema:additionalType": ["dcat:Dataset", "time series"]},
        {"digitalObjectType": ["http://www.w3.org/ns/dcat#Dataset", "time series"]},
        shared=("@type",),
    ),
    Row(
        "RDA dateCreated",
        {"schema:datePublished": "2023-09-01"},
        {"dateCreated": "2023-09-01"},
    ),
    Row(
        "RDA dateModified",
        {"schema:dateModified": {"@value": "2024-02-10T08:00:00Z"}},
        {"dateModified": "2024-02-10T08:00:00Z"},
    ),
    Row("RDA version", {"schema:version": "2.1"}, {"version": "2.1"}),
    Row(
        "RDA digitalObjectLocation",
        {"schema:url": "https://x.example/datasets/1"},
        {"digitalObjectLocation": ["https://x.example/datasets/1"]},
    ),
]


def _record(*sources: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"@context": CONTEXT}
    for source in sources:
        record.update(copy.deepcopy(source))
    return record


def test_every_row_with_a_cdif_source_is_covered() -> None:
    # The 16 rows of Appendix 2 that have a CDIF source (digitalObjectType has two and
    # rightsRecord two sources), and every attribute but the pid is produced by one of them.
    assert len(ROWS) == 17
    produced = {attribute for row in ROWS for attribute in row.expected}
    assert produced == set(KERNEL_ATTRIBUTES) - {"pid"}


@pytest.mark.parametrize("row", ROWS, ids=[row.label for row in ROWS])
def test_the_row_is_produced_from_its_source(row: Row) -> None:
    view = pid_kernel_view(_record(row.source))
    assert {attribute: view.get(attribute) for attribute in row.expected} == row.expected
    # and nothing else, but the rows that read the very same source (the three policy rows)
    same_source = {
        attribute
        for other in ROWS
        if other.source.keys() == row.source.keys()
        for attribute in other.expected
    }
    assert set(view) == same_source


@pytest.mark.parametrize("row", ROWS, ids=[row.label for row in ROWS])
def test_the_row_is_left_out_when_its_source_is_missing(row: Row) -> None:
    # Given a record with every other row's source
    others = [other.source for other in ROWS if other.source.keys() != row.source.keys()]
    record = _record(*others)
    for key in (*row.source, *row.shared):
        record.pop(key, None)
    view = pid_kernel_view(record)
    # Then the row's attributes are not there, and the other rows still are
    for attribute in row.expected:
        assert attribute not in view
    assert len(view) >= 8


def test_the_pid_is_the_resource_id_unless_the_harvester_invented_it() -> None:
    record = _record({"@id": "https://doi.org/10.5072/x"})
    assert pid_kernel_view(record) == {"pid": "https://doi.org/10.5072/x"}
    assert pid_kernel_view(record, invented={"https://doi.org/10.5072/x"}) == {}
    assert pid_kernel_view(_record({"@id": "_:b0"})) == {}


def test_location_falls_back_to_the_distributions_and_checksums_say_which_file() -> None:
    record = _record(
        {
            "schema:distribution": [
                {
                    "schema:contentUrl": "https://x.example/a.nc",
                    "spdx:checksum": {"spdx:algorithm": "sha1", "spdx:checksumValue": "aa"},
                },
                {"schema:contentUrl": "https://x.example/a.csv"},
            ]
        }
    )
    assert pid_kernel_view(record) == {
        "etag": [
            {"algorithm": "sha1", "checksumValue": "aa", "contentUrl": "https://x.example/a.nc"}
        ],
        "digitalObjectLocation": ["https://x.example/a.nc", "https://x.example/a.csv"],
    }
    record["schema:url"] = "https://x.example/landing"
    assert pid_kernel_view(record)["digitalObjectLocation"] == ["https://x.example/landing"]


def test_references_are_completed_from_the_record_and_nothing_is_invented() -> None:
    record = _record(
        {
            "schema:creator": {"@list": [{"@id": ROR, "schema:name": "Fjord Institute"}]},
            "schema:provider": [{"@id": ROR}],
            "schema:maintainer": {"@id": "https://ror.org/unknown0"},
            "spdx:checksum": {"spdx:algorithm": "md5"},  # no value: checks nothing
            "schema:subjectOf": {
                "@id": "https://x.example/md",
                "schema:maintainer": {"schema:name": "Metadata Desk"},
            },
        }
    )
    view = pid_kernel_view(record)
    assert view["responsibleOrganisation"] == [{"id": ROR, "name": "Fjord Institute"}]
    # an unknown reference stays a bare id; the metadata record's maintainer is not the
    # object's technical manager; a checksum without value is no etag
    assert view["technicalManagement"] == [{"id": "https://ror.org/unknown0"}]
    assert "etag" not in view and "kernelInformationProfile" not in view


def test_operation_info_is_never_produced() -> None:
    # FDOF operationInfo: "Not implemented by CDIF v1.0". Whatever the record holds, the view
    # has only the documented attributes.
    golden = Path(__file__).parent / "golden" / "crosswalk" / "landing.record.jsonld"
    record = json.loads(golden.read_text(encoding="utf-8"))
    record["schema:potentialAction"] = [{"@type": ["schema:Action"], "schema:name": "thumbnail"}]
    view = pid_kernel_view(record)
    assert set(view) <= set(KERNEL_ATTRIBUTES)
    assert list(view) == [key for key in KERNEL_ATTRIBUTES if key in view]
