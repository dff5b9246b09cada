"""web_fetch and web_search against real HTTP servers on loopback addresses: readable pages, pass-through text and
JSON, refusals that never reach the server, redirects re-checked hop by hop, a slow drip and a gzip bomb bounded, a
SearXNG-shaped search; plus the live internet checks, marked `network`."""

from __future__ import annotations

import json
import threading
import time

import pytest
from web_stub import WebStub

from azr.config import WebToolConfig
from azr.tools.fetch import WebFetcher
from azr.tools.guard import AddressGuard
from azr.tools.search import WebSearcher


@pytest.fixture
def web():
    with WebStub("127.0.0.1") as stub:
        yield stub


def fetcher(port: int, networks=("127.0.0.1/32",), resolver=None, **settings) -> WebFetcher:
    cfg = WebToolConfig(allow_ports=[port], allow_networks=list(networks), **settings)
    guard = AddressGuard(cfg.allow_ports, cfg.allow_networks, **({"resolver": resolver} if resolver else {}))
    return WebFetcher(cfg, guard)


def test_an_html_page_becomes_its_title_and_main_text(web):
    result = fetcher(web.port).fetch(web.url("/page.html"))
    assert result.status == "ok", result.content
    assert result.content.startswith("Title: Binary search, explained\n")
    assert "halving the range" in result.content
    assert "var x" not in result.content  # scripts are not text
    assert result.meta["content_type"] == "text/html" and result.meta["http_status"] == 200


@pytest.mark.parametrize(("path", "text"), [("/notes.md", "# Notes"), ("/data.json", '{"answer": 42}')])
def test_text_and_json_pass_through(web, path, text):
    result = fetcher(web.port).fetch(web.url(path))
    assert result.status == "ok" and result.content.startswith(text)


def test_other_content_types_are_refused_and_errors_say_why(web):
    binary = fetcher(web.port).fetch(web.url("/binary"))
    assert binary.status == "refused" and "application/octet-stream" in binary.content
    missing = fetcher(web.port).fetch(web.url("/missing"))
    assert missing.status == "error" and "HTTP 404" in missing.content


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/page.html",  # no allow-list: loopback
        "http://[::1]:{port}/page.html",
        "http://localhost:{port}/page.html",
        "http://user:secret@127.0.0.1:{port}/page.html",
        "http://2130706433:{port}/page.html",  # 127.0.0.1 written as one number
        "http://0x7f.1:{port}/page.html",
        "http://[::ffff:127.0.0.1]:{port}/page.html",
        "file:///etc/passwd",
    ],
)
def test_refusals_send_nothing(web, url):
    result = fetcher(web.port, networks=()).fetch(url.format(port=web.port))
    assert result.status == "refused", result.content
    assert web.requests == []


def test_a_port_outside_the_allowed_set_is_refused(web):
    result = fetcher(80).fetch(web.url("/page.html"))
    assert result.status == "refused" and f"port {web.port}" in result.content
    assert web.requests == []


def test_a_redirect_to_another_loopback_address_is_refused_at_its_hop(web):
    with WebStub("127.0.0.2") as other:
        target = f"http://127.0.0.2:{web.port}/page.html"
        result = fetcher(web.port).fetch(web.url(f"/redirect?to={target}"))
        assert result.status == "refused" and "127.0.0.2" in result.content
        assert [r["path"] for r in web.requests] == [f"/redirect?to={target}"]
        assert other.requests == []


def test_redirects_are_followed_and_counted(web):
    target = web.url("/notes.md")
    result = fetcher(web.port).fetch(web.url(f"/redirect?to={target}"))
    assert result.status == "ok" and result.meta["redirects"] == 1
    looping = fetcher(web.port).fetch(web.url("/loop"))
    assert looping.status == "error" and "more than 5 redirects" in looping.content
    assert len(web.requests) == 2 + 6


def test_one_bad_resolver_answer_among_good_ones_refuses_the_host(web):
    def resolve(host, port):
        return ["127.0.0.1", "10.20.30.40"]

    result = fetcher(web.port, resolver=resolve).fetch(f"http://intranet.test:{web.port}/page.html")
    assert result.status == "refused" and "10.20.30.40" in result.content
    assert web.requests == []


def test_the_vetted_address_is_the_one_connected_to(web):
    """DNS rebinding: the resolver is asked once per hop; the request goes to that answer with the host's name."""
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])
    asked = []

    def resolve(host, port):
        asked.append(host)
        return next(answers)

    result = fetcher(web.port, resolver=resolve).fetch(f"http://rebind.test:{web.port}/echo-headers")
    assert result.status == "ok" and asked == ["rebind.test"]
    assert json.loads(result.content)["Host"] == f"rebind.test:{web.port}"


def test_proxy_variables_are_ignored(web, monkeypatch):
    with WebStub("127.0.0.1") as proxy:
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        result = fetcher(web.port).fetch(web.url("/notes.md"))
        assert result.status == "ok" and proxy.requests == [] and len(web.requests) == 1


def test_a_gzip_bomb_stops_at_the_byte_cap(web):
    result = fetcher(web.port, max_bytes=200_000).fetch(web.url("/bomb"))
    assert result.status == "ok"
    assert result.meta["bytes"] == 200_000 and result.meta["body_truncated"] is True


def test_a_slow_drip_is_cut_by_the_deadline(web):
    started = time.monotonic()
    result = fetcher(web.port, fetch_timeout_s=1.0).fetch(web.url("/drip"))
    assert result.status == "timeout"
    assert time.monotonic() - started < 3


