"""Packages offered to programs: the installed files of chosen distributions and of what they require, found in the
trainer's environment, which the backends bind read-only into the sandbox under one directory on the programs'
`sys.path`. Nothing else of that environment is visible inside; offering none (the default) leaves programs the
standard library alone. Knows nothing of configs: `azr.config` checks the names at load, this module finds files.
"""

from __future__ import annotations

import functools
import re

PACKAGES_DIR = "/opt/azr-packages"  # inside bwrap and nsjail; the process backend gets a directory of symlinks
# Numeric libraries start a thread per core at import: one thread keeps a program inside its process limit and
# makes forking the worker (which may have imported them) safe.
THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@functools.cache
def package_entries(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(host path, name under PACKAGES_DIR) of every top-level directory or module that the named distributions
    (or import names, such as `sklearn`) and the distributions they require install, their `.dist-info` included
    (so `importlib.metadata` works inside) and shared libraries beside them (`numpy.libs`). LookupError names a
    package that is not installed."""
    if not names:
        return ()  # nothing offered: no scan of every installed distribution (about a third of a second)
    from importlib import metadata

    by_import = metadata.packages_distributions()
    todo = [(name, True) for name in names]
    seen: set[str] = set()
    entries: dict[str, str] = {}
    while todo:
        name, asked = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(by_import.get(name, [name])[0])
        except metadata.PackageNotFoundError:
            if asked:
                raise LookupError(f"sandbox.packages: {name!r} is not installed here (pip install {name})") from None
            continue  # a requirement that is not installed: optional, or for another platform
        for file in dist.files or ():
            top = file.parts[0]
            if top in ("..", "__pycache__") or top.endswith(".data"):  # scripts, and bytecode of other modules
                continue
            path = dist.locate_file(top)
            if path.exists():
                entries.setdefault(top, str(path))
        todo += [(req, False) for req in _requirements(dist.requires or ())]
    return tuple(sorted((path, top) for top, path in entries.items()))


def _requirements(requires: list[str]) -> list[str]:
    """Names of the requirements that apply here (markers evaluated where `packaging` is installed; extras never)."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # without packaging: every requirement but extras; those not installed are skipped
        return [m.group(0) for r in requires if "extra ==" not in r and (m := _NAME.match(r))]
    names = []
    for text in requires:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            names.append(req.name)
    return names
