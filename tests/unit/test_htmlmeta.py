"""The last-resort record built from HTML meta tags (Dublin Core, Highwire, plain)."""

from __future__ import annotations

from typing import Any

import pytest

from cdif_harvester.domain.resolution.htmlmeta import normalise_doi, record_from_meta
from cdif_harvester.domain.resolution.weblinks import MetaTag, parse_html_head

PAGE_URL = "https://data.example.org/datasets/42"


def tag(name: str, content: str, *, lang: str | None = None, scheme: str | None = None) -> MetaTag:
    return MetaTag(name=name, content=content, scheme=scheme, lang=lang)


def test_dublin_core_page_gives_a_full_record() -> None:
    # Given a landing page with Dublin Core meta tags, read by the HTML head parser
    page = """<html lang="en"><head>
      <meta name="DC.title" content="Ocean  temperature,
          North Atlantic 2020">
      <meta name="DC.creator" content="Doe, Jane">
      <meta name="DC.creator" content="Müller, Jörg; Poe, Edgar">
      <meta name="DC.description" content="Daily means.
Second line.">
      <meta name="DC.identifier" scheme="DCTERMS.URI" content="doi:10.5555/ocean.42">
      <meta name="DC.identifier" content="local-42">
      <meta name="DC.date" scheme="DCTERMS.W3CDTF" content="2020-01-01">
      <meta name="DCTERMS.issued" content="2021-03-04">
      <meta name="dcterms.modified" content="2022-05-06T07:08:09Z">
      <meta name="DC.subject" content="oceanography; temperature">
      <meta name="DC.subject" content="Argo">
      <meta name="keywords" content="temperature, salinity">
      <meta name="DC.publisher" content="Example Ocean Data Centre">
      <meta name="DC.rights" content="CC BY 4.0">
      <meta name="DC.language" content="en">
    </head><body></body></html>""".encode()
    head = parse_html_head(page, PAGE_URL)
    # When a record is built from its meta tags
    record = record_from_meta(head.meta, PAGE_URL)
    # Then every Dublin Core tag lands in its schema.org property
    assert record == {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": "https://doi.org/10.5555/ocean.42",
        "url": PAGE_URL,
        "name": "Ocean temperature, North Atlantic 2020",
        "description": "Daily means.\nSecond line.",
        "creator": [
            {"@type": "Person", "name": "Doe, Jane"},
            {"@type": "Person", "name": "Müller, Jörg"},
            {"@type": "Person", "name": "Poe, Edgar"},
        ],
        "identifier": ["https://doi.org/10.5555/ocean.42", "local-42"],
        "keywords": ["oceanography", "temperature", "Argo", "salinity"],
        "datePublished": "2021-03-04",
        "dateModified": "2022-05-06T07:08:09Z",
        "publisher": {"@type": "Organization", "name": "Example Ocean Data Centre"},
        "license": "CC BY 4.0",
        "inLanguage": "en",
    }


def test_highwire_citation_tags_give_a_record() -> None:
    meta = [
        tag("citation_title", "Sediment cores of Lake X"),
        tag("citation_author", "Smith, A."),
        tag("citation_author", "Jones, B."),
        tag("citation_doi", "10.1234/ABC-def.1"),
        tag("citation_publication_date", "2019/07/01"),
        tag("citation_keywords", "sediment; lake; cores"),
        tag("citation_publisher", "Lake Institute"),
        tag("citation_language", "de"),
        tag("description", "Cores from 2018."),
    ]
    assert record_from_meta(meta, PAGE_URL) == {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": "https://doi.org/10.1234/ABC-def.1",
        "url": PAGE_URL,
        "name": "Sediment cores of Lake X",
        "description": "Cores from 2018.",
        "creator": [
            {"@type": "Person", "name": "Smith, A."},
            {"@type": "Person", "name": "Jones, B."},
        ],
        "identifier": "https://doi.org/10.1234/ABC-def.1",
        "keywords": ["sediment", "lake", "cores"],
        "datePublished": "2019/07/01",
        "publisher": {"@type": "Organization", "name": "Lake Institute"},
        "inLanguage": "de",
    }


def test_minimal_record_has_only_title_and_page() -> None:
    assert record_from_meta([tag("dc.title", "Just a title")], PAGE_URL) == {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": PAGE_URL,
        "url": PAGE_URL,
        "name": "Just a title",
    }


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param([], id="no-tags"),
        pytest.param([tag("description", "d"), tag("keywords", "a, b")], id="no-title"),
        pytest.param([tag("dc.title", "  \n ")], id="blank-title"),
        pytest.param([tag("og:title", "Open Graph"), tag("title", "x")], id="og-title-not-used"),
        pytest.param([tag("dc.creator", "Doe"), tag("citation_doi", "10.1/x")], id="no-name"),
    ],
)
def test_no_title_no_record(meta: list[MetaTag]) -> None:
    assert record_from_meta(meta, PAGE_URL) is None


