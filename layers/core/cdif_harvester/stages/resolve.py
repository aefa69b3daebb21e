"""Stage 3: the URL resolver finds where a URL's metadata is and hands the documents on.

Every way CDIF and FAIR Signposting let a URL lead to its metadata is tried, cheapest and most
authoritative first, and the way that worked is recorded as the job's ``pattern``
(``format-parameter``, ``signmap``, ``content-type``, ``item-list``, ``http-link``, ``linkset``,
``legacy-meta``, ``embedded-script``, ``html-link``, ``content-negotiation``, ``html-meta``, and
``rendered`` when a source or run asks for pages to be rendered in a browser).
This stage fetches; :mod:`cdif_harvester.domain.resolution.rules` decides.

See docs/decisions/0019-where-the-resolver-looks.md, docs/decisions/0020-anti-spoofing.md and
docs/decisions/0056-cut-bodies-and-advisory-claims.md (bodies over their cap, advisory claims)
and docs/decisions/0065-link-identity-and-authority.md (every link read kept, conflicts),
docs/decisions/0075-rendering-pages-in-a-browser.md (rendered pages),
docs/decisions/0079-rendering-on-aws-hand-over.md (pages handed to a renderer elsewhere) and
docs/decisions/0080-bodies-kept-only-when-asked.md (documents handed on in the message or the
staging area; conditional requests from the validators in the URL's state).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field, replace
from typing import Any

from cdif_harvester.contracts import (
    DOCUMENT_QUEUE,
    RENDER_QUEUE,
    DocumentJob,
    DocumentRef,
    PageScripts,
    ScriptBlock,
    UrlJob,
    encode,
)
from cdif_harvester.domain.discovery.incremental import (
    fingerprint,
    lastmod_not_newer,
    lastmod_reason,
)
from cdif_harvester.domain.records.extraction import (
    ExtractionError,
    JsonLdScripts,
    has_dataset,
    parse_jsonld,
    read_jsonld_scripts,
)
from cdif_harvester.domain.resolution.htmlmeta import record_from_meta
from cdif_harvester.domain.resolution.rules import (
    LinkIdentity,
    MediaType,
    anchored_to,
    claimed_resources,
    describedby_tiers,
    forward_meta_links,
    is_list_profile,
    link_identity,
    linkset_forms,
    merge_links,
    normalise_url,
    parse_media_type,
    reverse_claims,
    same_origin,
    settle_links,
)
from cdif_harvester.domain.resolution.weblinks import (
    HtmlHead,
    parse_html_head,
    parse_link_header,
    parse_linkset_json,
    parse_linkset_text,
)
from cdif_harvester.errors import (
    BodyTooLarge,
    ContractError,
    FetchFailed,
    PermanentError,
    RetryableError,
)
from cdif_harvester.keys import raw_key, raw_meta_key, staged_document_key
from cdif_harvester.model import (
    HTML_MEDIA_TYPES,
    JSONLD_MEDIA_TYPES,
    FetchResponse,
    Outcome,
    RequestValidator,
    TypedLink,
    UrlOutcome,
    UrlState,
)
from cdif_harvester.ports import eventual
from cdif_harvester.stages.jobs import retry_after_of
from cdif_harvester.stages.outcomes import (
    GONE_REASON,
    holds_records,
    keep_validators,
    record_outcome,
)
from cdif_harvester.wiring import Wiring

__all__ = ["HttpStatusError", "resolve_url", "store_raw"]

# What a browser asks for: the landing page as HTML, nothing that would trigger negotiation.
ACCEPT_PAGE = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"
ACCEPT_JSONLD = (
    'application/ld+json;profile="https://w3id.org/cdif/core/1.0",'
    "application/ld+json;q=0.9,application/json;q=0.5"
)
ACCEPT_LINKSET = "application/linkset+json,application/linkset;q=0.9"
# A linkset announced with its form asks for that form (a page may announce both).
ACCEPT_LINKSET_FORM = {
    "application/linkset+json": "application/linkset+json",
    "application/json": "application/linkset+json,application/json;q=0.9",
    "application/linkset": "application/linkset",
}
MiB = 1024 * 1024
# A landing page bigger than this is read up to the cut (HTML) or for its headers only (others).
MAX_PAGE_BYTES = 5 * MiB
MAX_LINKSET_BYTES = 1024 * 1024
MAX_TARGETS = 5  # describedby targets fetched per tier
# What travels on the document job stays well under the message cap (200 KiB).
MAX_LINKS = 300
MAX_NOTES = 50
MAX_NOTE_CHARS = 500
# Without kept bodies, every request says so: our cache (and any other) keeps none of it; the
# resolver keeps the validators itself (RFC 9111, 5.2.1.5).
NO_STORE = {"Cache-Control": "no-store"}
# The response headers a document's provenance keeps (its links are kept apart, all of them).
PROVENANCE_HEADERS = ("content-type", "content-length", "etag", "last-modified")
NOT_MODIFIED = "not-modified: every answer was 304 Not Modified (no body downloaded)"
STILL_NONE = (
    "no-metadata: not modified since the last harvest, which found no CDIF metadata (every "
    "answer was 304 Not Modified; no body downloaded)"
)


class HttpStatusError(PermanentError):
    """The URL answered with a client error (4xx) or an unexpected status."""

    reason = "http-status"


def resolve_url(wiring: Wiring, job: UrlJob) -> DocumentJob | UrlOutcome | UrlJob:
    """Find the metadata of ``job.url`` (see the module docstring) and hand it on.

    Returns the DocumentJob sent to the extractor, or the recorded ``no-metadata`` outcome, or
    ``job`` itself when it needs a browser this wiring lacks and a renderer elsewhere takes it
    (``settings.render_queue``): the job is sent, unchanged, to the render queue and its URL
    gets no outcome here (the renderer's resolution records it). Raises HttpStatusError
    (permanent) for a 4xx answer of the URL itself, FetchFailed (retryable, with
    ``retry_after``) for 429 and 5xx, and whatever the fetcher or the queue raises.
    """
    return _Resolver(wiring, job).run()


@dataclass
class _Found:
    """A metadata document found: the response it came in, and how it was reached."""

    response: FetchResponse
    via: str
    body: bytes | None = None  # when the document was built, not fetched (html-meta)
    media_type: str | None = None
    authority: str | None = None
    forward: tuple[TypedLink, ...] = ()  # the claimed resource's own metadata links
    is_list: bool = False
    # What the record's report must warn about this document (``<code>: <details>``).
    warnings: list[str] = field(default_factory=list)
    # The page's JSON-LD as read here (an embedded script): handed on instead of the page.
    scripts: JsonLdScripts | None = None


@dataclass
class _Page:
    """The URL's own response: its head always, its body when it was read."""

    response: FetchResponse
    media: MediaType
    body_read: bool


class _Resolver:
    """One resolution: the links seen, the notes written and the documents found so far."""

    def __init__(self, wiring: Wiring, job: UrlJob) -> None:
        self.wiring = wiring
        self.job = job
        self.links: list[TypedLink] = list(job.links)
        self.notes: list[str] = []
        self.tried: list[str] = []
        self.resources: list[str] = [job.url]
        # The links followed (a target that gave a document, a linkset read), by identity and
        # source: the report says which of the links read were used.
        self.used: set[tuple[LinkIdentity, str | None]] = set()
        # Link headers already parsed, by response (the response is kept so its id stays unique).
        self._parsed: dict[int, tuple[FetchResponse, list[TypedLink]]] = {}
        # The pages handed on as their JSON-LD blocks, and their bodies (sent whole after all
        # when the message would be too large), by raw key.
        self._page_scripts: dict[str, tuple[PageScripts, bytes]] = {}
        # What the catalogue holds from the harvest that last produced records from this URL
        # (None when incremental harvesting is off or there is none), and whether every answer
        # so far was a 304 revalidation.
        # (``state`` is what the catalogue holds whatever it is: a URL that gave no metadata
        # keeps its validators there too.) Read eventually consistent where the catalogue can
        # (half the price): a state a moment old is one the URL had, so this resolution is the
        # one a job started a moment earlier would make; what is written from it (validators)
        # is written after this job's requests anyway, seconds after any read. A state this
        # run wrote is never compared with (holds_records): a redelivered job missing it
        # compares with the earlier harvest, as its first attempt did.
        catalog = wiring.catalog
        cheap = eventual(catalog)
        read = catalog.get_url if cheap is None else cheap.peek_url
        self.state = read(job.url) if wiring.settings.incremental else None
        self.held = (
            self.state
            if self.state is not None and holds_records(self.state, run_id=job.run_id)
            else None
        )
        self.answers = 0
        self.all_revalidated = True
        # Bodies over their cap (a landing page cut, a metadata target refused): when nothing
        # else is found the URL fails with them, not ``no-metadata`` (see decision 0056).
        self.too_large: list[str] = []
        # Whether documents are kept under raw/ and answers under cache/ (the run's setting or
        # the source's option); else the validators of every request go to the URL's state.
        self.keep = wiring.settings.keep_bodies or job.options.get("keep_bodies") == "true"
        self.validators: list[RequestValidator] = []
        self.revalidatable = True
        # An answer the revalidation got instead of a 304, kept for the request that needs it.
        self.ahead: dict[tuple[str, str, str], FetchResponse] = {}

    # ---------------------------------------------------------------------------- the order

    def run(self) -> DocumentJob | UrlOutcome | UrlJob:
        """Try every pattern in order; hand on the first that yields documents."""
        if self.held is not None and lastmod_not_newer(self.job.lastmod, self.held.lastmod):
            return self._unchanged(lastmod_reason(self.job.lastmod, self.held.lastmod))
        if self.held is not None and self._revalidated(self.held):
            return self._unchanged(NOT_MODIFIED)
        if self._found_nothing_before() and self._revalidated(self.state):
            return self._outcome(Outcome.NO_METADATA, STILL_NONE)
        found = self._format_parameter()
        if found:
            return self._hand_on("format-parameter", found)
        found = self._from_links(self.job.links, "signmap")
        if found:
            return self._hand_on("signmap", found)
        page = self._open_page()
        header_links = self._header_links(page.response)
        found = self._self_document(page)
        if found:
            return self._hand_on("item-list" if found[0].is_list else "content-type", found)
        header_links = self._this_page(header_links, "HTTP Link header")
        for pattern, found in self._link_patterns(header_links, "HTTP Link header"):
            if found:
                return self._hand_on(pattern, found)
        head: HtmlHead | None = None
        cut = page.response.truncated
        is_html = page.body_read and (page.media.type in HTML_MEDIA_TYPES or not page.media.type)
        if is_html and self._render_mode() == "always":
            if self._renders_elsewhere():
                return self._to_renderer()
            found = self._rendered(page)
            if found:
                return self._hand_on("rendered", found)
        if is_html:
            if cut:
                self._page_cut(page)
            scripts = self._embedded_dataset(page.response.body)
            if scripts is not None:
                # What lies before the cut is usable; the report says the rest was not seen.
                warnings = [_cut_warning(page.response)] if cut else []
                self_found = _Found(page.response, "self", warnings=warnings, scripts=scripts)
                return self._hand_on("embedded-script", [self_found])
            head = parse_html_head(page.response.body, page.response.url)
            self.notes.extend(head.notes)
            self.tried.extend(head.notes)
            self.links.extend(head.links)
            html_links = self._this_page(list(head.links), "HTML <link>")
            for pattern, found in self._link_patterns(html_links, "HTML <link>"):
                if found:
                    return self._hand_on(pattern.replace("http-link", "html-link"), found)
        found = self._content_negotiation(page)
        if found:
            return self._hand_on("content-negotiation", found)
        if head is not None and not cut:
            # Not from a cut page: <meta> tags are the last resort, and JSON-LD may lie past
            # the cut.
            found = self._html_meta(page, head)
            if found:
                return self._hand_on("html-meta", found)
        if is_html and self._render_mode() == "fallback":
            if self._renders_elsewhere():
                return self._to_renderer()
            found = self._rendered(page)
            if found:
                return self._hand_on("rendered", found)
        if self.too_large:
            raise self._too_large()
        return self._no_metadata(page)

    # ---------------------------------------------------------------------------- fetching

    def _fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        accept: str | None = None,
        max_bytes: int | None = None,
        truncate: bool = False,
    ) -> FetchResponse:
        headers = {"Accept": accept} if accept else {}
        if not self.keep:
            headers.update(NO_STORE)
        cap = max_bytes or self.wiring.settings.max_document_bytes
        ahead = self.ahead.pop((method, url, accept or ""), None)
        if ahead is not None and len(ahead.body) <= cap:
            response = ahead
        else:
            try:
                response = self.wiring.fetcher.fetch(
                    url,
                    method=method,
                    headers=headers or None,
                    max_bytes=cap,
                    # Passed only when wanted: fetchers that never cut (test doubles) stay usable.
                    **({"truncate": True} if truncate else {}),
                )
            except BaseException:
                self.revalidatable = False  # a request without an answer cannot be asked again
                raise
        self.answers += 1
        self.all_revalidated = self.all_revalidated and response.revalidated
        self._note_validator(method, url, accept, response)
        return response

    def _note_validator(
        self, method: str, url: str, accept: str | None, response: FetchResponse
    ) -> None:
        """Remember the validator of an answer, for the next harvest's conditional request.

        An answer without one (or not a whole 200, or ``no-store``) leaves the resolution one
        that cannot be revalidated: the next harvest then fetches the bodies and compares them.
        """
        etag = response.header("etag") or ""
        # If-None-Match takes precedence over If-Modified-Since (RFC 9110, 13.1.3).
        last_modified = "" if etag else response.header("last-modified") or ""
        no_store = "no-store" in (response.header("cache-control") or "").lower()
        whole = response.status in (200, 203) and not response.truncated
        if not whole or no_store or not (etag or last_modified):
            self.revalidatable = False
        else:
            validator = RequestValidator(
                method, "" if url == self.job.url else url, accept or "", etag, last_modified
            )
            if validator not in self.validators:
                self.validators.append(validator)

    def _found_nothing_before(self) -> bool:
        """Whether the URL's last outcome, in an earlier run, was ``no-metadata``."""
        state = self.state
        return (
            self.held is None
            and state is not None
            and state.outcome == Outcome.NO_METADATA.value
            and state.last_run != self.job.run_id
        )

    def _revalidated(self, held: UrlState | None) -> bool:
        """Ask every request of the held harvest again, conditionally; True when all say 304.

        The same requests with the same answers make the same resolution, so the URL is
        unchanged without a body downloaded. Only without kept bodies (with them, the HTTP cache
        revalidates every request itself), and never for a URL whose sitemap entry carries links
        (they may change without any answer changing). The first other answer ends it; a 200 is
        kept for the resolution, which asks the rest again without conditions.
        """
        if held is None or self.keep or not held.validators or self.job.links:
            return False
        for validator in held.validators:
            url = validator.url or self.job.url
            headers = dict(NO_STORE)
            if validator.accept:
                headers["Accept"] = validator.accept
            if validator.etag:
                headers["If-None-Match"] = validator.etag
            else:
                headers["If-Modified-Since"] = validator.last_modified
            try:
                response = self.wiring.fetcher.fetch(
                    url,
                    method=validator.method,
                    headers=headers,
                    max_bytes=self.wiring.settings.max_document_bytes,
                )
            except (PermanentError, RetryableError):
                return False  # the resolution asks again and decides what the error means
            if response.status != 304:
                if response.status == 200 and not response.truncated:
                    self.ahead[(validator.method, url, validator.accept)] = response
                return False
        return True

    def _open_page(self) -> _Page:
        """The URL's own response: HEAD first for CDIF1.0 sitemaps, else a capped GET."""
        url = self.job.url
        if self.job.cdif_agent:
            response = self._fetch(url, method="HEAD", accept=ACCEPT_PAGE)
            if response.status in (400, 403, 404, 405, 406, 501):
                self.notes.append(f"HEAD answered {response.status}; GET used instead")
            else:
                self._check_status(response, url)
                media = parse_media_type(response.header("content-type"))
                if response.status == 204 or not _worth_reading(media):
                    if media.type:
                        self.notes.append(f"{media.type} body not downloaded (headers only)")
                    return self._page(response, body_read=False)
                response, body_read = self._capped_page(url)
                self._check_status(response, url)
                return self._page(response, body_read=body_read)
        response, body_read = self._capped_page(url)
        self._check_status(response, url)
        return self._page(response, body_read=body_read and response.status != 204)

    def _capped_page(self, url: str) -> tuple[FetchResponse, bool]:
        """GET a page under MAX_PAGE_BYTES; return the response and whether its body was read.

        A body over the cap is never judged as if whole: an HTML (or untyped) page is asked
        again and read up to the cut (``truncated``); any other body keeps only its headers.
        Raises what the fetcher raises (BodyTooLarge without a response).
        """
        try:
            return self._fetch(url, accept=ACCEPT_PAGE, max_bytes=MAX_PAGE_BYTES), True
        except BodyTooLarge as exc:
            if exc.status is None:
                raise
            response = FetchResponse(url=url, status=exc.status, headers=exc.headers, body=b"")
        media = parse_media_type(response.header("content-type"))
        is_page = not media.type or media.type in HTML_MEDIA_TYPES
        if response.status in (200, 203, 410) and is_page:
            cut = self._fetch(url, accept=ACCEPT_PAGE, max_bytes=MAX_PAGE_BYTES, truncate=True)
            return cut, True
        self.notes.append(f"body over {MAX_PAGE_BYTES} bytes: only its headers were read")
        return response, False

    def _page_cut(self, page: _Page) -> None:
        """Note that the page was read up to the cut, and keep it as a reason to fail."""
        self.notes.append(
            f"{page.response.url}: page larger than {_size(MAX_PAGE_BYTES)}: read up to the cut; "
            "metadata past the cut was not seen"
        )
        self.too_large.append(
            f"landing page larger than {_size(MAX_PAGE_BYTES)}; metadata past the cut cannot "
            "be seen"
        )

    def _too_large(self) -> BodyTooLarge:
        """The error ending a URL whose only chances of metadata were over their caps."""
        tried = ", ".join(dict.fromkeys(self.tried)) or "nothing applicable"
        details = "; ".join(dict.fromkeys(self.too_large))
        return BodyTooLarge(f"{details} (tried: {tried})", reason="body-too-large")

    def _page(self, response: FetchResponse, *, body_read: bool) -> _Page:
        for url in (*response.redirects, response.url):
            if url not in self.resources:
                self.resources.append(url)
        if response.status == 203:
            self.notes.append("203 Non-Authoritative Information: read as 200")
        if response.status == 410:
            self.notes.append("410 Gone: a tombstone; its links are still read")
        media = parse_media_type(response.header("content-type"))
        return _Page(response, media, body_read)

    def _check_status(self, response: FetchResponse, url: str) -> None:
        """Raise for the statuses that end (4xx) or postpone (429, 5xx) the URL."""
        status = response.status
        if status == 429 or status >= 500:
            raise FetchFailed(
                f"{url} answered {status}",
                reason=f"http-{status}",
                retry_after=retry_after_of(self.wiring, response),
            )
        if status in (200, 203, 204, 410):
            return
        raise HttpStatusError(f"{url} answered {status}", reason=f"http-{status}")

    def _header_links(self, response: FetchResponse) -> list[TypedLink]:
        """The ``Link`` header links of a response, parsed once (repairs noted, links kept)."""
        known = self._parsed.get(id(response))
        if known is not None and known[0] is response:
            return known[1]
        parsed = parse_link_header(response.header_all("link"), response.url)
        self.notes.extend(parsed.repairs)
        self.links.extend(parsed.links)
        self._parsed[id(response)] = (response, list(parsed.links))
        return list(parsed.links)

    def _this_page(self, links: list[TypedLink], where: str) -> list[TypedLink]:
        """The links of a header or a page that are about the resource resolved: those without
        anchor, or anchored at its URL or a URL of its redirect chain (RFC 8288 section 3.2)."""
        kept, foreign = anchored_to(links, self.resources, unanchored=True)
        if foreign:
            self.notes.append(f"{where}: {foreign} link(s) anchored at other resources ignored")
        return kept

    # ---------------------------------------------------------------------------- patterns

    def _format_parameter(self) -> list[_Found]:
        parameter = self.job.options.get("format_parameter")
        if not parameter:
            return []
        separator = "&" if "?" in self.job.url else "?"
        url = f"{self.job.url}{separator}{parameter}"
        self.tried.append(f"format-parameter ({parameter})")
        found = self._document_at(url, via="format-parameter", accept=ACCEPT_JSONLD)
        return [found] if found else []

    def _self_document(self, page: _Page) -> list[_Found]:
        """The URL answered JSON-LD: it is the metadata (or a CDIF-list-1.0 ItemList of it)."""
        if page.media.type not in JSONLD_MEDIA_TYPES:
            return []
        self.tried.append("content-type")
        response = page.response
        if not page.body_read or response.truncated:
            response = self._fetch(self.job.url, accept=ACCEPT_JSONLD)
            self._check_status(response, self.job.url)
        data = _json_of(response.body)
        if data is None:
            # Malformed JSON-LD is still what the publisher serves as metadata: the extractor
            # records why it could not be read.
            return [_Found(response, "self")]
        if is_list_profile(page.media.profile) or _is_item_list(data):
            return [_Found(response, "self", is_list=True)]
        if not has_dataset(data):
            self.notes.append(f"{response.url}: JSON-LD without a Dataset")
            return []
        return [self._verified(_Found(response, "self"), data)]

    def _link_patterns(
        self, links: list[TypedLink], where: str, *, legacy_meta: bool = True
    ) -> list[tuple[str, list[_Found]]]:
        """``describedby``, then linkset, then legacy ``meta`` links; stops at the first that
        yields documents. Returns each pattern tried with what it found."""
        results: list[tuple[str, list[_Found]]] = []
        tiers = describedby_tiers(links)
        if tiers:
            self.tried.append(f"describedby in {where}")
            results.append(("http-link", self._targets(tiers)))
            if results[-1][1]:
                return results
        linksets = linkset_forms(links)
        if linksets:
            self.tried.append(f"linkset in {where}")
            results.append(("linkset", self._from_linksets(linksets)))
            if results[-1][1]:
                return results
        meta = forward_meta_links(links) if legacy_meta else []
        if meta:
            self.tried.append(f'rel="meta" in {where}')
            results.append(("legacy-meta", self._targets([meta], via="meta")))
        return results

    def _from_links(self, links: tuple[TypedLink, ...], where: str) -> list[_Found]:
        """Metadata from typed links carried on the job (a Signmap's ``<rs:ln>``)."""
        for _pattern, found in self._link_patterns(list(links), where, legacy_meta=False):
            if found:
                return found
        return []

    def _targets(self, tiers: list[list[TypedLink]], *, via: str = "describedby") -> list[_Found]:
        """Every target of the best tier that yields JSON-LD (at most MAX_TARGETS per tier)."""
        for tier in tiers:
            found: list[_Found] = []
            for link in tier[:MAX_TARGETS]:
                document = self._document_at(link.href, via=via)
                if document is not None:
                    self.used.add((link_identity(link), link.found_in))
                    found.append(document)
            if found:
                return found
        return []

    def _document_at(self, url: str, *, via: str, accept: str = ACCEPT_JSONLD) -> _Found | None:
        """Fetch a metadata target; None (with a note) when it is not usable JSON-LD."""
        try:
            response = self._fetch(url, accept=accept)
        except PermanentError as exc:
            self.notes.append(f"{via} target {url}: {exc.reason}: {exc}")
            if isinstance(exc, BodyTooLarge):
                self.too_large.append(f"{via} target over its size cap: {exc}")
            return None
        if response.status == 429 or response.status >= 500:
            self._check_status(response, url)  # retry the whole URL later
        if response.status not in (200, 203):
            self.notes.append(f"{via} target {url} answered {response.status}")
            return None
        media = parse_media_type(response.header("content-type"))
        data = _json_of(response.body)
        if data is None:
            if media.type in JSONLD_MEDIA_TYPES:
                return _Found(response, via)  # malformed, recorded by the extractor
            self.notes.append(f"{via} target {url} is {media.type or 'untyped'}, not JSON-LD")
            return None
        if not (has_dataset(data) or _is_item_list(data)):
            self.notes.append(f"{via} target {url}: JSON without a Dataset")
            return None
        found = _Found(response, via)
        return (
            self._verified(found, data)
            if via in ("format-parameter", "content-negotiation")
            else found
        )

    def _from_linksets(self, forms: list[list[TypedLink]]) -> list[_Found]:
        """The metadata a page's linksets name, read form by form (see ``linkset_forms``):
        the first form whose linksets hold links about this resource is used."""
        read = 0
        for form in forms:
            anchored: list[TypedLink] = []
            for link in form:
                if read >= MAX_TARGETS:
                    break
                read += 1
                kept = self._linkset(link)
                if kept:
                    self.used.add((link_identity(link), link.found_in))
                    anchored.extend(kept)
            if anchored:
                return self._targets(describedby_tiers(anchored), via="describedby")
        return []

    def _linkset(self, link: TypedLink) -> list[TypedLink]:
        """The links of one linkset about this resource (every link read is kept)."""
        media = parse_media_type(link.type).type
        accept = ACCEPT_LINKSET_FORM.get(media, ACCEPT_LINKSET)
        try:
            response = self._fetch(link.href, accept=accept, max_bytes=MAX_LINKSET_BYTES)
        except PermanentError as exc:
            self.notes.append(f"linkset {link.href}: {exc.reason}: {exc}")
            return []
        if response.status == 429 or response.status >= 500:
            self._check_status(response, link.href)
        if response.status != 200:
            self.notes.append(f"linkset {link.href} answered {response.status}")
            return []
        parsed = (
            parse_linkset_json(response.body, response.url)
            if _looks_like_json(response)
            else parse_linkset_text(response.body, response.url)
        )
        self.notes.extend(parsed.repairs)
        self.links.extend(parsed.links)
        kept, foreign = anchored_to(parsed.links, self.resources)
        if foreign:
            self.notes.append(
                f"linkset {link.href}: {foreign} link(s) anchored at other resources ignored"
            )
        return kept

    def _embedded_dataset(self, body: bytes) -> JsonLdScripts | None:
        """The JSON-LD blocks of the page ``body`` when one of them holds a Dataset, else None
        (what was tried, and why a block could not be read, go to the notes)."""
        scripts = read_jsonld_scripts(body)
        unreadable: list[str] = []
        found = False
        for block in scripts.blocks:
            try:
                if has_dataset(parse_jsonld(block.text).data):
                    found = True
                    break
            except ExtractionError as error:
                unreadable.append(error.reason)
        # A cut, or blocks that could not be read, say so in the outcome's reason: the Dataset
        # may be in a block left unread (the publisher learns which fault to mend).
        cut = scripts.note()
        notes = [cut] if cut else []
        if unreadable and not found:
            reasons = ", ".join(dict.fromkeys(unreadable))
            notes.append(f"{len(unreadable)} of {len(scripts.blocks)} unreadable: {reasons}")
        self.tried.append(f"embedded script ({'; '.join(notes)})" if notes else "embedded script")
        return scripts if found else None

    def _content_negotiation(self, page: _Page) -> list[_Found]:
        if page.media.type in JSONLD_MEDIA_TYPES:
            return []  # already asked: the URL's own answer was JSON-LD
        self.tried.append("content negotiation")
        if not page.body_read or page.response.truncated:
            # Ask with HEAD first: a large non-HTML body is never downloaded to find out.
            probe = self._fetch(self.job.url, method="HEAD", accept=ACCEPT_JSONLD)
            if parse_media_type(probe.header("content-type")).type not in JSONLD_MEDIA_TYPES:
                return []
        found = self._document_at(self.job.url, via="content-negotiation")
        if found is None or parse_media_type(found.response.header("content-type")).type not in (
            JSONLD_MEDIA_TYPES
        ):
            return []
        return [found]

    def _html_meta(self, page: _Page, head: HtmlHead) -> list[_Found]:
        self.tried.append("HTML <meta>")
        record = record_from_meta(head.meta, page.response.url)
        if record is None:
            return []
        self.notes.append(
            "record built from HTML <meta> tags: CDIF discourages this; publish JSON-LD instead"
        )
        body = json.dumps(record, indent=2, ensure_ascii=False).encode("utf-8")
        return [_Found(page.response, "html-meta", body=body, media_type="application/ld+json")]

    def _render_mode(self) -> str:
        """The run's mode when it sets one, else the source's option (``never`` by default)."""
        return self.wiring.settings.render or self.job.options.get("render") or "never"

    def _renders_elsewhere(self) -> bool:
        """Whether the page must be rendered by the renderer: no browser here, one there."""
        return self.wiring.renderer is None and self.wiring.settings.render_queue

    def _to_renderer(self) -> UrlJob:
        """Send the job, unchanged, to the renderer, which resolves it again with a browser.

        Nothing is recorded here: the URL's one outcome is the renderer's, and until then the
        run counts it pending (a copy sent twice ends as one, decision 0054). Raises what the
        queue raises (the job is then retried, nothing lost).
        """
        self.wiring.queue.send(RENDER_QUEUE, [encode(self.job)])
        return self.job

    def _rendered(self, page: _Page) -> list[_Found]:
        """The page rendered in a browser, when its DOM then holds a Dataset in JSON-LD."""
        renderer = self.wiring.renderer
        if renderer is None:
            self.tried.append("rendering (no browser available here)")
            return []
        try:
            rendered = renderer.render(self.job.url, page=page.response)
        except PermanentError as exc:
            self.tried.append(f"rendering ({exc.reason})")
            self.notes.append(f"the page could not be rendered: {exc.reason}: {exc}")
            return []
        what = f"rendered in {rendered.seconds:.2f} s ({rendered.requests} request(s)"
        what += f", {len(rendered.refused)} refused)" if rendered.refused else ")"
        self.notes.append(f"{rendered.url}: {what}")
        self.notes.extend(f"rendering refused {refusal}" for refusal in rendered.refused[:10])
        if rendered.stopped:
            self.notes.append(f"rendering stopped: {rendered.stopped}")
        found = bool(rendered.html) and self._embedded_dataset(rendered.html) is not None
        # The step is named for what it did (the last "embedded script" entry is this one's).
        self.tried.append(f"rendering ({rendered.stopped})" if rendered.stopped else "rendering")
        if not found:
            return []
        response = FetchResponse(
            url=rendered.url,
            status=page.response.status,
            headers=(("content-type", "text/html; charset=utf-8"),),
            body=rendered.html,
            redirects=page.response.redirects,
            elapsed=rendered.seconds,
        )
        return [_Found(response, "rendered", warnings=[f"rendered: {what}"])]

    # ---------------------------------------------------------------------------- spoofing

    def _verified(self, found: _Found, data: Any) -> _Found:
        """Check a self-asserted document's claim on another origin (1997 draft, spoofing).

        The check is advisory: a claim that cannot be checked (the resource cannot be reached
        or read, names no metadata) leaves the document ``unverified``, with the reason as a
        warning; only a resource that answers and names other metadata refutes it.
        """
        claims = [
            *reverse_claims(self._header_links(found.response)),
            *claimed_resources(data),
        ]
        foreign = [url for url in claims if not same_origin(url, found.response.url)]
        if not foreign or not self.wiring.settings.verify_claims:
            return found
        resource = foreign[0]
        forward, why = self._forward_links_of(resource)
        own = {normalise_url(u) for u in (*found.response.redirects, found.response.url)}
        own.add(normalise_url(self.job.url))
        if not forward:
            found.authority = "unverified"
            if forward is None:
                why = f"{resource} could not be read ({why})"
            else:
                why = f"{resource} names no metadata{why}"
            found.warnings.append(f"unverified-claim: {why}")
            self.notes.append(f"{found.response.url} claims {resource}: unverified: {why}")
        elif any(normalise_url(link.href) in own for link in forward):
            found.authority = "authoritative"
            self.notes.append(f"{resource} names {found.response.url} as its metadata")
        else:
            found.authority = "not-authoritative"
            found.forward = tuple(forward)
            self.notes.append(
                f"{found.response.url} claims {resource}, but {resource} names "
                f"{forward[0].href} as its metadata: not authoritative"
            )
        return found

    def _forward_links_of(self, resource: str) -> tuple[list[TypedLink] | None, str]:
        """The forward metadata links (describedby, meta) of a claimed resource, and a note.

        Returns ``(None, why)`` when the resource cannot be read: any fetch error, permanent
        or passing (a dead host, no DNS, a refused address, a timeout, a 5xx), since the check
        is advisory and must never cost the claiming record (1997 draft, "Metadata Spoofing").
        The note says, for links found, nothing, and for none found, why there may be more.
        Raises only Deferred (a busy host slot: the job runs again later).
        """
        try:
            response, body_read = self._capped_page(resource)
        except (PermanentError, RetryableError) as exc:
            return None, f"{exc.reason}: {exc}"
        if response.status not in (200, 203, 410):
            return None, f"it answered {response.status}"
        links = list(parse_link_header(response.header_all("link"), response.url).links)
        if body_read and parse_media_type(response.header("content-type")).type in (
            HTML_MEDIA_TYPES
        ):
            links.extend(parse_html_head(response.body, response.url).links)
        forward = [
            link
            for link in merge_links(links)
            if link.rel in ("describedby", "meta") and not link.reverse
        ]
        cut = f" (its page is larger than {_size(MAX_PAGE_BYTES)}: links past the cut unseen)"
        return forward, cut if response.truncated else ""

    def _winner(self, found: list[_Found]) -> list[_Found]:
        """Put forward metadata first when a claiming document was found not authoritative."""
        losers = [item for item in found if item.authority == "not-authoritative"]
        if not losers:
            return found
        extra: list[_Found] = []
        for item in losers:
            forward = list(item.forward)
            tiers = describedby_tiers(forward) or [forward_meta_links(forward)]
            try:
                documents = self._targets(tiers, via="forward-metadata")
            except RetryableError as exc:
                # The claiming document stays (not authoritative); the forward metadata is
                # only a bonus here, so its failure costs nothing else.
                self.notes.append(f"forward metadata could not be read: {exc.reason}: {exc}")
                documents = []
            for document in documents:
                document.authority = "authoritative"
                extra.append(document)
        return [*extra, *found]

    # ---------------------------------------------------------------------------- hand-over

    def _hand_on(self, pattern: str, found: list[_Found]) -> DocumentJob | UrlOutcome:
        found = self._winner(found)
        keys = [_raw_key_of(self.job, item) for item in found]
        if self.held is not None and self.held.fingerprint == fingerprint(pattern, keys):
            if self.all_revalidated and self.answers:
                why = NOT_MODIFIED
            else:
                why = "content-hash: the documents are byte-identical to the last harvest's"
                validators = self._validators()
                if not self.keep and validators != self.held.validators:
                    # The same documents under new validators: the next harvest asks with these.
                    self.wiring.catalog.put_url(replace(self.held, validators=validators))
            return self._unchanged(why, pattern)
        links, conflicts = settle_links(self.links, self.resources, self.used)
        for conflict in conflicts:
            # On each document's report (its records' warnings) and in the resolution notes.
            self.notes.append(conflict.partition(": ")[2])
            for item in found:
                item.warnings.append(conflict)
        refs = tuple(self._store(item, pattern, key) for item, key in zip(found, keys, strict=True))
        validators = self._validators()
        if len(links) > MAX_LINKS:
            # A collection page may list thousands of items: the message stays small. The
            # links that apply to this page go first.
            self.notes.append(f"{len(links)} links seen; the first {MAX_LINKS} are kept")
            links = tuple(sorted(links, key=lambda link: link.ignored is not None))[:MAX_LINKS]
        notes = tuple(note[:MAX_NOTE_CHARS] for note in dict.fromkeys(self.notes))
        document_job = DocumentJob(
            run_id=self.job.run_id,
            source=self.job.source,
            url=self.job.url,
            pattern=pattern,
            documents=refs,
            links=links,
            notes=notes[:MAX_NOTES],
            sitemap=self.job.sitemap,
            lastmod=self.job.lastmod,
            validators=validators,
            # The state read above travels with the job: the extractor compares against it
            # without reading the URL's item again (nothing here wrote it since).
            state=self.state,
            state_read=self.wiring.settings.incremental,
            scripts=tuple(
                self._page_scripts[ref.key][0] for ref in refs if ref.key in self._page_scripts
            ),
        )
        document_job, message = self._fitted(document_job)
        self.wiring.queue.send(DOCUMENT_QUEUE, [message])
        return document_job

    def _validators(self) -> tuple[RequestValidator, ...]:
        """The validators of this resolution's requests, or none when it cannot be revalidated
        (an answer without one; a rendered page, whose browser asked for more)."""
        if not self.revalidatable or self._render_mode() != "never":
            return ()
        return tuple(self.validators)

    def _fitted(self, job: DocumentJob) -> tuple[DocumentJob, str]:
        """``job`` with its largest bodies moved to the staging area until the message fits,
        and its message (encoded once: a page's body makes it the costliest message).

        A body in the message costs an SQS request per 64 KiB; one in the store costs a write
        and a read, more than four such requests, so a body is staged only when the message
        would be refused (decision 0080). Raises ContractError when it cannot fit (too many
        links or notes).
        """
        documents = list(job.documents)
        scripts = {page.key: page for page in job.scripts}

        def inline(ref: DocumentRef) -> int:  # (how much of it travels in the message)
            if ref.key in scripts:
                return max(1, sum(len(block.text) for block in scripts[ref.key].blocks))
            return len(ref.body) if ref.body is not None else 0

        while (
            message := _message(
                job := replace(job, documents=tuple(documents), scripts=tuple(scripts.values()))
            )
        ) is None:
            sent = [i for i, ref in enumerate(documents) if inline(ref)]
            if not sent:
                if job.state_read:  # the extractor can read the state itself
                    job = replace(job, state=None, state_read=False)
                    continue
                return job, encode(job)  # too many links or notes: encode() says so
            largest = max(sent, key=lambda i: inline(documents[i]))
            ref = documents[largest]
            if scripts.pop(ref.key, None) is not None:  # the page itself, staged after all
                body, encoding = _body_text(self._page_scripts[ref.key][1])
                ref = replace(ref, body=body, encoding=encoding)
            documents[largest] = self._staged(ref)
        return job, message

    def _staged(self, ref: DocumentRef) -> DocumentRef:
        """``ref`` with its body written to the run's staging area (expired with the run's)."""
        text = ref.body or ""
        body = base64.b64decode(text) if ref.encoding == "base64" else text.encode("utf-8")
        extension = ref.key.rsplit(".", 1)[-1]
        key = staged_document_key(self.job.run_id, ref.url, body, extension)
        self.wiring.store.put(key, body, content_type=ref.media_type or "application/octet-stream")
        return replace(ref, body=None, encoding=None, staged_key=key)

    def _store(self, item: _Found, pattern: str, key: str) -> DocumentRef:
        if not self.keep:
            return self._handed_over(item, key)
        return store_raw(
            self.wiring,
            self.job,
            item.response,
            pattern,
            via=item.via,
            authority=item.authority,
            body=item.body,
            media_type=item.media_type,
            warnings=tuple(item.warnings),
        )

    def _handed_over(self, item: _Found, key: str) -> DocumentRef:
        """The reference of a document not kept, under its raw ``key`` (the fingerprint's): its
        body travels in the message."""
        content = item.response.body if item.body is None else item.body
        ref = replace(
            _provenance(self.wiring, item.response),
            key=key,
            media_type=item.media_type or item.response.media_type,
            via=item.via,
            authority=item.authority,
            warnings=tuple(item.warnings),
            kept=False,
        )
        if item.scripts is not None and item.body is None:
            # The page's JSON-LD as read here is all the extractor reads of it: it goes in
            # place of the page (a fifth of its size, no second parse; decision 0101).
            blocks = tuple(ScriptBlock(b.index, b.text, b.profile) for b in item.scripts.blocks)
            self._page_scripts[key] = (PageScripts(key, blocks, item.scripts.unread), content)
            return ref
        body, encoding = _body_text(content)
        return replace(ref, body=body, encoding=encoding)

    def _unchanged(self, reason: str, pattern: str | None = None) -> UrlOutcome:
        return self._outcome(Outcome.UNCHANGED, reason, pattern)

    def _outcome(self, outcome: Outcome, reason: str, pattern: str | None = None) -> UrlOutcome:
        return record_outcome(
            self.wiring,
            run_id=self.job.run_id,
            source=self.job.source,
            url=self.job.url,
            outcome=outcome,
            reason=reason,
            pattern=pattern,
        )

    def _no_metadata(self, page: _Page) -> UrlOutcome:
        tried = ", ".join(dict.fromkeys(self.tried)) or "nothing applicable"
        what = page.media.type or "response"
        start = f"{GONE_REASON}; " if page.response.status == 410 else "no-metadata: "
        reason = f"{start}no CDIF metadata found in {what} (tried: {tried})"
        if not self.keep and self.wiring.settings.incremental:
            keep_validators(
                self.wiring,
                self.state,
                url=self.job.url,
                source=self.job.source,
                validators=self._validators(),
            )
        return record_outcome(
            self.wiring,
            run_id=self.job.run_id,
            source=self.job.source,
            url=self.job.url,
            outcome=Outcome.NO_METADATA,
            reason=reason,
        )


