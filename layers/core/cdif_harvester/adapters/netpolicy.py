"""The address policy of the safe fetcher: which URLs and IP addresses may be contacted at all.

Pure: it parses and classifies, it never resolves a name or opens a socket. :func:`check_url`
judges a URL (scheme, credentials, host syntax, an IP literal), :func:`check_resolved` every
address a name resolves to; only globally routable unicast addresses pass, and non-canonical
numeric hosts are refused. A refusal raises :class:`~cdif_harvester.errors.AddressRefused` with
a reason from :data:`REASONS`.

See docs/decisions/0012-address-policy-pinned.md (server-side request forgery, DNS rebinding)
and docs/decisions/0099-a-lean-fetch-path.md (the answers kept for allowed hosts).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import httpx

from cdif_harvester.errors import AddressRefused, PermanentError

__all__ = [
    "ALLOWED_SCHEMES",
    "CLOUD_METADATA_ADDRESSES",
    "REASONS",
    "IPAddress",
    "Refusal",
    "check_address",
    "check_host",
    "check_resolved",
    "check_url",
    "classify_address",
    "parse_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: URL schemes the fetcher may use.
ALLOWED_SCHEMES: frozenset[str] = frozenset({"http", "https"})

#: Every reason code an :class:`AddressRefused` raised by this module can carry.
REASONS: frozenset[str] = frozenset(
    {
        "scheme-not-allowed",
        "credentials-in-url",
        "invalid-host",
        "non-canonical-ip",
        "cloud-metadata-address",
        "unspecified-address",
        "loopback-address",
        "link-local-address",
        "private-address",
        "shared-address",
        "multicast-address",
        "documentation-address",
        "benchmarking-address",
        "reserved-address",
    }
)

#: Instance metadata and credential endpoints of cloud platforms, named explicitly so the refusal
#: message says what was at stake. Most also fall in a refused range; some (Azure's WireServer)
#: are public addresses that only mean something inside the cloud.
CLOUD_METADATA_ADDRESSES: dict[IPAddress, str] = {
    ipaddress.ip_address("169.254.169.254"): "AWS/GCP/Azure/OpenStack instance metadata",
    ipaddress.ip_address("fd00:ec2::254"): "AWS instance metadata (IPv6)",
    ipaddress.ip_address("169.254.170.2"): "AWS ECS task metadata and credentials",
    ipaddress.ip_address("169.254.170.23"): "AWS EKS pod identity agent",
    ipaddress.ip_address("fd00:ec2::23"): "AWS EKS pod identity agent (IPv6)",
    ipaddress.ip_address("100.100.100.200"): "Alibaba Cloud instance metadata",
    ipaddress.ip_address("192.0.0.192"): "Oracle Cloud instance metadata",
    ipaddress.ip_address("168.63.129.16"): "Azure WireServer",
}

_Net = ipaddress.IPv4Network | ipaddress.IPv6Network


def _nets(*specs: str) -> tuple[_Net, ...]:
    return tuple(ipaddress.ip_network(spec) for spec in specs)


# (reason, description, networks), checked in order; the first match wins. Embedded IPv4
# addresses (mapped, compatible, NAT64, 6to4) are unwrapped before this table is consulted.
_RANGES: tuple[tuple[str, str, tuple[_Net, ...]], ...] = (
    ("unspecified-address", "unspecified address", _nets("0.0.0.0/32", "::/128")),
    ("loopback-address", "loopback address", _nets("127.0.0.0/8", "::1/128")),
    ("link-local-address", "link-local address", _nets("169.254.0.0/16", "fe80::/10")),
    (
        "private-address",
        "private address (RFC 1918, unique local, site local, local-use NAT64)",
        _nets(
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "fc00::/7",
            "fec0::/10",
            "64:ff9b:1::/48",
        ),
    ),
    ("shared-address", "shared address space (carrier-grade NAT)", _nets("100.64.0.0/10")),
    ("multicast-address", "multicast address", _nets("224.0.0.0/4", "ff00::/8")),
    (
        "documentation-address",
        "documentation address",
        _nets(
            "192.0.2.0/24",
            "198.51.100.0/24",
            "203.0.113.0/24",
            "2001:db8::/32",
            "3fff::/20",
        ),
    ),
    ("benchmarking-address", "benchmarking address", _nets("198.18.0.0/15", "2001:2::/48")),
    (
        "reserved-address",
        "reserved or special-purpose address",
        _nets(
            "0.0.0.0/8",  # "this network"
            "192.0.0.0/24",  # IETF protocol assignments
            "192.88.99.0/24",  # former 6to4 relay anycast
            "240.0.0.0/4",  # reserved, includes the limited broadcast address
            "::/8",  # includes IPv4-translated ::ffff:0:0:0/96 and the remainder of ::/96
            "100::/64",  # discard-only
            "2001::/23",  # IETF protocol assignments, includes Teredo 2001::/32
            "5f00::/16",  # SRv6 segment identifiers
        ),
    ),
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")

# The canonical dotted quad: four decimal parts 0-255 without leading zeros.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}")
# A last label that an IPv4 parser would read as a number (WHATWG "ends in a number").
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")
# Letters, digits, hyphen and underscore (seen in real DNS names) in dot-separated labels.
_HOSTNAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*")


@dataclass(frozen=True)
class Refusal:
    """Why an address is refused: a stable reason code and a human-readable description."""

    reason: str
    description: str


def _classify_plain(address: IPAddress, allow_loopback: bool) -> Refusal | None:
    """Classify an address that embeds no IPv4 address (or the embedded address itself)."""
    if address in CLOUD_METADATA_ADDRESSES:
        return Refusal("cloud-metadata-address", CLOUD_METADATA_ADDRESSES[address])
    for reason, description, networks in _RANGES:
        if any(address in network for network in networks):
            if reason == "loopback-address" and allow_loopback:
                return None
            return Refusal(reason, description)
    # Safety net: anything the standard library does not consider globally routable.
    if address.is_reserved or address.is_multicast or not address.is_global:
        return Refusal("reserved-address", "reserved or special-purpose address")
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """Return the IPv4 address an IPv6 address stands for, with the name of the mapping."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # "::" and "::1" are not embeddings
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "IPv4-compatible"
    return None


