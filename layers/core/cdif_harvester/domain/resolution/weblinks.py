"""Read typed web links from HTTP ``Link`` headers, linksets and HTML ``<head>`` elements.

Four pure readers produce :class:`~cdif_harvester.model.TypedLink` values:
:func:`parse_link_header` (RFC 8288 section 3), :func:`parse_linkset_json` (RFC 9264 section
4.2), :func:`parse_linkset_text` (RFC 9264 section 4.1) and :func:`parse_html_head` (``<link>``
and ``<meta>``). They are lenient, never raise, and note every tolerated deviation in
``LinkParse.repairs``.

See docs/decisions/0021-lenient-link-readers.md; the bounds on
memory and time: docs/decisions/0050-parsing-in-bounded-memory.md.
"""

from __future__ import annotations

import codecs
import json
import re
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_to_bytes, urljoin, urlsplit

import lxml.etree
import lxml.html

from cdif_harvester.model import TypedLink

__all__ = [
    "MAX_HEADER_LINK_VALUES",
    "MAX_HTML_ELEMENTS",
    "MAX_LINK_VALUES",
    "HtmlHead",
    "LinkParse",
    "MetaTag",
    "parse_html_head",
    "parse_link_header",
    "parse_linkset_json",
    "parse_linkset_text",
]


@dataclass(frozen=True)
class LinkParse:
    """The links read from a header, or a linkset, and the repairs that were needed."""

    links: tuple[TypedLink, ...]
    repairs: tuple[str, ...]


@dataclass(frozen=True)
class MetaTag:
    """One HTML ``<meta name|property=... content=...>`` element.

    ``name`` is lower-cased (from ``name``, or ``property`` for Open Graph style tags);
    ``content`` is as found; ``scheme`` is the HTML 4 / Dublin Core ``scheme`` attribute;
    ``lang`` is the element's language, its own ``lang`` (or ``xml:lang``) or inherited from
    the nearest ancestor that has one.
    """

    name: str
    content: str
    scheme: str | None
    lang: str | None


@dataclass(frozen=True)
class HtmlHead:
    """What an HTML page says about itself: its typed links, its meta tags, its base URL.

    ``base`` is the URL that relative references of the page resolve against: the first
    ``<base href>`` (itself resolved against the page URL), else the page URL. ``notes`` say
    what was left unread (elements past :data:`MAX_HTML_ELEMENTS`).
    """

    links: tuple[TypedLink, ...]
    meta: tuple[MetaTag, ...]
    base: str
    notes: tuple[str, ...] = ()


# --- common parts ------------------------------------------------------------------------

_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~" + string.ascii_letters + string.digits)
_URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
# RFC 8288 section 2.1.1 reg-rel-type, plus "_" (seen in the wild, harmless).
_REGISTERED_FORM = re.compile(r"[a-z][a-z0-9._-]*")
_EXTENSION_FORM = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s\"'<>\\^`{|}]+")
_EXT_VALUE = re.compile(r"([A-Za-z0-9!#$%&+^_`{}~-]+)'([A-Za-z0-9-]*)'(.*)", re.DOTALL)
# Parameters that may appear once in a link-value; later occurrences are ignored.
_SINGLE_PARAMS = frozenset({"rel", "rev", "anchor", "type", "title", "title*", "profile", "scheme"})
_PARAMETER_LIKE = re.compile(r"[A-Za-z0-9!#$%&*+.^_`|~-]+=")
_CLIP = 60
# How many link-values one header set or linkset document, and how many <link> and <meta>
# elements one page, are read. A landing page has a few dozen; past these the links cost memory
# and work for nothing a harvester follows. Every cut is noted.
MAX_LINK_VALUES = 10_000
MAX_HTML_ELEMENTS = 1000
# How many link-values the Link headers of one response give, as many as the <link> elements
# of a page. The rest are still read, to be counted, never kept (docs/decisions/0066).
MAX_HEADER_LINK_VALUES = 1000
# How many repair notes one reading lists; the rest are counted. A publisher learns what to fix
# from the first few, and the notes travel in messages between stages.
MAX_NOTES = 100
# A target in angle brackets: what strip() would leave holds no white space, "<" or ">".
_BRACKETED_TARGET = re.compile(r"<\s*+([^ \t\r\n<>]*+)\s*+>")
# The start of the next link-value, seen inside what a quote would enclose: the quote was never
# closed, and the quote that seems to close it opens a value of the next link.
_NEXT_LINK_VALUE = re.compile(r",[ \t]*+<[^ \t\r\n<>\"]*+>[ \t]*+[;,]")


