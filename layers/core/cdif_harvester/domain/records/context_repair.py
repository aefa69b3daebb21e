"""Repair the inline ``@context`` objects of a published document that JSON-LD processing refuses.

:func:`trim_context` trims the white space around the IRIs of a context object (``@vocab``,
``@base``, a term's IRI, its ``@id``, ``@type`` or ``@reverse``): the one unambiguous repair.
:func:`drop_refused_terms` finds, in one pass over every inline context object, each term
definition pyld refuses (or whose IRI CDIF compaction would confuse with one of its prefixes)
and drops it; :func:`drop_confused_iris` drops, from the expanded document, the properties and
types written with a CDIF prefix the context did not define. Each says what it did in notes (at
most :data:`MAX_CONTEXT_NOTES` of each kind). Pure: contexts are served by a
:class:`~cdif_harvester.domain.records.contexts.JsonLdContexts`.

See docs/decisions/0061-json-ld-glitches-and-several-datasets.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import islice
from typing import Any

from pyld import jsonld

from cdif_harvester.domain.records import jsonld_loader
from cdif_harvester.domain.records.contexts import JsonLdContexts

__all__ = ["MAX_CONTEXT_NOTES", "drop_confused_iris", "drop_refused_terms", "trim_context"]

# Notes listed per kind and document; the rest are counted. A context of thousands of bad terms
# must not make a record's notes thousands long.
MAX_CONTEXT_NOTES = 20

# The keys of a term definition whose values are IRIs (or keywords).
_IRI_KEYS = ("@id", "@type", "@reverse")
# The context keywords pyld handles before the terms (its _process_context marks them defined).
_CONTEXT_KEYWORDS = (
    "@version",
    "@import",
    "@base",
    "@vocab",
    "@language",
    "@direction",
    "@propagate",
    "@protected",
)


class _Notes:
    """Notes of one kind, the first :data:`MAX_CONTEXT_NOTES` listed and the rest counted."""

    def __init__(self, notes: list[str], what: str) -> None:
        self._notes = notes
        self._what = what
        self._count = 0

    def add(self, text: str) -> None:
        self._count += 1
        if self._count <= MAX_CONTEXT_NOTES:
            self._notes.append(text)

    def close(self) -> None:
        if self._count > MAX_CONTEXT_NOTES:
            self._notes.append(f"{self._count - MAX_CONTEXT_NOTES} more {self._what} (not listed)")

    @property
    def count(self) -> int:
        return self._count


def _trimmed(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _trim_entries(context: dict[str, Any], note: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in context.items():
        fixed = value
        if key in ("@vocab", "@base") or (not key.startswith("@") and isinstance(value, str)):
            fixed = _trimmed(value)
            if fixed != value:
                note(f"context {key} {json.dumps(value)}: white space around the IRI trimmed")
        elif not key.startswith("@") and isinstance(value, dict):
            fixed = {k: _trimmed(v) if k in _IRI_KEYS else v for k, v in value.items()}
            if fixed != value:
                note(f"context term {key}: white space around its IRIs trimmed")
        out[key] = fixed
    return out


def trim_context(context: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The context object with the white space around its IRIs trimmed (a new dict when any
    was, else ``context`` itself), each trim noted in ``notes`` (the first
    :data:`MAX_CONTEXT_NOTES` of them; the rest counted)."""
    if not any(
        (isinstance(v, str) and v != v.strip())
        or (isinstance(v, dict) and any(_trimmed(v.get(k)) != v.get(k) for k in _IRI_KEYS))
        for k, v in context.items()
        if k in ("@vocab", "@base") or not k.startswith("@")
    ):
        return context
    trimmed = _Notes(notes, "context IRIs trimmed")
    out = _trim_entries(context, trimmed.add)
    trimmed.close()
    return out


def _confusing_prefixes() -> tuple[frozenset[str], tuple[str, ...]]:
    bindings = jsonld_loader.cdif_context()
    return frozenset(bindings), tuple(bindings.values())


def _confused(iri: Any) -> bool:
    """Whether CDIF compaction refuses ``iri`` ("Absolute IRI confused with prefix"): it is
    written ``<a CDIF prefix>:...`` but is under none of the CDIF prefix IRIs."""
    if not isinstance(iri, str) or iri.startswith("@") or ":" not in iri:
        return False
    terms, iris = _confusing_prefixes()
    if iri.split(":", 1)[0] not in terms:
        return False
    return not any(iri.startswith(prefix) and iri != prefix for prefix in iris)


def _reason(exc: jsonld.JsonLdError) -> str:
    code = getattr(exc, "code", None) or exc.type
    # The message alone: str(exc) writes out the details, the whole context among them (with
    # thousands of refused terms, that made the pass quadratic).
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else code
    return f"{code}: {message}"


