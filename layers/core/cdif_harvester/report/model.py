"""What the publisher report says: the figures, groups and advice of one harvest run.

:func:`build_report` turns what a run wrote (the ``summary.json`` dict and the outcome dicts of
``outcomes.jsonl``), and the records the catalogue holds when it closes (:class:`HeldRecord`),
into a :class:`Report`: every number (a :class:`Disagreement` when the inputs
do not belong together), every kind of problem with its fix from :data:`FIXES`, the FAIR
Signposting level reached and what to do next. How the page looks is
:mod:`cdif_harvester.report.render`'s business. Values in, values out (reading each input once,
with per-URL bookkeeping in a temporary database, :mod:`~cdif_harvester.report.spill`); the
publisher's text is kept as given (the renderer drops control characters, shortens and escapes it).

See docs/decisions/0044-what-the-publisher-report-says.md,
docs/decisions/0071-the-report-shows-the-current-state.md and
docs/decisions/0083-streaming-close-of-a-run.md.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from cdif_harvester.domain.discovery.urls import MAX_URL_LENGTH
from cdif_harvester.keys import source_of
from cdif_harvester.report.spill import Spill

__all__ = [
    "CHANGE_MEANINGS",
    "FIXES",
    "MAX_EXAMPLES",
    "MAX_PROBLEM_KINDS",
    "MAX_RECORD_ROWS",
    "MAX_URL_ROWS",
    "MAX_WITHDRAWN_ROWS",
    "OUTCOME_MEANINGS",
    "PATTERN_MEANINGS",
    "ChangeCount",
    "Disagreement",
    "HeldRecord",
    "LevelCount",
    "OutcomeCount",
    "PatternCount",
    "ProfileCount",
    "Problem",
    "ProblemKind",
    "RecordRow",
    "Report",
    "Signposting",
    "UrlRow",
    "build_report",
    "classify_error",
    "classify_reason",
    "classify_warning",
    "printable",
    "signposting_level",
]

#: How many URLs without a valid record the table lists; the page says how many more there are.
MAX_URL_ROWS = 200
#: How many kinds of problem are listed, and how many example URLs each.
MAX_PROBLEM_KINDS = 40
MAX_EXAMPLES = 3
#: How many withdrawn URLs are listed; the page says how many more there are.
MAX_WITHDRAWN_ROWS = 50
#: How many of the records held the page lists (problems first); it says how many more there are.
MAX_RECORD_ROWS = 200
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

# What a run did to a record the catalogue holds, in the order the page lists them.
CHANGE_MEANINGS: Mapping[str, str] = {
    "new": "harvested for the first time in this run",
    "changed": "rewritten in this run: its record or its verdict changed",
    "unchanged": "held as an earlier run left it (or rewritten the same)",
    "withdrawn": "withdrawn in this run: no longer announced, or gone",
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
    "rendered": "JSON-LD inserted by the page's scripts (read from the page rendered in a browser)",
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
        "The linkset the harvester makes of each record (GET /records/{id}/views/linkset-json, "
        "or cdif-harvest view ID --view linkset-json) is a starting point."
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
    # (Where the report is stored is the catalogue's business: a key of its own, or a range of
    # a segment on AWS; decision 0086.)
    "invalid": (
        "See the record's report (GET /records/{id}/report, or cdif-harvest view ID --view "
        "report) for what makes it invalid."
    ),
    "other": (
        "See the example message, and the record's report (GET /records/{id}/report, or "
        "cdif-harvest view ID --view report) for the details."
    ),
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
        "robots.txt disallows {path} for {agent} (the first URL of this kind; the others are "
        "listed below). If it should be harvested, allow it: User-agent: {agent} / "
        "Allow: {path}. If it is private, nothing to do."
    ),
    # -- warnings: what a record may lack and still be valid --
    "recommended": (
        "Add {path} ({item}): CDIF recommends it. When it does not apply or is not known, say "
        "so with nil:missing, nil:unknown or (where allowed) nil:notapplicable."
    ),
    "warning": (
        "See the example message, and the record's report (GET /records/{id}/report, or "
        "cdif-harvest view ID --view report) for the details."
    ),
    "cross-host-location": (
        "The sitemap lists URLs of another host. Announce the sitemap in that host's "
        "robots.txt (Sitemap: …), or list only URLs of the sitemap's own host."
    ),
    "cross-host-sitemap": (
        "The sitemap index lists a sitemap on another host. Announce that sitemap in the other "
        "host's robots.txt (Sitemap: …), or list only sitemaps of the index's own host."
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
        "The answer is larger than the harvester accepts (10 MiB, also once decompressed; "
        "landing pages are read up to 5 MiB; headers up to 32 KiB). Keep metadata small, link "
        "large files from the metadata instead of serving them at the sitemap URL, and serve "
        "many links as a linkset rather than in Link headers."
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
        "all; a page still arriving after 30 s is too slow and is not tried again until the "
        "next harvest). Make these pages faster, or check they are reachable from the internet."
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
        "robots.txt could not be read (a server error, a timeout, a refused connection), which "
        "means 'do not crawl now' (RFC 9309). Serve it with 200 (or 404 when there is none)."
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
    "cross-host-sitemap": "cross-host-sitemap",
    "body-too-large": "too-large",
    "decompressed-too-large": "too-large",
    "headers-too-large": "too-large",
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
    "too-slow": "timeout",
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
    "cross-host-sitemap": "Sitemap index lists another host's sitemaps",
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
    "robots-unavailable": "robots.txt unavailable",
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


def printable(text: object) -> str:
    """``text`` as a string without its control characters (tabs and line breaks stay).

    Publisher-controlled text may carry them (a NUL, a terminal escape); they are never shown.
    Never raises.
    """
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


_PLACEHOLDER_RE = re.compile(r"\{(path|item|types|alternatives|agent)\}")


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
    text = printable(message).strip()
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
    text = printable(reason or "").strip()
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
    elif code == "robots-txt" or (not code and outcome == "disallowed"):
        return _robots_kind(_details)
    elif code in _REASON_KINDS:
        kind = _REASON_KINDS[code]
    elif outcome in ("blocked", "disallowed", "no-metadata"):
        kind = {"blocked": "blocked", "disallowed": "robots-txt"}.get(outcome, "no-metadata")
    else:
        general = _generalise(text[:_MAX_MESSAGE])[:_MAX_KEY] or outcome
        return ProblemKind(f"other-reason:{general}", general, FIXES["other"], "url")
    return ProblemKind(kind, _KIND_TITLES.get(kind, kind), FIXES.get(kind, FIXES["other"]), "url")


_ROBOTS_DETAILS_RE = re.compile(r"^disallowed for (?P<agent>\S+)(?:: (?P<path>\S.*))?$")


def _robots_kind(details: str) -> ProblemKind:
    """The robots.txt kind, its fix naming the agent refused and the path disallowed
    (``disallowed for <agent>: <path>``; older reasons named no path)."""
    found = _ROBOTS_DETAILS_RE.match(details.strip())
    agent = found.group("agent") if found else "cdif-harvester"
    path = (found.group("path") if found else None) or "the URLs listed"
    fix = _fix_for("robots-txt", "robots-txt", agent=agent, path=path)
    return ProblemKind("robots-txt", _KIND_TITLES["robots-txt"], fix, "url")


_RECOMMENDED_RE = re.compile(r"^(?P<path>\S+) is recommended(?: \((?P<item>.*)\))?$")


def classify_warning(message: str, keyword: str = "") -> ProblemKind:
    """Group one warning of a record's report (``message`` with its ``keyword``) into its kind.

    A missing recommended property is keyed by its path (``recommended:schema:keywords``);
    any other warning by its keyword and its message with the record-specific parts taken
    out. Never raises.
    """
    text = printable(message).strip()[:_MAX_MESSAGE]
    found = _RECOMMENDED_RE.match(text)
    if found:
        path = _general_path(found.group("path"))
        item = found.group("item") or ""
        name = item.split(",", 1)[0].strip()
        title = f"Recommended property {path} missing" + (f" ({name})" if name else "")
        fix = _fix_for(f"recommended:{path}", "recommended", path=path, item=name or "a CDIF item")
        return ProblemKind(f"recommended:{path}", title, fix, "warning")
    general = _generalise(text)[:_MAX_KEY]
    key = f"warning:{printable(keyword).strip() or 'other'}:{general}"
    return ProblemKind(key, general or "Warning", FIXES["warning"], "warning")


def signposting_level(pattern: str | None) -> int:
    """The FAIR Signposting level a URL reached, judged from the pattern that led to its
    metadata: 2 for a linkset, 1 for typed links in HTTP headers or HTML, else 0."""
    return _SIGNPOSTING_LEVELS.get(pattern or "", 0)


# --- counting ----------------------------------------------------------------------------


@dataclass
class _Counts:
    """The figures of summary.json, counted the way the local runner counts them, one outcome
    at a time."""

    urls: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    pattern_counts: Counter[str] = field(default_factory=Counter)
    records: int = 0
    valid: int = 0
    problem_urls: int = 0  # URLs that did not yield only valid records (and are not unchanged)

    def add(self, outcome: Mapping[str, Any]) -> None:
        self.urls += 1
        self.kinds[str(outcome.get("outcome"))] += 1
        if outcome.get("pattern"):
            self.pattern_counts[str(outcome["pattern"])] += 1
        for record in _records(outcome):
            self.records += 1
            self.valid += record.get("valid") is True
        self.problem_urls += _has_problem(outcome)

    @property
    def invalid(self) -> int:
        return self.records - self.valid

    @property
    def outcomes(self) -> dict[str, int]:
        known = {kind: self.kinds.get(kind, 0) for kind in OUTCOME_MEANINGS}
        extra = {kind: n for kind, n in sorted(self.kinds.items()) if kind not in known}
        return {**known, **extra}

    @property
    def patterns(self) -> dict[str, int]:
        return dict(sorted(self.pattern_counts.items()))


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
    """One kind met: how many distinct URLs and records it hit (the pairs themselves are in
    the report's :class:`~cdif_harvester.report.spill.Spill`), its first message and URLs."""

    kind: ProblemKind
    example: str = ""
    urls: int = 0
    records: int = 0
    example_urls: list[str] = field(default_factory=list)

    @property
    def hits(self) -> int:
        return self.records if self.kind.scope == "record" else self.urls


class _Kinds:
    """The kinds of problem (or of warning) met, in the order first met."""

    def __init__(self, spill: Spill, name: str) -> None:
        self._spill = spill
        self._name = name
        self.found: dict[str, _Problem] = {}

    def note(self, kind: ProblemKind, url: str, message: str, record: str | None) -> None:
        problem = self.found.setdefault(kind.key, _Problem(kind, example=message))
        if self._spill.add(self._name, kind.key, url):
            problem.urls += 1
            if len(problem.example_urls) < MAX_EXAMPLES:
                problem.example_urls.append(url)
        if record is not None and self._spill.add(self._name, kind.key, url, record):
            problem.records += 1

    def note_outcome(self, outcome: Mapping[str, Any], *, with_records: bool) -> None:
        """The reason a URL yielded no record; with ``with_records``, the errors of the
        invalid records the outcome lists."""
        url = str(outcome.get("url") or "")
        kind = str(outcome.get("outcome") or "")
        if kind == "unchanged":
            return
        if kind != "record":
            reason = outcome.get("reason")
            self.note(classify_reason(reason, kind), url, str(reason or kind), None)
            return
        if not with_records:
            return  # the records' errors are those of the records held
        for index, record in enumerate(_records(outcome)):
            if record.get("valid") is True:
                continue
            record_id = str(record.get("record_id") or f"#{index}")
            for error in [str(e) for e in record.get("errors") or []] or [""]:
                problem = classify_error(error) if error else _invalid_without_message()
                self.note(problem, url, error, record_id)

    def note_held(self, kept: HeldRecord) -> None:
        """The errors of a record held whose report was read."""
        if kept.valid or not kept.read:
            return  # a report not read: its errors are counted, not grouped
        for error in kept.errors or ("",):
            problem = classify_error(error) if error else _invalid_without_message()
            self.note(problem, kept.url, error, kept.record_id)

    def note_warnings(self, record: HeldRecord) -> None:
        for keyword, message in record.warnings:
            self.note(classify_warning(message, keyword), record.url, message, record.record_id)

    def problems(self) -> list[_Problem]:
        """Every kind met, most hits first; among equals, what robots.txt disallows goes
        last (it is usually meant)."""
        return sorted(
            self.found.values(),
            key=lambda p: (-p.hits, -p.urls, p.kind.key == "robots-txt", p.kind.title),
        )


class _Smallest:
    """The first ``limit`` items by ``key`` of those given, as ``sorted`` would list them
    (equal keys in the order given), holding at most twice ``limit`` at once."""

    def __init__(self, limit: int, key: Callable[[Any], Any]) -> None:
        self._limit = limit
        self._key = key
        self._kept: list[tuple[Any, int, Any]] = []
        self._seq = 0

    def add(self, item: Any) -> None:
        self._seq += 1
        self._kept.append((self._key(item), self._seq, item))
        if len(self._kept) >= 2 * self._limit + 1:
            self._trim()

    def _trim(self) -> None:
        self._kept.sort(key=lambda kept: (kept[0], kept[1]))
        del self._kept[self._limit :]

    def items(self) -> list[Any]:
        self._trim()
        return [item for _, _, item in self._kept]


def _invalid_without_message() -> ProblemKind:
    return ProblemKind("invalid", _KIND_TITLES["invalid"], FIXES["invalid"], "record")


def _why(outcome: Mapping[str, Any]) -> str:
    """Why a URL did not yield a valid record: its reason, or its invalid records' errors."""
    if outcome.get("outcome") != "record":
        return str(outcome.get("reason") or "")
    said = []
    for record in _records(outcome):
        if record.get("valid") is True:
            continue
        errors = "; ".join(str(e) for e in record.get("errors") or []) or "invalid"
        said.append(f"{record.get('record_id') or 'record'}: {errors}")
    return " | ".join(said) or "no record made"


# --- the report ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldRecord:
    """One record the catalogue holds for a source when its run closes, as the report shows it.

    ``change`` says what the run did to it (a key of :data:`CHANGE_MEANINGS`). ``errors``,
    ``warnings`` (``(keyword, message)``) and the error counts of ``profiles``
    (``("core 1.1", "valid" | "invalid" | "unknown", errors)``) come from its stored report;
    ``read`` is False when that report was not read (past the cap): its verdicts are known, its
    messages are not.
    """

    record_id: str
    url: str
    valid: bool
    change: str
    errors: tuple[str, ...] = ()
    warnings: tuple[tuple[str, str], ...] = ()
    profiles: tuple[tuple[str, str, int], ...] = ()
    read: bool = True


@dataclass(frozen=True)
class ChangeCount:
    """How many records held a run marked with one change, and what the mark means."""

    change: str
    records: int
    meaning: str


@dataclass(frozen=True)
class RecordRow:
    """A record held, as the records table lists it."""

    record_id: str
    url: str
    valid: bool
    change: str
    errors: int
    warnings: int
    read: bool


@dataclass(frozen=True)
class Disagreement:
    """A figure of summary.json the outcomes given do not add up to."""

    name: str  # "urls", "valid_records", "outcomes.failed", "patterns.linkset"...
    given: Any  # what summary.json says, as it says it
    counted: int


@dataclass(frozen=True)
class OutcomeCount:
    """How many URLs ended in one outcome, and what the outcome means."""

    outcome: str
    urls: int
    meaning: str  # "" for an outcome of no known kind


@dataclass(frozen=True)
class PatternCount:
    """How many URLs led to their metadata by one discovery pattern, and what that says."""

    pattern: str
    urls: int
    meaning: str  # what the publisher serves ("" for a pattern of no known kind)
    level_name: str  # the FAIR Signposting level the pattern reaches


@dataclass(frozen=True)
class ProfileCount:
    """How the records of the run fared under one CDIF profile and version ("discovery 1.1")."""

    profile: str
    valid: int
    invalid: int
    unknown: int
    errors: int  # the errors of the invalid ones


_PROFILE_ERRORS = re.compile(r"^(.+): (\d+) errors?$")


class _ProfileCounts:
    """The records' verdicts per CDIF profile, counted one record at a time."""

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}

    def _add(self, name: str, column: int, errors: int) -> None:
        row = self._counts.setdefault(name, [0, 0, 0, 0])
        row[column] += 1
        row[3] += errors

    def add_outcome(self, outcome: Mapping[str, Any]) -> None:
        """The verdicts as an outcome lists them: "core 1.1 valid", "discovery 1.1: 3
        errors", "x 1.1: profile unknown"."""
        for record in _records(outcome):
            for line in record.get("profiles") or ():
                text = str(line)
                errors = _PROFILE_ERRORS.match(text)
                if errors:
                    self._add(errors[1], 1, int(errors[2]))
                elif text.endswith(": profile unknown"):
                    self._add(text.removesuffix(": profile unknown"), 2, 0)
                else:
                    self._add(text.removesuffix(" valid"), 0, 0)

    def add_held(self, record: HeldRecord) -> None:
        for name, status, errors in record.profiles:
            self._add(name, {"valid": 0, "invalid": 1}.get(status, 2), errors)

    def rows(self) -> list[ProfileCount]:
        """Core first, then by name."""
        return [
            ProfileCount(name, *row)
            for name, row in sorted(
                self._counts.items(), key=lambda kv: (not kv[0].startswith("core "), kv[0])
            )
        ]


