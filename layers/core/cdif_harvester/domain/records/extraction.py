"""Find and parse JSON-LD in what a publisher serves.

CDIF discoverability, "Option 1. Embedded in HTML": :func:`find_jsonld_scripts` finds the
``<script type="application/ld+json">`` blocks of a page, :func:`parse_jsonld` parses a block or
a ``.jsonld`` body (repairing well-known breakage, each repair recorded) and :func:`has_dataset`
tells whether a document describes a Dataset. Pure: lxml never resolves entities, follows DTDs
or fetches anything.

See docs/decisions/0023-finding-and-repairing-jsonld.md; the bounds on
memory and time: docs/decisions/0050-parsing-in-bounded-memory.md.
"""

from __future__ import annotations

import html
import io
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
    "MAX_JSON_DEPTH",
    "MAX_REPAIR_CHARS",
    "MAX_SCRIPTS",
    "ExtractionError",
    "JsonLdBlock",
    "JsonLdScripts",
    "JsonTooDeep",
    "ParsedJson",
    "find_jsonld_scripts",
    "has_dataset",
    "parse_jsonld",
    "read_jsonld_scripts",
]

# How many JSON-LD blocks of one page are read. A page describing one dataset has one or two; a
# catalogue page lists one block per dataset, and each is a record of its own (docs/decisions/
# 0061: 10,000 records of one page take about 16 s end to end locally). Past this the page costs
# a record per block (each normalised and validated) for nothing a harvester can use; the cut is
# reported.
MAX_SCRIPTS = 10_000
# How deep JSON may nest. CDIF records nest a dozen levels; the JSON-LD processing that follows
# (expansion, compaction, hashing) recurses a few frames per level, and Python stops at 1000.
MAX_JSON_DEPTH = 100
# The largest text the repairs are tried on: the document cap (Settings.max_document_bytes).
# Each repair is linear and holds a copy or two of the text; a bigger text that is not JSON is
# reported as it is.
MAX_REPAIR_CHARS = 10 * 1024 * 1024

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


class JsonTooDeep(ExtractionError):
    """The JSON nests deeper than :data:`MAX_JSON_DEPTH`: valid or not, it is not processed."""

    reason = "json-too-deep"


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


@dataclass(frozen=True)
class JsonLdScripts:
    """The JSON-LD blocks read from a page, and how many more were left unread (past
    :data:`MAX_SCRIPTS`)."""

    blocks: tuple[JsonLdBlock, ...]
    unread: int = 0

    def note(self) -> str | None:
        """What was left unread, as a ``too-many-scripts`` reason; None when nothing was."""
        if not self.unread:
            return None
        return (
            f"too-many-scripts: the page has {len(self.blocks) + self.unread} JSON-LD blocks; "
            f"only the first {len(self.blocks)} were read"
        )


def _media_type_and_profile(raw_type: str) -> tuple[str, str | None]:
    parts = [part.strip() for part in raw_type.split(";")]
    profile = None
    for param in parts[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "profile" and value.strip():
            profile = value.strip().strip('"').strip("'")
    return parts[0].lower(), profile


def find_jsonld_scripts(html_bytes: bytes) -> list[JsonLdBlock]:
    """Return the JSON-LD ``<script>`` blocks of an HTML page, in document order.

    The first :data:`MAX_SCRIPTS` only; :func:`read_jsonld_scripts` also says how many more there
    were. Never raises for bad input; never fetches.
    """
    return list(read_jsonld_scripts(html_bytes).blocks)


def read_jsonld_scripts(html_bytes: bytes) -> JsonLdScripts:
    """Read the JSON-LD ``<script>`` blocks of an HTML page, in document order.

    The ``type`` attribute is matched case-insensitively and may carry parameters. Broken
    HTML is tolerated (lxml's recovering parser); an empty or unparseable page yields no
    blocks. ``index`` counts JSON-LD blocks only (0-based). Blocks past :data:`MAX_SCRIPTS` are
    counted in ``unread``, not read. Never raises for bad input; never fetches.
    """
    if not html_bytes or not html_bytes.strip():
        return JsonLdScripts(blocks=())
    parser = lxml.html.HTMLParser(recover=True, no_network=True, remove_comments=False)
    try:
        root = lxml.html.document_fromstring(html_bytes, parser=parser)
    except (lxml.etree.ParserError, ValueError):
        return JsonLdScripts(blocks=())
    blocks: list[JsonLdBlock] = []
    unread = 0
    for element in root.iter("script"):
        media_type, type_profile = _media_type_and_profile(element.get("type") or "")
        if media_type != _JSONLD_MEDIA_TYPE:
            continue
        if len(blocks) >= MAX_SCRIPTS:
            unread += 1
            continue
        profile = (element.get("profile") or "").strip() or type_profile
        blocks.append(JsonLdBlock(index=len(blocks), text=element.text or "", profile=profile))
    return JsonLdScripts(blocks=tuple(blocks), unread=unread)


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


# A JSON string from its opening quote to its closing one, or to the end of the text when it is
# never closed; an escape takes the next character whatever it is. The quantifiers are possessive
# ("*+"): the pattern never backtracks, so a scan over the text is linear, and the regex engine
# keeps no state per repetition (without them a string of 5 million escapes costs 600 MB). The
# repairs write the text once into a buffer as they scan: re.sub, or a list of pieces or of
# positions, would hold an object per change (9 MiB of "}" held 500 MB).
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"?'
_STRING_TOKEN = re.compile(_STRING, re.DOTALL)
_STRING_OR_COMMENT = re.compile(_STRING + r"|//[^\n]*+|/\*", re.DOTALL)
_STRING_OR_BRACKETS = re.compile(_STRING + r"|[\[{]|[\]}]++", re.DOTALL)
_STRING_OR_TRAILING_COMMA = re.compile(f"({_STRING})|,(?=\\s*+[}}\\]])", re.DOTALL)
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f]")


