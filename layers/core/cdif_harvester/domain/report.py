"""The publisher report: how a harvest of a site went, and why records failed, as one HTML page.

:func:`render_report` turns what a run wrote (the ``summary.json`` dict and the outcome dicts of
``outcomes.jsonl``) into a complete, self-contained HTML5 document a publisher can read without
help: inline CSS, an inline SVG chart, no script and no external resource (a Content Security
Policy of ``default-src 'none'`` says so to the browser too). Pure: values in, text out.

Decisions:

* **Numbers.** Every figure is counted from the outcomes given. For the whole run they must be
  those of ``summary.json``; if they are not (the inputs do not belong together), the page says
  so in a warning instead of silently showing either. With ``source`` the page covers that
  source's URLs only and every figure is counted from them. Each number is the whole text of an
  element with ``data-count="<name>"`` (plain digits), so a program can read the page back:
  ``urls``, ``outcome-<outcome>``, ``pattern-<pattern>``, ``records``, ``valid-records``,
  ``invalid-records``, ``withdrawn``, ``urls-without-valid-record``, ``signposting-level-<n>``,
  ``problem-<kind>-records``/``-urls``...; the chart's labels are ``chart-outcome-<outcome>``.
* **What to fix first.** Record errors and the reasons of URLs that yielded nothing are grouped
  into kinds: the record-specific parts (list positions in paths, URLs, quoted values, numbers)
  are taken out, so "schema:creator/3/schema:name is required" and "schema:creator/0/schema:name
  is required" are one kind. Kinds are ranked by how many records (validation errors) or URLs
  (failures) they hit, each with a plain-language fix from :data:`FIXES` and up to three example
  URLs. ``unchanged`` URLs are not problems and are left out.
* **FAIR Signposting** (https://signposting.org/FAIR/). The level of a URL is judged from the
  pattern that led to its metadata, which is the most authoritative one the resolver found
  (headers outrank HTML, and typed links outrank embedded scripts): level 1 for typed links in
  HTTP ``Link`` headers or HTML ``<link>`` elements (``http-link``, ``html-link``), level 2 for
  a linkset (``linkset``). Every other pattern counts as no Signposting at the resource:
  ``embedded-script``, ``content-type``, ``item-list``, ``format-parameter``,
  ``content-negotiation``, ``html-meta`` and ``legacy-meta`` (the 1997 ``rel="meta"`` draft)
  find metadata without typed links, and a Signmap's ``<rs:ln>`` links live in the sitemap, not
  at the landing page, so a client that arrives at the page does not see them (the page says
  this, and that the Signmap is still welcome). The source's level is the highest any of its
  URLs reached, with how many URLs reached it and what to add to reach the next level.
* **Escaping.** URLs, reasons and error messages are publisher-controlled: every text goes
  through :func:`html.escape` (quotes too) after control characters are dropped, and a URL is
  made a link only when it is ``http``/``https``.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdif_harvester.keys import source_of

__all__ = [
    "FIXES",
    "MAX_URL_ROWS",
    "OUTCOME_MEANINGS",
    "PATTERN_MEANINGS",
    "ProblemKind",
    "classify_error",
    "classify_reason",
    "render_report",
    "signposting_level",
]

#: How many URLs without a valid record the table lists; the page says how many more there are.
MAX_URL_ROWS = 200
#: How many kinds of problem are listed, and how many example URLs each.
MAX_PROBLEM_KINDS = 40
MAX_EXAMPLES = 3
_MAX_TEXT = 400  # characters of one reason or message shown (the rest is in outcomes.jsonl)
_MAX_WITHDRAWN_ROWS = 50
_MAX_MESSAGE = 4000  # characters of a message classified
_MAX_KEY = 160  # characters of the key of a kind of no known form

# The README's outcomes table, in its order.
OUTCOME_MEANINGS: Mapping[str, str] = {
    "record": "metadata found; every record made from it is listed, valid or not",
    "no-metadata": "the URL answered but holds no CDIF/schema.org Dataset metadata",
    "unchanged": "skipped because nothing changed since the last harvest",
    "disallowed": "robots.txt disallows it for the harvester; never fetched",
    "blocked": "refused by the address policy (private, link-local, loopback...) before any "
    "connection",
    "failed": "fetched but unusable (HTTP error, too large, redirect loop, malformed JSON...)",
}
_OUTCOME_COLOURS: Mapping[str, str] = {
    "record": "#2e7d32",
    "no-metadata": "#b26a00",
    "unchanged": "#546e7a",
    "disallowed": "#6a1b9a",
    "blocked": "#8e2424",
    "failed": "#c62828",
}

# The README's discovery patterns table: what the publisher serves for each.
PATTERN_MEANINGS: Mapping[str, str] = {
    "format-parameter": "a metadata server answering CDIF JSON-LD for a query parameter",
    "signmap": "a Signmap: typed links to the metadata in the sitemap",
    "content-type": "the metadata file itself at the sitemap location",
    "item-list": "one file of many records (a CDIF list or schema.org ItemList)",
    "http-link": "a describedby link in the HTTP Link header",
    "linkset": "a linkset (RFC 9264) announced with rel=linkset",
    "legacy-meta": "an old-style rel=meta link (1997 draft)",
    "embedded-script": "JSON-LD embedded in the landing page",
    "html-link": "a describedby link element in the page head",
    "content-negotiation": "JSON-LD by content negotiation, nothing announced",
    "html-meta": "Dublin Core / Highwire meta tags only (last resort)",
}

# FAIR Signposting levels (https://signposting.org/FAIR/) by resolution pattern; any other
# pattern is level 0 (see the module docstring for why Signmaps are not a level of their own).
_SIGNPOSTING_LEVELS: Mapping[str, int] = {"http-link": 1, "html-link": 1, "linkset": 2}
_LEVEL_NAMES: Mapping[int, str] = {
    2: "Level 2: a linkset",
    1: "Level 1: typed links in HTTP headers or HTML",
    0: "No Signposting at the landing page",
}
_NEXT_STEP: Mapping[int, str] = {
    0: (
        "To reach level 1, announce the metadata on every landing page with typed links: an "
        'HTTP header Link: <https://…/metadata.jsonld>; rel="describedby"; '
        'type="application/ld+json" (or <link rel="describedby" type="application/ld+json" '
        'href="…"> in the HTML head), with cite-as (the persistent identifier), type '
        "(https://schema.org/Dataset), author, license and item links as FAIR Signposting "
        "describes."
    ),
    1: (
        "To reach level 2, publish the same links as a linkset (RFC 9264, "
        "application/linkset+json) and point to it from every landing page with "
        'Link: <https://…/linkset.json>; rel="linkset"; type="application/linkset+json". '
        "The harvester's views/<source>/<record>/linkset.json files are a starting point."
    ),
    2: "Level 2 is the highest: keep the linksets in step with the landing pages.",
}

_REPAIRS_TRIED = (
    "stripped a byte order mark, removed a CDATA or HTML comment wrapper, unescaped HTML "
    "entities, removed comments, escaped control characters in strings, removed trailing "
    "commas and a stray closing brace"
)

#: Plain-language fixes by problem kind: a kind's own key first (``required:schema:name``),
#: then its family (``required``). ``{path}``, ``{item}``, ``{types}``, ``{alternatives}`` are
#: filled in from the message (and escaped with the rest of the text when rendered).
FIXES: Mapping[str, str] = {
    # -- validation: missing required properties (CDIF core 1.0 content items) --
    "required:schema:name": 'Give every dataset a title: "name": "…" in its JSON-LD.',
    "required:schema:description": (
        'Describe the dataset in a few sentences: "description": "…" (or nil:missing when it '
        "really has none)."
    ),
    "required:schema:identifier": (
        "Add the dataset's persistent identifier (DOI, handle, ARK...): "
        '"identifier": {"@type": "PropertyValue", "propertyID": '
        '"https://registry.identifiers.org/registry/doi", "value": "doi:10.…", '
        '"url": "https://doi.org/10.…"}.'
    ),
    "required:schema:license": (
        "Say under which terms the data may be used: "
        '"license": "https://creativecommons.org/licenses/by/4.0/" (the URL of the licence), '
        'or "conditionsOfAccess" in words when there is no licence.'
    ),
    "required:schema:url": (
        'Say where the data can be had: "url" (the landing page) or "distribution" with a '
        "DataDownload (contentUrl, encodingFormat)."
    ),
    "required:schema:dateModified": (
        'Add "dateModified": when the dataset or its metadata last changed, as an ISO 8601 '
        "date such as 2024-05-31 (nil:unknown when it is not known)."
    ),
    "required:@id": (
        'Give the dataset an IRI of its own: "@id": its DOI URL or landing page URL (not a '
        "blank node)."
    ),
    "required:@type": 'Type the node as a dataset: "@type": "Dataset".',
    "required:@context": (
        'Declare the JSON-LD context: "@context": {"@vocab": "https://schema.org/"} (with the '
        "dcterms, dcat and prov prefixes CDIF uses)."
    ),
    "required:schema:subjectOf": (
        'Describe the metadata record itself: "subjectOf": {"@id": "<landing page>#metadata", '
        '"@type": "Dataset", "additionalType": ["dcat:CatalogRecord"], "about": {"@id": "<the '
        'dataset @id>"}, "dcterms:conformsTo": [{"@id": "https://w3id.org/cdif/core/1.0"}], '
        '"sdDatePublished": "…"}.'
    ),
    "required:schema:subjectOf/@id": (
        'Give the metadata record (subjectOf) an IRI of its own, e.g. "<landing page>#metadata".'
    ),
    "required:schema:subjectOf/@type": 'Type the metadata record (subjectOf) "@type": "Dataset".',
    "required:schema:subjectOf/schema:additionalType": (
        'Mark the metadata record (subjectOf) as a catalogue record: "additionalType": '
        '["dcat:CatalogRecord"].'
    ),
    "required:schema:subjectOf/schema:about": (
        'Say what the metadata record describes: in subjectOf, "about": {"@id": "<the '
        'dataset @id>"}.'
    ),
    "required:schema:subjectOf/dcterms:conformsTo": (
        'Declare the CDIF profile: in subjectOf, "dcterms:conformsTo": [{"@id": '
        '"https://w3id.org/cdif/core/1.0"}] (add https://w3id.org/cdif/discovery/1.0 for the '
        "discovery profile)."
    ),
    "required:schema:distribution/*/schema:contentUrl": (
        'Give every DataDownload in "distribution" its "contentUrl": the URL the file is '
        "downloaded from."
    ),
    "required": (
        "Add {path} to the JSON-LD of each record listed ({item}). The CDIF core profile "
        "requires it; nil:missing may stand in only where the profile allows."
    ),
    # -- validation: other rules --
    "type": (
        "Give {path} as {types}. A node (a person, a place, an identifier) is a JSON object "
        'with its "@type" and properties, not plain text; a single value is not a list.'
    ),
    "date": (
        "Write {path} in ISO 8601: 2024-05-31, or 2024-05-31T12:00:00Z with a time; not "
        '31/05/2024 or "May 2024".'
    ),
    "pattern": "Write {path} in the form the CDIF profile asks for (see the example message).",
    "enum": "Use one of the values allowed for {path} (the example message lists them).",
    "empty": "Give at least one value for {path}, or leave the property out when it is optional.",
    "nil": (
        "{path} may not be a nil value: nil:missing and nil:unknown stand only for a whole "
        "required-but-nilable item (description, creator, dateModified, provider...). Give a "
        "real value, or leave an optional item out."
    ),
    "nil-alone": "A nil value in {path} must be its only value: drop it, or drop the others.",
    "nil-notapplicable": (
        "nil:notapplicable is only for geographic extent, temporal coverage and variables "
        "measured; give {path} a real value or nil:missing/nil:unknown where allowed."
    ),
    "needs-one-of": "Give {path} at least one of {alternatives}.",
    "must-include:schema:subjectOf/dcterms:conformsTo": (
        'Declare the CDIF profile: in subjectOf, "dcterms:conformsTo": [{"@id": '
        '"https://w3id.org/cdif/core/1.0"}] (a discovery record declares both core and '
        "https://w3id.org/cdif/discovery/1.0)."
    ),
    "must-include:@type": 'The resource must be typed as a dataset: "@type": "Dataset".',
    "must-include": "{path} must include the value named in the example message.",
    "undescribed-agent": (
        "{path} names an agent only by @id: describe it where it first appears, with its "
        '"@type" (Person or Organization) and "name".'
    ),
    "temporal-order": (
        'Give temporalCoverage as start/end, the start first: "2019-01-01/2020-12-31".'
    ),
    "blank-id": 'Give the dataset an IRI as "@id" (its DOI or landing page URL), not a blank node.',
    "blank-record-id": (
        'Give the metadata record (subjectOf) an IRI as "@id", e.g. "<landing page>#metadata".'
    ),
    "record-id-same": (
        "The metadata record (subjectOf) needs an @id different from the dataset's, e.g. "
        '"<landing page>#metadata".'
    ),
    "about-mismatch": (
        'In subjectOf, "about" must name the dataset: {"@id": "<the dataset @id>"}.'
    ),
    "no-dataset": (
        'The JSON-LD holds no dataset: type the main node "@type": "Dataset" (schema.org), '
        "with the schema.org context."
    ),
    "jsonld-processing": (
        "The JSON-LD could not be processed: check the @context (a schema.org context, no "
        "unreachable remote contexts) and that @id values are IRIs. Any JSON-LD playground "
        "shows the same error."
    ),
    "not-an-object": "The metadata must be a JSON object (a Dataset node), not a list or a value.",
    "invalid": "See the record's report under reports/ for what makes it invalid.",
    "other": "See the example message, and the record's report under reports/ for the details.",
    # -- URLs that yielded no record --
    "no-metadata": (
        "The page holds no CDIF metadata the harvester could find. Embed the record in the "
        'page: <script type="application/ld+json">{"@context": …, "@type": "Dataset", …}'
        '</script>, or link to it: <link rel="describedby" type="application/ld+json" '
        'href="…"> in the head or an HTTP Link header with rel="describedby".'
    ),
    "no-dataset-block": (
        "The page has JSON-LD, but no block holds a schema.org Dataset: give the dataset's "
        'block "@type": "Dataset".'
    ),
    "malformed-json": (
        "The JSON-LD is not valid JSON even after the harvester's repairs ("
        + _REPAIRS_TRIED
        + "). Fix the syntax error at the line and column the message gives (a JSON linter "
        "shows it); the repairs already tried are named in the message."
    ),
    "robots-txt": (
        "robots.txt disallows this URL for the harvester. If it should be harvested, allow it: "
        "User-agent: cdif-harvester / Allow: /datasets/. If it is private, nothing to do."
    ),
    "cross-host-location": (
        "The sitemap lists URLs of another host. Announce the sitemap in that host's "
        "robots.txt (Sitemap: …), or list only URLs of the sitemap's own host."
    ),
    "http-404": (
        "The page is not found (HTTP 404). Remove it from the sitemap, or restore it (a "
        "retired dataset can keep a tombstone page answering 410 with its metadata links)."
    ),
    "http-410": (
        "The page is gone (HTTP 410). Remove it from the sitemap; keep Link headers on the "
        "tombstone if its metadata should stay findable."
    ),
    "http-auth": (
        "The server refuses access (HTTP 401/403). Landing pages and metadata must be readable "
        "without logging in; check firewall or bot rules for the harvester's User-Agent."
    ),
    "http-429": (
        "The server asked the harvester to slow down (HTTP 429) until it gave up. Set a "
        "Crawl-delay in robots.txt, or raise the rate limit for the harvester."
    ),
    "http-4xx": "The server answered a client error; check the URL in the sitemap is right.",
    "http-5xx": (
        "The server failed (HTTP 5xx) on every attempt. Check the server's logs for these "
        "URLs; the harvester retries, honouring Retry-After."
    ),
    "too-large": (
        "The answer is larger than the harvester accepts (10 MiB on the wire, 50 MiB "
        "decompressed; landing pages are read up to 5 MiB). Keep metadata small, and link "
        "large files from the metadata instead of serving them at the sitemap URL."
    ),
    "redirect": (
        "The redirects do not end: a loop, more than 5 hops, or a redirect without a usable "
        "Location. Redirect each URL straight to its final page."
    ),
    "blocked": (
        "The URL points at an address the harvester never contacts (private, loopback, "
        "link-local, cloud metadata) or uses another scheme than http/https. List public "
        "http(s) URLs only, with host names that resolve to public addresses."
    ),
    "timeout": (
        "The server did not answer in time (5 s to connect, 10 s between reads, 30 s in "
        "all). Make these pages faster, or check they are reachable from the internet."
    ),
    "dns-failure": "The host name does not resolve. Check the DNS records of the host.",
    "tls-error": (
        "The TLS (HTTPS) handshake failed: check the certificate is valid, not expired, and "
        "covers the host name, with its intermediate certificates served."
    ),
    "network": (
        "The connection failed (refused, reset or a broken HTTP answer). Check the server is "
        "reachable from the internet."
    ),
    "encoding": (
        "The body could not be decoded: check Content-Encoding matches what is sent (gzip, "
        "deflate, br) and that the answer is complete."
    ),
    "sitemap": (
        "The sitemap could not be read: serve well-formed sitemaps.org XML (or gzip of it, or "
        "one URL per line), without a DOCTYPE or entities, at most 50,000 URLs and 50 MiB each."
    ),
    "robots-unavailable": (
        "robots.txt answered a server error, which means 'do not crawl now' (RFC 9309). "
        "Serve it with 200 (or 404 when there is none)."
    ),
    "no-sitemaps-in-robots": (
        "robots.txt announces no sitemap: add Sitemap: https://…/sitemap.xml lines to it."
    ),
    "invalid-url": "The URL is not valid: check how the sitemap writes it (escaping, scheme).",
    "internal-error": (
        "The harvester itself failed on this URL: a bug on our side, not yours. Please report "
        "it with the example message."
    ),
}

# Reason codes (the part of a reason before ": ") by the kind they are grouped into.
_REASON_KINDS: Mapping[str, str] = {
    "no-metadata": "no-metadata",
    "no-dataset": "no-dataset-block",
    "malformed-json": "malformed-json",
    "robots-txt": "robots-txt",
    "cross-host-location": "cross-host-location",
    "body-too-large": "too-large",
    "decompressed-too-large": "too-large",
    "too-large": "too-large",
    "max-urls": "sitemap",
    "redirect": "redirect",
    "redirect-loop": "redirect",
    "too-many-redirects": "redirect",
    "redirect-without-location": "redirect",
    "bad-redirect-location": "redirect",
    "address-refused": "blocked",
    "cloud-metadata-address": "blocked",
    "unspecified-address": "blocked",
    "loopback-address": "blocked",
    "link-local-address": "blocked",
    "private-address": "blocked",
    "shared-address": "blocked",
    "multicast-address": "blocked",
    "documentation-address": "blocked",
    "benchmarking-address": "blocked",
    "reserved-address": "blocked",
    "scheme-not-allowed": "blocked",
    "invalid-host": "blocked",
    "non-canonical-ip": "blocked",
    "timeout": "timeout",
    "total-timeout": "timeout",
    "connect-timeout": "timeout",
    "read-timeout": "timeout",
    "write-timeout": "timeout",
    "pool-timeout": "timeout",
    "dns-failure": "dns-failure",
    "tls-error": "tls-error",
    "network": "network",
    "network-error": "network",
    "connect-error": "network",
    "connection-refused": "network",
    "connection-reset": "network",
    "protocol-error": "network",
    "content-decoding-error": "encoding",
    "truncated-body": "encoding",
    "unsupported-content-encoding": "encoding",
    "not-a-sitemap": "sitemap",
    "malformed-xml": "sitemap",
    "malformed-gzip": "sitemap",
    "xml-entities-refused": "sitemap",
    "sitemap-depth-exceeded": "sitemap",
    "sitemap": "sitemap",
    "robots-unavailable": "robots-unavailable",
    "no-sitemaps-in-robots": "no-sitemaps-in-robots",
    "invalid-url": "invalid-url",
    "invalid-request": "invalid-url",
    "normalisation-failed": "jsonld-processing",
    "internal-error": "internal-error",
}
_KIND_TITLES: Mapping[str, str] = {
    "no-metadata": "No metadata found on the page",
    "no-dataset-block": "JSON-LD without a Dataset",
    "malformed-json": "Malformed JSON-LD",
    "robots-txt": "Disallowed by robots.txt",
    "cross-host-location": "Sitemap lists another host's URLs",
    "http-404": "Page not found (HTTP 404)",
    "http-410": "Page gone (HTTP 410)",
    "http-auth": "Access refused (HTTP 401/403)",
    "http-429": "Too many requests (HTTP 429)",
    "http-4xx": "Client error (HTTP 4xx)",
    "http-5xx": "Server error (HTTP 5xx)",
    "too-large": "Too large",
    "redirect": "Redirect loop or too many redirects",
    "blocked": "Blocked address",
    "timeout": "Timed out",
    "dns-failure": "Host name does not resolve",
    "tls-error": "TLS (HTTPS) error",
    "network": "Connection failed",
    "encoding": "Body could not be decoded",
    "sitemap": "Unreadable sitemap",
    "robots-unavailable": "robots.txt unavailable (server error)",
    "no-sitemaps-in-robots": "robots.txt announces no sitemap",
    "invalid-url": "Invalid URL",
    "jsonld-processing": "JSON-LD processing failed",
    "internal-error": "Harvester error",
    "no-dataset": "No Dataset in the JSON-LD",
    "not-an-object": "Metadata is not a JSON object",
    "temporal-order": "Temporal coverage ends before it starts",
    "blank-id": "Dataset @id is a blank node",
    "blank-record-id": "Metadata record @id is a blank node",
    "record-id-same": "Metadata record has the dataset's @id",
    "about-mismatch": "subjectOf/about does not name the dataset",
    "invalid": "Invalid record (no message)",
}


@dataclass(frozen=True)
class ProblemKind:
    """One kind of problem: a stable ``key``, a ``title`` and how to fix it.

    ``scope`` is ``record`` for a validation error (counted per record) or ``url`` for the
    reason a URL yielded no record (counted per URL).
    """

    key: str
    title: str
    fix: str
    scope: str


# --- classification -----------------------------------------------------------------------

_URL_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()\[\],;]+")
_QUOTED_RE = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER_RE = re.compile(r"(?<![A-Za-z])\d+(?:\.\d+)?")
_INDEX_RE = re.compile(r"(?<=/)\d+(?=/|$)")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# The " (Content item, cardinality)" validation messages end with; an item may hold one
# parenthesis of its own, "Provenance (input datasets)".
_ITEM_RE = re.compile(r" \((?P<item>[^()]*(?:\([^()]*\))?[^()]*), (?P<card>\d(?:\.\.[\d*])?)\)$")
_TYPES_RE = re.compile(r"'([^']+)'")

_VALIDATION_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("required-or", re.compile(r"^(?P<path>\S+) or (?P<other>\S+) is required$")),
    ("required", re.compile(r"^(?P<path>\S+) is required$")),
    ("nil", re.compile(r"^(?P<path>\S+) must not be a nil value \(.*$")),
    ("nil", re.compile(r"^(?P<path>\S+): nil:\w+ is not allowed here$")),
    ("nil-alone", re.compile(r"^(?P<path>\S+): a nil value must be the only value$")),
    ("nil-notapplicable", re.compile(r"^(?P<path>\S+): nil:notapplicable is only for .*$")),
    ("needs-one-of", re.compile(r"^(?P<path>\S+) needs one of (?P<alternatives>.+)$")),
    ("must-include", re.compile(r"^(?P<path>\S+) must include .+$")),
    ("type", re.compile(r"^(?P<path>\S+): .* is not of type (?P<types>'[^']+'(?:, '[^']+')*)$")),
    ("date", re.compile(r"^(?P<path>\S+): .* is not a '(?:date|date-time|time)'$")),
    ("enum", re.compile(r"^(?P<path>\S+): .* is not one of .+$")),
    ("pattern", re.compile(r"^(?P<path>\S+): .* does not match .+$")),
    ("empty", re.compile(r"^(?P<path>\S+): .* (?:should be non-empty|is too short)$")),
    ("undescribed-agent", re.compile(r"^(?P<path>\S+) names .+, an agent the record does not")),
    ("temporal-order", re.compile(r"^schema:temporalCoverage .* ends before it starts")),
    ("blank-id", re.compile(r"^the resource @id must be an IRI")),
    ("blank-record-id", re.compile(r"^the metadata record \(schema:subjectOf\) @id must be")),
    ("record-id-same", re.compile(r"^the metadata record \(schema:subjectOf\) has the same @id")),
    ("about-mismatch", re.compile(r"^schema:subjectOf/schema:about must give the @id")),
    ("jsonld-processing", re.compile(r"^JSON-LD (?:expansion|compaction) failed")),
    ("no-dataset", re.compile(r"^(?:no schema:Dataset node found|not a JSON-LD document)")),
    ("not-an-object", re.compile(r"^the record must be a JSON object$")),
)
_CLOSEST_RE = re.compile(r"^(?P<path>\S+) does not match any allowed form; closest: (?P<inner>.+)$")
# JSON Schema types in words; the normaliser makes a list of a single value where the profile
# wants one, so "array" asks for values of the right kind rather than for brackets.
_TYPE_WORDS: Mapping[str, str] = {
    "object": "a JSON object",
    "string": "text (a JSON string)",
    "array": "one value or a list of values of the right kind",
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
}
_DATE_PROPERTIES = ("date", "Date", "sdDatePublished", "temporalCoverage")


def _clean(text: object) -> str:
    return _CONTROL_RE.sub("", str(text))


def _general_path(path: str) -> str:
    """A path with its list positions taken out: schema:creator/0/schema:name ->
    schema:creator/*/schema:name."""
    return _INDEX_RE.sub("*", path)


def _generalise(text: str) -> str:
    """Take the record- or URL-specific parts out of a message: URLs, quoted values, list
    positions, numbers."""
    text = _URL_RE.sub("<URL>", text)
    text = _QUOTED_RE.sub("<value>", text)
    text = _INDEX_RE.sub("*", text)
    return _NUMBER_RE.sub("<n>", text)


_PLACEHOLDER_RE = re.compile(r"\{(path|item|types|alternatives)\}")


def _fix_for(key: str, family: str, **values: str) -> str:
    """The fix for a kind, its placeholders filled in (only these: the fixes quote JSON, whose
    braces must stay as they are)."""
    template = FIXES.get(key) or FIXES.get(family) or FIXES["other"]
    return _PLACEHOLDER_RE.sub(lambda found: values.get(found.group(1), "it"), template)


def classify_error(message: str) -> ProblemKind:
    """Group one validation error message (of a record's report) into its kind of problem.

    Never raises; a message of no known form becomes a kind of its own, keyed by the message
    with its record-specific parts (URLs, quoted values, numbers) taken out.
    """
    text = _clean(message).strip()
    if len(text) > _MAX_MESSAGE:
        # A message quoting a huge value: its start (the path) and end (the content item) are
        # what classify it, and the rules then stay cheap.
        text = text[: _MAX_MESSAGE // 2] + " … " + text[-_MAX_MESSAGE // 4 :]
    found = _ITEM_RE.search(text)
    item = found.group("item") if found else ""
    core = text[: found.start()] if found else text
    closest = _CLOSEST_RE.match(core)
    if closest:  # the closest branch's problem is the one to fix
        core = closest.group("inner")
        inner = _ITEM_RE.search(core)
        if inner:
            item = item or inner.group("item")
            core = core[: inner.start()]
    for family, rule in _VALIDATION_RULES:
        match = rule.match(core)
        if match is None:
            continue
        groups = match.groupdict()
        path = _general_path(groups.get("path") or "")
        if family == "required-or":
            key = f"required:{path}"
            other = _general_path(groups["other"])
            title = f"Neither {path} nor {other} is given"
            return ProblemKind(
                key, title, _fix_for(key, "required", path=path, item=item), "record"
            )
        # A badly formed value of a date property is an invalid date, whatever rule caught it.
        is_date = family == "pattern" and any(word in path for word in _DATE_PROPERTIES)
        kind = "date" if is_date else family
        key = f"{kind}:{path}" if path else kind
        named = _TYPES_RE.findall(groups.get("types") or "")
        types = " or ".join(_TYPE_WORDS.get(t, t) for t in named) or "the right type"
        values = {
            "path": path,
            "item": item or "a CDIF content item",
            "types": types,
            "alternatives": groups.get("alternatives") or "the properties named",
        }
        return ProblemKind(
            key, _title(kind, path, item, types), _fix_for(key, kind, **values), "record"
        )
    general = _generalise(core)[:_MAX_KEY]
    return ProblemKind(f"other:{general}", general, _fix_for("", "other"), "record")


def _title(family: str, path: str, item: str, types: str) -> str:
    about = f" ({item})" if item else ""
    titles = {
        "required": f"Missing required property {path}{about}",
        "nil": f"Nil value not allowed in {path}{about}",
        "nil-alone": f"Nil value mixed with others in {path}{about}",
        "nil-notapplicable": f"nil:notapplicable not allowed in {path}{about}",
        "needs-one-of": f"{path} lacks every one of its alternatives{about}",
        "must-include": f"{path} lacks a required value{about}",
        "type": f"Wrong type: {path} should be {types}{about}",
        "date": f"Invalid date in {path}{about}",
        "enum": f"Value not allowed in {path}{about}",
        "pattern": f"Badly formed {path}{about}",
        "empty": f"Empty {path}{about}",
        "undescribed-agent": f"{path} names an agent the record does not describe",
    }
    return titles.get(family) or _KIND_TITLES.get(family, family)


def classify_reason(reason: str | None, outcome: str) -> ProblemKind:
    """Group the reason a URL yielded no record (``<code>: <details>``) into its kind.

    ``outcome`` decides the kind when the reason is missing or of no known code (a ``blocked``
    URL is a blocked address whatever its code). Never raises.
    """
    text = _clean(reason or "").strip()
    code, _, _details = text.partition(": ")
    code = code.strip().lower()
    status = re.fullmatch(r"http-(\d{3})", code)
    if status:
        number = int(status.group(1))
        if number in (404, 410, 429):
            kind = f"http-{number}"
        elif number in (401, 403, 407):
            kind = "http-auth"
        else:
            kind = "http-5xx" if number >= 500 else "http-4xx"
    elif code in _REASON_KINDS:
        kind = _REASON_KINDS[code]
    elif outcome in ("blocked", "disallowed", "no-metadata"):
        kind = {"blocked": "blocked", "disallowed": "robots-txt"}.get(outcome, "no-metadata")
    else:
        general = _generalise(text[:_MAX_MESSAGE])[:_MAX_KEY] or outcome
        return ProblemKind(f"other-reason:{general}", general, FIXES["other"], "url")
    return ProblemKind(kind, _KIND_TITLES.get(kind, kind), FIXES.get(kind, FIXES["other"]), "url")


def signposting_level(pattern: str | None) -> int:
    """The FAIR Signposting level a URL reached, judged from the pattern that led to its
    metadata: 2 for a linkset, 1 for typed links in HTTP headers or HTML, else 0."""
    return _SIGNPOSTING_LEVELS.get(pattern or "", 0)


# --- counting ----------------------------------------------------------------------------


@dataclass
class _Counts:
    urls: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    patterns: dict[str, int] = field(default_factory=dict)
    records: int = 0
    valid: int = 0
    invalid: int = 0
    problem_urls: int = 0  # URLs that did not yield only valid records (and are not unchanged)


def _count(outcomes: Sequence[Mapping[str, Any]]) -> _Counts:
    """The figures of summary.json, counted the way the local runner counts them."""
    kinds = Counter(str(o.get("outcome")) for o in outcomes)
    known = {kind: kinds.get(kind, 0) for kind in OUTCOME_MEANINGS}
    extra = {kind: count for kind, count in sorted(kinds.items()) if kind not in known}
    records = [r for o in outcomes for r in _records(o)]
    valid = sum(1 for r in records if r.get("valid") is True)
    return _Counts(
        urls=len(outcomes),
        outcomes={**known, **extra},
        patterns=dict(
            sorted(Counter(str(o["pattern"]) for o in outcomes if o.get("pattern")).items())
        ),
        records=len(records),
        valid=valid,
        invalid=len(records) - valid,
        problem_urls=sum(1 for o in outcomes if _has_problem(o)),
    )


def _has_problem(outcome: Mapping[str, Any]) -> bool:
    """True for a URL that yielded no record, or an invalid one (unchanged URLs are fine)."""
    kind = outcome.get("outcome")
    if kind == "unchanged":
        return False
    records = _records(outcome)
    return kind != "record" or not records or any(r.get("valid") is not True for r in records)


def _records(outcome: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    records = outcome.get("records") or []
    return [r for r in records if isinstance(r, Mapping)]


def _disagreements(summary: Mapping[str, Any], counts: _Counts) -> list[tuple[str, Any, Any]]:
    """Where the counted figures differ from summary.json's: (name, summary's, counted)."""
    found: list[tuple[str, Any, Any]] = []
    for name, counted in (
        ("urls", counts.urls),
        ("records", counts.records),
        ("valid_records", counts.valid),
        ("invalid_records", counts.invalid),
    ):
        if name in summary and summary[name] != counted:
            found.append((name, summary[name], counted))
    for field_name, counted_map in (("outcomes", counts.outcomes), ("patterns", counts.patterns)):
        given = summary.get(field_name)
        if not isinstance(given, Mapping):
            continue
        for key in sorted(set(given) | set(counted_map)):
            if given.get(key, 0) != counted_map.get(key, 0):
                found.append((f"{field_name}.{key}", given.get(key, 0), counted_map.get(key, 0)))
    return found


def _source_key(source: str) -> str:
    """The source name for a host, host:port, URL or source name."""
    return source_of(source if "://" in source else f"http://{source}")


def _source_of_outcome(outcome: Mapping[str, Any]) -> str:
    given = outcome.get("source")
    return str(given) if given else source_of(str(outcome.get("url") or ""))


# --- problems ------------------------------------------------------------------------------


@dataclass
class _Problem:
    kind: ProblemKind
    urls: dict[str, None] = field(default_factory=dict)  # ordered set
    records: set[tuple[str, str]] = field(default_factory=set)
    example: str = ""

    @property
    def hits(self) -> int:
        return len(self.records) if self.kind.scope == "record" else len(self.urls)


def _problems(outcomes: Sequence[Mapping[str, Any]]) -> list[_Problem]:
    """Every kind of problem met, most hits first."""
    found: dict[str, _Problem] = {}

    def note(kind: ProblemKind, url: str, message: str, record: str | None) -> None:
        problem = found.setdefault(kind.key, _Problem(kind, example=message))
        problem.urls.setdefault(url, None)
        if record is not None:
            problem.records.add((url, record))

    for outcome in outcomes:
        url = str(outcome.get("url") or "")
        kind = str(outcome.get("outcome") or "")
        if kind == "unchanged":
            continue
        if kind != "record":
            reason = outcome.get("reason")
            note(classify_reason(reason, kind), url, str(reason or kind), None)
            continue
        for index, record in enumerate(_records(outcome)):
            if record.get("valid") is True:
                continue
            record_id = str(record.get("record_id") or f"#{index}")
            errors = [str(e) for e in record.get("errors") or []] or [""]
            for error in errors:
                problem = classify_error(error) if error else _invalid_without_message()
                note(problem, url, error, record_id)
    # Among equals, what robots.txt disallows goes last: it is usually meant.
    return sorted(
        found.values(),
        key=lambda p: (-p.hits, -len(p.urls), p.kind.key == "robots-txt", p.kind.title),
    )


def _invalid_without_message() -> ProblemKind:
    return ProblemKind("invalid", _KIND_TITLES["invalid"], FIXES["invalid"], "record")


# --- rendering ----------------------------------------------------------------------------


def _e(text: object) -> str:
    """Escape publisher-controlled text for HTML text and attribute values."""
    return html.escape(_clean(text), quote=True)


def _short(text: object, limit: int = _MAX_TEXT) -> str:
    text = _clean(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(name: str, value: object, tag: str = "span", css: str = "num") -> str:
    return f'<{tag} class="{css}" data-count="{_e(name)}">{_e(value)}</{tag}>'


def _link(url: str) -> str:
    shown = _e(_short(url, 200))
    if re.match(r"(?i)https?://", url):
        return f'<a href="{_e(url)}">{shown}</a>'
    return f"<span>{shown}</span>"


def _plural(count: int, one: str, many: str | None = None) -> str:
    return one if count == 1 else (many or one + "s")


_CSS = """
:root { --ink: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #ffffff; --panel: #f6f8fa;
  --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans",
  sans-serif; color: var(--ink); background: var(--bg); }
header, main, footer { max-width: 1120px; margin: 0 auto; padding: 0 24px; }
header { padding-top: 24px; border-bottom: 1px solid var(--line); }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 32px 0 8px; border-bottom: 1px solid var(--line);
  padding-bottom: 4px; }
h3 { font-size: 16px; margin: 0 0 4px; }
.lede { color: var(--muted); margin: 0 0 12px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0 0 16px; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
dl.meta ul { margin: 0; padding-left: 18px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { flex: 1 1 150px; background: var(--panel); border: 1px solid var(--line);
  border-radius: 6px; padding: 10px 14px; }
.card .big { display: block; font-size: 28px; font-weight: 700; }
.card.good .big { color: #2e7d32; } .card.bad .big { color: #c62828; }
.verdict { font-size: 16px; }
.warning { background: #fff4e5; border: 1px solid #b26a00; border-radius: 6px; padding: 8px 12px; }
.columns { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
.columns > * { flex: 1 1 420px; }
svg.chart { width: 100%; max-width: 560px; height: auto; }
svg.chart text { font: 13px system-ui, "DejaVu Sans", sans-serif; fill: var(--ink); }
table { border-collapse: collapse; width: 100%; margin: 8px 0; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px; border-bottom: 1px solid
  var(--line); }
th { background: var(--panel); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.url { overflow-wrap: anywhere; width: 38%; }
td.why { overflow-wrap: anywhere; color: #333; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px;
  margin-right: 6px; }
ol.problems { padding-left: 22px; }
ol.problems > li { margin: 0 0 16px; padding: 10px 14px; background: var(--panel);
  border: 1px solid var(--line); border-radius: 6px; }
.hits { color: var(--muted); margin: 0 0 6px; }
.fix { margin: 0 0 6px; }
.example { margin: 4px 0 0; color: var(--muted); overflow-wrap: anywhere; }
code { font: 13px ui-monospace, "DejaVu Sans Mono", monospace; background: #eef1f4;
  padding: 0 3px; border-radius: 3px; overflow-wrap: anywhere; }
.level { font-size: 17px; }
.outcome { font-weight: 600; }
td.kind { white-space: nowrap; }
a { color: var(--accent); }
footer { color: var(--muted); font-size: 13px; padding: 24px; border-top: 1px solid var(--line);
  margin-top: 32px; }
"""


def render_report(
    summary: Mapping[str, Any],
    outcomes: Iterable[Mapping[str, Any]],
    *,
    source: str | None = None,
) -> str:
    """Render the publisher report of one harvest run as a complete HTML5 document.

    ``summary`` is the dict written to summary.json, ``outcomes`` the outcome dicts (the
    lines of outcomes.jsonl, or :func:`~cdif_harvester.model.outcome_to_dict`). With
    ``source`` (a source name, host, ``host:port`` or URL) the page covers that source's URLs
    only. Every figure is counted from the outcomes (see the module docstring). Never raises for
    odd values in the inputs; all text is escaped.
    """
    listed = [o for o in outcomes if isinstance(o, Mapping)]
    withdrawn = [str(url) for url in summary.get("withdrawn") or []]
    entry_urls = [
        str(url) for url in summary.get("entry_urls") or [summary.get("entry_url")] if url
    ]
    disagreements: list[tuple[str, Any, Any]] = []
    if source is not None:
        wanted = _source_key(source)
        listed = [o for o in listed if _source_of_outcome(o) == wanted]
        withdrawn = [url for url in withdrawn if source_of(url) == wanted]
        entry_urls = [url for url in entry_urls if source_of(url) == wanted] or entry_urls
        sources = [wanted]
    else:
        sources = sorted({_source_of_outcome(o) for o in listed}) or sorted(
            {source_of(url) for url in entry_urls}
        )
    counts = _count(listed)
    if source is None:
        disagreements = _disagreements(summary, counts)
    run_id = str(summary.get("run_id") or "")
    label = ", ".join(sources) or "no source"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        # No script and nothing from elsewhere: the browser is told so too.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="cdif-harvester">',
        f"<title>Harvest report: {_e(label)} (run {_e(run_id)})</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        _header(summary, label, run_id, entry_urls),
        "<main>",
    ]
    if disagreements:
        parts.append(_warning(disagreements))
    parts += [
        _overview(counts, withdrawn),
        _outcomes_section(counts),
        _patterns_section(counts),
        _signposting_section(listed),
        _problems_section(_problems(listed)),
        _urls_section(listed),
        _withdrawn_section(withdrawn),
        "</main>",
        "<footer>Made by cdif-harvester from summary.json and outcomes.jsonl of run "
        f"<code>{_e(run_id)}</code>. Each record's full report (errors with JSON pointers, "
        "warnings, repairs) is under reports/&lt;source&gt;/ in the output directory.</footer>",
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


def _header(summary: Mapping[str, Any], label: str, run_id: str, entry_urls: list[str]) -> str:
    entries = "".join(f"<li>{_link(url)}</li>" for url in entry_urls) or "<li>none</li>"
    elapsed = summary.get("elapsed_seconds")
    took = (
        f"<dt>Took</dt><dd>{_num('elapsed-seconds', elapsed)} s</dd>"
        if isinstance(elapsed, int | float) and not isinstance(elapsed, bool)
        else ""
    )
    started = _e(summary.get("started_at") or "")
    finished = _e(summary.get("finished_at") or "not finished")
    return (
        "<header>"
        f'<h1>Harvest report: <span class="source">{_e(label)}</span></h1>'
        '<p class="lede">How the harvester read your site in this run, and what to change so '
        "every page yields a valid CDIF record.</p>"
        '<dl class="meta">'
        f"<dt>Source</dt><dd>{_e(label)}</dd>"
        f"<dt>Run</dt><dd><code>{_e(run_id)}</code></dd>"
        f'<dt>Started</dt><dd><time datetime="{started}">{started}</time></dd>'
        f'<dt>Finished</dt><dd><time datetime="{finished}">{finished}</time></dd>'
        f"{took}"
        f"<dt>Entry {_plural(len(entry_urls), 'URL')}</dt><dd><ul>{entries}</ul></dd>"
        "</dl></header>"
    )


def _warning(disagreements: list[tuple[str, Any, Any]]) -> str:
    items = "".join(
        f"<li><code>{_e(name)}</code>: summary.json says "
        f"{_num(f'summary-json-{name}', given)}, the outcomes add up to "
        f"{_num(f'counted-{name}', counted)}</li>"
        for name, given, counted in disagreements
    )
    return (
        '<div class="warning" role="alert"><strong>These figures do not match summary.json.'
        "</strong> The outcomes given are not those the summary counted; the page shows the "
        f"outcomes' own figures.<ul>{items}</ul></div>"
    )


def _overview(counts: _Counts, withdrawn: list[str]) -> str:
    bad = counts.problem_urls
    if counts.urls == 0:
        verdict = "No URL was harvested in this run."
    elif bad == 0:
        verdict = "Every URL harvested yielded a valid record or was unchanged. Well done."
    else:
        verdict = (
            f"{_num('urls-without-valid-record', bad)} of {_num('urls', counts.urls)} "
            f"{_plural(counts.urls, 'URL')} did not yield a valid record: the sections below say "
            "why and what to fix first."
        )
    cards = [
        ("URLs harvested", "urls", counts.urls, ""),
        ("records found", "records", counts.records, ""),
        ("valid records", "valid-records", counts.valid, " good"),
        ("invalid records", "invalid-records", counts.invalid, " bad" if counts.invalid else ""),
        ("URLs withdrawn", "withdrawn", len(withdrawn), ""),
    ]
    rendered = "".join(
        f'<div class="card{css}">{_num(name, value, css="big")}{_e(title)}</div>'
        for title, name, value, css in cards
    )
    return (
        '<section id="overview" aria-labelledby="overview-h"><h2 id="overview-h">Overview</h2>'
        f'<p class="verdict">{verdict}</p><div class="cards">{rendered}</div></section>'
    )


def _colour(outcome: str) -> str:
    return _OUTCOME_COLOURS.get(outcome, "#57606a")


def _chart(counts: _Counts) -> str:
    """An inline SVG bar chart of URLs by outcome, with the numbers as text labels."""
    rows = list(counts.outcomes.items())
    top = max([value for _, value in rows] + [1])
    height = 16 + 30 * len(rows)
    bars = []
    for index, (kind, value) in enumerate(rows):
        middle = 8 + 30 * index + 15
        width = round(330 * value / top, 1)
        colour = _colour(kind)
        bars.append(
            f'<text x="104" y="{middle}" text-anchor="end" dominant-baseline="middle">'
            f"{_e(kind)}</text>"
            f'<rect x="112" y="{middle - 11}" width="{width}" height="22" rx="3" '
            f'fill="{colour}"></rect>'
            f'<text x="{112 + width + 6}" y="{middle}" dominant-baseline="middle" '
            f'data-count="chart-outcome-{_e(kind)}">{value}</text>'
        )
    return (
        f'<svg id="outcome-chart" class="chart" role="img" width="520" height="{height}" '
        f'viewBox="0 0 520 {height}" xmlns="http://www.w3.org/2000/svg" '
        'aria-labelledby="outcome-chart-title outcome-chart-desc">'
        '<title id="outcome-chart-title">URLs by outcome</title>'
        '<desc id="outcome-chart-desc">A bar for each outcome, as long as the number of URLs '
        "that ended in it; the table beside the chart gives the same numbers.</desc>"
        f"{''.join(bars)}</svg>"
    )


def _outcomes_section(counts: _Counts) -> str:
    rows = "".join(
        f'<tr><td class="kind"><span class="swatch" style="background:{_colour(kind)}">'
        f'</span><span class="outcome">{_e(kind)}</span></td>'
        f"{_num(f'outcome-{kind}', value, tag='td', css='n')}"
        f"<td>{_e(OUTCOME_MEANINGS.get(kind, ''))}</td></tr>"
        for kind, value in counts.outcomes.items()
    )
    return (
        '<section id="outcomes" aria-labelledby="outcomes-h">'
        '<h2 id="outcomes-h">What happened to each URL</h2>'
        f'<div class="columns"><div>{_chart(counts)}</div>'
        '<table><thead><tr><th scope="col">outcome</th><th scope="col" class="n">URLs</th>'
        f'<th scope="col">meaning</th></tr></thead><tbody>{rows}</tbody></table></div>'
        f"<p>Records: {_num('records', counts.records)} found, "
        f"{_num('valid-records', counts.valid)} valid, "
        f"{_num('invalid-records', counts.invalid)} invalid.</p></section>"
    )


def _patterns_section(counts: _Counts) -> str:
    if not counts.patterns:
        body = "<p>No URL led to metadata in this run, so no discovery pattern was used.</p>"
    else:
        rows = "".join(
            f"<tr><td><code>{_e(pattern)}</code></td>"
            f"{_num(f'pattern-{pattern}', value, tag='td', css='n')}"
            f"<td>{_e(PATTERN_MEANINGS.get(pattern, ''))}</td>"
            f"<td>{_e(_LEVEL_NAMES[signposting_level(pattern)])}</td></tr>"
            for pattern, value in counts.patterns.items()
        )
        body = (
            '<table><thead><tr><th scope="col">pattern</th><th scope="col" class="n">URLs</th>'
            '<th scope="col">what you serve</th><th scope="col">FAIR Signposting</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>"
        )
    return (
        '<section id="patterns" aria-labelledby="patterns-h">'
        '<h2 id="patterns-h">How the metadata was found</h2>'
        "<p>For each URL the harvester tries the ways CDIF and FAIR Signposting let a page lead "
        "to its metadata, most authoritative first, and keeps the one that worked.</p>"
        f"{body}</section>"
    )


def _signposting_section(outcomes: Sequence[Mapping[str, Any]]) -> str:
    with_metadata = [
        str(o["pattern"])
        for o in outcomes
        if o.get("pattern") and o.get("outcome") in ("record", "unchanged")
    ]
    levels = Counter(signposting_level(pattern) for pattern in with_metadata)
    total = len(with_metadata)
    if total == 0:
        said = (
            '<p class="level">No URL led to metadata in this run, so no Signposting level can '
            f"be judged ({_num('signposting-urls', 0)} URLs with metadata).</p>"
            f"<p>{_e(_NEXT_STEP[0])}</p>"
        )
    else:
        reached = max(levels)
        said = (
            f'<p class="level">This source reached <strong>{_e(_LEVEL_NAMES[reached])}</strong> '
            f"on {_num(f'signposting-level-{reached}', levels[reached])} of "
            f"{_num('signposting-urls', total)} URLs with metadata.</p>"
        )
        lower = total - levels[reached]
        if lower and reached:
            said += (
                f"<p>The other {_num('signposting-below-reached', lower)} "
                f"{_plural(lower, 'URL')} did not reach it: give "
                f"{'it' if lower == 1 else 'them'} the same links.</p>"
            )
        said += f"<p>{_e(_NEXT_STEP[reached])}</p>"
        signmap = with_metadata.count("signmap")
        if signmap:
            said += (
                f"<p>{_num('signposting-signmap', signmap)} "
                f"{_plural(signmap, 'URL was', 'URLs were')} "
                "found through your Signmap: its typed links serve harvesters well, but they "
                "live in the sitemap, not at the landing page, so they do not count as a FAIR "
                "Signposting level; add them to the pages' headers or HTML too.</p>"
            )
    rows = "".join(
        f"<tr><td>{_e(_LEVEL_NAMES[level])}</td>"
        f"{_num(f'signposting-level-{level}', levels.get(level, 0), tag='td', css='n')}</tr>"
        for level in (2, 1, 0)
    )
    return (
        '<section id="signposting" aria-labelledby="signposting-h">'
        '<h2 id="signposting-h">FAIR Signposting</h2>'
        "<p>FAIR Signposting (signposting.org/FAIR) lets machines go from a landing page to its "
        "metadata, identifier and licence by typed links: level 1 puts them in HTTP Link "
        "headers or HTML link elements, level 2 in a linkset.</p>"
        f"{said}"
        '<table><thead><tr><th scope="col">level</th><th scope="col" class="n">URLs with '
        f"metadata</th></tr></thead><tbody>{rows}</tbody></table></section>"
    )


def _problems_section(problems: list[_Problem]) -> str:
    if not problems:
        body = "<p>Nothing to fix: every URL harvested yielded valid records.</p>"
    else:
        items = [_problem_item(problem) for problem in problems[:MAX_PROBLEM_KINDS]]
        body = f'<ol class="problems">{"".join(items)}</ol>'
        hidden = len(problems) - MAX_PROBLEM_KINDS
        if hidden > 0:
            body += (
                f"<p>… and {_num('problem-kinds-not-listed', hidden)} more kinds of problem, "
                "hitting fewer records (every one is in outcomes.jsonl).</p>"
            )
    return (
        '<section id="problems" aria-labelledby="problems-h">'
        '<h2 id="problems-h">What to fix first</h2>'
        "<p>The validation errors of invalid records and the reasons URLs yielded no record, "
        "grouped by kind, those hitting the most records or URLs first.</p>"
        f"{body}</section>"
    )


def _problem_item(problem: _Problem) -> str:
    key = problem.kind.key
    urls = len(problem.urls)
    if problem.kind.scope == "record":
        records = len(problem.records)
        hits = (
            f"{_num(f'problem-{key}-records', records)} invalid {_plural(records, 'record')} "
            f"on {_num(f'problem-{key}-urls', urls)} {_plural(urls, 'URL')}"
        )
    else:
        hits = f"{_num(f'problem-{key}-urls', urls)} {_plural(urls, 'URL')} yielded no record"
    examples = "".join(f"<li>{_link(url)}</li>" for url in list(problem.urls)[:MAX_EXAMPLES])
    message = (
        f'<p class="example">Example message: <code>{_e(_short(problem.example))}</code></p>'
        if problem.example
        else ""
    )
    return (
        f"<li><h3>{_e(_short(problem.kind.title, 200))}</h3>"
        f'<p class="hits">{hits}</p>'
        f'<p class="fix"><strong>How to fix:</strong> {_e(problem.kind.fix)}</p>'
        f"{message}"
        f'<p class="example">{_plural(min(urls, MAX_EXAMPLES), "Example")}:</p>'
        f"<ul>{examples}</ul></li>"
    )


def _why(outcome: Mapping[str, Any]) -> str:
    if outcome.get("outcome") != "record":
        return _short(outcome.get("reason") or "")
    said = []
    for record in _records(outcome):
        if record.get("valid") is True:
            continue
        errors = "; ".join(str(e) for e in record.get("errors") or []) or "invalid"
        said.append(f"{record.get('record_id') or 'record'}: {errors}")
    return _short(" | ".join(said) or "no record made")


def _urls_section(outcomes: Sequence[Mapping[str, Any]]) -> str:
    order = {kind: index for index, kind in enumerate(OUTCOME_MEANINGS)}
    listed = sorted(
        (o for o in outcomes if _has_problem(o)),
        key=lambda o: (order.get(str(o.get("outcome")), len(order)), str(o.get("url"))),
    )
    if not listed:
        body = "<p>None: every URL yielded valid records or was unchanged.</p>"
    else:
        rows = "".join(
            f'<tr><td class="url">{_link(str(o.get("url") or ""))}</td>'
            f'<td class="kind"><span class="outcome">{_e(o.get("outcome") or "")}</span></td>'
            f'<td class="why">{_e(_why(o))}</td></tr>'
            for o in listed[:MAX_URL_ROWS]
        )
        body = (
            '<table><thead><tr><th scope="col">URL</th><th scope="col">outcome</th>'
            f'<th scope="col">why</th></tr></thead><tbody>{rows}</tbody></table>'
        )
        hidden = len(listed) - MAX_URL_ROWS
        if hidden > 0:
            body += (
                f"<p>… and {_num('urls-not-listed', hidden)} more {_plural(hidden, 'URL')}, "
                "every one in outcomes.jsonl.</p>"
            )
    return (
        '<section id="urls" aria-labelledby="urls-h">'
        '<h2 id="urls-h">URLs that did not yield a valid record</h2>'
        f"<p>{_num('urls-listed', len(listed))} {_plural(len(listed), 'URL')} yielded no "
        "record, or an invalid one.</p>"
        f"{body}</section>"
    )


def _withdrawn_section(withdrawn: list[str]) -> str:
    if not withdrawn:
        return ""
    items = "".join(f"<li>{_link(url)}</li>" for url in withdrawn[:_MAX_WITHDRAWN_ROWS])
    more = len(withdrawn) - _MAX_WITHDRAWN_ROWS
    tail = f"<p>… and {_num('withdrawn-not-listed', more)} more.</p>" if more > 0 else ""
    return (
        '<section id="withdrawn" aria-labelledby="withdrawn-h">'
        '<h2 id="withdrawn-h">Withdrawn</h2>'
        f"<p>{_num('withdrawn', len(withdrawn))} {_plural(len(withdrawn), 'URL')} your sitemaps "
        "no longer list: their records are kept, marked withdrawn, and left out of the "
        f"Signmap.</p><ul>{items}</ul>{tail}</section>"
    )