def classify_address(address: IPAddress | str, *, allow_loopback: bool = False) -> Refusal | None:
    """Return why ``address`` must not be contacted, or None when it is allowed.

    IPv6 addresses that embed an IPv4 address (``::ffff:10.0.0.1``, ``::10.0.0.1``,
    ``64:ff9b::a00:1``, ``2002:a00:1::``) are judged by the embedded address, since that is the
    host a packet would reach. The deprecated IPv4-compatible form is refused even when the
    embedded address is public, as no working network routes it.
    """
    if isinstance(address, str):
        address = ipaddress.ip_address(address)
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:  # a zone index does not change the address class
            address = ipaddress.IPv6Address(int(address))
        if address in CLOUD_METADATA_ADDRESSES:
            return Refusal("cloud-metadata-address", CLOUD_METADATA_ADDRESSES[address])
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner, form = embedded
            refusal = _classify_plain(inner, allow_loopback)
            if refusal is not None:
                return Refusal(refusal.reason, f"{form} {inner}: {refusal.description}")
            if form == "IPv4-compatible":
                return Refusal("reserved-address", f"deprecated IPv4-compatible form of {inner}")
            return None
    return _classify_plain(address, allow_loopback)


def check_address(
    address: IPAddress | str, *, allow_loopback: bool = False, host: str | None = None
) -> IPAddress:
    """Return ``address`` parsed when it may be contacted; raise AddressRefused otherwise.

    ``host`` is the name the address was resolved from; it only makes the message clearer.
    """
    try:
        parsed = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError as exc:
        raise AddressRefused(
            f"refused {address!r}: not an IP address", reason="invalid-host"
        ) from exc
    refusal = classify_address(parsed, allow_loopback=allow_loopback)
    if refusal is not None:
        subject = f"{host} resolves to {parsed}" if host and host != str(parsed) else str(parsed)
        raise AddressRefused(
            f"refused {subject}: {refusal.description} ({refusal.reason})",
            reason=refusal.reason,
        )
    return parsed


