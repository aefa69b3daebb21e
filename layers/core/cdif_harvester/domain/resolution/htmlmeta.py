"""A last-resort record: a schema.org Dataset built from a page's HTML ``<meta>`` tags.

CDIF discourages this pattern; :func:`record_from_meta` is used only when nothing better was
found, so that a page that publishes Dublin Core or Highwire (``citation_*``) tags is not lost
altogether. Without a title it returns None.

See docs/decisions/0022-records-from-html-meta.md for which tags give which property.
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
