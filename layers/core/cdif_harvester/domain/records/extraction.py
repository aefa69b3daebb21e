"""Find and parse JSON-LD in what a publisher serves.

CDIF discoverability, "Option 1. Embedded in HTML": :func:`find_jsonld_scripts` finds the
``<script type="application/ld+json">`` blocks of a page, :func:`parse_jsonld` parses a block or
a ``.jsonld`` body (repairing well-known breakage, each repair recorded) and :func:`has_dataset`
tells whether a document describes a Dataset. Pure: lxml never resolves entities, follows DTDs
or fetches anything.

See docs/decisions/0023-finding-and-repairing-jsonld.md.
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

from cdif_harvester.domain.records import jsonld_loader
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
    # Pages that HTML-escape the script body (&quot; ...) instead of leaving it raw. Without an
    # escaped quote the body was not escaped, and its entities are the publisher's text.
    return html.unescape(text) if _ESCAPED_QUOTE.search(text) else text


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


_ESCAPED_QUOTE = re.compile(r"&(?:quot|#34|#x22);", re.IGNORECASE)


def _outside_strings(text: str) -> list[tuple[int, str, bool]]:
    """Each character with its index and whether it is inside a JSON string."""
    marked: list[tuple[int, str, bool]] = []
    in_string = False
    escaped = False
    for index, char in enumerate(text):
        if in_string:
            marked.append((index, char, True))
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        else:
            in_string = char == '"'
            marked.append((index, char, in_string))
    return marked


def _remove_comments(text: str) -> str:
    # JavaScript habits: // to the end of the line, /* ... */ (an unterminated one is kept).
    if "//" not in text and "/*" not in text:
        return text
    out: list[str] = []
    marked = _outside_strings(text)
    position = 0
    while position < len(marked):
        index, char, inside = marked[position]
        following = text[index + 1 : index + 2]
        if not inside and char == "/" and following == "/":
            end = text.find("\n", index)
            position = len(text) if end < 0 else end
            continue
        if not inside and char == "/" and following == "*":
            end = text.find("*/", index + 2)
            if end >= 0:
                out.append(" ")
                position = end + 2
                continue
        out.append(char)
        position += 1
    return "".join(out)


_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_control_characters(text: str) -> str:
    # A raw newline or tab inside a string (pasted descriptions) is invalid JSON; escaped, the
    # string keeps it.
    if not any(ord(char) < 0x20 for char in text):
        return text
    return "".join(
        (_CONTROL_ESCAPES.get(char) or f"\\u{ord(char):04x}")
        if inside and ord(char) < 0x20
        else char
        for _, char, inside in _outside_strings(text)
    )


def _remove_unmatched_closers(text: str) -> str:
    depth = 0
    out: list[str] = []
    for _, char, inside in _outside_strings(text):
        if not inside and char in "{[":
            depth += 1
        elif not inside and char in "}]":
            if depth == 0:
                continue
            depth -= 1
        out.append(char)
    return "".join(out)


def _drop_early_closers(text: str) -> str | None:
    """Drop closers that end the document before its "extra data"; the text if it then parses."""
    candidate = text
    for _ in range(3):
        try:
            json.loads(candidate)
        except json.JSONDecodeError as exc:
            before = candidate[: exc.pos].rstrip()
            if not exc.msg.startswith("Extra data") or not before.endswith(("}", "]")):
                return None
            candidate = before[:-1] + candidate[len(before) :]
            continue
        return candidate
    return None


def _remove_stray_closers(text: str) -> str:
    # A closer that ends the document early leaves "extra data" after it ('{"a": {}}, "b": 1}');
    # one that closes nothing is a template leftover ('{...}}' or '{...}]'). The first kind is
    # dropped only if the text then parses.
    unmatched_removed = _remove_unmatched_closers(text)
    for start in (text, unmatched_removed):
        repaired = _drop_early_closers(start)
        if repaired is not None:
            return repaired
    return unmatched_removed


_REPAIRS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("stripped byte order mark", _strip_bom),
    ("removed CDATA or HTML comment wrapper", _strip_wrappers),
    ("unescaped HTML entities", _unescape_entities),
    ("removed comments", _remove_comments),
    ("escaped control characters in strings", _escape_control_characters),
    ("removed trailing commas", _remove_trailing_commas),
    ("removed a stray closing brace or bracket", _remove_stray_closers),
)

# A string @context that plainly names schema.org, however spelled.
_SCHEMA_ORG_CONTEXT = re.compile(r"^(?:https?:)?(?://)?(?:www\.)?schema\.org/?#?$", re.IGNORECASE)


def _repair_context_value(value: Any, repairs: list[str]) -> Any:
    if isinstance(value, list):
        return [_repair_context_value(entry, repairs) for entry in value]
    if not isinstance(value, str) or jsonld_loader.is_served(value):
        return value
    text = value.strip()
    if text.startswith(("{", "[")):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            return value
        if isinstance(parsed, dict | list):
            repairs.append("string-valued @context parsed as JSON")
            return parsed
    elif _SCHEMA_ORG_CONTEXT.match(text):
        repairs.append(f"@context {value!r} read as https://schema.org/")
        return "https://schema.org/"
    return value


def _repair_contexts(data: Any) -> tuple[Any, list[str]]:
    """Repair the string ``@context`` of the top-level node(s); return data and repairs."""
    repairs: list[str] = []
    nodes = data if isinstance(data, list) else [data]
    for node in nodes:
        if isinstance(node, dict) and "@context" in node:
            node["@context"] = _repair_context_value(node["@context"], repairs)
    return data, list(dict.fromkeys(repairs))


def parse_jsonld(text: str | bytes) -> ParsedJson:
    """Parse a JSON-LD text, repairing common publisher mistakes if needed.

    Tries ``json.loads`` first. On failure applies, in order and cumulatively, the repairs
    "stripped byte order mark", "removed CDATA or HTML comment wrapper", "unescaped HTML
    entities", "removed comments", "escaped control characters in strings", "removed trailing
    commas" and "removed a stray closing brace or bracket", recording each one that changed the
    text, and stops as soon as the text parses. Then repairs a string-valued ``@context`` that
    means schema.org or holds JSON (see the module docstring), recording that too.

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
        data = json.loads(text)
    except json.JSONDecodeError as first_error:
        error = first_error
    else:
        data, context_repairs = _repair_contexts(data)
        return ParsedJson(data=data, repairs=tuple(context_repairs))
    repaired = text
    applied: list[str] = []
    for label, repair in _REPAIRS:
        candidate = repair(repaired)
        if candidate == repaired:
            continue
        repaired = candidate
        applied.append(label)
        try:
            data = json.loads(repaired)
        except json.JSONDecodeError as exc:
            error = exc
            continue
        data, context_repairs = _repair_contexts(data)
        return ParsedJson(data=data, repairs=(*applied, *context_repairs))
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
