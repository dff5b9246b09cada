"""The address guard of `web_fetch`: which URLs and addresses a model may make azr connect to.

Covered: schemes other than http(s), userinfo in the URL, ports outside the allowed set, and every address that is
not global unicast, whatever form it takes: loopback, private, link-local, CGNAT (100.64/10), multicast, broadcast,
reserved, documentation and benchmarking ranges, the unspecified address, IPv6 site-local and unique-local, and the
IPv6 forms that wrap an IPv4 address (mapped, compatible, translated, NAT64, 6to4, Teredo), refused outright because
the IPv4 address inside may be anything. A host is refused if ANY of its resolver answers is refused, and the caller
connects to the vetted address itself (no second resolution, so no DNS rebinding between check and connect).

Not covered: what a global address serves (a public proxy that forwards inward is a public address here), and
hosts the operator lets through on purpose with `tools.web.allow_networks` (meant for tests on 127.0.0.1).
The classification is a table of networks written out here, not Python's `ipaddress` flags, which disagree with
the IANA special-purpose registries on several of these (e.g. CGNAT, 6to4 and Teredo count as global there).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

# (network, why it is refused). Anything in none of them is global unicast.
_V4 = [
    ("0.0.0.0/8", "unspecified ('this network')"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (CGNAT)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved (IETF protocol assignments)"),
    ("192.0.2.0/24", "reserved (documentation)"),
    ("192.31.196.0/24", "reserved (AS112)"),
    ("192.52.193.0/24", "reserved (AMT)"),
    ("192.88.99.0/24", "reserved (6to4 relay anycast)"),
    ("192.168.0.0/16", "private"),
    ("192.175.48.0/24", "reserved (AS112 direct delegation)"),
    ("198.18.0.0/15", "reserved (benchmarking)"),
    ("198.51.100.0/24", "reserved (documentation)"),
    ("203.0.113.0/24", "reserved (documentation)"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # 255.255.255.255 (broadcast) included
]
_V6 = [
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("::ffff:0:0/96", "IPv4-mapped"),
    ("::ffff:0:0:0/96", "IPv4-translated"),
    ("::/96", "IPv4-compatible"),
    ("64:ff9b::/96", "NAT64"),
    ("64:ff9b:1::/48", "NAT64 (local use)"),
    ("100::/64", "reserved (discard-only)"),
    ("2001::/32", "Teredo"),
    ("2001::/23", "reserved (IETF protocol assignments)"),
    ("2001:db8::/32", "reserved (documentation)"),
    ("2002::/16", "6to4"),
    ("3fff::/20", "reserved (documentation)"),
    ("5f00::/16", "reserved (segment routing)"),
    ("fc00::/7", "unique-local (private)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
]
_TABLE = [(ipaddress.ip_network(net), why) for net, why in _V4 + _V6]
_GLOBAL_V6 = ipaddress.ip_network("2000::/3")  # the only IPv6 space allocated as global unicast


class Refused(Exception):
    """The URL or one of its addresses may not be fetched; the message says why, on one line."""


class Unresolvable(Exception):
    """The host has no address (or the resolver failed): an error, not a refusal."""


def refusal(address: str | IPAddress) -> str | None:
    """Why `address` may not be connected to, or None when it is global unicast. Pure: no sockets."""
    try:
        ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    except ValueError:
        return f"not an IP address: {address!r}"
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        return "an IPv6 address with a zone"
    for network, why in _TABLE:
        if ip.version == network.version and ip in network:
            return why
    if ip.version == 6 and ip not in _GLOBAL_V6:
        return "reserved (outside 2000::/3)"
    return None


@dataclass(frozen=True)
class Target:
    """A vetted request target: connect to `address`, and send `host` as the Host header and TLS server name."""

    url: str
    scheme: str
    host: str
    port: int
    address: str
    path: str  # path and query, as sent

    @property
    def connect_url(self) -> str:
        """The URL with the vetted address in place of the host name."""
        literal = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{literal}:{self.port}{self.path}"

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == default else f"{name}:{self.port}"


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (A and AAAA)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


class AddressGuard:
    """Vets URLs before any connection: `check(url)` returns the `Target` to connect to, or raises `Refused`."""

    def __init__(
        self,
        allow_ports: Sequence[int] = (80, 443),
        allow_networks: Sequence[str] = (),
        resolver: Resolver = system_resolver,
    ):
        self.allow_ports = frozenset(int(p) for p in allow_ports)
        self.allow_networks = [ipaddress.ip_network(n, strict=False) for n in allow_networks]
        self.resolver = resolver

    def check(self, url: str) -> Target:
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError as exc:
            raise Refused(f"malformed URL: {exc}") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise Refused(f"scheme {scheme or '(none)'!r}: only http and https")
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise Refused("credentials (userinfo) in the URL")
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise Refused("no host in the URL")
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise Refused(f"malformed host name {host!r}") from None
        port = port or (443 if scheme == "https" else 80)
        if port not in self.allow_ports:
            raise Refused(f"port {port} is not allowed (allowed: {', '.join(map(str, sorted(self.allow_ports)))})")
        addresses = self._resolve(host, port)
        for address in addresses:
            self.vet(address)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        return Target(url, scheme, host, port, addresses[0], path)

    def vet(self, address: str) -> None:
        """Raise `Refused` unless `address` is global unicast or inside `allow_networks`."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            raise Refused(f"not an IP address: {address!r}") from None
        zoned = ip.version == 6 and ip.scope_id
        if not zoned and any(ip.version == n.version and ip in n for n in self.allow_networks):
            return
        why = refusal(ip)
        if why:
            raise Refused(f"address {address} is {why}")

    def _resolve(self, host: str, port: int) -> list[str]:
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            return [str(literal)]
        try:
            addresses = self.resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise Unresolvable(f"cannot resolve {host}: {exc}") from None
        if not addresses:
            raise Unresolvable(f"cannot resolve {host}: no addresses")
        return addresses
