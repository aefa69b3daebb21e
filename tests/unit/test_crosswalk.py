"""PID Kernel view (Appendix 2) and Signposting links (Appendix 3) of CDIF records.

Golden files of the official complete CDIF core example (skipped without the corpus); set
``CDIF_UPDATE_GOLDEN=1`` to rewrite them after a deliberate change, and review the diff. The
row-by-row checks against the Appendix 2 and 3 tables are in ``test_crosswalk_pidkernel.py``
and ``test_crosswalk_signposting.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from cdif_harvester.domain.views.crosswalk import (
    KERNEL_ATTRIBUTES,
    html_link_elements,
    link_header,
    linkset_json,
    linkset_text,
    pid_kernel_view,
    signposting_links,
)
from cdif_harvester.model import TypedLink

GOLDEN = Path(__file__).parent / "golden" / "crosswalk"
UPDATE = os.environ.get("CDIF_UPDATE_GOLDEN") == "1"


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _golden(path: Path, actual: Any) -> Any:
    if UPDATE:
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return _load(path)


def _complete(corpus: Path) -> dict[str, Any]:
    data = _load(corpus / "cdif-core-1.0/cdifCore/exampleCdifCoreComplete.json")
    assert isinstance(data, dict)
    return data


def test_pid_kernel_view_of_the_complete_example(corpus: Path) -> None:
    view = pid_kernel_view(_complete(corpus))
    assert view == _golden(GOLDEN / "complete.pid_kernel.expected.json", view)
    # The attributes come in the documented order.
    assert list(view) == [key for key in KERNEL_ATTRIBUTES if key in view]


def test_signposting_links_of_the_complete_example(corpus: Path) -> None:
    links = [dataclasses.asdict(link) for link in signposting_links(_complete(corpus))]
    assert links == _golden(GOLDEN / "complete.signposting.expected.json", links)


def test_pid_kernel_view_leaves_out_what_the_record_lacks() -> None:
    record = {
        "@context": {"schema": "http://schema.org/"},
        "@id": "https://doi.org/10.1/min",
        "@type": ["schema:Dataset"],
        "schema:distribution": [
            {"@type": ["schema:DataDownload"], "schema:contentUrl": "https://x.example/a.csv"}
        ],
    }
    assert pid_kernel_view(record) == {
        "pid": "https://doi.org/10.1/min",
        "digitalObjectType": ["http://schema.org/Dataset"],
        "digitalObjectLocation": ["https://x.example/a.csv"],
    }


def test_seen_links_win_and_duplicates_are_dropped() -> None:
    record = {
        "@id": "https://doi.org/10.1/x",
        "@type": ["schema:Dataset"],
        "schema:license": [
            "https://spdx.org/licenses/CC0-1.0",
            {"@id": "https://spdx.org/licenses/CC0-1.0"},
        ],
        "schema:subjectOf": {
            "@id": "https://x.example/md",
            "dcterms:conformsTo": [{"@id": "https://w3id.org/cdif/core/1.0"}],
        },
        "schema:relatedLink": [
            {
                "schema:linkRelationship": "IsPartOf",
                "schema:target": {
                    "schema:url": "https://x.example/collection",
                    "schema:encodingFormat": "text/html",
                },
            },
            {
                "schema:linkRelationship": "hasPart",
                "schema:target": {"schema:url": "https://x.example/part"},
            },
            {
                "schema:linkRelationship": "documentation",
                "schema:target": {"schema:url": "https://x.example/doc"},
            },
        ],
    }
    seen = [
        TypedLink("https://doi.org/10.1/x", "cite-as", found_in="http-header"),
        TypedLink(
            "https://x.example/other.json",
            "describedby",
            type="application/ld+json",
            found_in="html",
        ),
    ]
    links = signposting_links(record, seen)
    assert [(link.rel, link.href, link.anchor, link.found_in) for link in links] == [
        ("cite-as", "https://doi.org/10.1/x", None, "http-header"),
        ("describedby", "https://x.example/other.json", None, "html"),
        ("describedby", "https://x.example/md", None, "record"),
        ("describes", "https://doi.org/10.1/x", "https://x.example/md", "record"),
        ("type", "https://schema.org/Dataset", None, "record"),
        ("license", "https://spdx.org/licenses/CC0-1.0", None, "record"),
        ("collection", "https://x.example/collection", None, "record"),
        ("item", "https://x.example/part", None, "record"),
    ]
    assert links[2].profile == "https://w3id.org/cdif/core/1.0"
    assert links[6].type == "text/html"


LINKS = [
    TypedLink("https://doi.org/10.1/x", "cite-as"),
    TypedLink(
        "https://x.example/md.json",
        "describedby",
        type="application/ld+json",
        profile="https://w3id.org/cdif/core/1.0",
    ),
    TypedLink("https://doi.org/10.1/x", "describes", anchor="https://x.example/md.json"),
    TypedLink('https://x.example/a b"<c>', "item", type='text/"csv"'),
]


def test_link_header() -> None:
    assert link_header(LINKS) == (
        '<https://doi.org/10.1/x> ; rel="cite-as", '
        '<https://x.example/md.json> ; rel="describedby" ; type="application/ld+json" ; '
        'profile="https://w3id.org/cdif/core/1.0", '
        '<https://doi.org/10.1/x> ; rel="describes" ; anchor="https://x.example/md.json", '
        '<https://x.example/a%20b%22%3Cc%3E> ; rel="item" ; type="text/\\"csv\\""'
    )


def test_linkset_text_anchors_every_link() -> None:
    text = linkset_text("https://x.example/landing", LINKS[:3])
    assert text == (
        '<https://doi.org/10.1/x> ; rel="cite-as" ; anchor="https://x.example/landing",\n'
        '<https://x.example/md.json> ; rel="describedby" ; type="application/ld+json" ; '
        'profile="https://w3id.org/cdif/core/1.0" ; anchor="https://x.example/landing",\n'
        '<https://doi.org/10.1/x> ; rel="describes" ; anchor="https://x.example/md.json"\n'
    )


def test_linkset_json_groups_by_anchor_and_relation() -> None:
    assert linkset_json("https://x.example/landing", LINKS[:3]) == {
        "linkset": [
            {
                "anchor": "https://x.example/landing",
                "cite-as": [{"href": "https://doi.org/10.1/x"}],
                "describedby": [
                    {
                        "href": "https://x.example/md.json",
                        "type": "application/ld+json",
                        "profile": ["https://w3id.org/cdif/core/1.0"],
                    }
                ],
            },
            {
                "anchor": "https://x.example/md.json",
                "describes": [{"href": "https://doi.org/10.1/x"}],
            },
        ]
    }


def test_html_link_elements_are_escaped_and_skip_anchored_links() -> None:
    assert html_link_elements(LINKS) == (
        '<link rel="cite-as" href="https://doi.org/10.1/x">\n'
        '<link rel="describedby" href="https://x.example/md.json" type="application/ld+json" '
        'profile="https://w3id.org/cdif/core/1.0">\n'
        '<link rel="item" href="https://x.example/a b&quot;&lt;c&gt;" type="text/&quot;csv&quot;">'
    )
