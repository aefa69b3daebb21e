"""Stage 3: the URL resolver fetches a URL and finds where its metadata is.

Main path (CDIF discoverability, "Find metadata"): the URL returns JSON-LD itself
(pattern ``content-type``) or an HTML landing page with embedded
``<script type="application/ld+json">`` holding a Dataset (pattern ``embedded-script``). The
document is kept as fetched, with its provenance, and handed on by key. Issue 4 adds the other
patterns (Link headers, HTML links, linksets, Signmaps, content negotiation, legacy links).
"""

from __future__ import annotations

import json

from cdif_harvester.contracts import DOCUMENT_QUEUE, DocumentJob, DocumentRef, UrlJob, encode
from cdif_harvester.domain.extraction import (
    ExtractionError,
    find_jsonld_scripts,
    has_dataset,
    parse_jsonld,
)
from cdif_harvester.errors import FetchFailed, PermanentError
from cdif_harvester.keys import raw_key, raw_meta_key
from cdif_harvester.model import (
    HTML_MEDIA_TYPES,
    JSONLD_MEDIA_TYPES,
    FetchResponse,
    Outcome,
    UrlOutcome,
)
from cdif_harvester.stages import Ports, record_outcome

__all__ = ["resolve_url"]


class HttpStatusError(PermanentError):
    """The URL answered with a client error (4xx) or an unexpected status."""

    reason = "http-status"


def resolve_url(ports: Ports, job: UrlJob) -> DocumentJob | UrlOutcome:
    """Fetch ``job.url``, decide how its metadata is published, and hand the document on.

    Returns the DocumentJob sent to the extractor, or the recorded ``no-metadata`` outcome.
    Raises HttpStatusError (permanent) for 4xx answers, FetchFailed (retryable) for 5xx, and
    whatever the fetcher raises.
    """
    response = ports.fetcher.fetch(job.url, max_bytes=ports.settings.max_document_bytes)
    if response.status >= 500:
        raise FetchFailed(f"answered {response.status}", reason=f"http-{response.status}")
    if response.status != 200:
        raise HttpStatusError(f"answered {response.status}", reason=f"http-{response.status}")

    pattern = _pattern_of(response)
    if pattern is None:
        return record_outcome(
            ports,
            run_id=job.run_id,
            source=job.source,
            url=job.url,
            outcome=Outcome.NO_METADATA,
            reason=f"no-metadata: no JSON-LD Dataset found in {response.media_type or 'response'}",
        )
    ref = store_raw(ports, job, response, pattern)
    document_job = DocumentJob(
        run_id=job.run_id,
        source=job.source,
        url=job.url,
        pattern=pattern,
        documents=(ref,),
        links=job.links,
    )
    ports.queue.send(DOCUMENT_QUEUE, [encode(document_job)])
    return document_job


def _pattern_of(response: FetchResponse) -> str | None:
    if response.media_type in JSONLD_MEDIA_TYPES:
        try:
            data = parse_jsonld(response.body).data
        except ExtractionError:
            # Malformed JSON-LD is still the metadata the publisher serves: the extractor
            # records why it could not be read.
            return "content-type"
        return "content-type" if has_dataset(data) else None
    if response.media_type in HTML_MEDIA_TYPES or not response.media_type:
        for block in find_jsonld_scripts(response.body):
            try:
                if has_dataset(parse_jsonld(block.text).data):
                    return "embedded-script"
            except ExtractionError:
                continue
    return None


def store_raw(ports: Ports, job: UrlJob, response: FetchResponse, pattern: str) -> DocumentRef:
    """Keep a fetched document as fetched, with a provenance file beside it; return its ref."""
    extension = "html" if response.media_type in HTML_MEDIA_TYPES else "json"
    key = raw_key(job.source, response.url, response.body, extension)
    ports.store.put(
        key, response.body, content_type=response.media_type or "application/octet-stream"
    )
    provenance = {
        "url": job.url,
        "final_url": response.url,
        "redirects": list(response.redirects),
        "status": response.status,
        "headers": [list(pair) for pair in response.headers],
        "fetched_at": ports.clock.now().isoformat(timespec="seconds"),
        "pattern": pattern,
        "run_id": job.run_id,
        "sitemap": job.sitemap,
        "lastmod": job.lastmod,
    }
    ports.store.put(
        raw_meta_key(key),
        json.dumps(provenance, indent=2, sort_keys=True).encode("utf-8"),
        content_type="application/json",
    )
    return DocumentRef(key=key, url=response.url, media_type=response.media_type)
