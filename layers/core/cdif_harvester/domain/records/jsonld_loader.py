"""An offline pyld document loader: our own contexts from package data, nothing else.

:func:`document_loader` serves ``schemaorg.jsonld`` (every spelling of the schema.org context,
without type coercion), ``cdif.jsonld`` (at :data:`CDIF_CONTEXT_URL`) and ``cdif-1.1.jsonld`` (at
:data:`CDIF_11_CONTEXT_URL`, the prefixes CDIF 1.1 records use besides); every other URL is
refused without touching the network (:func:`is_served` tells beforehand). The functions here
serve the shipped contexts only and are pure (parsed contexts are cached for the process). The
trusted remote contexts the extractor fetched are served on top of these by a
:class:`~cdif_harvester.domain.records.contexts.JsonLdContexts`, never by a module global.

See docs/decisions/0024-offline-jsonld-contexts.md and docs/decisions/0025-no-type-coercion.md.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyld.jsonld import JsonLdError


__all__ = [
    "CDIF_11_CONTEXT_URL",
    "CDIF_CONTEXT_URL",
    "SCHEMA_ORG_CONTEXT_URLS",
    "canonical_url",
    "cdif_context",
    "document_loader",
    "is_served",
    "not_loaded",
    "remote_document",
    "schema_org_context",
    "served_document",
]

CDIF_CONTEXT_URL = "urn:cdif-harvester:context:cdif-1.0"
CDIF_11_CONTEXT_URL = "urn:cdif-harvester:context:cdif-1.1"
_CDIF_CONTEXT_FILES = {CDIF_CONTEXT_URL: "cdif.jsonld", CDIF_11_CONTEXT_URL: "cdif-1.1.jsonld"}

_SCHEMA_ORG_HOSTS = ("http://schema.org", "https://schema.org")
_SCHEMA_ORG_PATHS = ("", "/", "/docs/jsonldcontext.json", "/docs/jsonldcontext.jsonld")
SCHEMA_ORG_CONTEXT_URLS: frozenset[str] = frozenset(
    host + path for host in _SCHEMA_ORG_HOSTS for path in _SCHEMA_ORG_PATHS
) | frozenset(f"{host}/version/latest/schemaorg-current-https.jsonld" for host in _SCHEMA_ORG_HOSTS)


@cache
def _load_package_context(name: str) -> dict[str, Any]:
    """Read and parse one of our shipped contexts (once per process)."""
    entry = resources.files("cdif_harvester").joinpath("contexts").joinpath(name)
    text = entry.read_text(encoding="utf-8")
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("@context"), dict):
        raise ValueError(f"package context {name} is not a JSON-LD context document")
    return data


def schema_org_context() -> dict[str, Any]:
    """Return (a copy of) the ``@context`` object of our shipped schema.org context."""
    return copy.deepcopy(_load_package_context("schemaorg.jsonld")["@context"])


def cdif_context(url: str = CDIF_CONTEXT_URL) -> dict[str, Any]:
    """Return (a copy of) the ``@context`` object of our CDIF compaction context at ``url``
    (:data:`CDIF_CONTEXT_URL`, the 1.0 one, or :data:`CDIF_11_CONTEXT_URL`).

    The context only binds prefixes to IRI strings (checked when it is read), so a shallow
    copy is a full one; every normalised record gets its own.
    """
    return dict(_cdif_context_bindings(url))


@cache
def _cdif_context_bindings(url: str) -> dict[str, str]:
    name = _CDIF_CONTEXT_FILES[url]
    context = _load_package_context(name)["@context"]
    if not all(isinstance(key, str) and isinstance(value, str) for key, value in context.items()):
        raise ValueError(f"package context {name} binds something else than prefixes")
    return dict(context)


def canonical_url(url: str) -> str:
    """The form of a context URL under which it is served (surrounding blanks removed)."""
    return url.strip()


def served_document(url: str) -> dict[str, Any] | None:
    """The shipped context document :func:`document_loader` serves at ``url``, or None.

    Unlike the loader this returns our own copy, not a fresh one: callers must only read it
    (the fast JSON-LD path, which processes each context once).
    """
    key = canonical_url(url)
    if key in SCHEMA_ORG_CONTEXT_URLS:
        return _load_package_context("schemaorg.jsonld")
    if key in _CDIF_CONTEXT_FILES:
        return _load_package_context(_CDIF_CONTEXT_FILES[key])
    return None


def is_served(url: str) -> bool:
    """Whether :func:`document_loader` serves ``url`` (one of the shipped contexts)."""
    url = canonical_url(url)
    return url in SCHEMA_ORG_CONTEXT_URLS or url in _CDIF_CONTEXT_FILES


def document_loader(url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pyld ``documentLoader``: serve our shipped contexts, refuse everything else.

    Returns pyld's remote-document dict (``document`` is a fresh copy, so pyld may not alter
    our cached data). Raises :class:`pyld.jsonld.JsonLdError` (code ``loading document
    failed``) for any URL that is not one of ours; it never opens a connection.
    """
    del options  # pyld passes its options; nothing in them changes what we serve
    document = served_document(url)
    if document is None:
        raise not_loaded(url)
    return remote_document(canonical_url(url), document)


def not_loaded(url: str) -> JsonLdError:
    """The error a loader raises for a context it does not serve (it never fetches one)."""
    # (pyld is imported where it is used: a handler that never processes JSON-LD, the intake
    # API's for one, does not load it on a cold start)
    from pyld.jsonld import JsonLdError  # noqa: PLC0415

    return JsonLdError(
        f"remote context {url} not loaded: the harvester does not fetch remote JSON-LD "
        "documents (offline loader)",
        "jsonld.LoadDocumentError",
        {"url": url},
        code="loading document failed",
    )


def remote_document(key: str, document: dict[str, Any]) -> dict[str, Any]:
    """pyld's remote-document dict for ``document`` served at ``key``, with a fresh copy of it
    (pyld may not alter the copy kept); tagged ``static``, so pyld keeps its processed form."""
    return {
        "contentType": "application/ld+json",
        "contextUrl": None,
        "documentUrl": key,
        "document": copy.deepcopy(document),
        "tag": "static",
    }
