"""The `web_search` tool: a few results (title, URL, snippet) from ddgs (the default) or a SearXNG-compatible JSON
endpoint (`tools.web.search_backend: searxng`, `tools.web.searxng_url`).

Each search runs under an overall deadline of its own: ddgs' `timeout` bounds each engine's request, not a slow
engine's whole answer, so the search runs on a daemon thread that is abandoned when the deadline passes. No results
is an empty list (status ok), never an error. The SearXNG URL is the operator's, not the model's, so it is not put
through the address guard.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from azr.config import WebToolConfig
from azr.inputs import load_json
from azr.tools.result import ToolResult

_NO_RESULTS = "no results found"


class WebSearcher:
    """`search(query)` -> ToolResult, never raising. Settings from `tools.web` (`WebToolConfig`)."""

    def __init__(self, cfg: WebToolConfig):
        self.cfg = cfg

    def search(self, query: str) -> ToolResult:
        query = " ".join(query.split())
        if not query:
            return ToolResult("error", "query: empty")
        backend = self._ddgs if self.cfg.search_backend == "ddgs" else self._searxng
        outcome = with_deadline(lambda: backend(query), self.cfg.search_timeout_s)
        if outcome is None:
            return ToolResult("timeout", f"the search did not finish within {self.cfg.search_timeout_s:g}s")
        results, error = outcome
        if error is not None:
            return ToolResult("error", error)
        meta = {"backend": self.cfg.search_backend, "results": len(results)}
        return ToolResult("ok", format_results(results), meta)

    def _ddgs(self, query: str) -> list[dict[str, str]]:
        try:
            from ddgs import DDGS
            from ddgs.exceptions import DDGSException, TimeoutException
        except ImportError:
            raise _SearchError("web_search needs ddgs: pip install ddgs") from None
        try:
            found = DDGS(timeout=max(1, int(self.cfg.search_timeout_s))).text(query, max_results=self.cfg.max_results)
        except TimeoutException as exc:
            raise _SearchError(f"search timed out: {_one_line(exc)}") from None
        except DDGSException as exc:
            if _NO_RESULTS in str(exc).lower():  # ddgs raises where it finds nothing: that is an empty answer
                return []
            raise _SearchError(f"search failed: {_one_line(exc)}") from None
        return [{"title": r.get("title", ""), "url": r.get("href", ""), "snippet": r.get("body", "")} for r in found]

    def _searxng(self, query: str) -> list[dict[str, str]]:
        import httpx2

        if not self.cfg.searxng_url:
            raise _SearchError("tools.web.searxng_url is not set")
        url = self.cfg.searxng_url.rstrip("/") + "/search"
        try:
            with httpx2.Client(trust_env=False, timeout=self.cfg.search_timeout_s) as client:
                response = client.get(url, params={"q": query, "format": "json"})
            response.raise_for_status()
            data = load_json(response.content)  # valid text: no lone surrogate in a title or snippet
        except httpx2.HTTPError as exc:
            raise _SearchError(f"search failed: {type(exc).__name__}: {_one_line(exc)}") from None
        except ValueError:
            raise _SearchError("search failed: the SearXNG answer is not JSON") from None
        rows = data.get("results") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise _SearchError("search failed: the SearXNG answer has no 'results' list")
        found = [r for r in rows if isinstance(r, dict)][: self.cfg.max_results]
        return [
            {"title": str(r.get("title", "")), "url": str(r.get("url", "")), "snippet": str(r.get("content", ""))}
            for r in found
        ]


class _SearchError(Exception):
    pass


def format_results(results: list[dict[str, str]]) -> str:
    if not results:
        return "No results."
    lines = []
    for i, r in enumerate(results, 1):
        lines += [f"{i}. {' '.join(r['title'].split())}", f"   {r['url']}"]
        if r["snippet"].strip():
            lines.append(f"   {' '.join(r['snippet'].split())}")
    return "\n".join(lines)


def with_deadline(fn: Callable[[], Any], seconds: float) -> tuple[Any, str | None] | None:
    """(fn's value, None) or (None, its error's message); None when it did not return within `seconds` (the
    daemon thread running it is left to finish on its own; nothing waits for it)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except _SearchError as exc:
            box["error"] = str(exc)
        except Exception as exc:  # a third-party engine's own failure: reported to the model, never raised
            box["error"] = f"search failed: {type(exc).__name__}: {_one_line(exc)}"

    thread = threading.Thread(target=target, name="azr-web-search", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        return None
    return (None, box["error"]) if "error" in box else (box.get("value") or [], None)


def _one_line(exc: object) -> str:
    return " ".join(str(exc).split())[:300]