@dataclass(frozen=True)
class LevelCount:
    """How many URLs with metadata reached one FAIR Signposting level."""

    level: int
    name: str
    urls: int


@dataclass(frozen=True)
class Signposting:
    """The FAIR Signposting of the URLs with metadata (``record`` or ``unchanged``)."""

    urls: int  # URLs with metadata; 0 when no level can be judged
    reached: int  # the highest level any of them reached (0 when there are none)
    reached_name: str
    reached_urls: int  # how many reached it
    below_reached: int  # how many did not (always 0 at level 0)
    next_step: str  # what to add to reach the next level
    signmap_urls: int  # URLs found through a Signmap, which is no level of its own
    levels: tuple[LevelCount, ...]  # every level, the highest first


@dataclass(frozen=True)
class Problem:
    """One kind of problem met, how much it hit, and where."""

    kind: ProblemKind
    records: int  # invalid records hit (0 for a kind of scope ``url``)
    urls: int  # URLs hit
    example: str  # the first message of this kind met ("" when there was none)
    example_urls: tuple[str, ...]  # the first MAX_EXAMPLES URLs hit


@dataclass(frozen=True)
class UrlRow:
    """A URL that yielded no record, or an invalid one: its outcome and why."""

    url: str
    outcome: str
    why: str


@dataclass(frozen=True)
class Report:
    """What the publisher report of a run, or of one of its sources, says.

    Lists are cut where the page stops listing (``MAX_*``); the ``*_not_listed`` properties say
    how many were left out. Text is the publisher's as given: neither shortened nor escaped.
    """

    label: str  # the sources covered, comma-separated; "no source" when there is none
    run_id: str
    started_at: str
    finished_at: str  # "" while the run is not finished
    elapsed_seconds: float | None  # as summary.json gives it (an int stays an int)
    entry_urls: tuple[str, ...]
    disagreements: tuple[Disagreement, ...]  # always empty for one source's report
    urls: int
    records: int
    valid_records: int
    invalid_records: int
    urls_without_valid_record: int  # URLs that yielded no record or an invalid one
    outcomes: tuple[OutcomeCount, ...]  # the known outcomes in the README's order, then others
    patterns: tuple[PatternCount, ...]  # by pattern name
    profiles: tuple[ProfileCount, ...]  # the records' verdicts per CDIF profile, core first
    signposting: Signposting
    problems: tuple[Problem, ...]  # the first MAX_PROBLEM_KINDS, most hits first
    problem_kinds: int  # every kind met
    url_rows: tuple[UrlRow, ...]  # the first MAX_URL_ROWS, by outcome then URL
    withdrawn: tuple[str, ...]  # the first MAX_WITHDRAWN_ROWS
    withdrawn_urls: int  # every URL withdrawn
    # The source's records as they stand (from the catalogue), when given: then records,
    # valid_records, invalid_records, problems and profiles are theirs, not only this run's.
    current_state: bool = False
    run_records: int = 0  # the records this run read (what the outcomes list)
    changes: tuple[ChangeCount, ...] = ()  # every mark, in CHANGE_MEANINGS' order
    record_rows: tuple[RecordRow, ...] = ()  # the first MAX_RECORD_ROWS, problems first
    reports_not_read: int = 0  # records held whose report was not read (past the cap)
    warnings: tuple[Problem, ...] = ()  # the first MAX_PROBLEM_KINDS, most records first
    warning_kinds: int = 0  # every kind of warning met
    warning_count: int = 0  # every warning of the records held
    records_with_warnings: int = 0
    # What each site root among the entry URLs led to: its sitemaps, and how they were found.
    site_notes: tuple[str, ...] = ()

    @property
    def problem_kinds_not_listed(self) -> int:
        """How many kinds of problem are left out of :attr:`problems`."""
        return self.problem_kinds - len(self.problems)

    @property
    def urls_not_listed(self) -> int:
        """How many URLs without a valid record are left out of :attr:`url_rows`."""
        return self.urls_without_valid_record - len(self.url_rows)

    @property
    def withdrawn_not_listed(self) -> int:
        """How many withdrawn URLs are left out of :attr:`withdrawn`."""
        return self.withdrawn_urls - len(self.withdrawn)

    @property
    def records_not_listed(self) -> int:
        """How many records held are left out of :attr:`record_rows`."""
        return self.records - len(self.record_rows) if self.current_state else 0

    @property
    def warning_kinds_not_listed(self) -> int:
        """How many kinds of warning are left out of :attr:`warnings`."""
        return self.warning_kinds - len(self.warnings)