class _Notes(list[str]):
    """Repair notes: the first :data:`MAX_NOTES` are kept, the rest counted; the notes saying
    what was left unread (``cuts``) are always kept."""

    def __init__(self) -> None:
        super().__init__()
        self.unlisted = 0
        self.cuts: list[str] = []

    def append(self, note: str) -> None:
        if len(self) < MAX_NOTES:
            super().append(note)
        else:
            self.unlisted += 1

    def extend(self, notes: Iterable[str]) -> None:
        for note in notes:
            self.append(note)

    def cut(self, note: str) -> None:
        """Say what was left unread; never dropped."""
        self.cuts.append(note)

    def merge(self, other: _Notes) -> None:
        """Add another reading's notes, its cuts, and what it left unlisted."""
        self.extend(other)
        self.cuts.extend(other.cuts)
        self.unlisted += other.unlisted

    def listed(self) -> tuple[str, ...]:
        """The notes kept, the cuts, and one saying how many more notes there were."""
        more = (f"{self.unlisted} more repair notes not listed",) if self.unlisted else ()
        return (*self, *self.cuts, *more)


def _clip(text: str) -> str:
    """A fragment short enough for a repair note."""
    return text if len(text) <= _CLIP else text[: _CLIP - 3] + "..."


def _is_token(text: str) -> bool:
    return bool(text) and all(char in _TOKEN_CHARS for char in text)


def _resolve(reference: str, base: str) -> str | None:
    """``reference`` resolved against ``base`` (RFC 3986), or None unless that is absolute."""
    try:
        resolved = urljoin(base, reference.strip())
        return resolved if urlsplit(resolved).scheme else None
    except ValueError:  # e.g. an invalid IPv6 literal in either URL
        return None


def _relation_types(value: str) -> tuple[list[str], list[str]]:
    """The relation types of a ``rel``/``rev`` value, each once, in order of appearance, and
    the values that are not relation types at all (neither reg-rel-type nor a URI)."""
    types: list[str] = []
    invalid: list[str] = []
    for raw in value.split():
        # Extension relation types are URIs and compare as written (RFC 8288 section 2.1.2).
        if _URI_SCHEME.match(raw):
            rel = raw if _EXTENSION_FORM.fullmatch(raw) else None
        else:
            rel = raw.lower() if _REGISTERED_FORM.fullmatch(raw.lower()) else None
        if rel is None:
            invalid.append(raw)
        elif rel not in types:
            types.append(rel)
    return types, invalid


def _media_type(value: str) -> str | None:
    media_type, semicolon, parameters = value.strip().partition(";")
    media_type = media_type.strip().lower()
    if not media_type:
        return None
    return media_type + semicolon + parameters if semicolon else media_type


def _decode_ext_value(value: str) -> str | None:
    """Decode an RFC 8187 ext-value (``charset'language'pct-encoded``); None if invalid."""
    match = _EXT_VALUE.fullmatch(value.strip())
    if match is None:
        return None
    try:
        codecs.lookup(match.group(1))
        return unquote_to_bytes(match.group(3)).decode(match.group(1))
    except (LookupError, UnicodeDecodeError, ValueError):
        return None


def _optional(value: str | None) -> str | None:
    if value is None:
        return None
    return value.strip() or None


def _decode_text(body: bytes | str) -> str:
    if isinstance(body, str):
        return body
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Link syntax is ASCII (RFC 8288); an 8-bit byte can only be in a title.
        return body.decode("latin-1")


# --- the Link header grammar (RFC 8288 section 3) -----------------------------------------


@dataclass
class _LinkValue:
    """One link-value as read: its target reference and its parameters, in order."""

    target: str
    params: list[tuple[str, str]] = field(default_factory=list)


