"""A fast path for JSON-LD expansion and CDIF compaction, with pyld as the fallback.

For the subset of JSON-LD that dataset publishers use, expansion and compaction are one walk
each. The fast path **declines** (returns ``None``) as soon as it meets anything outside that
subset, and the normaliser runs pyld instead, so the result is the same either way. Entry
points: :func:`expand_schema_http`, :func:`compact_iri`, :func:`compact_value`, :func:`expand`,
:func:`compact`. Processed contexts live on a :class:`ProcessedContexts`, one per way of serving
context URLs (a :class:`~cdif_harvester.domain.records.contexts.JsonLdContexts` owns one and
empties it on every registration); IRIs compacted with the shipped CDIF context are memoised for
the process.

See docs/decisions/0026-fast-jsonld-path.md for the subset, the caches and the tests of agreement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from cdif_harvester.domain.records import jsonld_loader

__all__ = [
    "Declined",
    "Expansion",
    "ProcessedContexts",
    "compact",
    "compact_iri",
    "compact_value",
    "decline_reason",
    "expand",
    "expand_schema_http",
]

# pyld's _is_absolute_iri, verbatim (re.match: "$" also matches before a final newline).
_ABSOLUTE_IRI = re.compile(r"^([A-Za-z][A-Za-z0-9+-.]*|_):[^\s]*$")
# pyld's KEYWORD_PATTERN: such keys are dropped, such values refused.
_KEYWORD_FORM = re.compile(r"^@[a-zA-Z]+$")
# The keywords pyld knows (jsonld.KEYWORDS).
_KEYWORDS = frozenset(
    {
        "@base", "@container", "@context", "@default", "@direction", "@embed", "@explicit",
        "@first", "@graph", "@id", "@import", "@included", "@index", "@json", "@language",
        "@list", "@nest", "@none", "@omitDefault", "@propagate", "@protected", "@preserve",
        "@requireAll", "@reverse", "@set", "@type", "@value", "@version", "@vocab",
    }
)  # fmt: skip
# A simple term definition whose IRI ends in one of these may be used as a prefix (JSON-LD 1.1).
_GEN_DELIMS = frozenset(":/?#[]@")
_VOCAB_FORM = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S*\Z")
# pyld's context resolver fetches at most this many context URLs in one go (MAX_CONTEXT_URLS).
_MAX_CONTEXT_URLS = 10

_SCHEMA_HTTPS = "https://schema.org/"
_SCHEMA_HTTP = "http://schema.org/"

# JSON scalars other than null, which expand to {"@value": ...} (exact types: fast to test).
_SCALARS = frozenset({str, int, float, bool})
_UNSEEN = "\x00not yet expanded"  # a marker no key expands to (it is not an absolute IRI)

# Bounds of the caches: a full one is emptied and fills again with what is in use now.
_MEMO_LIMIT = 8192  # entries per memo (keys, types, compacted IRIs)
_CHILD_LIMIT = 1024  # processed child contexts kept per context


def _remember(memo: dict[Any, Any], key: Any, value: Any, limit: int = _MEMO_LIMIT) -> None:
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value


class Declined(Exception):
    """The input uses something the fast path does not implement; pyld must handle it.

    Raised by the compaction primitives (:func:`compact_iri`, :func:`compact_value`); the
    whole-document functions catch it and return None instead.
    """


def _is_absolute(iri: str) -> bool:
    return _ABSOLUTE_IRI.match(iri) is not None


# --- active contexts ------------------------------------------------------------------------


# Serves a context URL: its document (only read, never altered), or None when not served.
Served = Callable[[str], dict[str, Any] | None]


class _Context:
    """A processed context of the supported subset: terms, prefixes and ``@vocab``; ``served``
    is how its child contexts load context URLs (the root's, passed down)."""

    __slots__ = ("children", "keys", "prefixes", "served", "terms", "types", "vocab")

    def __init__(
        self, terms: dict[str, str], prefixes: dict[str, str], vocab: str | None, served: Served
    ):
        self.terms = terms  # term -> absolute IRI, or the keyword "@id" / "@type"
        self.prefixes = prefixes  # the terms that may be used as prefixes -> their IRI
        self.vocab = vocab
        self.served = served
        self.keys: dict[str, str | None] = {}  # property key -> expanded IRI (None: dropped)
        self.types: dict[str, str] = {}  # @type value -> IRI, where no base is involved
        self.children: dict[Any, _Context | str] = {}  # local context -> processed or why not

    def child(self, local: Any) -> _Context:
        """The context that ``local`` (a node's ``@context`` value) makes of this one."""
        entries = local if isinstance(local, list) else [local]
        if sum(isinstance(entry, str) for entry in entries) > _MAX_CONTEXT_URLS:
            raise Declined("more context URLs than pyld fetches at once")
        context = self
        for entry in entries:
            if isinstance(entry, str):
                key = "url " + entry
            elif isinstance(entry, dict):
                key = _context_key(entry)
            else:
                raise Declined(f"context entry of type {type(entry).__name__}")
            found = context.children.get(key)
            if found is None:
                try:
                    found = _process_entry(context, entry)
                except Declined as exc:
                    found = str(exc)
                _remember(context.children, key, found, _CHILD_LIMIT)
            if isinstance(found, str):
                raise Declined(found)
            context = found
        return context


def _context_key(entry: dict[str, Any]) -> Any:
    """A cache key for an inline context object: its entries when all are strings (the common
    case, cheap to sort), else its canonical JSON text."""
    if all(type(value) is str for value in entry.values()):
        return tuple(sorted(entry.items()))
    try:
        return json.dumps(entry, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise Declined("context object that is not JSON") from exc


def _resolve_iri(iri: str, base: str | None) -> Any:
    """pyld's resolution of ``iri`` against ``base`` (raises ValueError as pyld does).

    pyld is imported here, on first use, not with this module: the composition root builds the
    processed contexts in every handler, most of which never process JSON-LD (a cold start of
    the intake API's does not load pyld)."""
    from pyld.iri_resolver import resolve  # noqa: PLC0415 - already loaded after the first call

    return resolve(iri, base)


def _process_entry(parent: _Context, entry: Any) -> _Context:
    if isinstance(entry, str):
        # pyld resolves the URL before loading it; only a URL that resolution leaves as it is
        # is certain to name the same document.
        try:
            resolved = _resolve_iri(entry, None)
        except ValueError as exc:
            raise Declined(f"context URL {entry!r} is not absolute") from exc
        document = parent.served(entry) if resolved == entry else None
        if document is None:
            raise Declined(f"remote context {entry} is not served")
        inner = document.get("@context")
        if not isinstance(inner, dict):
            raise Declined(f"context {entry} is not a single context object")
        return _process_object(parent, inner)
    return _process_object(parent, entry)


def _process_object(parent: _Context, local: dict[str, Any]) -> _Context:
    """pyld's _process_context for one context object of the supported subset."""
    for key in local:
        if key.startswith("@") and key not in ("@vocab", "@version"):
            raise Declined(f"context keyword {key}")
    if "@version" in local:
        version = local["@version"]
        if not (isinstance(version, float) and version == 1.1):
            raise Declined("@version other than 1.1")
    vocab = parent.vocab
    if "@vocab" in local:
        value = local["@vocab"]
        if not isinstance(value, str) or not _VOCAB_FORM.match(value):
            raise Declined("@vocab that is not an absolute IRI")
        vocab = value  # _expand_iri returns such a value unchanged (suffix starts with //)
    builder = _TermBuilder(parent, local, vocab)
    for term in local:
        if not term.startswith("@"):
            builder.define(term)
    return _Context(builder.terms, builder.prefixes, vocab, parent.served)


class _TermBuilder:
    """pyld's _create_term_definition (and the _expand_iri it calls) for simple terms."""

    __slots__ = ("defined", "local", "prefixes", "terms", "vocab")

    def __init__(self, parent: _Context, local: dict[str, Any], vocab: str | None):
        self.terms = dict(parent.terms)
        self.prefixes = dict(parent.prefixes)
        self.local = local
        self.vocab = vocab
        self.defined: dict[str, bool] = {}

    def expand_iri(self, value: str) -> str | None:
        """_expand_iri(vocab=True, local_ctx, defined), no base: None when relative."""
        if value in self.local and self.defined.get(value) is not True:
            self.define(value)
        if value in self.terms:
            return self.terms[value]
        colon = value.find(":")
        if colon > 0:
            prefix, suffix = value[:colon], value[colon + 1 :]
            if prefix == "_" or suffix.startswith("//"):
                return value
            if prefix in self.local and not self.defined.get(prefix):
                self.define(prefix)
            if prefix in self.prefixes:
                return self.prefixes[prefix] + suffix
            if _is_absolute(value):
                return value
        if self.vocab is not None:
            return self.vocab + value
        return None  # pyld refuses a relative IRI here ("invalid IRI mapping")

    def define(self, term: str) -> None:
        """Define ``term`` from the local context (on demand, cycles declined)."""
        if term in self.defined:
            if self.defined[term]:
                return
            raise Declined(f"cyclic definition of {term}")
        self.defined[term] = False
        if not term or term.startswith("@") or ":" in term or "/" in term:
            raise Declined(f"term {term!r}")
        value = self.local[term]
        self.terms.pop(term, None)
        self.prefixes.pop(term, None)
        simple = isinstance(value, str)
        if isinstance(value, str):
            source = value
        elif isinstance(value, dict) and set(value) == {"@id"} and isinstance(value["@id"], str):
            source = value["@id"]
        else:
            raise Declined(f"term definition of {term} beyond @id")
        iri = self._target(term, source)
        self.terms[term] = iri
        if simple and iri[-1] in _GEN_DELIMS:
            self.prefixes[term] = iri
        self.defined[term] = True

    def _target(self, term: str, source: str) -> str:
        if source == term:
            raise Declined(f"term {term} defined as itself")
        if source.startswith("@"):
            if source not in ("@id", "@type"):
                raise Declined(f"term {term} aliases {source}")
            return source
        iri = self.expand_iri(source)
        if iri is None or iri.startswith("@") or not _is_absolute(iri):
            raise Declined(f"term {term} does not map to an absolute IRI")
        if iri.startswith("_:") or iri.endswith("\n"):
            raise Declined(f"term {term} maps to a blank node or an IRI ending in a newline")
        return iri


class ProcessedContexts:
    """The fast path's processed contexts for one way of serving context URLs.

    ``served`` gives the document served at a context URL (None when not served); everything
    processed here was read through it. Two root contexts (empty, and our schema.org context for
    documents without ``@context``) hold every processed context under them; :meth:`clear`
    forgets them all, which whoever changes what ``served`` answers must call.
    """

    __slots__ = ("_roots", "_served")

    def __init__(self, served: Served) -> None:
        self._served = served
        self._roots: dict[str, _Context] = {}

    def root(self, default_context: bool) -> _Context:
        """The root context: our schema.org context with ``default_context``, else empty."""
        name = "schema.org" if default_context else "empty"
        root = self._roots.get(name)
        if root is None:
            root = _Context({}, {}, None, self._served)
            if default_context:
                root = root.child(jsonld_loader.schema_org_context())
            self._roots[name] = root
        return root

    def clear(self) -> None:
        """Forget every processed context (what a context URL serves has changed)."""
        self._roots.clear()


@cache
def _shipped() -> ProcessedContexts:
    # The shipped contexts alone never change: processing them is a pure cache, shared.
    return ProcessedContexts(jsonld_loader.served_document)


# --- expansion ------------------------------------------------------------------------------


class _Expander:
    """One expansion (pyld's _expand and _expand_object, for the supported subset).

    With ``schema_http``, every ``https://schema.org/`` IRI in a property, ``@type`` or ``@id``
    position comes out as ``http://schema.org/`` (what the normaliser does after expanding), and
    ``mapped`` tells whether any did.
    """

    __slots__ = ("base", "in_order", "mapped", "nodes", "raw", "schema_http")

    def __init__(self, base: str, schema_http: bool, raw: bool):
        self.base = base
        self.schema_http = schema_http
        self.raw = raw
        self.mapped = False
        # The expanded objects in the order their JSON objects were entered (a slot each, None
        # where the result is no node with an @id): the depth-first document order of the
        # result, as long as no entry of a node was filled from two keys and nothing holding
        # nodes was dropped (in_order says so).
        self.nodes: list[dict[str, Any] | None] = []
        self.in_order = True

    def http(self, iri: str) -> str:
        """``iri`` with the https schema.org namespace written as http, when asked for."""
        if self.schema_http and iri.startswith(_SCHEMA_HTTPS):
            self.mapped = True
            return _SCHEMA_HTTP + iri[len(_SCHEMA_HTTPS) :]
        return iri

    def merge_http(self, rval: dict[str, Any]) -> dict[str, Any]:
        """Rename a node's https schema.org properties; values of a name met twice are joined
        (in the order the normaliser's own mapping walk joins them)."""
        out: dict[str, Any] = {}
        for key, value in rval.items():
            name = self.http(key) if key[0] != "@" else key
            if name in out and isinstance(out[name], list):
                self.in_order = False
                out[name].extend(value)
            else:
                out[name] = value
        return out

    def key(self, ctx: _Context, key: str) -> str | None:
        """A property key's expanded IRI or keyword; None when pyld drops the key."""
        found = ctx.keys.get(key, "")
        if found != "":
            return found
        iri: str | None
        if key in _KEYWORDS:
            iri = key
        elif _KEYWORD_FORM.match(key):
            iri = None
        elif key in ctx.terms:
            iri = ctx.terms[key]
        else:
            iri = self._prefixed(ctx, key)
            if iri is None:
                iri = ctx.vocab + key if ctx.vocab is not None else key
        if iri is not None and not (iri in _KEYWORDS or _is_absolute(iri)):
            iri = None
        _remember(ctx.keys, key, iri)
        return iri

    @staticmethod
    def _prefixed(ctx: _Context, value: str) -> str | None:
        colon = value.find(":")
        if colon > 0:
            prefix, suffix = value[:colon], value[colon + 1 :]
            if prefix == "_" or suffix.startswith("//"):
                return value
            if prefix in ctx.prefixes:
                return ctx.prefixes[prefix] + suffix
            if _is_absolute(value):
                return value
        return None

    def node_id(self, ctx: _Context, value: Any) -> str:
        """An ``@id`` value (document-relative, no vocabulary)."""
        if not isinstance(value, str):
            raise Declined("@id that is not a string")
        if value.startswith("@"):
            raise Declined("@id that looks like a keyword")
        iri = self._prefixed(ctx, value)
        return self.http(iri if iri is not None else self._resolve(value))

    def type_iri(self, ctx: _Context, value: str) -> str:
        """A ``@type`` value (vocabulary-relative, then document-relative)."""
        found = ctx.types.get(value)
        if found is not None:
            return found
        if value.startswith("@"):
            raise Declined("@type value that is a keyword")
        iri = ctx.terms.get(value)
        if iri is None:
            iri = self._prefixed(ctx, value)
        if iri is None and ctx.vocab is not None:
            iri = ctx.vocab + value
        if iri is None:
            return self._resolve(value)  # depends on the base: not kept
        if iri.startswith("@"):
            raise Declined("@type value that is a keyword alias")
        _remember(ctx.types, value, iri)
        return iri

    def _resolve(self, value: str) -> str:
        try:
            return str(_resolve_iri(value, self.base))
        except ValueError as exc:  # pyld raises it too: let pyld say so
            raise Declined(f"unresolvable IRI {value!r}") from exc

    def element(self, ctx: _Context, element: Any, free_floating: bool, in_list: bool) -> Any:
        """pyld's _expand: ``free_floating`` when the active property is None or @graph."""
        if isinstance(element, list):
            out: list[Any] = []
            keep_scalars = in_list or not free_floating
            for item in element:
                if type(item) in _SCALARS:  # the common case, inlined
                    if keep_scalars:
                        out.append({"@value": item})
                    continue
                if in_list and isinstance(item, list):
                    raise Declined("list of lists")
                expanded = self.element(ctx, item, free_floating, in_list)
                if expanded is None:
                    continue
                if isinstance(expanded, list):
                    out.extend(expanded)
                else:
                    out.append(expanded)
            return out
        if isinstance(element, dict):
            return self.node(ctx, element, free_floating, in_list)
        if element is None or (free_floating and not in_list):
            return None
        return {"@value": element}

    def node(
        self, ctx: _Context, element: dict[str, Any], free_floating: bool, in_list: bool
    ) -> Any:
        """A JSON object: node, value object or list object; None when pyld drops it."""
        if "@context" in element:
            ctx = ctx.child(element["@context"])
        slot = len(self.nodes)
        self.nodes.append(None)
        rval: dict[str, Any] = {}
        type_was_array = False
        https_keys = False
        memo = ctx.keys
        for key in sorted(element):
            if key == "@context":
                continue
            prop = memo.get(key, _UNSEEN)
            if prop is _UNSEEN:
                prop = self.key(ctx, key)
            value = element[key]
            if prop is None:
                if self.raw and isinstance(value, dict | list):
                    # Not expanded, yet the normaliser's preparation walks it
                    raise Declined(f"dropped key {key!r} holds objects or arrays")
                continue
            if prop[0] == "@":
                if prop in rval and prop != "@type":
                    raise Declined(f"colliding keywords {prop}")
                if prop == "@type" and isinstance(value, list):
                    type_was_array = True
                self.keyword(ctx, prop, value, rval)
                continue
            if type(value) in _SCALARS:
                expanded: Any = {"@value": value}
            else:
                expanded = self.property_value(ctx, value)
                if expanded is None:
                    continue
            if self.schema_http and prop.startswith(_SCHEMA_HTTPS):
                https_keys = True
            existing = rval.get(prop)
            if existing is None:
                rval[prop] = expanded if isinstance(expanded, list) else [expanded]
                continue
            self.in_order = False
            if isinstance(expanded, list):
                existing.extend(expanded)
            else:
                existing.append(expanded)
        if "@value" in rval or "@list" in rval or "@language" in rval:
            return self.settle(
                self.finish(rval, type_was_array, free_floating, in_list), slot, https_keys
            )
        # A node object: finish() would only drop it when free-floating and empty or a bare
        # reference; settle() inlined
        if free_floating and not in_list and (not rval or (len(rval) == 1 and "@id" in rval)):
            return self.settle(None, slot, https_keys)
        if https_keys:
            rval = self.merge_http(rval)
        if len(rval) > 1 and isinstance(rval.get("@id"), str):
            self.nodes[slot] = rval
        return rval

    def settle(self, result: Any, slot: int, https_keys: bool) -> Any:
        """Last steps for a JSON object's expansion: https names, its place in ``nodes``."""
        if result is None:
            if len(self.nodes) > slot + 1:
                self.in_order = False  # dropped with what it held
            return None
        if https_keys:
            result = self.merge_http(result)
        if isinstance(result.get("@id"), str) and len(result) > 1 and "@value" not in result:
            self.nodes[slot] = result
        return result

    def keyword(self, ctx: _Context, prop: str, value: Any, rval: dict[str, Any]) -> None:
        """Add a keyword entry of a JSON object to its expansion ``rval``."""
        if prop == "@id":
            if self.raw and isinstance(value, str) and not value.strip():
                raise Declined("blank @id (the normaliser removes it)")
            rval["@id"] = self.node_id(ctx, value)
        elif prop == "@type":
            if isinstance(value, str):
                value = [value]
            elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise Declined("@type that is not a string or an array of strings")
            for item in value:
                rval.setdefault("@type", []).append(self.http(self.type_iri(ctx, item)))
        elif prop == "@value":
            if value is None or isinstance(value, dict | list):
                raise Declined("@value that is null, an object or an array")
            rval["@value"] = value
        elif prop == "@language":
            if value is None:
                return
            if not isinstance(value, str):
                raise Declined("@language that is not a string")
            rval["@language"] = value.lower()
        elif prop == "@graph":
            if not isinstance(value, dict | list):
                raise Declined("@graph that is not an object or an array")
            expanded = self.element(ctx, value, True, False)
            if expanded is not None:
                rval["@graph"] = expanded if isinstance(expanded, list) else [expanded]
        elif prop == "@list":
            if isinstance(value, list):
                rval["@list"] = self.element(ctx, value, False, True)
                return
            item = None if value is None else self.element(ctx, value, False, True)
            if item is None:
                raise Declined("@list of a value that expands to nothing")
            rval["@list"] = [item]
        else:
            raise Declined(f"keyword {prop}")

    @staticmethod
    def finish(
        rval: dict[str, Any], type_was_array: bool, free_floating: bool, in_list: bool
    ) -> Any:
        """pyld's checks at the end of _expand: value objects, lists, free-floating values."""
        count = len(rval)
        if "@value" in rval:
            if not set(rval) <= {"@value", "@type", "@language"}:
                raise Declined("value object with other entries")
            if "@type" in rval:
                if "@language" in rval or type_was_array or len(rval["@type"]) != 1:
                    raise Declined("value object with an odd @type")
                value_type = rval["@type"][0]
                if not _is_absolute(value_type) or value_type.startswith("_:"):
                    raise Declined("value object typed with a relative IRI or blank node")
                rval["@type"] = value_type
            elif "@language" in rval and not isinstance(rval["@value"], str):
                raise Declined("language-tagged value that is not a string")
        elif "@list" in rval:
            if count > 1:
                raise Declined("@list with other entries")
        elif "@language" in rval:
            if count > 1:
                raise Declined("@language on a node")
            return None
        if (
            not in_list
            and free_floating
            and (
                count == 0 or "@value" in rval or "@list" in rval or (count == 1 and "@id" in rval)
            )
        ):
            return None
        return rval

    def property_value(self, ctx: _Context, value: Any) -> Any:
        if isinstance(value, list):
            return self.element(ctx, value, False, False)
        if isinstance(value, dict):
            return self.node(ctx, value, False, False)
        if value is None:
            return None
        return {"@value": value}


@dataclass(frozen=True)
class Expansion:
    """The result of :func:`expand_schema_http`.

    ``nodes`` is the expanded document; ``mapped`` whether an https schema.org IRI was
    rewritten; ``identified`` the node objects of ``nodes`` that carry a string ``@id`` and
    more than that (not bare references, not value or list objects), in depth-first document
    order, each once, or None when the walk cannot vouch for that order (a node entry filled
    from two keys, a dropped object holding nodes, a top-level node with ``@graph``).
    """

    nodes: list[Any]
    mapped: bool
    identified: list[dict[str, Any]] | None


def _expand(  # noqa: PLR0913, PLR0917 - private: the public functions name each argument
    document: Any,
    base: str,
    default_context: bool,
    schema_http: bool,
    contexts: ProcessedContexts | None,
    raw: bool = False,
) -> Expansion:
    if not base:
        raise Declined("no base IRI")
    root = (contexts if contexts is not None else _shipped()).root(default_context)
    expander = _Expander(base, schema_http, raw)
    expanded = expander.element(root, document, True, False)
    if isinstance(expanded, dict) and len(expanded) == 1 and "@graph" in expanded:
        expanded = expanded["@graph"]
    if expanded is None:
        expanded = []
    elif not isinstance(expanded, list):
        expanded = [expanded]
    in_order = expander.in_order and not any(
        isinstance(node, dict) and "@graph" in node for node in expanded
    )
    identified = [node for node in expander.nodes if node is not None] if in_order else None
    return Expansion(expanded, expander.mapped, identified)


def expand(
    document: Any,
    *,
    base: str,
    default_context: bool = False,
    contexts: ProcessedContexts | None = None,
) -> list[Any] | None:
    """Expand ``document`` exactly as ``pyld.jsonld.expand`` would, or decline with None.

    ``base`` is the document's base IRI; ``default_context`` reads the document with our
    schema.org context first (pyld's ``expandContext``), for documents without ``@context``.
    ``contexts`` serves the context URLs (the shipped contexts alone when None). The document
    is not altered; the result shares only immutable scalars with it. Raises nothing: whatever
    the fast path does not implement (see the module docstring), including every input pyld
    would reject, makes it return None.
    """
    try:
        return _expand(document, base, default_context, False, contexts).nodes
    except (Declined, RecursionError):
        return None


def expand_schema_http(
    document: Any,
    *,
    base: str,
    default_context: bool = False,
    raw: bool = False,
    contexts: ProcessedContexts | None = None,
) -> Expansion | None:
    """:func:`expand`, with ``https://schema.org/`` IRIs written ``http://schema.org/``.

    The :class:`Expansion` is exactly what the normaliser's own mapping walk makes of pyld's
    expansion (properties, ``@type`` values of nodes and values, ``@id``; a property written
    both ways keeps one name, values joined), done in the same walk; or None when the fast
    path declines.

    ``raw`` is for a document the normaliser has not prepared (``normalisation._prepare``
    removes blank ``@id`` values, null and empty ``@context`` values and contexts the loader
    does not serve, noting each): the walk then also declines on blank ``@id`` values and on
    dropped keys holding objects or arrays (whose insides only the preparation walks); null
    contexts and contexts not served it declines anyway, and an empty context array changes
    nothing. ``contexts`` serves the context URLs (the shipped contexts alone when None).
    """
    try:
        return _expand(document, base, default_context, True, contexts, raw)
    except (Declined, RecursionError):
        return None


def decline_reason(
    document: Any,
    *,
    base: str,
    default_context: bool = False,
    contexts: ProcessedContexts | None = None,
) -> str | None:
    """Why :func:`expand` declines ``document`` (None when it does not): for diagnostics."""
    try:
        _expand(document, base, default_context, False, contexts)
    except Declined as exc:
        return str(exc)
    return None


# --- compaction with the CDIF context --------------------------------------------------------

# Compacted IRIs: for properties and types (vocab), and for @id values, per compaction context
# URL. A pure memo: compaction uses only the shipped CDIF contexts.
_COMPACTED_VOCAB: dict[str, dict[str, str]] = {}
_COMPACTED_ID: dict[str, dict[str, str]] = {}


@cache
def _cdif_prefixes(url: str = jsonld_loader.CDIF_CONTEXT_URL) -> tuple[tuple[str, str], ...]:
    """The CDIF context's (IRI, term) pairs; each is a prefix under JSON-LD 1.1 rules."""
    bindings = jsonld_loader.cdif_context(url)
    for term, iri in bindings.items():
        if ":" in term or "/" in term or term.startswith("@") or iri[-1:] not in _GEN_DELIMS:
            raise ValueError(f"CDIF context term {term} is not a plain prefix")
    return tuple((iri, term) for term, iri in bindings.items())


def compact_iri(iri: Any, *, vocab: bool, context: str = jsonld_loader.CDIF_CONTEXT_URL) -> str:
    """pyld's _compact_iri with a CDIF context (prefixes only, no @vocab, no base): the one
    at ``context``, a URL the loader serves (the CDIF 1.0 context by default).

    ``vocab`` for properties and ``@type`` values, not for ``@id`` values. Raises
    :class:`Declined` where pyld would pick a term or raise.
    """
    memo = (_COMPACTED_VOCAB if vocab else _COMPACTED_ID).setdefault(context, {})
    found = memo.get(iri)
    if found is not None:
        return found
    if not isinstance(iri, str):
        raise Declined("IRI that is not a string")
    prefixes = _cdif_prefixes(context)
    choice: str | None = None
    for prefix_iri, term in prefixes:
        if iri == prefix_iri:
            if vocab:
                raise Declined(f"IRI {iri} equals a prefix IRI (term selection)")
            continue
        if iri.startswith(prefix_iri):
            curie = f"{term}:{iri[len(prefix_iri) :]}"
            if choice is None or (len(curie), curie) < (len(choice), choice):
                choice = curie
    if choice is None:
        for _, term in prefixes:
            if iri.startswith(term + ":"):
                raise Declined(f"IRI {iri} could be confused with a compact IRI")
        choice = iri
    _remember(memo, iri, choice)
    return choice


def compact_value(item: dict[str, Any], context: str = jsonld_loader.CDIF_CONTEXT_URL) -> Any:
    """pyld's _compact_value for a value object (an expanded ``{"@value": ...}``) with the
    CDIF context at ``context``: the bare value, or the object with its ``@type`` compacted.
    Raises :class:`Declined` for ``@index``, ``@direction`` and JSON literals."""
    value = item["@value"]
    if isinstance(value, dict | list) or value is None:
        raise Declined("@value that is null, an object or an array")
    if len(item) == 1:
        return value
    if len(item) == 2 and isinstance(item.get("@type"), str):
        return {"@type": compact_iri(item["@type"], vocab=True, context=context), "@value": value}
    if len(item) == 2 and isinstance(item.get("@language"), str):
        return {"@language": item["@language"], "@value": value}
    raise Declined("value object with other entries")


def _compact_item(item: Any) -> Any:
    """One member of an expanded property's array (or of a @list)."""
    if not isinstance(item, dict):
        raise Declined("expanded value that is not an object")
    if "@value" in item:
        return compact_value(item)
    if "@list" in item:
        members = item["@list"]
        if len(item) != 1 or not isinstance(members, list):
            raise Declined("@list with other entries")
        compacted = []
        for member in members:
            if isinstance(member, dict) and "@list" in member:
                raise Declined("list of lists")
            compacted.append(_compact_item(member))
        return {"@list": compacted}
    if len(item) == 1 and "@id" in item:
        return {"@id": compact_iri(item["@id"], vocab=False)}
    return _compact_node(item)


def _compact_node(node: dict[str, Any]) -> dict[str, Any]:
    rval: dict[str, Any] = {}
    for key in sorted(node):
        value = node[key]
        if key == "@id":
            rval["@id"] = compact_iri(value, vocab=False)
        elif key == "@type":
            if not isinstance(value, list):
                raise Declined("@type that is not an array")
            types = [compact_iri(t, vocab=True) for t in value]
            rval["@type"] = types[0] if len(types) == 1 else types
        elif key.startswith("@"):
            raise Declined(f"keyword {key} in a node")
        else:
            if not isinstance(value, list):
                raise Declined("property value that is not an array")
            items = [_compact_item(item) for item in value]
            rval[compact_iri(key, vocab=True)] = items[0] if len(items) == 1 else items
    return rval


def compact(node: Any) -> dict[str, Any] | None:
    """Compact one expanded node with the CDIF context, or decline with None.

    The result is what ``pyld.jsonld.compact(node, CDIF_CONTEXT_URL, {"skipExpansion":
    True})`` returns (``"@context"`` first, naming the context's URL), built fresh: it shares
    only immutable scalars with ``node``.
    """
    if not isinstance(node, dict) or "@value" in node or "@list" in node:
        return None
    try:
        return {"@context": jsonld_loader.CDIF_CONTEXT_URL, **_compact_node(node)}
    except (Declined, RecursionError):
        return None