class _Levels:
    """The FAIR Signposting of the URLs with metadata (``record`` or ``unchanged``)."""

    def __init__(self) -> None:
        self.levels: Counter[int] = Counter()
        self.urls = 0
        self.signmap = 0

    def add(self, outcome: Mapping[str, Any]) -> None:
        if outcome.get("pattern") and outcome.get("outcome") in ("record", "unchanged"):
            pattern = str(outcome["pattern"])
            self.urls += 1
            self.levels[signposting_level(pattern)] += 1
            self.signmap += pattern == "signmap"

    def signposting(self) -> Signposting:
        reached = max(self.levels, default=0)
        return Signposting(
            urls=self.urls,
            reached=reached,
            reached_name=_LEVEL_NAMES[reached],
            reached_urls=self.levels[reached],
            below_reached=self.urls - self.levels[reached],
            next_step=_NEXT_STEP[reached],
            signmap_urls=self.signmap,
            levels=tuple(
                LevelCount(level, _LEVEL_NAMES[level], self.levels[level]) for level in (2, 1, 0)
            ),
        )


_OUTCOME_ORDER: Mapping[str, int] = {kind: index for index, kind in enumerate(OUTCOME_MEANINGS)}
_CHANGE_ORDER: Mapping[str, int] = {change: index for index, change in enumerate(CHANGE_MEANINGS)}