def _forget_since(defined: dict[str, bool], size: int) -> None:
    """Forget the entries ``defined`` gained past its first ``size`` (a refused definition
    leaves the terms it was defining half-defined; they are tried again on their own)."""
    for name in list(islice(reversed(defined), len(defined) - size)):
        del defined[name]


class _Checker:
    """One pass of pyld's own term definition over a context object, term by term."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.processor = jsonld.JsonLdProcessor()
        self.options = options

    def active(self, chain: list[Any]) -> dict[str, Any] | None:
        """The active context the contexts of ``chain`` make, or None when pyld refuses it."""
        initial: dict[str, Any] = self.processor._get_initial_context(self.options)  # noqa: SLF001
        if not chain:
            return initial
        try:
            active: dict[str, Any] = self.processor.process_context(initial, chain, self.options)
        except (jsonld.JsonLdError, RecursionError):
            return None
        return active

    def keywords(self, active: dict[str, Any], local: dict[str, Any]) -> dict[str, Any] | None:
        """The active context after ``local``'s keyword entries, or None when pyld refuses them."""
        entries = {k: v for k, v in local.items() if k in _CONTEXT_KEYWORDS}
        try:
            found: dict[str, Any] = self.processor.process_context(active, entries, self.options)
        except (jsonld.JsonLdError, RecursionError):
            return None
        return found

    def clone(self, active: dict[str, Any]) -> dict[str, Any]:
        """A copy of ``active`` to define terms on, as pyld's context processing makes one (its
        clone leaves out the processing mode, which pyld then sets again: without it a JSON-LD
        1.1 term definition, a scoped ``@context`` say, would be refused)."""
        clone: dict[str, Any] = self.processor._clone_active_context(active)  # noqa: SLF001
        clone["processingMode"] = active.get("processingMode", "json-ld-1.1")
        return clone

    def define(
        self, active: dict[str, Any], local: dict[str, Any], term: str, defined: dict[str, bool]
    ) -> str | None:
        """Define ``term`` of ``local`` on ``active``: None when pyld accepts it, else why not."""
        size = len(defined)
        try:
            self.processor._create_term_definition(  # noqa: SLF001
                active, local, term, defined, self.options
            )
        except jsonld.JsonLdError as exc:
            _forget_since(defined, size)
            return _reason(exc)
        except RecursionError:
            _forget_since(defined, size)
            return "term definition nested too deeply"
        value = local.get(term)
        if isinstance(value, dict) and "@context" in value:
            # pyld's context processing checks a scoped context right after its term's
            # definition, on the context being built, and refuses the whole context if it fails.
            try:
                self.processor._process_context(  # noqa: SLF001
                    active, value["@context"], self.options, override_protected=True
                )
            except Exception as exc:  # noqa: BLE001 - whatever pyld's own check catches
                inner = _reason(exc) if isinstance(exc, jsonld.JsonLdError) else repr(exc)
                return f"invalid scoped context: {inner}"
        mapping = active["mappings"].get(term)
        if mapping is not None and _confused(mapping.get("@id")):
            return (
                f"IRI confused with prefix: {mapping['@id']} is written with a CDIF prefix "
                "but the context does not define it"
            )
        return None

    def refused(self, active: dict[str, Any], local: dict[str, Any]) -> dict[str, str]:
        """The terms of ``local`` that pyld refuses on ``active``, with why (each term tried
        once or twice: linear in the number of terms)."""
        refused: dict[str, str] = {}
        start = self.keywords(active, local)
        if start is None:
            # A keyword entry pyld refuses (an "@vocab" that is no string, say): each is tried
            # on its own, and those refused are dropped too.
            for key in (key for key in local if key in _CONTEXT_KEYWORDS):
                if self.keywords(active, {key: local[key]}) is None:
                    refused[key] = f"pyld refuses its value {json.dumps(local[key])}"
            local = {k: v for k, v in local.items() if k not in refused}
            start = self.keywords(active, local)
            if start is None:
                return refused
        terms = [key for key in local if key not in _CONTEXT_KEYWORDS]
        blamed: dict[str, str] = {}
        defined: dict[str, bool] = {key: True for key in local if key in _CONTEXT_KEYWORDS}
        defined["_uuid"] = True
        first = self.clone(start)
        for term in terms:
            if defined.get(term) is True:
                continue
            why = self.define(first, local, term, defined)
            if why is not None:
                blamed[term] = why
        if not blamed:
            return refused
        # A term is blamed for a refused term its IRI uses as a prefix: tried again with the
        # refused ones out of the context, it is kept when pyld then accepts it.
        kept = {k: v for k, v in local.items() if k not in blamed}
        second = self.clone(start)
        defined = {key: True for key in local if key in _CONTEXT_KEYWORDS}
        defined["_uuid"] = True
        for term in kept:
            if term not in _CONTEXT_KEYWORDS and defined.get(term) is not True:
                self.define(second, kept, term, defined)
        for term, why in blamed.items():
            kept[term] = local[term]
            if self.define(second, kept, term, defined) is not None:
                del kept[term]
                defined.pop(term, None)
                refused[term] = why
        return refused


