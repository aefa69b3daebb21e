"""The address policy of the safe fetcher, on tables of addresses, hosts and URLs (pure)."""

from __future__ import annotations

import ipaddress

import pytest

from cdif_harvester.adapters import netpolicy
from cdif_harvester.adapters.netpolicy import (
    REASONS,
    check_address,
    check_host,
    check_resolved,
    check_url,
    classify_address,
    parse_host,
)
from cdif_harvester.errors import AddressRefused, PermanentError

# (address, reason it is refused with, or None when it may be contacted)
ADDRESSES: list[tuple[str, str | None]] = [
    # public unicast passes
    ("93.184.215.14", None),
    ("8.8.8.8", None),
    ("1.1.1.1", None),
    ("2606:4700:4700::1111", None),
    ("2a00:1450:4001:80b::200e", None),
    ("::ffff:8.8.8.8", None),  # IPv4-mapped public
    ("64:ff9b::808:808", None),  # NAT64 of 8.8.8.8
    ("2002:808:808::1", None),  # 6to4 of 8.8.8.8
    # cloud metadata, named explicitly
    ("169.254.169.254", "cloud-metadata-address"),
    ("fd00:ec2::254", "cloud-metadata-address"),
    ("100.100.100.200", "cloud-metadata-address"),
    ("169.254.170.2", "cloud-metadata-address"),
    ("169.254.170.23", "cloud-metadata-address"),
    ("192.0.0.192", "cloud-metadata-address"),
    ("168.63.129.16", "cloud-metadata-address"),
    ("::ffff:169.254.169.254", "cloud-metadata-address"),
    ("::ffff:a9fe:a9fe", "cloud-metadata-address"),
    ("64:ff9b::a9fe:a9fe", "cloud-metadata-address"),
    # unspecified
    ("0.0.0.0", "unspecified-address"),
    ("::", "unspecified-address"),
    ("::ffff:0.0.0.0", "unspecified-address"),
    # loopback
    ("127.0.0.1", "loopback-address"),
    ("127.255.255.254", "loopback-address"),
    ("::1", "loopback-address"),
    ("::ffff:127.0.0.1", "loopback-address"),
    ("::ffff:7f00:1", "loopback-address"),
    ("::127.0.0.1", "loopback-address"),  # IPv4-compatible
    ("64:ff9b::7f00:1", "loopback-address"),
    # link-local
    ("169.254.1.1", "link-local-address"),
    ("fe80::1", "link-local-address"),
    ("fe80::1%eth0", "link-local-address"),
    ("febf::1", "link-local-address"),
    # private
    ("10.0.0.1", "private-address"),
    ("10.255.255.255", "private-address"),
    ("172.16.0.1", "private-address"),
    ("172.31.255.255", "private-address"),
    ("192.168.1.1", "private-address"),
    ("fc00::1", "private-address"),
    ("fd12:3456:789a::1", "private-address"),
    ("fec0::1", "private-address"),
    ("64:ff9b:1::a00:1", "private-address"),
    ("::ffff:10.0.0.1", "private-address"),
    ("::ffff:192.168.0.1", "private-address"),
    ("::10.0.0.1", "private-address"),
    ("64:ff9b::10.1.2.3", "private-address"),
    ("64:ff9b::c0a8:101", "private-address"),
    ("2002:a00:1::1", "private-address"),  # 6to4 of 10.0.0.1
    # just outside the private ranges
    ("172.15.255.255", None),
    ("172.32.0.1", None),
    ("11.0.0.1", None),
    # shared address space
    ("100.64.0.1", "shared-address"),
    ("100.127.255.254", "shared-address"),
    ("::ffff:100.64.0.1", "shared-address"),
    ("100.128.0.1", None),
    # multicast
    ("224.0.0.1", "multicast-address"),
    ("239.255.255.250", "multicast-address"),
    ("ff02::1", "multicast-address"),
    ("ff05::2", "multicast-address"),
    ("::ffff:224.0.0.251", "multicast-address"),
    # documentation
    ("192.0.2.1", "documentation-address"),
    ("198.51.100.7", "documentation-address"),
    ("203.0.113.9", "documentation-address"),
    ("2001:db8::1", "documentation-address"),
    ("3fff::1", "documentation-address"),
    # benchmarking
    ("198.18.0.1", "benchmarking-address"),
    ("198.19.255.254", "benchmarking-address"),
    ("2001:2::1", "benchmarking-address"),
    # reserved and special purpose
    ("240.0.0.1", "reserved-address"),
    ("255.255.255.255", "reserved-address"),
    ("0.1.2.3", "reserved-address"),
    ("192.0.0.8", "reserved-address"),
    ("192.88.99.1", "reserved-address"),
    ("100::1", "reserved-address"),
    ("2001::1", "reserved-address"),  # Teredo
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "reserved-address"),
    ("::ffff:0:a00:1", "reserved-address"),  # IPv4-translated form
    ("::8.8.8.8", "reserved-address"),  # deprecated IPv4-compatible form, even of a public one
    ("4000::1", "reserved-address"),
    ("5f00::1", "reserved-address"),
]