def _url_row_key(outcome: Mapping[str, Any]) -> tuple[int, str]:
    """URLs without a valid record: by outcome (the README's order) then URL."""
    return (
        _OUTCOME_ORDER.get(str(outcome.get("outcome")), len(_OUTCOME_ORDER)),
        str(outcome.get("url")),
    )


def _record_row_key(r: HeldRecord) -> tuple[bool, bool, int, str, str]:
    """The records held: the invalid first, then those with warnings, then by change and URL."""
    return (
        r.valid,
        not r.warnings,
        _CHANGE_ORDER.get(r.change, len(_CHANGE_ORDER)),
        r.url,
        r.record_id,
    )


@dataclass
class _HeldCounts:
    """The figures of the records held: every mark, and those of the records not withdrawn."""

    marks: Counter[str] = field(default_factory=Counter)
    current: int = 0
    valid: int = 0
    not_read: int = 0
    warnings: int = 0
    with_warnings: int = 0

    def add(self, record: HeldRecord) -> bool:
        """Count ``record``; True when it is current (not withdrawn)."""
        self.marks[record.change] += 1
        if record.change == "withdrawn":
            return False
        self.current += 1
        self.valid += record.valid
        self.not_read += not record.read
        self.warnings += len(record.warnings)
        self.with_warnings += bool(record.warnings)
        return True