def drop_refused_terms(
    document: Any, *, base: str, default_context: bool, contexts: JsonLdContexts, notes: list[str]
) -> Any | None:
    """``document`` with every term definition pyld refuses dropped from its inline contexts.

    Each inline context object is checked against the contexts in effect where it stands (its
    ancestors', the entries before it); each of its terms is defined once with pyld's own term
    definition (twice when it was refused), so the work is linear in the number of terms. Also
    dropped: a term whose IRI CDIF compaction would confuse with a CDIF prefix. Each drop is
    noted. Returns None when nothing was dropped (the document is then as it was).
    """
    # (pyld's expand sets JSON-LD 1.1 among its defaults; its context processing does not)
    checker = _Checker(contexts.pyld_options(base=base, processingMode="json-ld-1.1"))
    dropped = _Notes(notes, "refused context terms dropped")
    root: list[Any] = [jsonld_loader.schema_org_context()] if default_context else []

    def repair(entries: list[Any], chain: list[Any]) -> list[Any]:
        out: list[Any] = []
        for entry in entries:
            if isinstance(entry, dict) and entry:
                active = checker.active([*chain, *out])
                refused = checker.refused(active, entry) if active is not None else {}
                for term, why in refused.items():
                    kind = "entry" if term in _CONTEXT_KEYWORDS else "term"
                    dropped.add(f"context {kind} {json.dumps(term)} dropped: {why}")
                if refused:
                    out.append({k: v for k, v in entry.items() if k not in refused})
                    continue
            out.append(entry)
        return out

    def walk(item: Any, chain: list[Any]) -> Any:
        if isinstance(item, list):
            return [
                walk(child, chain) if isinstance(child, dict | list) else child for child in item
            ]
        if not isinstance(item, dict):
            return item
        inner = chain
        context: Any = None
        if "@context" in item:
            context = item["@context"]
            entries = repair(context if isinstance(context, list) else [context], chain)
            context = entries if isinstance(context, list) else entries[0]
            inner = [*chain, *entries]
        out: dict[str, Any] = {}
        for key, child in item.items():  # in the document's order
            if key == "@context":
                out[key] = context
            elif key == "@value" or not isinstance(child, dict | list):
                out[key] = child
            else:
                out[key] = walk(child, inner)
        return out

    repaired = walk(document, root)
    dropped.close()
    return repaired if dropped.count else None


def drop_confused_iris(nodes: list[Any], notes: list[str]) -> list[Any] | None:
    """Expanded ``nodes`` without what CDIF compaction would confuse with a CDIF prefix.

    A property, a ``@type`` or a value's ``@type`` written ``schema:...`` where the context
    defines no ``schema`` prefix expands to that text unchanged, which compaction refuses
    ("Absolute IRI confused with prefix"); each is dropped and noted (a node ``@id`` so written
    is dropped too: the node is then read as unidentified). Returns None when nothing was.
    """
    dropped = _Notes(notes, "IRIs confused with a CDIF prefix dropped")

    def why(iri: str) -> str:
        return f"written with the prefix {iri.split(':', 1)[0]}, which the context does not define"

    def walk(item: Any) -> Any:
        if isinstance(item, list):
            return [walk(child) for child in item]
        if not isinstance(item, dict):
            return item
        if "@value" in item:
            if _confused(item.get("@type")):
                dropped.add(f"value type {item['@type']} dropped: {why(item['@type'])}")
                return {k: v for k, v in item.items() if k != "@type"}
            return item
        out: dict[str, Any] = {}
        for key, value in item.items():
            if key == "@type" and isinstance(value, list):
                for iri in (t for t in value if _confused(t)):
                    dropped.add(f"type {iri} dropped: {why(iri)}")
                out[key] = [t for t in value if not _confused(t)]
            elif key == "@id" and _confused(value):
                dropped.add(f"@id {value} dropped: {why(value)}")
            elif not key.startswith("@") and _confused(key):
                dropped.add(f"property {key} dropped: {why(key)}")
            else:
                out[key] = walk(value)
        return out

    cleaned = walk(nodes)
    dropped.close()
    return cleaned if dropped.count else None