def _size(limit: int) -> str:
    return f"{limit // MiB} MiB" if limit % MiB == 0 else f"{limit} bytes"


def _body_text(content: bytes) -> tuple[str, str | None]:
    """A document's bytes as its message holds them: UTF-8 text, else base64 (and which)."""
    try:
        return content.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(content).decode("ascii"), "base64"


def _cut_warning(response: FetchResponse) -> str:
    return (
        f"truncated-page: {response.url} is larger than {_size(MAX_PAGE_BYTES)}: only what lies "
        "before the cut was read; metadata past it was not seen"
    )


def _message(job: DocumentJob) -> str | None:
    """The message of ``job``, or None when it is over the size a message may have (which
    ``encode`` refuses)."""
    try:
        return encode(job)
    except ContractError:
        return None


def _provenance(wiring: Wiring, response: FetchResponse) -> DocumentRef:
    """A reference holding how ``response`` was fetched (the rest is filled in by the caller)."""
    headers = {name: value for name in PROVENANCE_HEADERS if (value := response.header(name))}
    return DocumentRef(
        key="",
        url=response.url,
        media_type=response.media_type or "application/octet-stream",
        status=response.status,
        redirects=tuple(response.redirects),
        headers=headers,
        fetched_at=wiring.clock.now().isoformat(timespec="seconds"),
    )