class _Hosts:
    """Each source as its host (``data.example.org``, ``127.0.0.1:8765``), read from the
    first URL of it given; the source name when none is."""

    def __init__(self, urls: Iterable[str] = ()) -> None:
        self._host: dict[str, str] = {}
        self._origins: set[str] = set()
        for url in urls:
            self.add(url)

    def add(self, url: str) -> None:
        if "://" not in url:
            return
        # A URL whose text up to its path is that of one added before names the same source
        # and host (its path plays no part): it is every URL of a run but a few, and working
        # its source out again took a third of the report's time. (An over-long URL is not
        # skipped: its source is named without its port, see keys.source_of.)
        scheme, _, rest = url.partition("://")
        origin = f"{scheme}://{rest.partition('/')[0]}"
        if len(url) < MAX_URL_LENGTH:
            if origin in self._origins:
                return
            self._origins.add(origin)
        name = source_of(url)
        if name not in self._host:
            try:
                netloc = urlsplit(url).netloc.rpartition("@")[2].lower()
            except ValueError:  # a malformed location: the source's own name will do
                return
            self._host[name] = netloc or name

    def of(self, sources: Sequence[str]) -> list[str]:
        return [self._host.get(name, name) for name in sources]


def _site_notes(summary: Mapping[str, Any]) -> tuple[str, ...]:
    """The notes summary.json keeps of each site root (``sites``), odd entries left out."""
    sites = summary.get("sites")
    if not isinstance(sites, list):
        return ()
    return tuple(
        str(site["note"]) for site in sites if isinstance(site, Mapping) and site.get("note")
    )