def test_searxng_results_and_an_empty_search(web):
    cfg = WebToolConfig(search_backend="searxng", searxng_url=web.url(""), max_results=3)
    result = WebSearcher(cfg).search("binary search")
    assert result.status == "ok" and result.meta["results"] == 3
    assert result.content.splitlines()[:3] == [
        "1. Result 1 for binary search",
        "   https://example.org/1",
        "   snippet 1",
    ]
    empty = WebSearcher(cfg).search("nothing")
    assert (empty.status, empty.content, empty.meta["results"]) == ("ok", "No results.", 0)


def test_a_search_that_hangs_is_cut_by_its_own_deadline(monkeypatch):
    import ddgs

    release = threading.Event()

    class Stuck:
        def __init__(self, *args, **kwargs):
            pass

        def text(self, query, max_results=None):  # a slow engine: ddgs' own timeout does not bound this wait
            release.wait(30)
            return []

    monkeypatch.setattr(ddgs, "DDGS", Stuck)
    started = time.monotonic()
    result = WebSearcher(WebToolConfig(search_timeout_s=0.5)).search("anything")
    release.set()
    assert result.status == "timeout" and time.monotonic() - started < 2


def test_ddgs_no_results_is_an_empty_list(monkeypatch):
    import ddgs
    from ddgs.exceptions import DDGSException

    class Empty:
        def __init__(self, *args, **kwargs):
            pass

        def text(self, query, max_results=None):
            raise DDGSException("No results found.")

    monkeypatch.setattr(ddgs, "DDGS", Empty)
    result = WebSearcher(WebToolConfig()).search("zzqx")
    assert (result.status, result.content) == ("ok", "No results.")


@pytest.mark.network
def test_live_ddgs_search():
    result = WebSearcher(WebToolConfig()).search("python binary search bisect module")
    assert result.status == "ok" and result.meta["results"] > 0, result.content


@pytest.mark.network
def test_live_fetch_of_a_real_page():
    result = WebFetcher(WebToolConfig(), AddressGuard()).fetch("https://docs.python.org/3/library/bisect.html")
    assert result.status == "ok" and "bisect" in result.content, result.content


# ------------------------------------------------------------------------------------ bodies decoded to valid text
def _served(web, ctype: str, body: bytes) -> str:
    from urllib.parse import urlencode

    return web.url("/as?" + urlencode({"type": ctype, "hex": body.hex()}))


ESCAPES = b"caf\\xe9 \\ud800 \\x1b[31mRED\\x1b[0m \\x00 done"  # what unicode_escape would turn into raw characters


@pytest.mark.parametrize("charset", ["unicode_escape", "raw-unicode-escape", "rot13", "hex", "utf-7", "no-such-codec"])
@pytest.mark.parametrize("media", ["text/plain", "text/html"])
def test_a_charset_that_is_not_a_text_encoding_falls_back_to_utf8(web, charset, media):
    body = ESCAPES if media == "text/plain" else b"<html><body><p>" + ESCAPES + b" and more words</p></body></html>"
    result = fetcher(web.port).fetch(_served(web, f"{media}; charset={charset}", body))
    assert result.status == "ok", result.content
    assert "caf\\xe9 \\ud800 \\x1b[31mRED" in result.content  # the backslashes are text, as UTF-8 reads them
    assert not any(0xD800 <= ord(c) <= 0xDFFF or (ord(c) < 32 and c not in "\t\n\r") for c in result.content)
    result.content.encode("utf-8")  # strict: valid text


def test_a_meta_charset_that_is_not_a_text_encoding_is_not_used_either(web):
    body = (
        b'<html><head><meta charset="unicode_escape"><title>t</title></head><body><p>' + ESCAPES + b"</p></body></html>"
    )
    result = fetcher(web.port).fetch(_served(web, "text/html", body))
    assert result.status == "ok" and "\\x1b[31mRED" in result.content and "\x1b" not in result.content


@pytest.mark.parametrize(
    ("ctype", "body", "text"),
    [
        ("text/plain; charset=latin-1", "café".encode("latin-1"), "café"),
        ("text/plain; charset=Windows-1251", "привет".encode("cp1251"), "привет"),
        ("text/plain; charset=shift_jis", "日本".encode("shift_jis"), "日本"),
        ("text/plain; charset=utf-16", "wide".encode("utf-16"), "wide"),
        ("text/plain", b"bad \xff\xfe bytes", "bad \ufffd\ufffd bytes"),
        ("text/plain; charset=utf-8", b"raw \x1b[2J \x00 \x85 ctl", "raw \ufffd[2J \ufffd \ufffd ctl"),
        ("text/plain; charset=latin-1", b"c1 \x9b31m", "c1 \ufffd31m"),
        ("application/json", b'{"s": "\\ud800"}', '{"s": "\\ud800"}'),  # JSON passes through as text
    ],
)
def test_real_text_encodings_decode_and_controls_never_pass(web, ctype, body, text):
    result = fetcher(web.port).fetch(_served(web, ctype, body))
    assert (result.status, result.content) == ("ok", text)


def test_searxng_results_with_a_lone_surrogate_escape_are_valid_text(web, monkeypatch):
    import httpx2

    cfg = WebToolConfig(search_backend="searxng", searxng_url=web.url(""), max_results=1)
    real_get = httpx2.Client.get

    def get(self, url, **kw):  # the stub's search answers with a lone surrogate's escape in a title
        response = real_get(self, url, **kw)
        response._content = b'{"results": [{"title": "T\\ud800", "url": "https://x.org/", "content": "s"}]}'
        return response

    monkeypatch.setattr(httpx2.Client, "get", get)
    result = WebSearcher(cfg).search("q")
    assert result.status == "ok" and "T\ufffd" in result.content