class _LinkFieldReader:
    """A cursor over one field value (or one linkset document) that reads link-values.

    ``Link = #link-value``, ``link-value = "<" URI-Reference ">" *( OWS ";" OWS link-param )``,
    ``link-param = token BWS [ "=" BWS ( token / quoted-string ) ]``, plus the repairs listed in
    the module docstring.
    """

    def __init__(self, text: str, label: str, *, lines_separate: bool) -> None:
        self.text = text
        self.pos = 0
        self.label = label
        self.lines_separate = lines_separate
        self.repairs = _Notes()
        self.quiet = False  # past the cap: values are read to be counted, without notes
        # (start, end): no quoted string opened after ``start`` closes before ``end``, the end
        # of its line. Remembered so that a line of unclosed quotes is scanned once, not once
        # per quote.
        self._unclosed = (-1, -1)
        # Where an unreadable fragment ends: the next link-value or the next parameter.
        self.link_stops = ",\r\n" if lines_separate else ","
        self.param_stops = ";,\r\n" if lines_separate else ";,"

    def note(self, message: str) -> None:
        if not self.quiet:
            self.repairs.append(f"{self.label}: {message}")

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_space(self) -> tuple[bool, bool]:
        """Skip white space (line breaks included); say whether any, and any line break."""
        start, crossed_line = self.pos, False
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            crossed_line = crossed_line or self.text[self.pos] in "\r\n"
            self.pos += 1
        return self.pos > start, crossed_line

    def skip_to(self, stops: str) -> str:
        """Consume up to (not including) the first character of ``stops`` outside a closed
        double-quoted string; return what was consumed."""
        start, text = self.pos, self.text
        while self.pos < len(text) and text[self.pos] not in stops:
            if text[self.pos] == '"':
                closing = self._closing_quote(self.pos + 1)
                if closing is not None:
                    self.pos = closing
            self.pos += 1
        return text[start : self.pos]

    def _closing_quote(self, start: int) -> int | None:
        """Index of the ``"`` closing a quoted string opened before ``start``, or None when
        the line or the text ends first (quoted strings never span lines)."""
        if self._unclosed[0] < start <= self._unclosed[1]:
            return None
        index, text = start, self.text
        while index < len(text):
            char = text[index]
            if char == '"':
                return index
            if char in "\r\n":
                break
            index += 2 if char == "\\" else 1
        # Any later quote on this line is escaped in this scan, and a scan from it would
        # continue exactly as this one did: it would not close either.
        self._unclosed = (start, index)
        return None

    def consume_until(self, stops: str) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in stops:
            self.pos += 1
        return self.text[start : self.pos]

    # -- link-values

    def read_all(self, room: int | None = None) -> tuple[list[_LinkValue], int]:
        """Read the link-values of the text, skipping what cannot be read: the first ``room``
        (all when None) are returned, with the number of those read after them and dropped.

        Past :data:`MAX_LINK_VALUES` reading stops, with a cut note, whatever ``room`` says.
        """
        try:
            return self._read_values(room)
        finally:
            self.quiet = False  # the kept values' own notes are still to come (_links_of)

    def _read_values(self, room: int | None) -> tuple[list[_LinkValue], int]:
        values: list[_LinkValue] = []
        dropped = 0
        after_comma = False
        while True:
            self.skip_space()
            if len(values) + dropped >= MAX_LINK_VALUES and not self.at_end():
                self.repairs.cut(
                    f"{self.label}: only the first {MAX_LINK_VALUES} link-values read; "
                    "the rest ignored"
                )
                return values, dropped
            if self.at_end():
                if after_comma:
                    self.note("empty list element ignored")
                return values, dropped
            if self.peek() == ",":
                self.note("empty list element ignored")
                self.pos += 1
                after_comma = True
                continue
            # Past the room, link-values are read only to be counted: their repairs are not
            # noted, as nothing of them is kept.
            self.quiet = room is not None and len(values) >= room
            value = self.read_link_value()
            if value is not None and self.quiet:
                dropped += 1
            elif value is not None:
                values.append(value)
            after_comma = self.read_separator()

    def read_separator(self) -> bool:
        """After a link-value: consume the comma that ends it; True if there was one."""
        if self.peek() == ",":
            self.pos += 1
            return True
        return False

    def read_link_value(self) -> _LinkValue | None:
        target = self.read_target()
        if target is None:
            return None
        value = _LinkValue(target)
        self.read_params(value)
        return value

    def read_target(self) -> str | None:
        if self.peek() == "<":
            # A URI-Reference contains neither white space nor "<": if the text up to the
            # next ">" does, the "<" was never closed. (A match stops at the first such
            # character: searching for the next ">" from every "<" was quadratic.)
            bracketed = _BRACKETED_TARGET.match(self.text, self.pos)
            if bracketed is not None:
                self.pos = bracketed.end()
                return bracketed.group(1).strip()
            self.pos += 1
            target = self.consume_until(";, \t\r\n")
            self.note(f"unclosed '<' before {_clip(target)} repaired")
            return target
        start = self.pos
        target = self.consume_until(";,\r\n" if self.lines_separate else ";,").strip()
        # Accept a bare target only if it can be a URI-Reference and does not look like a
        # parameter ("rel=x" with the target forgotten).
        if (
            target
            and not any(char in target for char in " \t\"'<>")
            and not _PARAMETER_LIKE.match(target)
        ):
            self.note(f"missing angle brackets around {_clip(target)} repaired")
            return target
        self.pos = start
        fragment = self.skip_to(self.link_stops)
        self.note(f"unparseable fragment {_clip(fragment.strip())!r} skipped")
        return None

    def read_params(self, value: _LinkValue) -> None:
        while True:
            _, crossed_line = self.skip_space()
            char = self.peek()
            if char in ("", ","):
                return
            if char == "<":
                # A new link-value. In a linkset a line break separates link-values.
                if not (self.lines_separate and crossed_line):
                    following = self.text[self.pos : self.pos + _CLIP]
                    self.note(f"missing comma before link to {_clip(following)}")
                return
            if char != ";":
                if self.lines_separate and crossed_line:
                    return  # a line that does not continue the parameters starts a link-value
                fragment = self.skip_to(self.param_stops)
                self.note(f"unparseable fragment {_clip(fragment.strip())!r} skipped")
                continue
            self.pos += 1
            self.read_param(value)

    def read_param(self, value: _LinkValue) -> None:
        self.skip_space()
        if self.peek() in ("", ";", ",", "<"):
            self.note(f"empty parameter ignored in link to {_clip(value.target)}")
            return
        name = self.consume_until("=;, \t\r\n<")
        if not _is_token(name):
            self.pos -= len(name)
            fragment = self.skip_to(self.param_stops)
            self.note(f"unparseable parameter {_clip(fragment.strip())!r} skipped")
            return
        name = name.lower()  # parameter names are case-insensitive
        space_before, _ = self.skip_space()
        if self.peek() != "=":
            value.params.append((name, ""))
            return
        self.pos += 1
        space_after, _ = self.skip_space()
        if space_before or space_after:
            self.note(f"whitespace around '=' in parameter {name} repaired")
        value.params.append((name, self.read_param_value(name)))

    def read_param_value(self, name: str) -> str:
        char = self.peek()
        if char == '"':
            closing = self._closing_quote(self.pos + 1)
            if closing is not None:
                cut = self._next_link_within(self.pos + 1, closing)
                if cut is not None:
                    return self._unterminated(name, cut)
                raw = self.text[self.pos + 1 : closing]
                self.pos = closing + 1
                return re.sub(r"\\(.)", r"\1", raw, flags=re.DOTALL)  # quoted-pairs
            self.pos += 1
            self.note(f"unterminated quote in parameter {name} repaired")
            return self.read_bare_value(name, note=False)
        if char == "'":
            closing = self.text.find("'", self.pos + 1)
            cut = None if closing == -1 else self._next_link_within(self.pos + 1, closing)
            if cut is not None:
                return self._unterminated(name, cut)
            self.pos += 1
            if closing != -1 and not any(char in "\r\n" for char in self.text[self.pos : closing]):
                raw = self.text[self.pos : closing]
                self.pos = closing + 1
                self.note(f"single-quoted value of parameter {name} repaired")
                return raw
            self.note(f"unterminated quote in parameter {name} repaired")
            return self.read_bare_value(name, note=False)
        return self.read_bare_value(name, note=True)

    def _next_link_within(self, start: int, end: int) -> int | None:
        """Where a link-value seems to start between ``start`` and ``end`` (the comma before
        it), or None. Each quoted span is searched once: reading goes on from the comma, and
        no quote lies between it and ``end``."""
        found = _NEXT_LINK_VALUE.search(self.text, start, end)
        return None if found is None else found.start()

    def _unterminated(self, name: str, end: int) -> str:
        """The value of a quote never closed before the next link-value, which starts at
        ``end``: what lies between, so that link is read too (an unbalanced quote in one
        parameter would otherwise swallow the links after it)."""
        raw = self.text[self.pos + 1 : end].strip()
        self.pos = end
        self.note(f"unterminated quote in parameter {name} repaired")
        return raw

    def read_bare_value(self, name: str, *, note: bool) -> str:
        # Up to the next ";" or "," (or line end, or "<", which no URI or token contains).
        raw = self.consume_until(";,\r\n<").strip()
        if note and raw and not _is_token(raw):
            self.note(f"unquoted value {_clip(raw)!r} of parameter {name} (not a token) accepted")
        return raw


