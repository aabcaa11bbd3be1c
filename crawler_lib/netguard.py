"""SSRF guard: which IP addresses the crawler may connect to.

Web content chooses the URLs we fetch, so a link (or a DNS answer) must never make us connect to
loopback, private, link-local, unique-local, multicast, unspecified, reserved or cloud-metadata
addresses unless the operator listed their network in `security.allow_networks`. The check runs in
the socket factory of every connection, after DNS resolution, so IP-literal URLs, redirects and DNS
rebinding all pass through it.
"""
from __future__ import annotations

import ipaddress
import socket
from typing import Iterable, Optional

# Metadata endpoints that are not covered by the generic non-global test on every platform.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "100.100.100.200", "192.0.0.192", "fd00:ec2::254"))


class BlockedAddress(OSError):
    """Raised instead of connecting to a refused address."""

    def __init__(self, address: str, reason: str):
        super().__init__(f"refused to connect to {address}: {reason}")
        self.address = address
        self.reason = reason


def classify(address: str) -> Optional[str]:
    """Why the address is not a public unicast address, or None if it is one."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA_ADDRESSES:
        return "metadata_address"
    if ip.is_loopback:
        return "loopback_address"
    if ip.is_link_local:
        return "link_local_address"
    if ip.is_multicast:
        return "multicast_address"
    if ip.is_unspecified:
        return "unspecified_address"
    if ip.is_private:
        return "private_address"
    if ip.is_reserved or not ip.is_global:
        return "reserved_address"
    return None


class AddressGuard:
    def __init__(self, allow_networks: Iterable[str] = ()):
        self.allow_networks = [ipaddress.ip_network(n, strict=False) for n in allow_networks]

    @classmethod
    def from_config(cls, cfg) -> "AddressGuard":
        return cls(cfg["security.allow_networks"])

    def refusal(self, address: str) -> Optional[str]:
        """None if we may connect to `address`, else the reason we may not."""
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return "invalid_address"
        if any(ip in network for network in self.allow_networks if ip.version == network.version):
            return None
        return classify(address)

    def socket_factory(self, addr_info) -> socket.socket:
        """aiohttp `socket_factory`: check the resolved address, then create the socket."""
        family, type_, proto, _, sockaddr = addr_info
        reason = self.refusal(sockaddr[0])
        if reason:
            raise BlockedAddress(sockaddr[0], reason)
        sock = socket.socket(family=family, type=type_, proto=proto)
        sock.setblocking(False)
        return sock