@pytest.mark.parametrize(("address", "reason"), ADDRESSES)
def test_address_table(address: str, reason: str | None) -> None:
    refusal = classify_address(address)
    assert (refusal.reason if refusal else None) == reason
    if reason is None:
        assert check_address(address) == ipaddress.ip_address(address)
    else:
        with pytest.raises(AddressRefused) as caught:
            check_address(address)
        assert caught.value.reason == reason
        assert caught.value.outcome == "blocked"
        assert reason in str(caught.value)


def test_reason_codes_are_documented() -> None:
    assert {reason for _address, reason in ADDRESSES if reason} <= REASONS


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"]
)
def test_allow_loopback_lets_loopback_through(address: str) -> None:
    assert classify_address(address, allow_loopback=True) is None
    assert classify_address(address).reason == "loopback-address"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("0.0.0.0", "unspecified-address"),
        ("::", "unspecified-address"),
        ("10.0.0.1", "private-address"),
        ("169.254.169.254", "cloud-metadata-address"),
        ("169.254.0.1", "link-local-address"),
    ],
)
def test_allow_loopback_lets_nothing_else_through(address: str, reason: str) -> None:
    refusal = classify_address(address, allow_loopback=True)
    assert refusal is not None
    assert refusal.reason == reason


def test_metadata_message_names_the_endpoint() -> None:
    with pytest.raises(AddressRefused, match="instance metadata"):
        check_address("169.254.169.254")
    with pytest.raises(AddressRefused, match="Alibaba"):
        check_address("100.100.100.200")
    with pytest.raises(AddressRefused, match="ECS"):
        check_address("169.254.170.2")
    with pytest.raises(AddressRefused, match=r"IPv4-mapped 10\.0\.0\.1"):
        check_address("::ffff:10.0.0.1")


def test_check_address_rejects_garbage() -> None:
    with pytest.raises(AddressRefused) as caught:
        check_address("not-an-ip")
    assert caught.value.reason == "invalid-host"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("example.org", None),
        ("EXAMPLE.org.", None),
        ("xn--mnchen-3ya.de", None),
        ("_service.example.org", None),
        ("a-b.c-d.example", None),
        ("localhost", None),
        ("8.8.8.8", "8.8.8.8"),
        ("8.8.8.8.", "8.8.8.8"),
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("2001:4860::8888", "2001:4860::8888"),
    ],
)
def test_parse_host(host: str, expected: str | None) -> None:
    parsed = parse_host(host)
    assert parsed == (ipaddress.ip_address(expected) if expected else None)


@pytest.mark.parametrize(
    "host",
    [
        "2130706433",  # decimal 127.0.0.1
        "0177.0.0.1",  # octal
        "0x7f.0.0.1",  # hex
        "0x7f000001",
        "0X7F.1",
        "127.1",  # shortened
        "127.0.1",
        "10.1",
        "017700000001",
        "1.2.3.4.5",
        "8.8.8.08",
        "256.1.1.1",
        "example.123",  # a numeric last label is an IPv4 number to URL parsers
        "3232235777",  # decimal 192.168.1.1
        "0x",
    ],
)
def test_odd_numeric_hosts_are_refused_outright(host: str) -> None:
    with pytest.raises(AddressRefused) as caught:
        parse_host(host)
    assert caught.value.reason == "non-canonical-ip"


@pytest.mark.parametrize(
    "host", ["", ".", "exa mple.org", "exa%20mple.org", "a..b", "-x.org", "a/b", "[::g]", "1::2::3"]
)
def test_malformed_hosts_are_refused(host: str) -> None:
    with pytest.raises(AddressRefused) as caught:
        parse_host(host)
    assert caught.value.reason == "invalid-host"


def test_check_host_checks_literals_and_defers_names() -> None:
    assert check_host("publisher.example") is None
    assert check_host("8.8.8.8") == ipaddress.ip_address("8.8.8.8")
    with pytest.raises(AddressRefused) as caught:
        check_host("10.0.0.1")
    assert caught.value.reason == "private-address"
    assert check_host("127.0.0.1", allow_loopback=True) == ipaddress.ip_address("127.0.0.1")


