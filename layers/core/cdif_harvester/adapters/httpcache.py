"""Conditional requests: a :class:`~cdif_harvester.ports.Fetcher` that revalidates what it kept.

:class:`RevalidatingFetcher` wraps the safe fetcher like a private HTTP cache that only
revalidates (RFC 9111): answers with a validator are kept under ``cache/<source>/``, the next
request for them is conditional, and a ``304 Not Modified`` is handed on as the kept answer with
``revalidated=True``. Nothing is served from the store without asking the publisher. A request
that says ``Cache-Control: no-store`` (the resolver's, unless bodies are kept) passes untouched.

See docs/decisions/0014-conditional-requests.md and
docs/decisions/0080-bodies-kept-only-when-asked.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cdif_harvester.errors import StorageError
from cdif_harvester.keys import source_of
from cdif_harvester.model import FetchResponse
from cdif_harvester.ports import Fetcher, ObjectStore

__all__ = ["CACHE_PREFIX", "RevalidatingFetcher", "cache_keys"]

CACHE_PREFIX = "cache/"
_SAME_ANSWER = ("url", "status", "etag", "last_modified", "sha256")
_CONDITIONAL = frozenset({"if-none-match", "if-modified-since", "if-match", "if-range"})


def cache_keys(method: str, url: str, accept: str | None) -> tuple[str, str]:
    """Return the (meta, body) keys under which the answer to this request is kept."""
    digest = hashlib.sha256(f"{method}\n{accept or ''}\n{url}".encode()).hexdigest()[:32]
    stem = f"{CACHE_PREFIX}{source_of(url)}/{digest}"
    return f"{stem}.json", f"{stem}.body"


class RevalidatingFetcher:
    """A Fetcher that sends conditional requests for answers it kept (see the module docstring)."""

    def __init__(self, inner: Fetcher, store: ObjectStore) -> None:
        self.inner = inner
        self.store = store

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        """Fetch ``url``, conditionally when an answer is kept; a 304 returns the kept answer.

        With ``truncate`` (a read that may be cut at the cap, as robots.txt is read) the request
        is still conditional, so an unchanged robots.txt costs a 304; a body that came back cut
        is never kept, so a kept answer is always whole.
        """
        given = dict(headers or {})
        conditional = _CONDITIONAL & {name.lower() for name in given}
        if method not in ("GET", "HEAD") or conditional or _no_store(given):
            return self.inner.fetch(
                url, method=method, headers=headers, max_bytes=max_bytes, truncate=truncate
            )
        accept = next((v for k, v in given.items() if k.lower() == "accept"), None)
        meta_key, body_key = cache_keys(method, url, accept)
        kept = self._kept(meta_key, max_bytes)
        if kept is not None:
            if kept.get("etag"):
                given["If-None-Match"] = str(kept["etag"])
            if kept.get("last_modified"):
                given["If-Modified-Since"] = str(kept["last_modified"])
        response = self.inner.fetch(
            url, method=method, headers=given, max_bytes=max_bytes, truncate=truncate
        )
        if response.status == 304 and kept is not None:
            body = self._body(body_key, kept) if method == "GET" else b""
            if body is not None:
                return FetchResponse(
                    url=str(kept["url"]),
                    status=int(kept["status"]),
                    headers=tuple((str(k), str(v)) for k, v in kept["headers"]),
                    body=body,
                    redirects=response.redirects,
                    elapsed=response.elapsed,
                    revalidated=True,
                )
            # The kept body is gone: ask again without conditions.
            return self.inner.fetch(
                url, method=method, headers=headers, max_bytes=max_bytes, truncate=truncate
            )
        if response.status == 200 and not response.truncated:
            self._keep(meta_key, body_key, response, kept, with_body=method == "GET")
        return response

    def _kept(self, meta_key: str, max_bytes: int | None) -> dict[str, Any] | None:
        try:
            kept = json.loads(self.store.get(meta_key))
        except (KeyError, ValueError, StorageError):  # unreadable is a miss, not a failure
            return None
        if not isinstance(kept, dict):
            return None
        if max_bytes is not None and int(kept.get("length", 0)) > max_bytes:
            return None
        return kept

    def _body(self, body_key: str, kept: Mapping[str, Any]) -> bytes | None:
        try:
            body = self.store.get(body_key)
        except KeyError:
            return None
        if hashlib.sha256(body).hexdigest() != kept.get("sha256"):
            return None
        return body

    def _keep(
        self,
        meta_key: str,
        body_key: str,
        response: FetchResponse,
        kept: Mapping[str, Any] | None,
        *,
        with_body: bool,
    ) -> None:
        etag = response.header("etag")
        last_modified = response.header("last-modified")
        cache_control = (response.header("cache-control") or "").lower()
        if not (etag or last_modified) or "no-store" in cache_control:
            return
        digest = hashlib.sha256(response.body).hexdigest()
        meta = {
            "url": response.url,
            "status": response.status,
            "headers": [list(pair) for pair in response.headers],
            "etag": etag,
            "last_modified": last_modified,
            "sha256": digest,
            "length": len(response.body),
        }
        if kept is not None and all(kept.get(name) == meta[name] for name in _SAME_ANSWER):
            # The same answer again (a server that ignores conditions, or Date moved on):
            # write nothing.
            return
        if with_body and (kept is None or kept.get("sha256") != digest):
            self.store.put(body_key, response.body, content_type="application/octet-stream")
        self.store.put(
            meta_key, json.dumps(meta, sort_keys=True).encode(), content_type="application/json"
        )


def _no_store(headers: Mapping[str, str]) -> bool:
    """Whether the request says ``Cache-Control: no-store``: a cache must keep no part of it or
    of its answer (RFC 9111, 5.2.1.5); the caller keeps its own validators."""
    return any(
        name.lower() == "cache-control"
        and "no-store" in (part.strip().lower() for part in value.split(","))
        for name, value in headers.items()
    )
