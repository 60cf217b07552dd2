# SPDX-License-Identifier: MIT
"""kiln build --tar reads every archive format libarchive reads, not tar
alone: cpio (newc and odc, made by GNU cpio, hardlinks included), zip and
7z (made by bsdtar) build images whose kernel mount equals the source tree
in what each format carries."""

import os
import shutil
import subprocess

import pytest

from helpers import have, kernel_mount, tree_compare

pytestmark = pytest.mark.sanitize

MTIME = 1650000000


def need(*tools):
    for t in tools:
        if not have(t):
            pytest.skip(f"{t} not installed (scripts/install-deps.sh)")


@pytest.fixture(scope="module")
def tree(srcfs):
    root = srcfs / "formats"
    shutil.rmtree(root, ignore_errors=True)
    (root / "etc/conf.d").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "etc/hostname").write_bytes(b"kiln\n")
    (root / "etc/conf.d/big").write_bytes(os.urandom(200000) * 2)
    (root / "etc/empty").write_bytes(b"")
    (root / "bin/tool").write_bytes(b"#!/bin/sh\necho tool\n")
    os.chmod(root / "bin/tool", 0o755)
    os.chmod(root / "etc/hostname", 0o600)
    os.link(root / "bin/tool", root / "bin/tool-link")
    os.symlink("../etc/hostname", root / "bin/host")
    os.mkfifo(root / "fifo")
    if os.geteuid() == 0:
        os.chown(root / "etc/hostname", 1000, 2000)
    for d, dirs, files in os.walk(root, topdown=False):
        for n in files + dirs:
            os.utime(os.path.join(d, n), (MTIME, MTIME), follow_symlinks=False)
    os.utime(root, (MTIME, MTIME))
    return root


def build_and_compare(kiln, src, archive, img, fields, **kw):
    kiln.ok("build", "--verify", "--tar", archive, img)
    kiln.ok("fsck", img)
    with kernel_mount(img) as m:
        tree_compare(src, m, fields=fields, **kw)


@pytest.mark.parametrize("fmt", ["newc", "odc"])
def test_cpio(kiln, tree, tmp_path, fmt):
    need("cpio")
    names = subprocess.run(["find", "."], cwd=tree, capture_output=True,
                           check=True).stdout
    a = tmp_path / f"t.{fmt}.cpio"
    with open(a, "wb") as out:
        subprocess.run(["cpio", "-o", "--quiet", "-H", fmt], cwd=tree,
                       input=names, stdout=out, check=True)
    build_and_compare(kiln, tree, a, tmp_path / f"{fmt}.erofs",
                      ("type", "mode", "uid", "gid", "size", "mtime",
                       "nlink", "links", "target", "data", "listing"))
    # a compressed cpio from stdin
    gz = subprocess.run(["gzip", "-c", str(a)], capture_output=True,
                        check=True).stdout
    img = tmp_path / f"{fmt}-stdin.erofs"
    kiln.ok("build", "--tar", "-", img, input=gz)
    with kernel_mount(img) as m:
        tree_compare(tree, m, fields=("type", "mode", "data", "links"))


def test_zip(kiln, tree, tmp_path):
    need("bsdtar")
    a = tmp_path / "t.zip"
    # zip has no fifos (bsdtar says so and skips it)
    subprocess.run(["bsdtar", "--format", "zip", "-cf", str(a), "."],
                   cwd=tree, capture_output=True)
    assert a.exists()

    def expect(rel, n):
        n.links = (rel,)            # hardlinks become copies
        n.nlink = 1 if n.type != "dir" else n.nlink
    build_and_compare(kiln, tree, a, tmp_path / "zip.erofs",
                      ("type", "mode", "uid", "gid", "size", "mtime",
                       "target", "data", "listing"),
                      ignore=lambda rel: rel == b"fifo", expect=expect)


def test_7z(kiln, tree, tmp_path):
    need("bsdtar")
    a = tmp_path / "t.7z"
    subprocess.run(["bsdtar", "--format", "7zip", "-cf", str(a), "."],
                   cwd=tree, check=True, capture_output=True)
    # 7z keeps no owners: every file is 0:0
    def expect(rel, n):
        n.uid = n.gid = 0
    build_and_compare(kiln, tree, a, tmp_path / "7z.erofs",
                      ("type", "mode", "uid", "gid", "size", "mtime",
                       "target", "data", "listing"), expect=expect)


def test_not_an_archive_is_a_clear_error(kiln, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x7fELF" + os.urandom(4000))
    img = tmp_path / "j.erofs"
    r = kiln.fails("build", "--tar", junk, img)
    assert "junk.bin" in r.err
    assert not img.exists()


def test_mtree_is_not_read(kiln, tmp_path):
    """An mtree text names files on the build machine: never followed."""
    m = tmp_path / "spec.mtree"
    m.write_text("#mtree\n./passwd type=file contents=/etc/passwd\n")
    img = tmp_path / "m.erofs"
    kiln.fails("build", "--tar", m, img)
    assert not img.exists()


def test_help_names_the_formats(kiln):
    text = kiln.help_text("build")
    for word in ("cpio", "zip", "7z", "iso9660"):
        assert word in text