# (URL, reason it is refused with, or None when it passes)
URLS: list[tuple[str, str | None]] = [
    ("https://example.org/dataset/1", None),
    ("http://example.org:8080/a?b=c#frag", None),
    ("HTTPS://Example.ORG/", None),
    ("http://8.8.8.8/", None),
    ("http://[2606:4700:4700::1111]/", None),
    ("https://münchen.de/", None),
    ("ftp://example.org/file", "scheme-not-allowed"),
    ("file:///etc/passwd", "scheme-not-allowed"),
    ("gopher://example.org/", "scheme-not-allowed"),
    ("javascript:alert(1)", "scheme-not-allowed"),
    ("data:text/plain,hi", "scheme-not-allowed"),
    ("http://user:pass@example.org/", "credentials-in-url"),
    ("http://user@example.org/", "credentials-in-url"),
    ("http://example.org\\@10.0.0.1/", "credentials-in-url"),
    ("http://10.0.0.1/", "private-address"),
    ("http://192.168.0.1:8080/admin", "private-address"),
    ("http://[::ffff:10.0.0.1]/", "private-address"),
    ("http://[::ffff:a00:1]/", "private-address"),
    ("http://[fd00::1]/", "private-address"),
    ("http://127.0.0.1:8000/", "loopback-address"),
    ("http://[::1]/", "loopback-address"),
    ("http://[::ffff:127.0.0.1]/", "loopback-address"),
    ("http://127.0.0.1./", "loopback-address"),
    ("http://169.254.169.254/latest/meta-data/", "cloud-metadata-address"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "cloud-metadata-address"),
    ("http://100.100.100.200/latest/meta-data/", "cloud-metadata-address"),
    ("http://169.254.170.2/v2/credentials", "cloud-metadata-address"),
    ("http://[fe80::1%25eth0]/", "link-local-address"),
    ("http://0.0.0.0/", "unspecified-address"),
    ("http://[::]/", "unspecified-address"),
    ("http://224.0.0.1/", "multicast-address"),
    ("http://100.64.1.1/", "shared-address"),
    ("http://2130706433/", "non-canonical-ip"),
    ("http://0x7f.0.0.1/", "non-canonical-ip"),
    ("http://0x7f000001/", "non-canonical-ip"),
    ("http://127.1/", "non-canonical-ip"),
    ("http:///path", "invalid-host"),
    ("http:10.0.0.1", "invalid-host"),
    ("http://exa mple.org/", "invalid-host"),
]


@pytest.mark.parametrize(("url", "reason"), URLS)
def test_url_table(url: str, reason: str | None) -> None:
    if reason is None:
        assert str(check_url(url)).lower().startswith(url.split(":", 1)[0].lower())
        return
    with pytest.raises(AddressRefused) as caught:
        check_url(url)
    assert caught.value.reason == reason
    assert caught.value.outcome == "blocked"


def test_url_that_httpx_cannot_parse_is_invalid_not_blocked() -> None:
    # httpx refuses an octal dotted quad itself; that is an invalid URL, not an address refusal.
    with pytest.raises(PermanentError) as caught:
        check_url("http://0177.0.0.1/")
    assert caught.value.reason == "invalid-url"
    assert not isinstance(caught.value, AddressRefused)


def test_credentials_are_not_echoed_in_the_message() -> None:
    with pytest.raises(AddressRefused) as caught:
        check_url("https://alice:s3cret@example.org/")
    assert "s3cret" not in str(caught.value)


def test_loopback_url_allowed_only_when_asked() -> None:
    assert check_url("http://127.0.0.1:8000/", allow_loopback=True).port == 8000
    assert check_url("http://[::1]:8000/", allow_loopback=True).host == "::1"


def test_check_resolved_refuses_if_any_address_is_refused() -> None:
    with pytest.raises(AddressRefused) as caught:
        check_resolved("mixed.test", ["8.8.8.8", "10.1.2.3"])
    assert caught.value.reason == "private-address"
    assert "mixed.test resolves to 10.1.2.3" in str(caught.value)
    with pytest.raises(AddressRefused) as caught:
        check_resolved("mixed.test", ["127.0.0.1", "10.1.2.3"], allow_loopback=True)
    assert caught.value.reason == "private-address"


def test_check_resolved_returns_distinct_addresses_in_order() -> None:
    assert check_resolved("ok.test", ["8.8.8.8", "2001:4860:4860::8888", "8.8.8.8"]) == [
        ipaddress.ip_address("8.8.8.8"),
        ipaddress.ip_address("2001:4860:4860::8888"),
    ]


def test_check_resolved_refuses_empty_and_garbage() -> None:
    with pytest.raises(AddressRefused) as caught:
        check_resolved("none.test", [])
    assert caught.value.reason == "invalid-host"
    with pytest.raises(AddressRefused) as caught:
        check_resolved("bad.test", ["8.8.8.8", "not-an-address"])
    assert caught.value.reason == "invalid-host"


def test_every_metadata_address_is_refused_as_metadata() -> None:
    for address in netpolicy.CLOUD_METADATA_ADDRESSES:
        refusal = classify_address(address, allow_loopback=True)
        assert refusal is not None
        assert refusal.reason == "cloud-metadata-address"
