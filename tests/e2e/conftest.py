# SPDX-License-Identifier: MIT
"""Fixtures for the end-to-end suite: the kiln binary, source trees on a
private tmpfs, a default image of the rich tree, kernel mounts."""

import os
import shutil
import subprocess
import sys

import pytest

import helpers
from helpers import DATA, Kiln, kiln_path

sys.path.insert(0, str(DATA))
import mktree  # noqa: E402


@pytest.fixture(scope="session")
def kiln():
    p = kiln_path()
    if not os.access(p, os.X_OK):
        pytest.fail(f"no kiln binary at {p}: build first (make build) or "
                    f"set KILN=/path/to/kiln")
    return Kiln(p)


@pytest.fixture(scope="session")
def srcfs(tmp_path_factory):
    """Where source trees live. As root a private tmpfs: it keeps large
    xattrs (ext4 keeps one block per inode) and sparse files cheaply."""
    d = tmp_path_factory.mktemp("srcfs")
    mounted = False
    if os.geteuid() == 0:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8g,mode=0755",
                            "kiln-e2e-src", str(d)], capture_output=True)
        mounted = r.returncode == 0
    yield d
    if mounted:
        r = subprocess.run(["umount", str(d)], capture_output=True)
        if r.returncode:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)


@pytest.fixture(scope="session")
def rich_tree(srcfs):
    """The full tree from tests/data/mktree.py (seed 1)."""
    return mktree.make_tree(srcfs / "rich", seed=1,
                            big_xattrs=_big_xattrs_ok(srcfs))


def _big_xattrs_ok(where):
    return os.geteuid() == 0 and \
        subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target",
                        str(where)], capture_output=True,
                       text=True).stdout.strip() == "tmpfs"


@pytest.fixture(scope="session")
def small_tree(srcfs):
    """The same kinds of files with 300 entries in the big directory:
    cheap to corrupt and walk hundreds of times."""
    return mktree.make_tree(srcfs / "small", seed=7, many=300,
                            big_xattrs=_big_xattrs_ok(srcfs))


@pytest.fixture(scope="session")
def make_tree(srcfs):
    """make_tree(name, **kw): a fresh tree from mktree on the source fs."""
    def make(name, **kw):
        kw.setdefault("big_xattrs", _big_xattrs_ok(srcfs))
        return mktree.make_tree(srcfs / name, **kw)
    return make


@pytest.fixture(scope="session")
def rich_image(kiln, rich_tree, tmp_path_factory):
    """The rich tree built with default options (4096-byte blocks)."""
    img = tmp_path_factory.mktemp("rich-image") / "rich.erofs"
    kiln.build(rich_tree.root, img)
    return img


@pytest.fixture(scope="session")
def small_image(kiln, small_tree, tmp_path_factory):
    img = tmp_path_factory.mktemp("small-image") / "small.erofs"
    kiln.build(small_tree.root, img)
    return img


@pytest.fixture
def scratch(srcfs, request):
    """An empty directory on the source filesystem, for extraction: it
    holds every xattr the source trees carry (ext4 would not)."""
    d = srcfs / "scratch" / request.node.name.replace("/", "_")[:200]
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kernel_mount():
    """with kernel_mount(image) as mnt: ... (skips without root/loop/erofs)."""
    return helpers.kernel_mount


@pytest.fixture
def need_root():
    if os.geteuid() != 0:
        pytest.skip("needs root")


def pytest_report_header(config):
    why = helpers.kernel_mount_unavailable()
    return [f"kiln: {kiln_path()}"
            + (" (sanitized)" if helpers.SANITIZED else ""),
            "kernel mounts: " + (why or "available"),
            "dm-verity through the kernel: " +
            ("run (KILN_DM_TESTS=1)" if os.environ.get("KILN_DM_TESTS") == "1"
             else "not collected (set KILN_DM_TESTS=1 where the kernel "
                  "has device-mapper)")]


# -- KILN_REQUIRE_ALL=1: a skip is a failure ---------------------------------

REQUIRE_ALL = os.environ.get("KILN_REQUIRE_ALL") == "1"


def _skip_reason(rep):
    lr = rep.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        return lr[2]
    return str(lr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under KILN_REQUIRE_ALL=1 (CI) every skipped test fails, with the
    reason it would have skipped: CI has root, loop devices, /dev/fuse and
    erofs-utils 1.9, so nothing may go untested. Deselected tests (-m, -k)
    are not affected."""
    outcome = yield
    rep = outcome.get_result()
    if REQUIRE_ALL and rep.skipped and not hasattr(rep, "wasxfail"):
        rep.outcome = "failed"
        rep.longrepr = (f"skipped under KILN_REQUIRE_ALL=1: "
                        f"{_skip_reason(rep)}")


def pytest_sessionfinish(session, exitstatus):
    """What still counts as skipped (a module that skips while collected)
    fails the run under KILN_REQUIRE_ALL=1."""
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = tr.stats.get("skipped", []) if tr else []
    if REQUIRE_ALL and skipped and exitstatus == 0:
        tr.write_line(f"KILN_REQUIRE_ALL=1: {len(skipped)} skipped, "
                      f"failing the run", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# -- the sanitizer pass --------------------------------------------------------

def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "sanitize: also run in the ASan/UBSan pass (make check-asan runs "
        "pytest -m 'sanitize and not nosanitize'); a module joins with "
        "pytestmark = pytest.mark.sanitize")
    config.addinivalue_line(
        "markers",
        "nosanitize: never run against a sanitized kiln (KILN_SANITIZED=1 "
        "deselects it)")
    config.addinivalue_line(
        "markers",
        "dm: needs the kernel's device-mapper (dm-verity); collected only "
        "with KILN_DM_TESTS=1, since the CI machines' kernel has none")


def pytest_collection_modifyitems(config, items):
    if os.environ.get("KILN_DM_TESTS") != "1":
        out = [i for i in items if i.get_closest_marker("dm")]
        if out:
            config.hook.pytest_deselected(items=out)
            items[:] = [i for i in items if not i.get_closest_marker("dm")]
    if not helpers.SANITIZED:
        return
    out = [i for i in items if i.get_closest_marker("nosanitize")]
    if out:
        config.hook.pytest_deselected(items=out)
        items[:] = [i for i in items if not i.get_closest_marker("nosanitize")]