def _links_of(
    value: _LinkValue,
    base: str,
    found_in: str,
    reader: _LinkFieldReader,
    *,
    default_anchor: str | None,
) -> list[TypedLink]:
    """The typed links one link-value stands for (RFC 8288 appendix B.2, leniently)."""
    first: dict[str, str] = {}
    for name, param in value.params:
        if name not in first:
            first[name] = param
        elif name in _SINGLE_PARAMS:
            reader.note(f"repeated parameter {name} in link to {_clip(value.target)} ignored")
    href = _resolve(value.target, base)
    if href is None:
        reader.note(f"target {_clip(value.target)!r} cannot be made absolute; link dropped")
        return []
    rels, invalid_rels = _relation_types(first.get("rel", ""))
    revs, invalid_revs = _relation_types(first.get("rev", ""))
    for invalid in (*invalid_rels, *invalid_revs):
        reader.note(f"{_clip(invalid)!r} is not a relation type; ignored")
    if not rels and not revs:
        reader.note(f"link to {_clip(href)} has no rel; dropped")
        return []
    if "anchor" in first:
        anchor = _resolve(first["anchor"], base)
        if anchor is None:
            reader.note(f"anchor {_clip(first['anchor'])!r} cannot be made absolute; dropped")
            return []
    else:
        anchor = default_anchor
        if default_anchor is not None:
            reader.note(f"link to {_clip(href)} has no anchor; anchor set to {_clip(base)}")
    title = _optional(first.get("title"))
    if "title*" in first:
        decoded = _decode_ext_value(first["title*"])
        if decoded is None:
            reader.note(f"title* {_clip(first['title*'])!r} cannot be decoded; ignored")
        else:
            title = decoded
    attributes: dict[str, Any] = {
        "type": _media_type(first.get("type", "")),
        "profile": _optional(first.get("profile")),
        "anchor": anchor,
        "found_in": found_in,
        "title": title,
        "hreflang": _optional(first.get("hreflang")),
        "scheme": _optional(first.get("scheme")),
    }
    return [TypedLink(href=href, rel=rel, **attributes) for rel in rels] + [
        TypedLink(href=href, rel=rev, reverse=True, **attributes) for rev in revs
    ]