def parse_host(host: str) -> IPAddress | None:
    """Return the IP address ``host`` denotes, None when it is a host name to resolve.

    Raises AddressRefused (``invalid-host``) for a host that is neither an IP literal nor a
    syntactically valid DNS name, and (``non-canonical-ip``) for a numeric host in any form other
    than the canonical dotted quad or an IPv6 literal. One trailing dot is ignored.
    """
    text = host.strip("[]").lower()
    if text.endswith("."):
        text = text[:-1]
    if not text:
        raise AddressRefused("refused URL without a host", reason="invalid-host")
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text.replace("%25", "%", 1))
        except ValueError as exc:
            raise AddressRefused(
                f"refused host {host!r}: not a valid IPv6 address", reason="invalid-host"
            ) from exc
    if _NUMERIC_LABEL.fullmatch(text.rsplit(".", 1)[-1]):
        if _DOTTED_QUAD.fullmatch(text):
            return ipaddress.IPv4Address(text)
        raise AddressRefused(
            f"refused host {host!r}: numeric host in a non-canonical form "
            "(decimal, octal, hex or shortened IPv4 is not accepted)",
            reason="non-canonical-ip",
        )
    if len(text) > 253 or not _HOSTNAME.fullmatch(text):
        raise AddressRefused(f"refused host {host!r}: not a valid host name", reason="invalid-host")
    return None


def check_host(host: str, *, allow_loopback: bool = False) -> IPAddress | None:
    """Apply the policy to a URL host: a literal IP is checked now, a name returns None.

    Raises AddressRefused when the host is malformed, numeric in an odd form, or an address that
    is not allowed.
    """
    return _checked_host(host, allow_loopback)


# A pure function of its arguments, asked again for every request to a host: the answers for
# allowed hosts are kept (a refusal raises, and is not kept).
@lru_cache(maxsize=4096)
def _checked_host(host: str, allow_loopback: bool) -> IPAddress | None:
    address = parse_host(host)
    if address is not None:
        check_address(address, allow_loopback=allow_loopback)
    return address


def check_resolved(
    host: str, addresses: Iterable[str], *, allow_loopback: bool = False
) -> list[IPAddress]:
    """Check EVERY address ``host`` resolved to; return them parsed, duplicates removed, in order.

    One disallowed address refuses the whole name, even if others are public: a name that points
    into a private network or at a metadata endpoint is hostile or misconfigured, and refusing it
    outright keeps the decision independent of address order and of connection fallbacks.
    Raises AddressRefused; an empty list is refused with ``invalid-host``.
    """
    checked: list[IPAddress] = []
    for text in addresses:
        address = check_address(text, allow_loopback=allow_loopback, host=host)
        if address not in checked:
            checked.append(address)
    if not checked:
        raise AddressRefused(f"refused {host}: it resolved to no address", reason="invalid-host")
    return checked


def check_url(url: str | httpx.URL, *, allow_loopback: bool = False) -> httpx.URL:
    """Apply the policy to a URL before any connection: return it parsed, or raise.

    The URL is parsed with httpx, the parser the fetcher sends with, so the check and the request
    can never disagree on the host. Refuses (AddressRefused) a scheme other than http/https,
    userinfo (``user:pass@``), a malformed or oddly numeric host, and a literal IP address that
    the policy does not allow. A URL httpx cannot parse raises PermanentError ``invalid-url``.
    """
    if isinstance(url, httpx.URL):
        parsed = url
    else:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise PermanentError(f"invalid URL {url!r}: {exc}", reason="invalid-url") from exc
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise AddressRefused(
            f"refused {url!s}: scheme {parsed.scheme!r} is not allowed (http, https only)",
            reason="scheme-not-allowed",
        )
    if parsed.userinfo:
        # Credentials in URLs leak into logs and records, and "trusted.example@evil" is a classic
        # way to disguise the real host.
        raise AddressRefused(
            f"refused {parsed.scheme}://{parsed.host}/...: credentials in the URL",
            reason="credentials-in-url",
        )
    # raw_host is what is sent and connected to (IDNA names in their ASCII "xn--" form).
    check_host(parsed.raw_host.decode("ascii"), allow_loopback=allow_loopback)
    return parsed
