"""An offline pyld document loader: our own contexts from package data, nothing else.

:func:`document_loader` serves ``schemaorg.jsonld`` (every spelling of the schema.org context,
without type coercion), ``cdif.jsonld`` (at :data:`CDIF_CONTEXT_URL`) and the contexts an
operator trusts once the extractor has fetched them (:func:`register_context`); every other URL
is refused without touching the network (:func:`is_served` tells beforehand).

See docs/decisions/0024-offline-jsonld-contexts.md and docs/decisions/0025-no-type-coercion.md.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from pyld import jsonld

__all__ = [
    "CDIF_CONTEXT_URL",
    "SCHEMA_ORG_CONTEXT_URLS",
    "cdif_context",
    "document_loader",
    "is_served",
    "register_context",
    "registry_version",
    "schema_org_context",
    "served_document",
]

CDIF_CONTEXT_URL = "urn:cdif-harvester:context:cdif-1.0"

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


def cdif_context() -> dict[str, Any]:
    """Return (a copy of) the ``@context`` object of our CDIF 1.0 compaction context.

    The context only binds prefixes to IRI strings (checked when it is read), so a shallow
    copy is a full one; every normalised record gets its own.
    """
    return dict(_cdif_context_bindings())


@cache
def _cdif_context_bindings() -> dict[str, str]:
    context = _load_package_context("cdif.jsonld")["@context"]
    if not all(isinstance(key, str) and isinstance(value, str) for key, value in context.items()):
        raise ValueError("package context cdif.jsonld binds something else than prefixes")
    return dict(context)


def _canonical(url: str) -> str:
    return url.strip()


# Trusted remote contexts handed over by the extractor stage: URL -> context document.
_REGISTERED: dict[str, dict[str, Any]] = {}
# Bumped by every registration, so that caches of processed contexts know to start again.
_REGISTRY_VERSION = [0]


def register_context(url: str, document: Any) -> None:
    """Serve ``document`` (a fetched, trusted context document) at ``url`` from now on.

    Raises ValueError when ``document`` is not a JSON-LD context document (an object with an
    ``@context`` object or array).
    """
    if not isinstance(document, dict) or not isinstance(document.get("@context"), dict | list):
        raise ValueError(f"{url} is not a JSON-LD context document (no @context object)")
    _REGISTERED[_canonical(url)] = copy.deepcopy(document)
    _REGISTRY_VERSION[0] += 1


def registry_version() -> int:
    """A number that changes whenever :func:`register_context` is called."""
    return _REGISTRY_VERSION[0]


def served_document(url: str) -> dict[str, Any] | None:
    """The context document :func:`document_loader` serves at ``url``, or None.

    Unlike the loader this returns our own copy, not a fresh one: callers must only read it
    (the fast JSON-LD path, which processes each context once per process).
    """
    key = _canonical(url)
    if key in SCHEMA_ORG_CONTEXT_URLS:
        return _load_package_context("schemaorg.jsonld")
    if key == CDIF_CONTEXT_URL:
        return _load_package_context("cdif.jsonld")
    return _REGISTERED.get(key)


def is_served(url: str) -> bool:
    """Whether :func:`document_loader` serves ``url`` (package data or a registered context)."""
    url = _canonical(url)
    return url in SCHEMA_ORG_CONTEXT_URLS or url == CDIF_CONTEXT_URL or url in _REGISTERED


def document_loader(url: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pyld ``documentLoader``: serve our shipped contexts, refuse everything else.

    Returns pyld's remote-document dict (``document`` is a fresh copy, so pyld may not alter
    our cached data). Raises :class:`pyld.jsonld.JsonLdError` (code ``loading document
    failed``) for any URL that is not one of ours; it never opens a connection.
    """
    del options  # pyld passes its options; nothing in them changes what we serve
    key = _canonical(url)
    if key in SCHEMA_ORG_CONTEXT_URLS:
        document = _load_package_context("schemaorg.jsonld")
    elif key == CDIF_CONTEXT_URL:
        document = _load_package_context("cdif.jsonld")
    elif key in _REGISTERED:
        document = _REGISTERED[key]
    else:
        raise jsonld.JsonLdError(
            f"remote context {url} not loaded: the harvester does not fetch remote JSON-LD "
            "documents (offline loader)",
            "jsonld.LoadDocumentError",
            {"url": url},
            code="loading document failed",
        )
    return {
        "contentType": "application/ld+json",
        "contextUrl": None,
        "documentUrl": key,
        "document": copy.deepcopy(document),
        "tag": "static",
    }