def _parse_link_text(
    texts: Iterable[str],
    base: str,
    found_in: str,
    label: str,
    *,
    lines_separate: bool,
    default_anchor: str | None,
    max_values: int | None = None,
) -> LinkParse:
    links: list[TypedLink] = []
    repairs = _Notes()
    kept = dropped = 0
    for text in texts:
        reader = _LinkFieldReader(text, label, lines_separate=lines_separate)
        room = None if max_values is None else max_values - kept
        values, past = reader.read_all(room)
        kept += len(values)
        dropped += past
        for value in values:
            links.extend(_links_of(value, base, found_in, reader, default_anchor=default_anchor))
        repairs.merge(reader.repairs)
    if dropped:
        repairs.cut(f"{label}: the first {kept} link-values kept; {dropped} more read and dropped")
    return LinkParse(links=tuple(links), repairs=repairs.listed())


def parse_link_header(
    values: Sequence[str], base: str, *, found_in: str = "http-header"
) -> LinkParse:
    """Read the typed links of one or more HTTP ``Link`` field values (RFC 8288 section 3).

    ``values`` are the field values in order (one per header line; each may hold several
    comma-separated link-values). ``base`` is the URL of the response: targets and anchors
    are resolved against it. Links without ``anchor`` keep ``anchor=None``. Sloppy forms are
    repaired and each repair is noted in :attr:`LinkParse.repairs`; unreadable fragments are
    skipped. The first :data:`MAX_HEADER_LINK_VALUES` link-values give links; the rest are
    counted, and a repair says how many were dropped. Never raises.
    """
    texts = [value for value in values if isinstance(value, str)]
    return _parse_link_text(
        texts,
        base,
        found_in,
        "link-header",
        lines_separate=False,
        default_anchor=None,
        max_values=MAX_HEADER_LINK_VALUES,
    )


