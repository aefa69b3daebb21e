"""A guard that makes any attempt to reach a non-loopback address fail loudly in tests.

Tests must never send a packet beyond loopback, not even a DNS query. The guard wraps
``socket.socket.connect``/``connect_ex``/``sendto`` and ``socket.getaddrinfo``: loopback addresses,
``localhost`` and Unix sockets pass, everything else raises :class:`NetworkEscape` before any
packet leaves.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["NetworkEscape", "attempts", "guard_network"]

attempts: list[str] = []


class NetworkEscape(AssertionError):
    """Raised when code under test tries to reach a non-loopback address."""


def _is_loopback_host(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    text = str(host).strip("[]")
    if text in {"localhost", ""}:
        return True
    try:
        return ipaddress.ip_address(text.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def _check_address(address: Any) -> None:
    if isinstance(address, (str, bytes)):  # AF_UNIX path
        return
    host = address[0] if isinstance(address, tuple) and address else address
    if not _is_loopback_host(host):
        attempts.append(str(host))
        raise NetworkEscape(f"test tried to reach non-loopback address {host!r}")


@contextmanager
def guard_network() -> Iterator[None]:
    """Within the block, refuse every connection or lookup beyond loopback."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sendto = socket.socket.sendto
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(address)
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(address)
        return real_connect_ex(self, address)

    def sendto(self: socket.socket, data: bytes, *args: Any) -> int:
        _check_address(args[-1])
        return real_sendto(self, data, *args)  # type: ignore[arg-type]

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _is_loopback_host(host):
            attempts.append(str(host))
            raise NetworkEscape(f"test tried to resolve non-loopback host {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.socket.sendto = sendto  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo
    try:
        yield
    finally:
        socket.socket.connect = real_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = real_connect_ex  # type: ignore[method-assign]
        socket.socket.sendto = real_sendto  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo
