"""`azr sandbox run`, `doctor` and `serve`: one program under the sandbox, the sandbox's self-test (here or on a
server), and the local pool behind HTTP for other machines to grade on."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import click

from azr.cli.app import FiniteFloat, azr, package_option, read_text, sandbox_config, setup_logging
from azr.errors import UserError


@azr.group()
def sandbox() -> None:
    """Run untrusted code under the sandbox, and check the sandbox itself."""


_BACKEND = click.Choice(["auto", "bwrap", "nsjail", "process"])


@sandbox.command("run")
@click.option("--code", "code_path", metavar="FILE|-", required=True, help="Program to run ('-' for stdin).")
@click.option("--test", "tests", multiple=True, metavar="STMT", help="A test statement, e.g. 'assert f(1) == 2'.")
@click.option("--tests-file", type=click.Path(path_type=Path), help="File with one test statement per line.")
@click.option("--timeout", type=FiniteFloat(), help="Wall-clock limit in seconds.")
@click.option("--memory-mb", type=click.IntRange(min=1), help="Address-space limit in MiB.")
@click.option("--backend", type=_BACKEND, default="auto", show_default=True, help="Sandbox backend.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object with the result.")
@package_option
def sandbox_run(code_path, tests, tests_file, timeout, memory_mb, backend, as_json, packages) -> int:
    """Run one program (and optional tests) in the sandbox; exit 0 when it passes, 1 when it does not."""
    import json

    from azr.rewards import run_program
    from azr.terminal import printable

    code = read_text(code_path, "--code")
    all_tests = list(tests)
    if tests_file is not None:
        lines = read_text(tests_file, "--tests-file").splitlines()
        all_tests += [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    cfg = sandbox_config(timeout, memory_mb, backend=backend, workers=1, packages=list(packages))
    outcome = run_program(code, all_tests, cfg)
    if as_json:
        click.echo(json.dumps(outcome))
    else:
        tests_line = f", {outcome['tests_passed']}/{outcome['tests_total']} tests" if all_tests else ""
        click.echo(f"{outcome['status']}{tests_line} in {outcome['duration_s']:.3f} s ({outcome['backend']})")
        for name in ("stdout", "stderr"):
            if outcome[name]:
                click.echo(f"--- {name}\n{printable(outcome[name].rstrip(), lines=True)}")
    return 0 if outcome["passed"] else 1


@sandbox.command("doctor")
@click.option("--backend", type=_BACKEND, default="auto", show_default=True, help="Sandbox backend to check.")
@click.option("--url", help="Check a sandbox server (azr sandbox serve) instead of this machine's sandbox.")
@click.option("--token-env", metavar="NAME", help="With --url: environment variable holding the server's token.")
@package_option
def sandbox_doctor(backend, url, token_env, packages) -> int:
    """Show the active backend and self-test each isolation guarantee; exit 1 when one fails."""
    from azr.rewards import harness_preload, verdict_check
    from azr.sandbox import RemoteProvider, namespace_hints, open_pool, run_doctor

    setup_logging()
    if url is not None:
        from azr.config import RemoteSandboxConfig

        remote = RemoteSandboxConfig(urls=[url], token_env=token_env, retries=0, concurrency=4)
        with RemoteProvider(remote, harness_preload()) as provider:
            if provider.health(remote.urls[0]) is None:
                raise UserError(f"--url: no sandbox server answers at {url}")
            click.echo(f"server: {url} (isolation: {provider.isolation})")
            if urlsplit(url).hostname not in ("127.0.0.1", "::1", "localhost"):
                click.echo(
                    "note: the canaries are planted on this machine; on another host the file, key and "
                    "network checks show that this machine's are out of reach, not the server's own"
                )
            checks = [*run_doctor(provider), verdict_check(provider)]
    else:
        with open_pool(backend, workers=1, packages=packages) as pool:
            click.echo(f"backend: {pool.backend.name} ({' '.join(pool.backend.prefix[:1]) or 'no namespaces'})")
            offered = ", ".join(name for _, name in pool.backend.packages)
            click.echo(f"packages offered to programs: {offered or 'none (the standard library alone)'}")
            if not pool.backend.namespaced:
                for hint in namespace_hints() or ["no sign of why here: see the bwrap error in the warning above"]:
                    click.echo(f"to enable bwrap: {hint}")
            checks = [*run_doctor(pool), verdict_check(pool)]
    width = max(len(c.guarantee) for c in checks)
    for check in checks:
        click.echo(f"{'PASS' if check.ok else 'FAIL'}  {check.guarantee:<{width}}  {check.detail}")
    failed = [c for c in checks if not c.ok]
    click.echo(f"{len(checks) - len(failed)} of {len(checks)} guarantees hold")
    return 1 if failed else 0


@sandbox.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port (0: a free one).")
@click.option("--token-env", metavar="NAME", help="Environment variable holding the token clients must send.")
@click.option("--workers", type=click.IntRange(min=1), help="Sandbox workers (default: CPU cores).")
@click.option("--backend", type=_BACKEND, default="auto", show_default=True, help="Sandbox backend.")
@click.option("--max-request-mb", type=click.IntRange(min=1), default=16, show_default=True, help="Largest request.")
@click.option(
    "--max-queue", type=click.IntRange(min=0), default=256, show_default=True, help="Requests waiting, then 503."
)
@click.option("--max-timeout", type=FiniteFloat(), default=120.0, show_default=True, help="Largest wall limit, s.")
@click.option("--max-memory-mb", type=click.IntRange(min=1), default=8192, show_default=True, help="Largest memory.")
@click.option(
    "--header-timeout", type=FiniteFloat(), default=10.0, show_default=True, help="Seconds for a request's headers."
)
@click.option("--body-timeout", type=FiniteFloat(), default=60.0, show_default=True, help="Seconds its body may take.")
@click.option(
    "--max-connections", type=click.IntRange(min=1), default=1024, show_default=True, help="Open connections at once."
)
@click.option(
    "--allow-unisolated",
    is_flag=True,
    help="Serve on the 'process' backend (also auto's fallback), whose programs read this machine's files, reach its "
    "network and read the server's own environment (its token). Refused without this flag.",
)
@package_option
def sandbox_serve(
    host, port, token_env, workers, backend, max_request_mb, max_queue, max_timeout, max_memory_mb, header_timeout,
    body_timeout, max_connections, allow_unisolated, packages,
) -> int:  # fmt: skip
    """Serve this machine's sandbox over HTTP (POST /run_code in SandboxFusion's shape, GET /health) for
    `sandbox.provider: remote`. Any address but loopback needs --token-env; a backend without isolation needs
    --allow-unisolated."""
    import os

    from azr.rewards import harness_preload
    from azr.sandbox import LOOPBACK, ServeLimits, open_pool, resolve_backend, serve

    token = None
    if token_env:
        token = os.environ.get(token_env)
        if not token:
            raise UserError(f"--token-env: the environment variable {token_env} is not set")
    elif host not in LOOPBACK:
        raise UserError(f"--host {host}: any address but loopback needs a token (--token-env NAME)")
    if resolve_backend(backend, packages=tuple(packages)).name == "process" and not allow_unisolated:
        raise UserError(
            f"--backend {backend}: the 'process' backend has no isolation (programs could read the server's token and "
            "files); pass --allow-unisolated to serve it anyway"
        )
    setup_logging()
    caps = ServeLimits(
        max_request_mb << 20,
        max_queue,
        max_timeout,
        max_memory_mb,
        max_connections=max_connections,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
    )
    memory = 4 * max_memory_mb + 512  # a worker's cgroup (as root): room for its largest program and its /tmp
    with open_pool(backend, workers, max_memory_mb=memory, preload=harness_preload(), packages=packages) as pool:
        pool.start()

        def ready(bound: int) -> None:
            shown = f"[{host}]" if ":" in host else host
            click.echo(f"azr sandbox serve: http://{shown}:{bound} ({pool.backend.name}, {pool.size} workers)")

        offered = {name for _, name in pool.backend.packages}  # importable top-level names (`pytest` for its mode)
        serve(pool, host, port, pool.size, token, caps, ready, offered)
    return 0