def parse_linkset_text(body: bytes | str, base: str) -> LinkParse:
    """Read an ``application/linkset`` document (RFC 9264 section 4.1).

    The Link header syntax, with line breaks as well as commas between link-values. Targets
    and anchors are resolved against ``base`` (the linkset's URL); a link without ``anchor``
    gets ``base`` as anchor, with a note. Links have ``found_in="linkset"``. Never raises.
    """
    return _parse_link_text(
        [_decode_text(body)],
        base,
        "linkset",
        "linkset",
        lines_separate=True,
        default_anchor=base,
    )


# --- application/linkset+json (RFC 9264 section 4.2) -------------------------------------


def _strings(value: Any, what: str, repairs: list[str], *, array_expected: bool) -> list[str]:
    """The string values of a target attribute: an array of strings or of ``{"value": ...}``
    objects (RFC 9264 section 4.2.4), or, leniently, a bare string or object."""
    if isinstance(value, str | dict) and array_expected:
        repairs.append(f"linkset: {what} is not an array; read as one value")
        value = [value]
    elif isinstance(value, list) and not array_expected:
        repairs.append(f"linkset: {what} is an array; first value used")
    elif not isinstance(value, list):
        value = [value]
    strings: list[str] = []
    for item in value:
        text = item.get("value") if isinstance(item, dict) else item
        if isinstance(text, str) and text.strip():
            strings.append(text.strip())
        else:
            repairs.append(f"linkset: unreadable value in {what} ignored")
    return strings


def _json_target(
    target: Any, rel: str, anchor: str, base: str, repairs: list[str]
) -> TypedLink | None:
    if not isinstance(target, dict):
        repairs.append(f"linkset: target of {_clip(rel)} is not an object; skipped")
        return None
    raw_href = target.get("href")
    href = _resolve(raw_href, base) if isinstance(raw_href, str) else None
    if href is None:
        repairs.append(f"linkset: target of {_clip(rel)} has no usable href; skipped")
        return None

    def first(name: str, *, array_expected: bool) -> str | None:
        if name not in target:
            return None
        values = _strings(target[name], name, repairs, array_expected=array_expected)
        return values[0] if values else None

    title = first("title", array_expected=False)
    title_star = first("title*", array_expected=True)
    profiles = (
        _strings(target["profile"], "profile", repairs, array_expected=True)
        if "profile" in target
        else []
    )
    media_type = first("type", array_expected=False)
    return TypedLink(
        href=href,
        rel=rel,
        type=_media_type(media_type) if media_type else None,
        profile=" ".join(profiles) or None,
        anchor=anchor,
        found_in="linkset",
        title=title_star or title,
        hreflang=first("hreflang", array_expected=True),
        scheme=first("scheme", array_expected=True),
    )


