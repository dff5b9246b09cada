"""The `web_fetch` tool: one web page as readable text, fetched through the address guard.

Every hop (the first request and each redirect, at most `max_redirects`) is vetted by `azr.tools.guard` and sent to
the vetted address itself, with the host name as Host header and TLS server name. Proxy variables are ignored, only
gzip and deflate are accepted, the decoded body is capped (a gzip bomb stops at the cap) and the whole fetch,
redirects included, is bounded by one deadline. HTML becomes its title and main text (readability-lxml); text and
JSON pass through; other content types are refused before their body is read. A body is decoded here, never by a
library, and only with a real text encoding (`page_text`). Never sends a credential.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import zlib
from typing import Any
from urllib.parse import urljoin

from azr.config import WebToolConfig
from azr.inputs import decode_text
from azr.tools.guard import AddressGuard, Refused, Unresolvable
from azr.tools.result import ToolResult

_REDIRECTS = {301, 302, 303, 307, 308}
_HTML = {"text/html", "application/xhtml+xml"}
_BLOCKS = {"p", "div", "br", "li", "tr", "pre", "blockquote", "section", "article", "table", "ul", "ol", "dd", "dt"}
_BLOCKS |= {f"h{i}" for i in range(1, 7)}
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_META_CHARSET = re.compile(rb"(?i)<meta[^>]+charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)")


class FetchError(Exception):
    """The page could not be fetched or read (status `error`); the message is one line."""


class WebFetcher:
    """`fetch(url)` -> ToolResult, never raising. Settings from `tools.web` (`WebToolConfig`)."""

    def __init__(self, cfg: WebToolConfig, guard: AddressGuard):
        self.cfg, self.guard = cfg, guard

    def fetch(self, url: str) -> ToolResult:
        try:
            return run_sync(asyncio.wait_for(self._fetch(url), self.cfg.fetch_timeout_s))
        except TimeoutError:
            return ToolResult("timeout", f"the fetch did not finish within {self.cfg.fetch_timeout_s:g}s")
        except Refused as exc:
            return ToolResult("refused", str(exc))
        except (Unresolvable, FetchError) as exc:
            return ToolResult("error", str(exc))

    async def _fetch(self, url: str) -> ToolResult:
        import httpx2

        headers = {
            "User-Agent": self.cfg.user_agent,
            "Accept": "text/html, application/xhtml+xml, text/plain, text/markdown, application/json;q=0.9",
            "Accept-Encoding": "gzip, deflate",
        }
        timeout = httpx2.Timeout(self.cfg.fetch_timeout_s)
        async with httpx2.AsyncClient(trust_env=False, follow_redirects=False, timeout=timeout) as client:
            for hop in range(self.cfg.max_redirects + 1):
                target = self.guard.check(url)
                request = client.build_request(
                    "GET",
                    target.connect_url,
                    headers={**headers, "Host": target.host_header},
                    extensions={"sni_hostname": target.host},
                )
                try:
                    response = await client.send(request, stream=True)
                except httpx2.HTTPError as exc:
                    raise FetchError(f"{type(exc).__name__}: {_one_line(str(exc)) or 'request failed'}") from None
                try:
                    if response.status_code in _REDIRECTS:
                        location = response.headers.get("location")
                        if not location:
                            raise FetchError(f"HTTP {response.status_code} without a Location header")
                        url = urljoin(url, location)
                        continue
                    return await self._read(response, url, hop)
                finally:
                    await response.aclose()
        raise FetchError(f"more than {self.cfg.max_redirects} redirects")

    async def _read(self, response: Any, url: str, redirects: int) -> ToolResult:
        if response.status_code >= 400:
            raise FetchError(f"HTTP {response.status_code} from {url}")
        media, charset = _content_type(response.headers.get("content-type", ""))
        if not (media in _HTML or media.startswith("text/") or media == "application/json" or media.endswith("+json")):
            raise Refused(f"content type {media or '(none)'!r} is not fetched (HTML, text and JSON are)")
        body, truncated = await _read_capped(response, self.cfg.max_bytes)
        meta = {"url": url, "http_status": response.status_code, "content_type": media, "bytes": len(body)}
        meta |= {"body_truncated": truncated, "redirects": redirects}
        if media in _HTML:
            title, text = readable_text(body, charset)
            return ToolResult("ok", f"Title: {title}\nURL: {url}\n\n{text}", meta)
        return ToolResult("ok", page_text(body, charset), meta)


async def _read_capped(response: Any, limit: int) -> tuple[bytes, bool]:
    """The decoded body, at most `limit` bytes (True when more was there). Decoding is done here, with the output
    bounded at each step, so a small compressed body cannot expand past the cap in memory."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding in ("gzip", "x-gzip", "deflate"):
        decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected
    elif encoding in ("", "identity"):
        decoder = None
    else:
        raise FetchError(f"content encoding {encoding!r} is not supported (gzip and deflate are)")
    out = bytearray()
    async for chunk in response.aiter_raw():
        pending = chunk
        while pending:
            room = limit + 1 - len(out)
            try:
                data = decoder.decompress(pending, room) if decoder else pending[:room]
            except zlib.error as exc:
                raise FetchError(f"cannot decode the {encoding} body: {exc}") from None
            pending = decoder.unconsumed_tail if decoder else b""
            out += data
            if len(out) > limit:
                return bytes(out[:limit]), True
    return bytes(out), False


def readable_text(body: bytes, charset: str | None) -> tuple[str, str]:
    """(title, main text) of an HTML page, through readability-lxml."""
    try:
        import lxml.html
        from readability import Document
    except ImportError:
        raise FetchError("web_fetch needs readability-lxml: pip install readability-lxml") from None
    html = page_text(body, charset or _meta_charset(body))
    try:
        document = Document(html)
        title = document.short_title() or ""
        tree = lxml.html.fromstring(document.summary(html_partial=True))
    except Exception as exc:  # readability's own Unparseable, lxml's ParserError on empty or broken pages
        raise FetchError(f"cannot read the page: {type(exc).__name__}: {_one_line(str(exc))}") from None
    for element in tree.iter():
        if isinstance(element.tag, str) and element.tag.lower() in _BLOCKS:
            element.tail = "\n" + (element.tail or "")
    lines = [" ".join(line.split()) for line in tree.text_content().splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return " ".join(title.split()), text


def _content_type(value: str) -> tuple[str, str | None]:
    media, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'")
    return media.strip().lower(), charset


def page_text(body: bytes, charset: str | None) -> str:
    """A page's bytes as valid text: decoded only with a real text encoding (`azr.inputs.TEXT_ENCODINGS`; a declared
    `unicode_escape`, `rot13` or unknown name falls back to UTF-8), bad bytes and control characters other than tab,
    newline and carriage return replaced by U+FFFD: no surrogate, no escape sequence reaches the model or a log."""
    return _CONTROLS.sub("\ufffd", decode_text(body, charset))


def _meta_charset(body: bytes) -> str | None:
    """The charset an HTML page declares in its first bytes (`<meta charset=…>` or http-equiv), if any."""
    match = _META_CHARSET.search(body[:4096])
    return match.group(1).decode("ascii") if match else None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def run_sync(coroutine: Any) -> Any:
    """Run a coroutine to completion from sync code, in a private loop on another thread if this one runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
