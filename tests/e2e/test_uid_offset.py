# SPDX-License-Identifier: MIT
"""--uid-offset / --gid-offset: added to every owner, for tar and directory
sources, after --all-root and --force-uid/--force-gid; an owner carried
past 2^32-1 fails the build with the file's name and leaves no image."""

import os
import shutil
import subprocess

import pytest

from helpers import kernel_mount, snapshot

pytestmark = pytest.mark.sanitize

UMAX = 2**32 - 1


@pytest.fixture(scope="module")
def owned(srcfs):
    if os.geteuid() != 0:
        pytest.skip("needs root to give files other owners")
    root = srcfs / "owned"
    shutil.rmtree(root, ignore_errors=True)
    (root / "d").mkdir(parents=True)
    (root / "root-file").write_bytes(b"r")
    (root / "d/user-file").write_bytes(b"u")
    os.symlink("user-file", root / "d/link")
    os.chown(root / "d/user-file", 1000, 2000)
    os.chown(root / "d", 33, 44)
    os.chown(root / "d/link", 7, 8, follow_symlinks=False)
    return root


def owners(root):
    return {rel: (n.uid, n.gid) for rel, n in
            snapshot(root, data=False, xattrs=False).items()}


def sources(owned, tmp_path):
    t = tmp_path / "owned.tar"
    subprocess.run(["tar", "--numeric-owner", "--format=pax", "-C",
                    str(owned), "-cf", str(t), "."], check=True)
    return {"dir": [owned], "tar": ["--tar", t]}


@pytest.mark.parametrize("kind", ["dir", "tar"])
def test_offsets_are_added(kiln, owned, tmp_path, kind):
    src = sources(owned, tmp_path)[kind]
    img = tmp_path / "o.erofs"
    kiln.ok("build", "--uid-offset", "100000", "--gid-offset", "200000",
            *src, img)
    kiln.ok("fsck", img)
    want = {rel: (u + 100000, g + 200000)
            for rel, (u, g) in owners(owned).items()}
    with kernel_mount(img) as m:
        assert owners(m) == want


@pytest.mark.parametrize("kind", ["dir", "tar"])
def test_offsets_apply_after_all_root_and_forced_ids(kiln, owned, tmp_path,
                                                     kind):
    src = sources(owned, tmp_path)[kind]
    img = tmp_path / "o.erofs"
    kiln.ok("build", "--all-root", "--uid-offset", "100000",
            "--gid-offset", "100000", *src, img)
    with kernel_mount(img) as m:
        assert set(owners(m).values()) == {(100000, 100000)}
    kiln.ok("build", "--force-uid", "5", "--uid-offset", "10", *src, img)
    with kernel_mount(img) as m:
        got = owners(m)
    assert {u for u, _ in got.values()} == {15}
    assert got == {rel: (15, g) for rel, (_, g) in owners(owned).items()}


@pytest.mark.parametrize("kind", ["dir", "tar"])
def test_overflow_names_the_file(kiln, owned, tmp_path, kind):
    src = sources(owned, tmp_path)[kind]
    img = tmp_path / "o.erofs"
    # 1000 + offset passes 2^32-1, 0 + offset does not
    r = kiln.fails("build", "--uid-offset", str(UMAX - 500), *src, img)
    assert "user-file" in r.err and "4294967295" in r.err, r.err
    assert not img.exists()
    r = kiln.fails("build", "--gid-offset", str(UMAX - 100), *src, img)
    assert "gid" in r.err and "4294967295" in r.err, r.err
    assert not img.exists()
    # the largest owner the kernel shows ((uid_t)-1 is no id)
    kiln.ok("build", "--uid-offset", str(UMAX - 1001), *src, img)
    with kernel_mount(img) as m:
        assert os.stat(m / "d/user-file").st_uid == UMAX - 1


def test_bad_offsets_are_usage_errors(kiln, tmp_path):
    for bad in ("-1", "4294967296", "x"):
        r = kiln.run("build", "--uid-offset", bad, tmp_path, tmp_path / "i")
        assert r.rc == 2 and "--uid-offset" in r.err, r.err
