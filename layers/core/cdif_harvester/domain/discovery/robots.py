"""robots.txt: which sitemaps a site announces, and what a harvester may fetch.

The rules are parsed by protego (RFC 9309); this module adds which ``Sitemap:`` lines a site
announces in a ``User-agent: CDIF1.0`` group (CDIF discoverability, "Find metadata"), listed with
the others in :attr:`RobotsPolicy.sitemaps`. Pure: bytes in, values out.

See docs/decisions/0015-cdif-sitemaps-in-robots.md for what counts as that group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from protego import Protego

__all__ = [
    "CDIF_USER_AGENT",
    "MAX_ROBOTS_BYTES",
    "RobotsPolicy",
    "allow_all",
    "parse_robots",
]

CDIF_USER_AGENT = "CDIF1.0"
"""The robots.txt product token under which a site announces CDIF-specific sitemaps."""

MAX_ROBOTS_BYTES = 512 * 1024
"""How much of a robots.txt is read (RFC 9309 section 2.5: parse at least 500 KiB)."""

_UTF8_BOM = b"\xef\xbb\xbf"
# Directive names as protego reads them (it tolerates some misspellings and spaced forms).
_USER_AGENT_FIELDS = frozenset({"user-agent", "useragent", "user agent"})
_SITEMAP_FIELDS = frozenset({"sitemap", "sitemaps", "site-map"})
_SITE_WIDE_FIELDS = _SITEMAP_FIELDS | {"host"}
_KNOWN_FIELDS = (
    _USER_AGENT_FIELDS
    | _SITE_WIDE_FIELDS
    | {"allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"}
    | {"crawl-delay", "crawl delay", "request-rate", "request rate", "visit-time", "visit time"}
)


@dataclass(frozen=True)
class RobotsPolicy:
    """What one robots.txt says, for the origin (scheme, host, port) it was fetched from.

    ``sitemaps`` holds every ``Sitemap:`` URL, made absolute and without duplicates, in file
    order; ``cdif_sitemaps`` the subset announced in a ``User-agent: CDIF1.0`` group (see the
    module docstring). The rules apply to URLs of ``robots_url``'s origin only: ask
    :meth:`covers` first and fetch the other origin's robots.txt when it answers False.
    """

    robots_url: str
    sitemaps: tuple[str, ...] = ()
    cdif_sitemaps: tuple[str, ...] = ()
    _rules: Protego | None = field(default=None, repr=False, compare=False)

    def covers(self, url: str) -> bool:
        """Return True when ``url`` is on the origin this robots.txt governs."""
        return _origin(url) == _origin(self.robots_url)

    def allows(self, url: str, user_agent: str) -> bool:
        """Return True when ``user_agent`` may fetch ``url`` (path and query are matched).

        ``user_agent`` is matched against the groups' product tokens as protego does: the group
        with the longest token found in it at a token boundary wins, else the ``*`` group. To
        honour a ``CDIF1.0`` group, pass a user agent that contains that token.
        """
        if self._rules is None:
            return True
        return bool(self._rules.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        """Return the ``Crawl-delay`` in seconds for ``user_agent``'s group, or None."""
        if self._rules is None:
            return None
        delay = self._rules.crawl_delay(user_agent)
        return None if delay is None else float(delay)


def allow_all(robots_url: str) -> RobotsPolicy:
    """Return the policy of a site without a robots.txt (404): everything allowed, no sitemaps.

    RFC 9309 section 2.3.1.3: when robots.txt is unavailable (4xx), crawlers may access any
    resource on the server.
    """
    return RobotsPolicy(robots_url=robots_url)


def parse_robots(
    body: bytes, *, robots_url: str, max_bytes: int = MAX_ROBOTS_BYTES
) -> RobotsPolicy:
    """Parse a robots.txt body fetched from ``robots_url`` into a :class:`RobotsPolicy`.

    Tolerant by design, never raises on content: a UTF-8 byte order mark is dropped, CR, LF and
    CRLF line ends are all accepted, lines that are not directives are ignored, and a line that
    is not valid UTF-8 is read as Latin-1 (so one stray byte does not garble the whole file).
    Only the first ``max_bytes`` are read, cut at the last line end. Relative Sitemap URLs are
    resolved against ``robots_url``.
    """
    text = _decode(_cut(body, max_bytes) if len(body) > max_bytes else body)
    rules = Protego.parse(text)
    sitemaps: list[str] = []
    for raw in rules.sitemaps:
        url = _absolute(raw, robots_url)
        if url and url not in sitemaps:
            sitemaps.append(url)
    cdif: list[str] = []
    for raw in _cdif_group_sitemaps(text):
        url = _absolute(raw, robots_url)
        if url and url not in cdif:
            cdif.append(url)
    return RobotsPolicy(
        robots_url=robots_url,
        sitemaps=tuple(sitemaps),
        cdif_sitemaps=tuple(cdif),
        _rules=rules,
    )


def _cut(body: bytes, max_bytes: int) -> bytes:
    head = body[:max_bytes]
    end = max(head.rfind(b"\n"), head.rfind(b"\r"))
    return head[: end + 1] if end >= 0 else head


def _decode(body: bytes) -> str:
    body = body.removeprefix(_UTF8_BOM)
    lines = []
    for line in body.splitlines():
        try:
            lines.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(line.decode("latin-1"))
    return "\n".join(lines)


def _split_directive(line: str) -> tuple[str, str] | None:
    """Return (lower-cased field, value) of a directive line, or None; reads lines as protego
    does, including its second chance for ``Sitemap https://...`` and ``User agent foo``."""
    name, sep, value = line.partition(":")
    name = name.strip().lower()
    if sep and (name in _KNOWN_FIELDS or not value or value[0].isspace()):
        return name, value.strip()
    words = line.split()
    for count in (1, 2):
        candidate = " ".join(words[:count]).lower()
        if candidate in _KNOWN_FIELDS:
            return candidate, " ".join(words[count:])
    return (name, value.strip()) if sep else None


def _cdif_group_sitemaps(text: str) -> list[str]:
    """Return the raw Sitemap values that sit in a group naming the CDIF1.0 token."""
    found: list[str] = []
    agents: list[str] = []  # product tokens of the current group, lower-cased
    previous_field: str | None = None
    for raw_line in text.splitlines():
        line = raw_line.split("#", 1)[0].strip()
        if not line:
            if not raw_line.strip():
                # A blank line ends the group (a comment-only line does not).
                agents, previous_field = [], None
            continue
        parsed = _split_directive(line)
        if parsed is None:
            continue
        name, value = parsed
        if name in _USER_AGENT_FIELDS:
            if previous_field is not None and previous_field not in _USER_AGENT_FIELDS:
                agents = []  # a User-agent line after a rule starts a new group (RFC 9309)
            agents.append(value.lower())
        elif name in _SITEMAP_FIELDS and value and CDIF_USER_AGENT.lower() in agents:
            found.append(value)
        if name not in _SITE_WIDE_FIELDS:
            previous_field = name
    return found


def _absolute(raw: str, base: str) -> str | None:
    url = urljoin(base, raw.strip())
    return url if urlsplit(url).scheme in {"http", "https"} else None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    default = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or ""), port if port is not None else default
