"""A last-resort record: a schema.org Dataset built from a page's HTML ``<meta>`` tags.

CDIF discourages this pattern. Its discoverability recommendations ask for structured
metadata (JSON-LD embedded in the landing page, or a metadata document reached through a
``describedby`` link, a linkset or a Signmap); loose ``<meta>`` tags carry free text with no
types, no identifiers for people or licences and no distribution, and a record built from them
can at best satisfy a small part of CDIF core. The harvester uses :func:`record_from_meta` only
when nothing better was found, so that a page that publishes Dublin Core or Highwire
(``citation_*``) tags is not lost altogether.

Tag names are compared case-insensitively. ``DC.x``, ``dc.x``, ``dcterms.x`` and the colon
forms ``dc:x`` and ``dcterms:x`` are the same tag. Property by property, the first source group
in the list that has a value wins; within a group, tags count in document order:

=================  ==============================================================================
property           tags (source groups in order of preference)
=================  ==============================================================================
``name``           ``DC.title``; ``citation_title``
``description``    ``DC.description``, ``dcterms.abstract``; ``citation_abstract``;
                   ``description``
``creator``        ``DC.creator``; ``citation_author`` (one ``Person`` per tag; ``;`` separates
                   several names in one tag)
``identifier``     ``DC.identifier`` and ``citation_doi``, all of them, in that order
``keywords``       ``DC.subject``, ``citation_keywords`` and ``keywords``, all of them (split on
                   ``;``, or on ``,`` when there is no ``;``)
``datePublished``  ``DC.date.issued``, ``dcterms.issued``; ``citation_publication_date``;
                   ``DC.date``; ``citation_date``
``dateModified``   ``DC.date.modified``, ``dcterms.modified``
``publisher``      ``DC.publisher``; ``citation_publisher`` (an ``Organization``)
``license``        ``dcterms.license``; ``DC.rights``
``inLanguage``     ``DC.language``; ``citation_language``
``url``            the page URL
``@id``            the first DOI among the identifiers, else the first http(s) URL among them,
                   else the page URL
=================  ==============================================================================

Decisions:

* No title, no record: :func:`record_from_meta` returns None without ``DC.title`` or
  ``citation_title``. Open Graph tags and ``<title>`` are deliberately not used: every page has
  them, and they do not say that the page describes a dataset.
* A DOI (``10.1234/abc``, ``doi:10.1234/abc``, ``https://dx.doi.org/10.1234/abc``, ...) is
  written ``https://doi.org/10.1234/abc``, in ``identifier`` as well as in ``@id``. Other
  identifiers are kept as written.
* ``lang`` is the preferred language: for the single-valued ``name`` and ``description``, a
  tag in that language (``en`` matches ``en-GB``) wins over an untagged one, which wins over
  one in another language. Multi-valued properties keep every value. ``lang`` is never
  written as ``inLanguage``: the language of a page says nothing sure about a dataset.
* ``identifier`` and ``inLanguage`` are a string when there is one value and a list when there
  are several; ``creator`` and ``keywords`` are always lists. Values are stripped; short ones
  (everything but ``description``) have runs of white space collapsed; repeated values count
  once. Dates and licences are kept as written (no parsing, no guessing of licence URLs).
* Every creator is a ``Person``: tags cannot tell a person from an organisation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from cdif_harvester.domain.resolution.weblinks import MetaTag

__all__ = ["normalise_doi", "record_from_meta"]

_DC_PREFIXES = ("dcterms.", "dcterms:", "dc.", "dc:")
_DOI = re.compile(
    r"(?:doi:\s*|info:doi/|https?://(?:dx\.)?doi\.org/)?(10\.\d{4,9}(?:\.\d+)*/\S+)",
    re.IGNORECASE,
)
_WEB_URL = re.compile(r"https?://[^\s/?#]+\S*", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s+")

# Source groups per property, in order of preference (see the table in the module docstring).
# Tag names here are canonical: lower case, Dublin Core prefixes written "dc.".
_NAME = (("dc.title",), ("citation_title",))
_DESCRIPTION = (("dc.description", "dc.abstract"), ("citation_abstract",), ("description",))
_CREATOR = (("dc.creator",), ("citation_author",))
_IDENTIFIER = ("dc.identifier", "citation_doi")
_KEYWORDS = ("dc.subject", "citation_keywords", "keywords")
_DATE_PUBLISHED = (
    ("dc.date.issued", "dc.issued"),
    ("citation_publication_date",),
    ("dc.date",),
    ("citation_date",),
)
_DATE_MODIFIED = (("dc.date.modified", "dc.modified"),)
_PUBLISHER = (("dc.publisher",), ("citation_publisher",))
_LICENSE = (("dc.license",), ("dc.rights",))
_LANGUAGE = (("dc.language",), ("citation_language",))


def normalise_doi(value: str) -> str | None:
    """Return ``https://doi.org/<doi>`` if ``value`` is a DOI in any common spelling, else None.

    Accepts a bare ``10.x/y``, ``doi:10.x/y``, ``info:doi/10.x/y`` and ``doi.org`` or
    ``dx.doi.org`` URLs (http or https). Never raises.
    """
    match = _DOI.fullmatch(value.strip())
    return f"https://doi.org/{match.group(1)}" if match else None


def _canonical(name: str) -> str:
    name = name.strip().lower()
    for prefix in _DC_PREFIXES:
        if name.startswith(prefix):
            return "dc." + name[len(prefix) :]
    return name


def _short(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _unique(values: Sequence[str], *, fold_case: bool = False) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for value in values:
        key = value.casefold() if fold_case else value
        if value and key not in seen:
            seen.add(key)
            kept.append(value)
    return kept


class _Tags:
    """The meta tags of a page by canonical name, with empty contents left out."""

    def __init__(self, meta: Sequence[MetaTag]) -> None:
        self.by_name: dict[str, list[MetaTag]] = {}
        for tag in meta:
            if tag.content and tag.content.strip():
                self.by_name.setdefault(_canonical(tag.name), []).append(tag)

    def group(self, names: Sequence[str]) -> list[MetaTag]:
        return [tag for name in names for tag in self.by_name.get(name, [])]

    def first_group(self, groups: Sequence[Sequence[str]]) -> list[MetaTag]:
        for names in groups:
            tags = self.group(names)
            if tags:
                return tags
        return []


def _language_rank(tag: MetaTag, lang: str | None) -> int:
    if lang is None:
        return 0
    if not tag.lang:
        return 1
    wanted, have = lang.lower(), tag.lang.lower()
    matches = have == wanted or have.startswith(wanted + "-") or wanted.startswith(have + "-")
    return 0 if matches else 2


def _single(
    tags: _Tags, groups: Sequence[Sequence[str]], lang: str | None, *, short: bool = True
) -> str | None:
    candidates = tags.first_group(groups)
    if not candidates:
        return None
    best = min(candidates, key=lambda tag: _language_rank(tag, lang))  # stable: first wins
    return _short(best.content) if short else best.content.strip()


def _split(text: str, separators: str) -> list[str]:
    for separator in separators:
        if separator in text:
            return [_short(part) for part in text.split(separator)]
    return [_short(text)]


def _identifiers(tags: _Tags) -> list[str]:
    values: list[str] = []
    for tag in tags.group(_IDENTIFIER):
        value = _short(tag.content)
        values.append(normalise_doi(value) or value)
    return _unique(values)


def _resource_id(identifiers: Sequence[str], page_url: str) -> str:
    dois = [value for value in identifiers if value.startswith("https://doi.org/")]
    urls = [value for value in identifiers if _WEB_URL.fullmatch(value)]
    return (dois or urls or [page_url])[0]


def _one_or_many(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else values


def record_from_meta(
    meta: Sequence[MetaTag], page_url: str, *, lang: str | None = None
) -> dict[str, Any] | None:
    """Build a schema.org ``Dataset`` (JSON-LD) from a page's Dublin Core, Highwire
    ``citation_*`` and plain ``description``/``keywords`` meta tags.

    ``page_url`` becomes ``url`` (and ``@id`` unless an identifier is a DOI or a URL). ``lang``
    is the preferred language for ``name`` and ``description`` when tags exist in several
    languages. The mapping is the table in the module docstring. Returns None when no tag gives
    a title. Never raises.
    """
    tags = _Tags(meta)
    name = _single(tags, _NAME, lang)
    if not name:
        return None
    identifiers = _identifiers(tags)
    creators = _unique(
        [part for tag in tags.first_group(_CREATOR) for part in _split(tag.content, ";")]
    )
    keywords = _unique(
        [part for tag in tags.group(_KEYWORDS) for part in _split(tag.content, ";,")],
        fold_case=True,
    )
    languages = _unique([_short(tag.content) for tag in tags.first_group(_LANGUAGE)])
    publisher = _single(tags, _PUBLISHER, lang)
    optional: dict[str, Any] = {
        "description": _single(tags, _DESCRIPTION, lang, short=False),
        "creator": [{"@type": "Person", "name": creator} for creator in creators] or None,
        "identifier": _one_or_many(identifiers) if identifiers else None,
        "keywords": keywords or None,
        "datePublished": _single(tags, _DATE_PUBLISHED, None),
        "dateModified": _single(tags, _DATE_MODIFIED, None),
        "publisher": {"@type": "Organization", "name": publisher} if publisher else None,
        "license": _single(tags, _LICENSE, None),
        "inLanguage": _one_or_many(languages) if languages else None,
    }
    record: dict[str, Any] = {
        "@context": "https://schema.org/",
        "@type": "Dataset",
        "@id": _resource_id(identifiers, page_url),
        "url": page_url,
        "name": name,
    }
    record.update((key, value) for key, value in optional.items() if value is not None)
    return record