def _remove_trailing_commas(text: str) -> str:
    # Outside strings only: drop a comma followed by } or ] (white space between).
    if not _TRAILING_COMMA.search(text):
        return text
    out = io.StringIO()
    copied = 0
    for match in _STRING_OR_TRAILING_COMMA.finditer(text):
        start = match.start()
        if text[start] == ",":
            out.write(text[copied:start])
            copied = start + 1
    out.write(text[copied:])
    return out.getvalue()


_ESCAPED_QUOTE = re.compile(r"&(?:quot|#34|#x22);", re.IGNORECASE)


def _remove_comments(text: str) -> str:
    # JavaScript habits: // to the end of the line, /* ... */ (an unterminated one is kept).
    # One pass from left to right; strings are skipped whole, so "//" in a URL stays.
    if "//" not in text and "/*" not in text:
        return text
    out = io.StringIO()
    copied = position = 0
    closers_left = True
    while (match := _STRING_OR_COMMENT.search(text, position)) is not None:
        start, position = match.span()
        if text[start] == '"':
            continue
        if text[start + 1] == "/":
            out.write(text[copied:start])
            copied = position
            continue
        # Once no "*/" follows one "/*", none follows a later one: asking again for every
        # unterminated "/*" made this quadratic.
        end = text.find("*/", position) if closers_left else -1
        if end < 0:
            closers_left = False
            position = start + 1
            continue
        out.write(text[copied:start])
        out.write(" ")
        copied = position = end + 2
    out.write(text[copied:])
    return out.getvalue()


_CONTROL_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


# str.translate builds the escaped string in one go (a re.sub would hold a piece per match).
_CONTROL_TABLE = {code: _CONTROL_ESCAPES.get(chr(code)) or f"\\u{code:04x}" for code in range(0x20)}


def _escape_control_characters(text: str) -> str:
    # A raw newline or tab inside a string (pasted descriptions) is invalid JSON; escaped, the
    # string keeps it.
    if not _CONTROL_CHARACTER.search(text):
        return text
    out = io.StringIO()
    copied = 0
    for match in _STRING_TOKEN.finditer(text):
        start, end = match.span()
        if _CONTROL_CHARACTER.search(text, start, end):
            out.write(text[copied:start])
            out.write(text[start:end].translate(_CONTROL_TABLE))
            copied = end
    out.write(text[copied:])
    return out.getvalue()


def _remove_unmatched_closers(text: str) -> str:
    # A run of closers at depth d closes d brackets; the rest of the run closes nothing.
    depth = 0
    out = io.StringIO()
    copied = 0
    for match in _STRING_OR_BRACKETS.finditer(text):
        start, end = match.span()
        char = text[start]
        if char in "{[":
            depth += 1
        elif char in "}]":
            closing = min(depth, end - start)
            depth -= closing
            if start + closing < end:
                out.write(text[copied : start + closing])
                copied = end
    if not copied:
        return text
    out.write(text[copied:])
    return out.getvalue()