@pytest.mark.parametrize(
    "name",
    [
        "DC.title",
        "dc.title",
        "DC.Title",
        "dcterms.title",
        "DCTERMS.TITLE",
        "dc:title",
        "dcterms:title",
        "citation_title",
        "CITATION_TITLE",
    ],
)
def test_title_tag_names_are_case_insensitive_with_every_prefix(name: str) -> None:
    record = record_from_meta([tag(name, "T")], PAGE_URL)
    assert record is not None
    assert record["name"] == "T"


def test_dublin_core_wins_over_highwire_for_single_values_and_creators() -> None:
    meta = [
        tag("citation_title", "Highwire title"),
        tag("citation_author", "Jane Doe"),
        tag("citation_publisher", "HW Press"),
        tag("citation_date", "2001"),
        tag("DC.title", "DC title"),
        tag("DC.creator", "Doe, Jane"),
        tag("DC.publisher", "DC Press"),
        tag("DC.date", "2002"),
        tag("citation_publication_date", "2003"),
    ]
    record = record_from_meta(meta, PAGE_URL)
    assert record is not None
    assert record["name"] == "DC title"
    assert record["creator"] == [{"@type": "Person", "name": "Doe, Jane"}]
    assert record["publisher"] == {"@type": "Organization", "name": "DC Press"}
    # an explicit publication date outranks a bare DC.date
    assert record["datePublished"] == "2003"


@pytest.mark.parametrize(
    ("meta", "published"),
    [
        ([tag("dc.date", "2002"), tag("citation_date", "2001")], "2002"),
        ([tag("citation_date", "2001")], "2001"),
        ([tag("dc.date.issued", "2004"), tag("dcterms.issued", "2005")], "2004"),
        ([tag("dc.date", "2002"), tag("DC.Date.Issued", "2004")], "2004"),
    ],
)
def test_date_published_sources(meta: list[MetaTag], published: str) -> None:
    record = record_from_meta([tag("dc.title", "T"), *meta], PAGE_URL)
    assert record is not None
    assert record["datePublished"] == published


def test_license_prefers_dcterms_license_over_rights() -> None:
    meta = [
        tag("dc.title", "T"),
        tag("DC.rights", "All rights reserved"),
        tag("dcterms.license", "https://creativecommons.org/licenses/by/4.0/"),
        tag("DC.Date.Modified", "2024-01-01"),
    ]
    record = record_from_meta(meta, PAGE_URL)
    assert record is not None
    assert record["license"] == "https://creativecommons.org/licenses/by/4.0/"
    assert record["dateModified"] == "2024-01-01"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("10.1234/abc", "https://doi.org/10.1234/abc"),
        ("doi:10.1234/abc", "https://doi.org/10.1234/abc"),
        ("DOI: 10.1234/abc", "https://doi.org/10.1234/abc"),
        ("info:doi/10.1234/abc", "https://doi.org/10.1234/abc"),
        ("https://doi.org/10.1234/abc", "https://doi.org/10.1234/abc"),
        ("http://dx.doi.org/10.1234/abc", "https://doi.org/10.1234/abc"),
        ("  10.1000.10/x(y)z  ", "https://doi.org/10.1000.10/x(y)z"),
        ("10.123/too-short-prefix", None),
        ("10.1234/", None),
        ("10.1234/with space", None),
        ("https://example.org/10.1234/abc", None),
        ("hdl:20.500/1", None),
        ("", None),
    ],
)
def test_normalise_doi(value: str, expected: str | None) -> None:
    assert normalise_doi(value) == expected