def build_report(
    summary: Mapping[str, Any],
    outcomes: Iterable[Mapping[str, Any]],
    *,
    source: str | None = None,
    held: Iterable[HeldRecord] | None = None,
) -> Report:
    """Say what the publisher report of one harvest run says.

    ``summary`` is the dict written to summary.json, ``outcomes`` the outcome dicts (the
    lines of outcomes.jsonl, or :func:`~cdif_harvester.model.outcome_to_dict`). With
    ``source`` (a source name, host, ``host:port`` or URL) the report covers that source's URLs
    only. ``held`` are the records the catalogue holds for the run's sources when it closes
    (withdrawn in this run included, marked so): then the records, their verdicts, problems,
    warnings and profiles are theirs, what stands now, not only what this run read. Every other
    figure is counted from the outcomes (see the module docstring). Never raises for odd values
    in the inputs.

    Each input is read once, as it comes: a report over any number of URLs takes bounded
    memory (what it must remember per URL is on disk, :class:`~cdif_harvester.report.spill.Spill`;
    the lists it shows are cut at ``MAX_*``, and say how many more there are).
    """
    with Spill() as spill:
        return _build(summary, outcomes, source, held, spill)


def _note_for_held(spill: Spill, outcome: Mapping[str, Any]) -> None:
    """Note the run's outcome of a URL, and its row when it yielded no record."""
    url = str(outcome.get("url") or "")
    spill.note_outcome(url, str(outcome.get("outcome") or ""))
    if outcome.get("outcome") not in ("record", "unchanged"):
        spill.note_row(url, str(outcome.get("outcome")), _why(outcome))


