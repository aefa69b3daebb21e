"""Find and parse JSON-LD in what a publisher serves.

CDIF discoverability, "Option 1. Embedded in HTML": a landing page carries its metadata in one
or more ``<script type="application/ld+json">`` elements. This module finds those blocks in an
HTML page (:func:`find_jsonld_scripts`), parses a block or a ``.jsonld`` body into JSON
(:func:`parse_jsonld`, with a few well-known repairs) and tells whether a parsed document
describes a Dataset at all (:func:`has_dataset`).

Everything here is pure: lxml parses the bytes it is given and never resolves entities,
follows DTDs or fetches anything.

Decisions:

* The script ``type`` is compared case-insensitively on its media type only, so
  ``application/ld+json; profile="https://w3id.org/cdif/core/1.0"`` counts; a ``profile``
  attribute on the element (a Signposting habit) is captured as :attr:`JsonLdBlock.profile`,
  else the ``profile`` media-type parameter.
* Repairs are tried only after ``json.loads`` fails, one at a time and cumulatively, in a fixed
  order; each applied repair is recorded so the record's provenance can say what was changed.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lxml.etree
import lxml.html

from cdif_harvester.errors import PermanentError

__all__ = [
    "ExtractionError",
    "JsonLdBlock",
    "ParsedJson",
    "find_jsonld_scripts",
    "has_dataset",
    "parse_jsonld",
]

_JSONLD_MEDIA_TYPE = "application/ld+json"
_DATASET_TYPES = frozenset(
    {
        "Dataset",
        "schema:Dataset",
        "http://schema.org/Dataset",
        "https://schema.org/Dataset",
        "http://schema.org/Dataset/",
        "https://schema.org/Dataset/",
    }
)


class ExtractionError(PermanentError):
    """The metadata could not be extracted (malformed JSON that no repair could save)."""

    reason = "malformed-json"


@dataclass(frozen=True)
class JsonLdBlock:
    """One ``<script type="application/ld+json">`` element: its position, text and profile."""

    index: int
    text: str
    profile: str | None


@dataclass(frozen=True)
class ParsedJson:
    """A parsed JSON(-LD) document and the repairs that were needed to parse it."""

    data: Any
    repairs: tuple[str, ...]


def _media_type_and_profile(raw_type: str) -> tuple[str, str | None]:
    parts = [part.strip() for part in raw_type.split(";")]
    profile = None
    for param in parts[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "profile" and value.strip():
            profile = value.strip().strip('"').strip("'")
    return parts[0].lower(), profile


def find_jsonld_scripts(html_bytes: bytes) -> list[JsonLdBlock]:
    """Return every JSON-LD ``<script>`` block of an HTML page, in document order.

    The ``type`` attribute is matched case-insensitively and may carry parameters. Broken
    HTML is tolerated (lxml's recovering parser); an empty or unparseable page yields ``[]``.
    ``index`` counts JSON-LD blocks only (0-based). Never raises for bad input; never fetches.
    """
    if not html_bytes or not html_bytes.strip():
        return []
    parser = lxml.html.HTMLParser(recover=True, no_network=True, remove_comments=False)
    try:
        root = lxml.html.document_fromstring(html_bytes, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return []
    blocks: list[JsonLdBlock] = []
    for element in root.iter("script"):
        media_type, type_profile = _media_type_and_profile(element.get("type") or "")
        if media_type != _JSONLD_MEDIA_TYPE:
            continue
        profile = (element.get("profile") or "").strip() or type_profile
        blocks.append(JsonLdBlock(index=len(blocks), text=element.text or "", profile=profile))
    return blocks


# --- repairs -----------------------------------------------------------------------------

_WRAPPER_PATTERNS = (
    re.compile(r"^\s*<!\[CDATA\[(?P<body>.*)\]\]>\s*$", re.DOTALL),
    re.compile(r"^\s*<!--(?P<body>.*)-->\s*$", re.DOTALL),
    # a CDATA section hidden from old browsers inside JS comments: //<![CDATA[ ... //]]>
    re.compile(r"^\s*//\s*<!\[CDATA\[(?P<body>.*)//\s*\]\]>\s*$", re.DOTALL),
    re.compile(r"^\s*/\*\s*<!\[CDATA\[\s*\*/(?P<body>.*)/\*\s*\]\]>\s*\*/\s*$", re.DOTALL),
)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _strip_bom(text: str) -> str:
    return text.lstrip("\ufeff")


def _unescape_entities(text: str) -> str:
    # Pages that HTML-escape the script body (&quot; ...) instead of leaving it raw.
    return html.unescape(text) if "&" in text else text


def _strip_wrappers(text: str) -> str:
    for pattern in _WRAPPER_PATTERNS:
        match = pattern.match(text)
        if match:
            return match.group("body")
    return text


def _remove_trailing_commas(text: str) -> str:
    # Outside strings only: walk the text and drop a comma followed by } or ].
    out: list[str] = []
    in_string = False
    escaped = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif char == "," and _TRAILING_COMMA.match(text, i):
            pass
        else:
            out.append(char)
        i += 1
    return "".join(out)


_REPAIRS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("stripped byte order mark", _strip_bom),
    ("removed CDATA or HTML comment wrapper", _strip_wrappers),
    ("unescaped HTML entities", _unescape_entities),
    ("removed trailing commas", _remove_trailing_commas),
)


def parse_jsonld(text: str | bytes) -> ParsedJson:
    """Parse a JSON-LD text, repairing a few common publisher mistakes if needed.

    Tries ``json.loads`` first. On failure applies, in order and cumulatively, the repairs
    "stripped byte order mark", "removed CDATA or HTML comment wrapper", "unescaped HTML
    entities" and "removed trailing commas", recording each one that changed the text, and
    returns as soon as the text parses.

    Raises :class:`ExtractionError` (reason ``malformed-json``) naming the line and column of
    the first syntax error when the text is empty or still broken after every repair.
    """
    if isinstance(text, bytes):
        raw = text
        try:
            text = raw.decode("utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8")
        except UnicodeDecodeError:
            text = raw.decode("latin-1")
    if not text.strip():
        raise ExtractionError("malformed JSON-LD: the script block or document is empty")
    try:
        return ParsedJson(data=json.loads(text), repairs=())
    except json.JSONDecodeError as first_error:
        error = first_error
    repaired = text
    applied: list[str] = []
    for label, repair in _REPAIRS:
        candidate = repair(repaired)
        if candidate == repaired:
            continue
        repaired = candidate
        applied.append(label)
        try:
            return ParsedJson(data=json.loads(repaired), repairs=tuple(applied))
        except json.JSONDecodeError as exc:
            error = exc
    tried = f" (after repairs: {', '.join(applied)})" if applied else ""
    raise ExtractionError(
        f"malformed JSON-LD at line {error.lineno}, column {error.colno}: {error.msg}{tried}"
    )


# --- dataset detection -------------------------------------------------------------------


def _types_of(node: dict[str, Any]) -> list[str]:
    raw = node.get("@type", node.get("type"))
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list):
        return [item for item in raw if isinstance(item, str)]
    return []


def _is_dataset_node(node: dict[str, Any]) -> bool:
    return any(value.strip() in _DATASET_TYPES for value in _types_of(node))


_ABOUT_KEYS = ("about", "schema:about", "http://schema.org/about", "https://schema.org/about")
_GRAPH_KEYS = ("@graph", "itemListElement", "schema:itemListElement", "item", "schema:item")


def has_dataset(data: Any) -> bool:
    """Whether a parsed JSON-LD document contains a Dataset-typed node.

    Looks at the root node, the items of a top-level array, the nodes of ``@graph``, the
    ``about`` of a metadata record (the older CDIF shape, discoverability Appendix 1) and the
    elements of an ``ItemList`` (Appendix 1, Example 3). Accepts ``Dataset``,
    ``schema:Dataset`` and the ``http``/``https`` schema.org IRIs. Never raises.
    """
    pending: list[tuple[Any, int]] = [(data, 0)]
    while pending:
        item, depth = pending.pop()
        if depth > 6:
            continue
        if isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
            continue
        if not isinstance(item, dict):
            continue
        if _is_dataset_node(item):
            return True
        for key in (*_ABOUT_KEYS, *_GRAPH_KEYS):
            if key in item:
                pending.append((item[key], depth + 1))
    return False