@pytest.mark.parametrize(
    ("identifiers", "resource_id", "identifier"),
    [
        (["10.1234/abc"], "https://doi.org/10.1234/abc", "https://doi.org/10.1234/abc"),
        (["doi:10.1234/abc"], "https://doi.org/10.1234/abc", "https://doi.org/10.1234/abc"),
        (
            ["https://hdl.handle.net/1/2"],
            "https://hdl.handle.net/1/2",
            "https://hdl.handle.net/1/2",
        ),
        (
            ["https://hdl.handle.net/1/2", "doi:10.1234/abc"],
            "https://doi.org/10.1234/abc",
            ["https://hdl.handle.net/1/2", "https://doi.org/10.1234/abc"],
        ),
        (["ISBN 978-3-16-148410-0"], PAGE_URL, "ISBN 978-3-16-148410-0"),
        (["urn:nbn:de:1234", "local 7"], PAGE_URL, ["urn:nbn:de:1234", "local 7"]),
        (
            ["10.1234/abc", "https://doi.org/10.1234/abc"],
            "https://doi.org/10.1234/abc",
            "https://doi.org/10.1234/abc",
        ),
    ],
)
def test_identifier_and_resource_id(
    identifiers: list[str], resource_id: str, identifier: Any
) -> None:
    meta = [tag("dc.title", "T"), *(tag("DC.identifier", value) for value in identifiers)]
    record = record_from_meta(meta, PAGE_URL)
    assert record is not None
    assert record["@id"] == resource_id
    assert record["identifier"] == identifier


def test_citation_doi_joins_dc_identifiers() -> None:
    meta = [tag("dc.title", "T"), tag("dc.identifier", "local-1"), tag("citation_doi", "10.9999/q")]
    record = record_from_meta(meta, PAGE_URL)
    assert record is not None
    assert record["identifier"] == ["local-1", "https://doi.org/10.9999/q"]
    assert record["@id"] == "https://doi.org/10.9999/q"


@pytest.mark.parametrize(
    ("contents", "keywords"),
    [
        (["a; b; c"], ["a", "b", "c"]),
        (["a, b, c"], ["a", "b", "c"]),
        (
            ["Earth Science > Oceans, temperature; salinity"],
            ["Earth Science > Oceans, temperature", "salinity"],
        ),
        (["Argo", "argo", "ARGO; floats"], ["Argo", "floats"]),
        (["a;;b; ", " , "], ["a", "b"]),
    ],
)
def test_keywords_are_split_and_deduplicated(contents: list[str], keywords: list[str]) -> None:
    meta = [tag("dc.title", "T"), *(tag("dc.subject", content) for content in contents)]
    record = record_from_meta(meta, PAGE_URL)
    assert record is not None
    assert record["keywords"] == keywords


def test_preferred_language_picks_title_and_description() -> None:
    meta = [
        tag("DC.title", "Meerestemperatur", lang="de"),
        tag("DC.title", "Ocean temperature", lang="en-GB"),
        tag("DC.title", "Untagged title"),
        tag("DC.description", "Beschreibung", lang="de"),
        tag("DC.description", "Untagged description"),
        tag("DC.language", "de"),
        tag("DC.language", "en"),
    ]
    english = record_from_meta(meta, PAGE_URL, lang="en")
    german = record_from_meta(meta, PAGE_URL, lang="DE")
    french = record_from_meta(meta, PAGE_URL, lang="fr")
    default = record_from_meta(meta, PAGE_URL)
    assert english is not None and german is not None and french is not None
    assert default is not None
    assert (english["name"], english["description"]) == (
        "Ocean temperature",
        "Untagged description",
    )
    assert (german["name"], german["description"]) == ("Meerestemperatur", "Beschreibung")
    assert (french["name"], french["description"]) == ("Untagged title", "Untagged description")
    assert (default["name"], default["description"]) == ("Meerestemperatur", "Beschreibung")
    # the languages of the dataset come from DC.language only, both kept
    assert english["inLanguage"] == ["de", "en"]


def test_page_language_is_not_written_as_in_language() -> None:
    record = record_from_meta([tag("dc.title", "T", lang="en")], PAGE_URL, lang="en")
    assert record is not None
    assert "inLanguage" not in record


def test_description_falls_back_to_plain_description_and_abstracts() -> None:
    only_plain = record_from_meta([tag("dc.title", "T"), tag("description", " d ")], PAGE_URL)
    abstract = record_from_meta(
        [tag("dc.title", "T"), tag("description", "plain"), tag("dcterms.abstract", "abs")],
        PAGE_URL,
    )
    highwire = record_from_meta(
        [tag("dc.title", "T"), tag("description", "plain"), tag("citation_abstract", "hw")],
        PAGE_URL,
    )
    assert only_plain is not None and abstract is not None and highwire is not None
    assert only_plain["description"] == "d"
    assert abstract["description"] == "abs"
    assert highwire["description"] == "hw"


def test_empty_tags_are_ignored() -> None:
    meta = [
        tag("dc.title", "T"),
        tag("dc.creator", " "),
        tag("dc.publisher", ""),
        tag("dc.description", "\n"),
        tag("keywords", ""),
    ]
    assert record_from_meta(meta, PAGE_URL) == {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": PAGE_URL,
        "url": PAGE_URL,
        "name": "T",
    }
