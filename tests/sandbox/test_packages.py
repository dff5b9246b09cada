"""Packages offered to programs (`sandbox.packages`): which files are bound, where, and that programs import them on
a real bwrap pool and on the process backend, and that nothing is offered by default."""

from __future__ import annotations

import importlib.util
import os

import pytest

from azr.sandbox import Limits, SandboxUnavailable, build_backend, open_pool
from azr.sandbox.backends import bwrap_argv, nsjail_argv
from azr.sandbox.packages import PACKAGES_DIR, package_entries

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numpy") is None, reason="numpy is not installed here")
IMPORTS = "import numpy\nprint(numpy.arange(4).sum())\n"


def test_numpy_brings_its_package_its_metadata_and_its_shared_libraries_only():
    entries = dict((name, path) for path, name in package_entries(("numpy",)))
    assert "numpy" in entries and any(n.startswith("numpy-") and n.endswith(".dist-info") for n in entries)
    assert "numpy.libs" in entries or not any(
        p.endswith(".libs") for p in os.listdir(os.path.dirname(entries["numpy"]))
    )
    assert "__pycache__" not in entries and all(os.path.exists(p) for p in entries.values())
    assert all(os.path.basename(path) == name for name, path in entries.items())


def test_a_package_that_is_not_installed_is_refused_in_one_line():
    with pytest.raises(LookupError, match=r"^sandbox\.packages: 'no-such-package-azr' is not installed here"):
        package_entries(("no-such-package-azr",))
    with pytest.raises(SandboxUnavailable, match="not installed here"):
        build_backend("process", packages=("no-such-package-azr",))


def test_offered_packages_are_bound_read_only_under_one_directory():
    packages = (("/site/numpy", "numpy"), ("/site/numpy.libs", "numpy.libs"))
    argv = bwrap_argv("bwrap", "/usr", 16, {}, mounts=[], packages=packages)
    assert ["--ro-bind", "/site/numpy", f"{PACKAGES_DIR}/numpy"] == argv[argv.index("/site/numpy") - 1 :][:3]
    assert argv.index("/site/numpy.libs") < argv.index("--remount-ro")
    argv = nsjail_argv("nsjail", "/usr", 16, {}, mounts=[], packages=packages)
    assert f"/site/numpy:{PACKAGES_DIR}/numpy" in argv and argv[
        argv.index(f"/site/numpy:{PACKAGES_DIR}/numpy") - 1
    ] == ("--bindmount_ro")


def test_nothing_is_offered_by_default_and_numpy_threads_are_pinned_only_when_offered():
    plain, offered = build_backend("process"), build_backend("process", packages=("numpy",))
    assert plain.packages == () and "OPENBLAS_NUM_THREADS" not in plain.env
    assert offered.env["OPENBLAS_NUM_THREADS"] == "1" and offered.packages


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_programs_import_an_offered_package_and_not_one_that_is_not(backend):
    with open_pool(backend, workers=1, packages=("numpy",)) as pool:
        assert pool.run(IMPORTS, Limits(wall_s=20.0)).stdout == "6\n"
    with open_pool(backend, workers=1) as pool:
        r = pool.run(IMPORTS, Limits(wall_s=20.0))
    assert r.exit_code != 0 and "No module named 'numpy'" in r.stderr
