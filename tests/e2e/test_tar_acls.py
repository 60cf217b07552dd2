# SPDX-License-Identifier: MIT
"""POSIX ACLs from tar: archives made by GNU tar (--acls, with and without
--xattrs) and bsdtar (--acls) from a tree whose ACLs setfacl set build
images whose kernel mount gives the same getfacl output, ACL xattrs and
modes (the group bits are the mask, not the group entry) as the source."""

import io
import os
import shutil
import subprocess
import tarfile

import pytest

from helpers import have, kernel_mount, tree_compare

pytestmark = pytest.mark.sanitize

FIELDS = ("type", "mode", "uid", "gid", "size", "data", "xattrs", "listing")


def need(*tools):
    for t in tools:
        if not have(t):
            pytest.skip(f"{t} not installed (scripts/install-deps.sh)")


def setfacl(*args):
    subprocess.run(["setfacl", *map(str, args)], check=True,
                   capture_output=True)


def getfacl(root):
    """getfacl of every path below @root, by relative path, numeric ids."""
    paths = sorted(os.path.relpath(os.path.join(d, n), root)
                   for d, dirs, files in os.walk(root) for n in dirs + files)
    r = subprocess.run(["getfacl", "-n", "-p", ".", *paths], cwd=root,
                       capture_output=True, text=True, check=True)
    return r.stdout


@pytest.fixture(scope="module")
def acl_tree(srcfs):
    if os.geteuid() != 0:
        pytest.skip("needs root to give files other owners")
    need("setfacl", "getfacl")
    root = srcfs / "acl-tree"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    f = root / "named"
    f.write_bytes(b"named users and groups\n")
    os.chmod(f, 0o640)
    try:
        setfacl("-m", "u:nobody:rwx,g:daemon:r,u:4242:rw", f)
    except subprocess.CalledProcessError:
        pytest.skip("no POSIX ACLs where the trees live")
    # group:: wider than the mask: the mode shows the mask
    setfacl("-n", "-m", "g::rwx,m::r", f)
    (root / "plain").write_bytes(b"no ACL\n")
    os.chmod(root / "plain", 0o754)
    d = root / "dir"
    d.mkdir()
    setfacl("-m", "u:65534:rw", d)
    setfacl("-d", "-m", "u:nobody:rx,g:4343:rwx", d)
    (d / "inherited").write_bytes(b"from the default ACL\n")
    (d / "sub").mkdir()
    os.chown(d / "inherited", 1000, 1000)
    e = root / "default-only"
    e.mkdir()
    setfacl("-d", "-m", "o::---", e)
    return root


ARCHIVERS = {
    "gnu-acls-xattrs": ["tar", "--numeric-owner", "--format=pax", "--acls",
                        "--xattrs"],
    "gnu-acls": ["tar", "--numeric-owner", "--format=pax", "--acls"],
    "bsdtar": ["bsdtar", "--numeric-owner", "--acls"],
}


@pytest.mark.parametrize("kind", ["gnu-acls-xattrs", "gnu-acls", "bsdtar"])
def test_acls_and_modes_round_trip(kiln, acl_tree, tmp_path, kind):
    argv = ARCHIVERS[kind]
    need(argv[0])
    t = tmp_path / f"{kind}.tar"
    subprocess.run(argv + ["-C", str(acl_tree), "-cf", str(t), "."],
                   check=True, capture_output=True)
    img = tmp_path / f"{kind}.erofs"
    r = kiln.ok("build", "--verify", "--tar", t, img)
    assert "ACL" not in r.err, r.err
    kiln.ok("fsck", img)
    with kernel_mount(img) as m:
        tree_compare(acl_tree, m, fields=FIELDS)
        assert getfacl(m) == getfacl(acl_tree)
        assert (os.stat(m / "named").st_mode & 0o777) == 0o640


def test_no_xattrs_drops_acls_but_keeps_the_mode(kiln, acl_tree, tmp_path):
    t = tmp_path / "a.tar"
    subprocess.run(["tar", "--numeric-owner", "--format=pax", "--acls",
                    "-C", str(acl_tree), "-cf", str(t), "."],
                   check=True, capture_output=True)
    img = tmp_path / "a.erofs"
    kiln.ok("build", "--no-xattrs", "--tar", t, img)
    with kernel_mount(img) as m:
        tree_compare(acl_tree, m, fields=("type", "mode", "data"))
        assert not os.listxattr(m / "named")


def test_unknown_acl_name_is_a_clear_error(kiln, tmp_path):
    t = tmp_path / "n.tar"
    with tarfile.open(t, "w", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo("f")
        ti.size = 1
        ti.mode = 0o640
        ti.pax_headers = {"SCHILY.acl.access":
                          "user::rw-,user:no-such-user-kiln:r--,group::r--,"
                          "mask::r--,other::---"}
        tf.addfile(ti, io.BytesIO(b"x"))
    img = tmp_path / "n.erofs"
    r = kiln.fails("build", "--tar", t, img)
    assert "no-such-user-kiln" in r.err and ": f:" in r.err, r.err
    assert not img.exists()
