"""The JSON-LD contexts one harvester serves, and what it has learnt about them.

A :class:`JsonLdContexts` serves the shipped contexts
(:mod:`cdif_harvester.domain.records.jsonld_loader`) plus the trusted remote ones the extractor
fetched and registered on it, remembers the trusted ones that could not be loaded (with why),
and holds what is processed from what it serves (the fast path's
:class:`~cdif_harvester.domain.records.jsonld_fast.ProcessedContexts` and pyld's resolved
contexts), emptied on every registration. The composition root builds one per process, on the
:class:`~cdif_harvester.wiring.Wiring`, and it is passed to ``normalise``, ``record_nquads`` and
``shacl_issues``; functions given none use :func:`shipped_contexts`, the shipped contexts alone,
refusing registrations (a pure cache). Nothing here does I/O.

See docs/decisions/0043-state-on-the-wiring.md and
docs/decisions/0024-offline-jsonld-contexts.md.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

from cdif_harvester.domain.records import jsonld_fast, jsonld_loader

__all__ = ["JsonLdContexts", "shipped_contexts"]

# Resolved contexts pyld keeps per instance; a full cache is emptied and fills again with what
# is in use (pyld's own process-wide cache holds 100).
_RESOLVED_LIMIT = 100


class _ResolvedContexts(dict[str, Any]):
    """pyld's shared cache of resolved contexts (it only calls ``get`` and ``[key] = ...``)."""

    def __setitem__(self, key: str, value: Any) -> None:
        if len(self) >= _RESOLVED_LIMIT and key not in self:
            self.clear()
        super().__setitem__(key, value)


class JsonLdContexts:
    """The context documents served to JSON-LD processing: the shipped ones, plus the trusted
    remote ones registered with :meth:`register`; and the trusted ones that failed, with why.

    Not locked: threads sharing one instance may at worst process a context twice.
    """

    def __init__(self) -> None:
        self._registered: dict[str, dict[str, Any]] = {}
        self._failures: dict[str, str] = {}
        self._resolved = _ResolvedContexts()
        self.processed = jsonld_fast.ProcessedContexts(self.served_document)

    def register(self, url: str, document: Any) -> None:
        """Serve ``document`` (a fetched, trusted context document) at ``url`` from now on.

        Everything processed from what was served before is forgotten. Raises ValueError when
        ``document`` is not a JSON-LD context document (an object with an ``@context`` object
        or array).
        """
        if not isinstance(document, dict) or not isinstance(document.get("@context"), dict | list):
            raise ValueError(f"{url} is not a JSON-LD context document (no @context object)")
        self._registered[jsonld_loader.canonical_url(url)] = copy.deepcopy(document)
        self.processed.clear()
        self._resolved.clear()

    def served_document(self, url: str) -> dict[str, Any] | None:
        """The context document served at ``url``, or None; our own copy: only read it."""
        shipped = jsonld_loader.served_document(url)
        if shipped is not None:
            return shipped
        return self._registered.get(jsonld_loader.canonical_url(url))

    def is_served(self, url: str) -> bool:
        """Whether ``url`` is served (a shipped or a registered context)."""
        return self.served_document(url) is not None

    def document_loader(self, url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """A pyld ``documentLoader`` serving what :meth:`served_document` serves.

        Returns pyld's remote-document dict (a fresh copy of the document). Raises
        :class:`pyld.jsonld.JsonLdError` (code ``loading document failed``) for a URL not
        served; it never opens a connection.
        """
        del options  # pyld passes its options; nothing in them changes what we serve
        document = self.served_document(url)
        if document is None:
            raise jsonld_loader.not_loaded(url)
        return jsonld_loader.remote_document(jsonld_loader.canonical_url(url), document)

    def pyld_options(self, **options: Any) -> dict[str, Any]:
        """``options`` for one pyld call, plus this instance's document loader and its cache of
        resolved contexts (a fresh resolver per call, as pyld makes itself)."""
        # (pyld is imported when a call needs it: most handlers never do; see jsonld_fast)
        from pyld.context_resolver import ContextResolver  # noqa: PLC0415

        return {
            **options,
            "documentLoader": self.document_loader,
            "contextResolver": ContextResolver(self._resolved, self.document_loader),
        }

    def failure(self, url: str) -> str | None:
        """Why the trusted context at ``url`` could not be loaded, if that was remembered."""
        return self._failures.get(url)

    def remember_failure(self, url: str, reason: str) -> None:
        """Remember that the trusted context at ``url`` cannot be loaded, and why."""
        self._failures[url] = reason


class _ShippedOnly(JsonLdContexts):
    """The shipped contexts alone: what :func:`shipped_contexts` shares. It refuses to learn
    anything, so what it serves and caches is a pure function of the shipped files."""

    def register(self, url: str, document: Any) -> None:
        """Refuse: raises RuntimeError (build a :class:`JsonLdContexts` to register on)."""
        raise RuntimeError(f"the shipped contexts take no registration ({url})")

    def remember_failure(self, url: str, reason: str) -> None:
        """Refuse: raises RuntimeError (build a :class:`JsonLdContexts` to remember on)."""
        raise RuntimeError(f"the shipped contexts remember no failure ({url})")


@cache
def shipped_contexts() -> JsonLdContexts:
    """The shared instance serving the shipped contexts alone (what callers that name no
    instance get). Its caches depend on nothing but the shipped files."""
    return _ShippedOnly()