def _depth_of(data: Any) -> int:
    """How deep the arrays and objects of parsed JSON nest, counted up to MAX_JSON_DEPTH + 1."""
    depth = 0
    level = [data] if isinstance(data, dict | list) else []
    while level and depth <= MAX_JSON_DEPTH:
        depth += 1
        level = [
            child
            for node in level
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, dict | list)
        ]
    return depth


#: Closers that end a document early dropped at most (each costs a parse of the whole text).
_EARLY_CLOSERS = 2


def _drop_early_closers(text: str) -> str | None:
    """Drop up to :data:`_EARLY_CLOSERS` closers that end the document before its "extra
    data"; the text if it then parses, else None."""
    candidate = text
    for dropped in range(_EARLY_CLOSERS + 1):
        try:
            _loads(candidate)
        except json.JSONDecodeError as exc:
            before = candidate[: exc.pos].rstrip()
            if (
                dropped == _EARLY_CLOSERS
                or not exc.msg.startswith("Extra data")
                or not before.endswith(("}", "]"))
            ):
                return None
            candidate = before[:-1] + candidate[len(before) :]
            continue
        return candidate
    return None  # pragma: no cover - (the last pass returns)


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


def _decoded(raw: bytes) -> tuple[str, list[str]]:
    """The text of a JSON body: UTF-8 (RFC 8259 section 8.1), else read as Latin-1, noted."""
    try:
        return raw.decode("utf-8-sig" if raw.startswith(b"\xef\xbb\xbf") else "utf-8"), []
    except UnicodeDecodeError as exc:
        # Every byte is a Latin-1 character: a publisher writing Latin-1 keeps its text.
        note = f"decoded as Latin-1: not UTF-8 (byte {exc.start})"
        return raw.decode("latin-1"), [note]


def _loads(text: str) -> Any:
    """``json.loads``, with JSON nested too deep for Python (or for what follows) refused."""
    try:
        data = json.loads(text)
    except RecursionError as exc:
        # The parser recurses once per level and Python stops it near 1000 levels.
        raise JsonTooDeep(
            f"JSON nested too deeply to be parsed; at most {MAX_JSON_DEPTH} levels are read"
        ) from exc
    if _depth_of(data) > MAX_JSON_DEPTH:
        raise JsonTooDeep(f"JSON nested more than {MAX_JSON_DEPTH} levels deep; not read")
    return data


def parse_jsonld(text: str | bytes) -> ParsedJson:
    """Parse a JSON-LD text, repairing common publisher mistakes if needed.

    Bytes are decoded as UTF-8 (as Latin-1 if they are not UTF-8, recorded as a repair). Tries
    ``json.loads`` first. On failure applies, in order and cumulatively, the repairs
    "stripped byte order mark", "removed CDATA or HTML comment wrapper", "unescaped HTML
    entities", "removed comments", "escaped control characters in strings", "removed trailing
    commas" and "removed a stray closing brace or bracket", recording each one that changed the
    text, and stops as soon as the text parses. Then repairs a string-valued ``@context`` that
    means schema.org or holds JSON (see the module docstring), recording that too. Every repair
    is linear in the length of the text; texts longer than :data:`MAX_REPAIR_CHARS` are not
    repaired.

    Raises :class:`ExtractionError` (reason ``malformed-json``) naming the line and column of
    the first syntax error when the text is empty or still broken after every repair, and
    :class:`JsonTooDeep` (reason ``json-too-deep``) when arrays and objects nest deeper than
    :data:`MAX_JSON_DEPTH`.
    """
    decoding: list[str] = []
    if isinstance(text, bytes):
        text, decoding = _decoded(text)
    if not text.strip():
        raise ExtractionError("malformed JSON-LD: the script block or document is empty")
    try:
        data = _loads(text)
    except json.JSONDecodeError as first_error:
        error = first_error
    else:
        data, context_repairs = _repair_contexts(data)
        return ParsedJson(data=data, repairs=(*decoding, *context_repairs))
    if len(text) > MAX_REPAIR_CHARS:
        raise ExtractionError(
            f"malformed JSON-LD at line {error.lineno}, column {error.colno}: {error.msg} "
            f"(not repaired: {len(text)} characters, over the {MAX_REPAIR_CHARS} "
            "the repairs are tried on)"
        )
    repaired = text
    applied: list[str] = [*decoding]
    for label, repair in _REPAIRS:
        candidate = repair(repaired)
        if candidate == repaired:
            continue
        repaired = candidate
        applied.append(label)
        try:
            data = _loads(repaired)
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