def _json_context(context: Any, base: str, repairs: list[str], room: int) -> list[TypedLink]:
    """The links of one link context, at most ``room`` of them."""
    if not isinstance(context, dict):
        repairs.append("linkset: a link context is not an object; skipped")
        return []
    raw = context.get("anchor")
    anchor = _resolve(raw, base) if isinstance(raw, str) else None
    if "anchor" not in context:
        anchor = base
        repairs.append(f"linkset: link context has no anchor; anchor set to {_clip(base)}")
    elif anchor is None:
        repairs.append(f"linkset: anchor {_clip(str(raw))!r} is unusable; context skipped")
        return []
    links: list[TypedLink] = []
    for key, value in context.items():
        if key == "anchor":
            continue
        targets = value
        if isinstance(targets, dict):
            repairs.append(f"linkset: targets of {_clip(key)} are not an array; read as one")
            targets = [targets]
        if not isinstance(targets, list):
            repairs.append(f"linkset: targets of {_clip(key)} are not an array; skipped")
            continue
        # A member name is one relation type (RFC 9264 section 4.2.2); a space-separated list
        # is read leniently, anything else is not a relation at all.
        rels, invalid = _relation_types(key)
        if invalid or not rels:
            repairs.append(f"linkset: {_clip(key)!r} is not a relation type; skipped")
            continue
        if len(key.split()) > 1:
            repairs.append(f"linkset: {_clip(key)!r} read as {len(rels)} relation types")
        for rel in rels:
            for target in targets:
                if len(links) >= room:
                    return links
                link = _json_target(target, rel, anchor, base, repairs)
                if link is not None:
                    links.append(link)
    return links


def parse_linkset_json(body: bytes | str, base: str) -> LinkParse:
    """Read an ``application/linkset+json`` document (RFC 9264 section 4.2).

    ``{"linkset": [{"anchor": ..., "<relation type>": [{"href": ..., ...}]}]}``. Anchors and
    hrefs are resolved against ``base`` (the linkset's URL); a context without ``anchor``
    gets ``base``, with a note. Target attributes read: ``type``, ``hreflang`` (first),
    ``title``, ``title*`` (first value; wins over ``title``), ``profile`` (values joined
    with a space) and ``scheme``. Wrong shapes are read as far as they can be, with notes; a
    body that is not JSON gives no links and one note. Never raises.
    """
    repairs = _Notes()
    if isinstance(body, str) and body.startswith("\ufeff"):
        body = body[1:]
        repairs.append("linkset: byte order mark removed")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError included
        return LinkParse(links=(), repairs=("linkset: body is not JSON; no links read",))
    contexts = data.get("linkset") if isinstance(data, dict) else None
    if isinstance(contexts, dict):
        repairs.append("linkset: linkset is an object, not an array; read as one context")
        contexts = [contexts]
    if not isinstance(contexts, list):
        repairs.append("linkset: no linkset array in the document; no links read")
        return LinkParse(links=(), repairs=repairs.listed())
    links: list[TypedLink] = []
    for context in contexts:
        if len(links) >= MAX_LINK_VALUES:
            break
        links.extend(_json_context(context, base, repairs, MAX_LINK_VALUES - len(links)))
    if len(links) >= MAX_LINK_VALUES:
        repairs.cut(f"linkset: links read up to {MAX_LINK_VALUES}; any more ignored")
    return LinkParse(links=tuple(links), repairs=repairs.listed())


# --- HTML <link> and <meta> ----------------------------------------------------------------

_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# WHATWG Encoding: these labels mean windows-1252; a declared UTF-16 in a byte stream
# without BOM means UTF-8 (HTML "prescan" rules).
_ENCODING_ALIASES = {
    "iso-8859-1": "windows-1252",
    "iso8859-1": "windows-1252",
    "latin1": "windows-1252",
    "latin-1": "windows-1252",
    "us-ascii": "windows-1252",
    "ascii": "windows-1252",
    "utf-16": "utf-8",
    "utf-16le": "utf-8",
    "utf-16be": "utf-8",
}


def _html_text(body: bytes) -> str:
    """Decode an HTML body the way a browser would without an HTTP charset."""
    for bom, encoding in _BOMS:
        if body.startswith(bom):
            return body.decode(encoding, "replace")
    declared = _META_CHARSET.search(body[:1024])
    if declared is not None:
        label = declared.group(1).decode("ascii").lower()
        label = _ENCODING_ALIASES.get(label, label)
        try:
            return body.decode(label, "replace")
        except (LookupError, ValueError):  # unknown label, or a codec that is not for text
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("windows-1252", "replace")


def _html_root(body: bytes) -> Any:
    """The parsed document, or None. Re-encoded as UTF-8 so lxml never guesses (it reads
    undeclared bytes as Latin-1) and never meets an encoding declaration in a str."""
    if not body or not body.strip():
        return None
    data = _html_text(body).encode("utf-8", "replace")
    parser = lxml.html.HTMLParser(
        recover=True, no_network=True, remove_comments=True, encoding="utf-8"
    )
    try:
        return lxml.html.document_fromstring(data, parser=parser)
    except (lxml.etree.LxmlError, ValueError):
        return None