def _raw_key_of(job: UrlJob, item: _Found) -> str:
    content = item.response.body if item.body is None else item.body
    media = item.media_type or item.response.media_type
    return raw_key(job.source, item.response.url, content, _extension(media))


def _extension(media: str | None) -> str:
    return "html" if media in HTML_MEDIA_TYPES else "json"


def _worth_reading(media: MediaType) -> bool:
    """Whether a body of this type may hold metadata or links (HTML, JSON-LD, unknown)."""
    return not media.type or media.type in HTML_MEDIA_TYPES or media.type in JSONLD_MEDIA_TYPES


def _json_of(body: bytes) -> Any:
    try:
        return parse_jsonld(body).data
    except ExtractionError:
        return None


def _is_item_list(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    kinds = data.get("@type", [])
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return any(
        isinstance(kind, str) and kind.rsplit("/", 1)[-1].removeprefix("schema:") == "ItemList"
        for kind in kinds
    )


def _looks_like_json(response: FetchResponse) -> bool:
    media = parse_media_type(response.header("content-type")).type
    if media in ("application/linkset+json", "application/json"):
        return True
    if media == "application/linkset":
        return False
    return response.body.lstrip()[:1] in (b"{", b"[")


def store_raw(  # noqa: PLR0913 - the provenance of a document has this many parts
    wiring: Wiring,
    job: UrlJob,
    response: FetchResponse,
    pattern: str,
    *,
    via: str = "self",
    authority: str | None = None,
    body: bytes | None = None,
    media_type: str | None = None,
    warnings: tuple[str, ...] = (),
) -> DocumentRef:
    """Keep a fetched (or, for ``html-meta``, built) document with a provenance file beside it.

    ``body``/``media_type`` override the response's (a document the resolver built); the
    provenance still names the response it was built from. ``warnings`` travel on the
    reference to the record's report (an unverified claim, a page cut at its cap).
    """
    content = response.body if body is None else body
    media = media_type or response.media_type
    key = raw_key(job.source, response.url, content, _extension(media))
    wiring.store.put(key, content, content_type=media or "application/octet-stream")
    provenance = {
        "url": job.url,
        "final_url": response.url,
        "redirects": list(response.redirects),
        "status": response.status,
        "headers": [list(pair) for pair in response.headers],
        "fetched_at": wiring.clock.now().isoformat(timespec="seconds"),
        "pattern": pattern,
        "via": via,
        "authority": authority,
        "warnings": list(warnings),
        "truncated": response.truncated,
        "run_id": job.run_id,
        "sitemap": job.sitemap,
        "lastmod": job.lastmod,
    }
    wiring.store.put(
        raw_meta_key(key),
        json.dumps(provenance, indent=2, sort_keys=True).encode("utf-8"),
        content_type="application/json",
    )
    return replace(
        _provenance(wiring, response),
        key=key,
        media_type=media,
        via=via,
        authority=authority,
        warnings=warnings,
    )
