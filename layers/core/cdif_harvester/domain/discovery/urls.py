"""URL identity: the canonical form under which a location is de-duplicated, compared across
hosts and fetched.

:func:`canonical_url` lower-cases scheme and host, writes the host in IDNA ASCII form, drops a
default port and the fragment and writes an empty path as ``/`` (RFC 3986 section 6.2.3); it
refuses what can never be fetched: a malformed URL, a bad host or port, a URL longer than the
sitemaps.org limit (``invalid-url``) and a scheme other than http(s) (``scheme-not-allowed``,
as the fetcher's address policy says). :func:`canonical_origin` is the origin of that form. Pure.

See docs/decisions/0046-isolated-locations-and-url-identity.md.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from urllib.parse import urlsplit

import idna

from cdif_harvester.errors import AddressRefused, PermanentError

__all__ = ["MAX_URL_LENGTH", "InvalidUrl", "canonical_origin", "canonical_url"]

MAX_URL_LENGTH = 2048
"""sitemaps.org: a location "must be less than 2,048 characters"."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")


class InvalidUrl(PermanentError):
    """A location that is not a URL the harvester could ever fetch (malformed, bad host or
    port, too long)."""

    reason = "invalid-url"


def canonical_url(url: str) -> str:
    """Return the canonical form of the absolute http(s) URL ``url`` (see the module docstring).

    Path and query are kept as written (percent-encoding is not touched). Raises InvalidUrl
    for a malformed or over-long URL, a missing or malformed host, a port that is not a number
    from 1 to 65535; AddressRefused (``scheme-not-allowed``) for a scheme other than http(s).
    """
    scheme, netloc, host, port, path, query = _parts(url)
    userinfo = netloc.rpartition("@")[0] if "@" in netloc else ""
    authority = f"{userinfo}@{host}" if userinfo else host
    if port is not None:
        authority = f"{authority}:{port}"
    return f"{scheme}://{authority}{path or '/'}{'?' + query if query else ''}"


@lru_cache(maxsize=256)
def canonical_origin(url: str) -> str:
    """Return ``scheme://host[:port]`` of ``url`` in canonical form (no default port): the unit
    of robots.txt and of the cross-host rule. Raises as :func:`canonical_url` does."""
    # (kept for the last few URLs: the gate, the source and the address policy each ask it of
    # the same URL in turn; an error is not kept, so a bad URL is refused each time)
    scheme, _netloc, host, port, _path, _query = _parts(url)
    return f"{scheme}://{host}" if port is None else f"{scheme}://{host}:{port}"


def _parts(url: str) -> tuple[str, str, str, int | None, str, str]:
    """(scheme, netloc, canonical host, port or None when default, path, query)."""
    if len(url) >= MAX_URL_LENGTH:
        raise InvalidUrl(
            f"{url[:80]}... is {len(url)} characters long (sitemaps.org: less than "
            f"{MAX_URL_LENGTH})"
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. "http://[::1/x": an unclosed IPv6 bracket
        raise InvalidUrl(f"{url!r} cannot be parsed: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise AddressRefused(
            f"refused {url!r}: scheme {scheme or '(none)'!r} is not allowed (http, https only)",
            reason="scheme-not-allowed",
        )
    try:
        port = parts.port
    except ValueError as exc:  # not a number, or over 65535
        raise InvalidUrl(f"{url!r} has an invalid port: {exc}") from exc
    if port == 0:
        raise InvalidUrl(f"{url!r} has an invalid port: 0")
    bracketed = parts.netloc.rpartition("@")[2].startswith("[")
    host = _host(parts.hostname or "", url, bracketed=bracketed)
    if port == _DEFAULT_PORTS[scheme]:
        port = None
    return scheme, parts.netloc, host, port, parts.path, parts.query


def _host(raw: str, url: str, *, bracketed: bool) -> str:
    """The host in canonical form: an IP literal normalised, a name lower-cased in IDNA form.

    Between brackets there may only be an IPv6 address: an IPvFuture literal (``[v1.x]``) is
    no address the harvester can reach, and is not the host name ``v1.x``.
    """
    if not bracketed:
        known = _plain_host(raw)
        if known is not None:
            return known
    if not raw:
        raise InvalidUrl(f"{url!r} has no host")
    if bracketed:
        try:
            return f"[{ipaddress.IPv6Address(raw).compressed}]"
        except ValueError as exc:
            raise InvalidUrl(f"{url!r} has an invalid IPv6 host: {exc}") from exc
    name = raw.lower()
    if not name.isascii():
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except UnicodeError as exc:  # (idna.IDNAError is one)
            raise InvalidUrl(f"{url!r} has a host that is not a valid IDNA name: {exc}") from exc
    if not _valid_name(name):
        raise InvalidUrl(f"{url!r} has an invalid host {raw!r}")
    return name


def _valid_name(name: str) -> bool:
    """Whether ``name`` (lower case, ASCII) is a host name: labels of letters, digits, ``-``
    and ``_``, 253 characters at most."""
    bare = name[:-1] if name.endswith(".") else name  # a fully qualified name's root dot
    return len(bare) <= 253 and all(_LABEL.fullmatch(label) for label in bare.split("."))


@lru_cache(maxsize=1024)
def _plain_host(raw: str) -> str | None:
    """``raw`` lower-cased when it is a valid ASCII host name, else None (for :func:`_host`
    to say why, or to read a non-ASCII name). A sitemap names the same few hosts thousands of
    times: each is checked once."""
    name = raw.lower()
    return name if name.isascii() and _valid_name(name) else None
