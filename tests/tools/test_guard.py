"""The address guard: the classification table (pure, no sockets) and URL vetting with an injected resolver."""

from __future__ import annotations

import pytest

from azr.tools import AddressGuard, Refused, Unresolvable, refusal

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "CGNAT"),
    ("100.127.255.255", "CGNAT"),
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"),
    ("192.0.0.170", "reserved"),
    ("192.0.2.1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("192.88.99.1", "6to4 relay"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::ffff:127.0.0.1", "IPv4-mapped"),
    ("::ffff:8.8.8.8", "IPv4-mapped"),  # wraps a global address, refused all the same
    ("::ffff:0:a00:1", "IPv4-translated"),
    ("::127.0.0.1", "IPv4-compatible"),
    ("::8.8.8.8", "IPv4-compatible"),
    ("64:ff9b::7f00:1", "NAT64"),
    ("64:ff9b::808:808", "NAT64"),
    ("64:ff9b:1::a00:1", "NAT64"),
    ("2002:7f00:1::", "6to4"),
    ("2002:808:808::1", "6to4"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
    ("2001:db8::1", "documentation"),
    ("2001:10::1", "IETF protocol assignments"),
    ("fc00::1", "unique-local"),
    ("fd12:3456::1", "unique-local"),
    ("fe80::1", "link-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("100::1", "discard"),
    ("3fff::1", "documentation"),
    ("4000::1", "outside 2000::/3"),
    ("fe80::1%eth0", "zone"),
]
GLOBAL = [
    "8.8.8.8",
    "1.1.1.1",
    "100.128.0.1",
    "100.63.255.255",
    "172.32.0.1",
    "93.184.215.14",
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001:81c::200e",
]


@pytest.mark.parametrize(("address", "why"), REFUSED, ids=[a for a, _ in REFUSED])
def test_refused_addresses(address, why):
    reason = refusal(address)
    assert reason is not None and why.lower() in reason.lower(), reason


@pytest.mark.parametrize("address", GLOBAL)
def test_global_unicast_addresses_pass(address):
    assert refusal(address) is None


@pytest.mark.parametrize("address", ["2002:7f00:1::", "192.88.99.1", "3fff::1", "64:ff9b:1::a00:1"])
def test_python_ipaddress_calls_some_of_them_global(address):
    """Why the table is written out: this Python's `ipaddress` calls these global (6to4 wrapping 127.0.0.1, the
    6to4 relay, IPv6 documentation space, local-use NAT64 wrapping 10.0.0.1)."""
    import ipaddress

    assert ipaddress.ip_address(address).is_global
    assert refusal(address) is not None


def _resolver(table):
    calls = []

    def resolve(host, port):
        calls.append(host)
        if host not in table:
            raise OSError("Name or service not known")
        return table[host]

    resolve.calls = calls
    return resolve


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.org/", "scheme"),
        ("file:///etc/passwd", "scheme"),
        ("gopher://example.org/", "scheme"),
        ("example.org/page", "scheme"),
        ("http://user:pw@example.org/", "credentials"),
        ("http://user@example.org/", "credentials"),
        ("http://example.org:8080/", "port 8080"),
        ("http://example.org:22/", "port 22"),
        ("http://[::1]/", "loopback"),
        ("http://127.0.0.1/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[::ffff:7f00:1]/", "IPv4-mapped"),
        ("http://mixed.test/", "private"),  # one bad answer among good ones
        ("http://rebind.test/", "loopback"),
        ("http://decimal.test/", "loopback"),
        ("http://:80/", "no host"),
    ],
)
def test_urls_refused_before_any_connection(url, why):
    resolve = _resolver(
        {
            "example.org": ["93.184.215.14"],
            "mixed.test": ["93.184.215.14", "2606:4700::1", "10.0.0.7"],
            "rebind.test": ["127.0.0.1"],
            "decimal.test": ["127.0.0.1"],  # what getaddrinfo makes of 2130706433 or 0x7f.1
        }
    )
    with pytest.raises(Refused, match=why):
        AddressGuard(resolver=resolve).check(url)


def test_a_vetted_target_keeps_the_host_name_for_host_header_and_tls():
    guard = AddressGuard(
        resolver=_resolver({"example.org": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]})
    )
    target = guard.check("https://Example.org./a/b?x=1#frag")
    assert (target.host, target.port, target.address) == ("example.org", 443, "93.184.215.14")
    assert target.connect_url == "https://93.184.215.14:443/a/b?x=1"
    assert target.host_header == "example.org"
    v6 = AddressGuard(allow_ports=[80, 8080], resolver=_resolver({"h.test": ["2606:4700::1"]})).check(
        "http://h.test:8080"
    )
    assert v6.connect_url == "http://[2606:4700::1]:8080/" and v6.host_header == "h.test:8080"


def test_unresolvable_hosts_are_errors_not_refusals():
    with pytest.raises(Unresolvable, match="cannot resolve"):
        AddressGuard(resolver=_resolver({})).check("http://nowhere.test/")


def test_allow_networks_opens_only_what_it_names():
    guard = AddressGuard(allow_ports=[8000], allow_networks=["127.0.0.1/32"])
    assert guard.check("http://127.0.0.1:8000/").address == "127.0.0.1"
    with pytest.raises(Refused, match="loopback"):
        guard.check("http://127.0.0.2:8000/")
    with pytest.raises(Refused, match="loopback"):
        guard.check("http://[::1]:8000/")