def _note_held(spill: Spill, record: HeldRecord) -> None:
    """Note what an invalid record held says, for the URLs without a valid record."""
    if not record.valid:
        errors = "; ".join(record.errors) if record.read else "report not read"
        spill.note_held(record.url, f"{record.record_id}: {errors or 'invalid'}")


def _build(
    summary: Mapping[str, Any],
    outcomes: Iterable[Mapping[str, Any]],
    source: str | None,
    held: Iterable[HeldRecord] | None,
    spill: Spill,
) -> Report:
    withdrawn = [str(url) for url in summary.get("withdrawn") or []]
    entry_urls = [
        str(url) for url in summary.get("entry_urls") or [summary.get("entry_url")] if url
    ]
    wanted = _source_key(source) if source is not None else None
    if wanted is not None:
        withdrawn = [url for url in withdrawn if source_of(url) == wanted]
        entry_urls = [url for url in entry_urls if source_of(url) == wanted] or entry_urls
    hosts = _Hosts(entry_urls)
    counts, levels, profiles = _Counts(), _Levels(), _ProfileCounts()
    problems = _Kinds(spill, "problem")
    url_rows = _Smallest(MAX_URL_ROWS, _url_row_key)
    sources: set[str] = set()
    for outcome in outcomes:
        if not isinstance(outcome, Mapping):
            continue
        named = _source_of_outcome(outcome)
        if wanted is not None and named != wanted:
            continue
        sources.add(named)
        hosts.add(str(outcome.get("url") or ""))
        counts.add(outcome)
        levels.add(outcome)
        problems.note_outcome(outcome, with_records=held is None)
        if held is not None:
            _note_for_held(spill, outcome)  # joined with the records held at the end
            continue
        profiles.add_outcome(outcome)
        if _has_problem(outcome):
            url_rows.add(outcome)
    if wanted is not None:
        listed_sources = [wanted]
    else:
        listed_sources = sorted(sources) or sorted({source_of(url) for url in entry_urls})
    # One source's figures are its own, so only the whole run's are held against summary.json.
    disagreements = _disagreements(summary, counts) if source is None else []
    elapsed = summary.get("elapsed_seconds")
    report = Report(
        label="",
        run_id=str(summary.get("run_id") or ""),
        started_at=str(summary.get("started_at") or ""),
        finished_at=str(summary.get("finished_at") or ""),
        elapsed_seconds=(
            elapsed if isinstance(elapsed, int | float) and not isinstance(elapsed, bool) else None
        ),
        entry_urls=tuple(entry_urls),
        site_notes=_site_notes(summary),
        disagreements=tuple(Disagreement(*found) for found in disagreements),
        urls=counts.urls,
        records=counts.records,
        valid_records=counts.valid,
        invalid_records=counts.invalid,
        urls_without_valid_record=counts.problem_urls,
        outcomes=tuple(
            OutcomeCount(kind, value, OUTCOME_MEANINGS.get(kind, ""))
            for kind, value in counts.outcomes.items()
        ),
        patterns=tuple(
            PatternCount(
                pattern,
                value,
                PATTERN_MEANINGS.get(pattern, ""),
                _LEVEL_NAMES[signposting_level(pattern)],
            )
            for pattern, value in counts.patterns.items()
        ),
        profiles=(),
        signposting=levels.signposting(),
        problems=(),
        problem_kinds=0,
        url_rows=(),
        withdrawn=tuple(withdrawn[:MAX_WITHDRAWN_ROWS]),
        withdrawn_urls=len(withdrawn),
        run_records=counts.records,
    )
    if held is None:
        found = problems.problems()
        return replace(
            report,
            label=", ".join(hosts.of(listed_sources)) or "no source",
            profiles=tuple(profiles.rows()),
            problems=tuple(_public(problem) for problem in found[:MAX_PROBLEM_KINDS]),
            problem_kinds=len(found),
            url_rows=tuple(
                UrlRow(str(o.get("url") or ""), str(o.get("outcome") or ""), _why(o))
                for o in url_rows.items()
            ),
        )
    warnings = _Kinds(spill, "warning")
    record_rows = _Smallest(MAX_RECORD_ROWS, _record_row_key)
    tally = _HeldCounts()
    for record in held:
        if isinstance(record, HeldRecord) and (wanted is None or source_of(record.url) == wanted):
            hosts.add(record.url)
            problems.note_held(record)
            if tally.add(record):
                warnings.note_warnings(record)
                profiles.add_held(record)
                record_rows.add(record)
                _note_held(spill, record)
    found = problems.problems()
    warned = warnings.problems()
    without_valid, rows = spill.url_rows(_OUTCOME_ORDER, MAX_URL_ROWS)
    return replace(
        report,
        label=", ".join(hosts.of(listed_sources)) or "no source",
        problems=tuple(_public(problem) for problem in found[:MAX_PROBLEM_KINDS]),
        problem_kinds=len(found),
        url_rows=tuple(UrlRow(*row) for row in rows),
        records=tally.current,
        valid_records=tally.valid,
        invalid_records=tally.current - tally.valid,
        urls_without_valid_record=without_valid,
        profiles=tuple(profiles.rows()),
        current_state=True,
        changes=tuple(
            ChangeCount(change, tally.marks.get(change, 0), meaning)
            for change, meaning in CHANGE_MEANINGS.items()
        ),
        record_rows=tuple(
            RecordRow(r.record_id, r.url, r.valid, r.change, len(r.errors), len(r.warnings), r.read)
            for r in record_rows.items()
        ),
        reports_not_read=tally.not_read,
        warnings=tuple(_public(p) for p in warned[:MAX_PROBLEM_KINDS]),
        warning_kinds=len(warned),
        warning_count=tally.warnings,
        records_with_warnings=tally.with_warnings,
    )


def _public(problem: _Problem) -> Problem:
    """A kind of problem met, as the report lists it."""
    return Problem(
        kind=problem.kind,
        records=problem.records,
        urls=problem.urls,
        example=problem.example,
        example_urls=tuple(problem.example_urls),
    )