def _language(element: Any) -> str | None:
    """The element's language: its own ``lang``/``xml:lang``, else the nearest ancestor's.
    An empty value means "unknown" and stops the search (HTML "the language of a node")."""
    while element is not None:
        for name in ("lang", "xml:lang"):
            value = element.get(name)
            if value is not None:
                return value.strip() or None
        element = element.getparent()
    return None


def _first(root: Any, tag: str, notes: list[str]) -> list[Any]:
    """The first :data:`MAX_HTML_ELEMENTS` elements ``tag`` of the page; a note if more."""
    elements: list[Any] = []
    unread = 0
    for element in root.iter(tag):
        if len(elements) < MAX_HTML_ELEMENTS:
            elements.append(element)
        else:
            unread += 1
    if unread:
        notes.append(
            f"html: the page has {len(elements) + unread} <{tag}> elements; "
            f"only the first {len(elements)} were read"
        )
    return elements


def _html_links(elements: list[Any], document_base: str) -> list[TypedLink]:
    links: list[TypedLink] = []
    for element in elements:
        raw_href = (element.get("href") or "").strip()
        if not raw_href:
            continue
        href = _resolve(raw_href, document_base)
        if href is None:
            continue
        rels, _ = _relation_types(element.get("rel") or "")
        revs, _ = _relation_types(element.get("rev") or "")
        # Not an HTML attribute, but publishers copy it from their Link headers: a link
        # about another resource must not count as this page's (decision 0065).
        raw_anchor = _optional(element.get("anchor"))
        attributes: dict[str, Any] = {
            "type": _media_type(element.get("type") or ""),
            "profile": _optional(element.get("profile")),
            "anchor": _resolve(raw_anchor, document_base) if raw_anchor else None,
            "found_in": "html",
            "title": _optional(element.get("title")),
            "hreflang": _optional(element.get("hreflang")),
            "scheme": _optional(element.get("scheme")),
        }
        links.extend(TypedLink(href=href, rel=rel, **attributes) for rel in rels)
        links.extend(TypedLink(href=href, rel=rev, reverse=True, **attributes) for rev in revs)
    return links


def _html_meta(elements: list[Any]) -> list[MetaTag]:
    tags: list[MetaTag] = []
    for element in elements:
        content = element.get("content")
        if content is None:
            continue
        names: list[str] = []
        for attribute in ("name", "property"):
            name = (element.get(attribute) or "").strip().lower()
            if name and name not in names:
                names.append(name)
        scheme = _optional(element.get("scheme"))
        lang = _language(element)
        tags.extend(MetaTag(name=name, content=content, scheme=scheme, lang=lang) for name in names)
    return tags


def parse_html_head(body: bytes, base: str) -> HtmlHead:
    """Read the typed links and meta tags of an HTML page.

    ``base`` is the page URL. The first ``<base href>`` (resolved against ``base``) becomes the
    document base that link targets resolve against. Every ``<link>`` with ``href`` gives one
    link per ``rel`` value and one ``reverse=True`` link per ``rev`` value, ``found_in="html"``,
    no anchor. Every ``<meta>`` with ``content`` and ``name`` and/or ``property`` gives a
    :class:`MetaTag` per distinct name. The first :data:`MAX_HTML_ELEMENTS` ``<link>`` and
    ``<meta>`` elements are read, and a note says how many more there were. A page lxml cannot
    parse gives an empty :class:`HtmlHead` (with ``base`` the page URL). Never raises; never
    fetches.
    """
    root = _html_root(body)
    if root is None:
        return HtmlHead(links=(), meta=(), base=base)
    document_base = base
    for element in root.iter("base"):
        raw = element.get("href")
        if raw is None:
            continue
        # HTML: the first <base> with an href sets the document base URL.
        document_base = _resolve(raw, base) or base
        break
    notes: list[str] = []
    links = _html_links(_first(root, "link", notes), document_base)
    meta = _html_meta(_first(root, "meta", notes))
    return HtmlHead(links=tuple(links), meta=tuple(meta), base=document_base, notes=tuple(notes))
