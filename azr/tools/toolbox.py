"""The toolbox: the three tools by their wire names, their JSON schemas, and `call(name, arguments)`.

`call` checks the arguments against the tool's schema, runs the tool, caps and neutralises its output, strips any
secret the process knows of, records a `ToolEvent`, and returns a `ToolResult`; it never raises. The tool
environment (`azr.envs.ToolEnvironment`) offers the same schemas in `azr gen` and in GRPO.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from azr.config import AzrConfig, SandboxConfig, ToolsConfig
from azr.inputs import load_json
from azr.sandbox import ExecutionProvider
from azr.secrets import redact_data, register
from azr.tools.fetch import WebFetcher
from azr.tools.guard import AddressGuard, Resolver, system_resolver
from azr.tools.python import PythonRunner
from azr.tools.result import ToolResult, cap, neutralise
from azr.tools.search import WebSearcher

log = logging.getLogger(__name__)


# The tools as the model sees them: these signatures and docstrings are what `get_json_schema` turns into SCHEMAS
# (a test checks they agree), so they are written for the model.
def python_run(code: str):
    """Run a Python 3 program in an isolated sandbox and return its output: what it printed, its errors and exit code.

    The sandbox has no network and keeps no files between calls; standard input is empty.

    Args:
        code: The complete program to run. Print whatever you want to see.
    """


def web_search(query: str):
    """Search the web and return the top results, each with its title, URL and a snippet.

    Args:
        query: What to search for, as you would type it into a search engine.
    """


def web_fetch(url: str):
    """Fetch a web page (http or https) and return its title and readable text; plain text and JSON come back as is.

    Args:
        url: The address of the page, starting with http:// or https://.
    """


SPECS: dict[str, Callable] = {f.__name__: f for f in (python_run, web_search, web_fetch)}


def _schema(name: str, description: str, arg: str, arg_help: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {arg: {"type": "string", "description": arg_help}}, "required": [arg]}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


SCHEMAS: dict[str, dict[str, Any]] = {
    "python_run": _schema(
        "python_run",
        "Run a Python 3 program in an isolated sandbox and return its output: what it printed, its errors and exit "
        "code.\n\nThe sandbox has no network and keeps no files between calls; standard input is empty.",
        "code",
        "The complete program to run. Print whatever you want to see.",
    ),
    "web_search": _schema(
        "web_search",
        "Search the web and return the top results, each with its title, URL and a snippet.",
        "query",
        "What to search for, as you would type it into a search engine.",
    ),
    "web_fetch": _schema(
        "web_fetch",
        "Fetch a web page (http or https) and return its title and readable text; plain text and JSON come back as is.",
        "url",
        "The address of the page, starting with http:// or https://.",
    ),
}


@dataclass
class ToolEvent:
    """One call, for the rollout record and the summary: no arguments, no output."""

    name: str
    ok: bool
    status: str
    duration_s: float
    truncated: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Toolbox:
    """The tools `tools.names` offers, over one sandbox pool and one address guard. Thread-safe."""

    def __init__(
        self,
        cfg: ToolsConfig,
        sandbox: SandboxConfig,
        *,
        pool: ExecutionProvider | None = None,
        resolver: Resolver = system_resolver,
        control_tokens: Iterable[str] = (),
        secrets: Iterable[str] = (),
    ):
        self.cfg = cfg
        self.names = list(cfg.names)
        self.control_tokens = tuple(control_tokens)
        for secret in secrets:
            register(secret)
        self.python = PythonRunner(cfg, sandbox, pool)
        searcher = WebSearcher(cfg.web)
        fetcher = WebFetcher(cfg.web, AddressGuard(cfg.web.allow_ports, cfg.web.allow_networks, resolver))
        self._run: dict[str, Callable[[dict[str, Any]], ToolResult]] = {
            "python_run": lambda args: self.python.run(args["code"]),
            "web_search": lambda args: searcher.search(args["query"]),
            "web_fetch": lambda args: fetcher.fetch(args["url"]),
        }
        self.counts: Counter[tuple[str, str]] = Counter()  # (tool, status) -> calls
        self._lock = threading.Lock()

    def schemas(self) -> list[dict[str, Any]]:
        return [SCHEMAS[name] for name in self.names]

    def call(self, name: str, arguments: Any) -> tuple[ToolResult, ToolEvent]:
        """Run one call; the result for the model and the event for the record. Never raises."""
        started = time.monotonic()
        args, problem = self._arguments(name, arguments)
        if problem is not None:
            result = ToolResult("error", problem)
        else:
            try:
                result = self._run[name](args)
            except Exception as exc:  # a tool's own bug must reach the model as an error, never crash an episode
                log.exception("tool %s failed", name)
                result = ToolResult("error", f"the tool failed: {type(exc).__name__}: {exc}")
        content, truncated = cap(
            neutralise(self.redact(result.content), self.control_tokens), self.cfg.max_output_chars
        )
        result = ToolResult(result.status, content, {**result.meta, "truncated": truncated})
        event = ToolEvent(
            name=name if name in SCHEMAS else str(name)[:64],
            ok=result.ok,
            status=result.status,
            duration_s=round(time.monotonic() - started, 4),
            truncated=truncated,
            error=None if result.ok else content.splitlines()[0][:300] if content else result.status,
        )
        with self._lock:
            self.counts[(event.name, event.status)] += 1
        return result, event

    def redact(self, value: Any) -> Any:
        """`value` (text, or JSON-shaped data) with every secret replaced by `<redacted>` (`azr.secrets`)."""
        return redact_data(value)

    def _arguments(self, name: str, arguments: Any) -> tuple[dict[str, Any], str | None]:
        if name not in self.names:
            return {}, f"unknown tool {str(name)[:64]!r}; the tools are: {', '.join(self.names)}"
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):
            try:
                arguments = load_json(arguments) if arguments.strip() else {}
            except ValueError as exc:
                return {}, f"{name}: arguments are not valid JSON: {exc}"
        if not isinstance(arguments, dict):
            return {}, f"{name}: arguments must be a JSON object, got {type(arguments).__name__}"
        parameters = SCHEMAS[name]["function"]["parameters"]
        unknown = sorted(set(arguments) - set(parameters["properties"]))
        if unknown:
            return {}, f"{name}: unknown argument {unknown[0]!r}; it takes {', '.join(parameters['properties'])}"
        for key in parameters["required"]:
            if key not in arguments:
                return {}, f"{name}: missing argument {key!r}"
        for key, value in arguments.items():
            if parameters["properties"][key]["type"] == "string" and not isinstance(value, str):
                return {}, f"{name}: argument {key!r} must be a string, got {type(value).__name__}"
        return arguments, None


def secrets_from_env(names: Sequence[str | None]) -> list[str]:
    """The values of the environment variables that hold API keys, to strip from everything a tool returns."""
    import os

    return [os.environ[n] for n in names if n and os.environ.get(n)]


def build_toolbox(cfg: AzrConfig, pool: ExecutionProvider | None = None, control_tokens: Iterable[str] = ()) -> Toolbox:
    """The toolbox of a recipe (`tools:`, `sandbox:`), stripping the keys its endpoints name from every output."""
    keys = secrets_from_env([cfg.gen.endpoint.api_key_env, cfg.self_play.api_key_env, cfg.teacher.api_key_env])
    return Toolbox(cfg.tools, cfg.sandbox, pool=pool, control_tokens=control_tokens, secrets=keys)
