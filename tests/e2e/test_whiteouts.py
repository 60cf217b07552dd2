# SPDX-License-Identifier: MIT
"""OCI / aufs whiteouts (--whiteouts): layer images built from tars with
whiteouts and opaque directories, kernel-mounted and stacked with the
kernel's overlayfs, show the merged tree a container runtime would; keep
and strip behave as stated; directory sources keep what they hold unless
asked."""

import contextlib
import io
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from helpers import kernel_mount

pytestmark = pytest.mark.sanitize

MTIME = 1700000000


def add(tf, name, kind="file", data=b"", mode=None, uid=0, gid=0,
        mtime=MTIME):
    ti = tarfile.TarInfo(name)
    ti.mtime = mtime
    ti.uid, ti.gid = uid, gid
    if kind == "dir":
        ti.type = tarfile.DIRTYPE
        ti.mode = 0o755 if mode is None else mode
        tf.addfile(ti)
    elif kind == "chr":
        ti.type = tarfile.CHRTYPE
        ti.mode = 0o644 if mode is None else mode
        tf.addfile(ti)
    elif kind == "link":
        ti.type = tarfile.SYMTYPE
        ti.linkname = data
        ti.mode = 0o777
        tf.addfile(ti)
    else:
        ti.size = len(data)
        ti.mode = 0o644 if mode is None else mode
        tf.addfile(ti, io.BytesIO(data))


def make_tar(path, entries):
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            add(tf, *e[:2], **(e[2] if len(e) > 2 else {}))
    return path


# The base layer: what the upper layer deletes, hides and keeps.
LOWER = [
    ("a", "dir"),
    ("a/keep.txt", "file", {"data": b"keep"}),
    ("a/gone.txt", "file", {"data": b"gone"}),
    ("a/sub", "dir"),
    ("a/sub/deep.txt", "file", {"data": b"deep"}),
    ("gone_dir", "dir"),
    ("gone_dir/y", "file", {"data": b"y"}),
    ("opq", "dir"),
    ("opq/old1", "file", {"data": b"old1"}),
    ("opq/olddir", "dir"),
    ("opq/olddir/x", "file", {"data": b"x"}),
    ("nested/n1/n2", "dir"),
    ("nested/n1/n2/del.txt", "file", {"data": b"del"}),
    ("nested/n1/n2/stay.txt", "file", {"data": b"stay"}),
    ("newdir_lower", "dir"),
    ("newdir_lower/hidden", "file", {"data": b"h"}),
    ("replaced.txt", "file", {"data": b"old"}),
    ("both_wr", "file", {"data": b"lower"}),
    ("both_rw", "file", {"data": b"lower"}),
    ("link", "link", {"data": "a/keep.txt"}),
]

# The layer on top, in the order an OCI layer tar may have it.
UPPER = [
    ("a/.wh.gone.txt", "file", {"mode": 0o600, "uid": 7, "gid": 8}),
    (".wh.gone_dir", "file"),
    ("opq/.wh..wh..opq", "file"),
    ("opq/new1", "file", {"data": b"new1"}),
    ("nested/n1/n2/.wh.del.txt", "file"),
    # an opaque marker with no other member: the directory is made
    ("newdir_lower/.wh..wh..opq", "file"),
    (".wh..wh.plnk", "dir"),
    (".wh..wh.plnk/123.456", "file", {"data": b"aufs"}),
    ("up.txt", "file", {"data": b"up"}),
    ("replaced.txt", "file", {"data": b"new"}),
    # a whiteout then a member of the same name: the member (later) wins
    (".wh.both_wr", "file"),
    ("both_wr", "file", {"data": b"upper"}),
    # a member then its whiteout: the whiteout (later) wins
    ("both_rw", "file", {"data": b"upper"}),
    (".wh.both_rw", "file"),
    # a directory no lower layer has, holding a whiteout: overlayfs must
    # not list it (the directory needs trusted.overlay.origin for that)
    ("fresh", "dir"),
    ("fresh/.wh.z", "file"),
    ("fresh/real", "file", {"data": b"r"}),
]

# What overlayfs must show for lowerdir=UPPER:LOWER.
MERGED = {
    "a": None, "a/keep.txt": b"keep", "a/sub": None,
    "a/sub/deep.txt": b"deep",
    "opq": None, "opq/new1": b"new1",
    "nested": None, "nested/n1": None, "nested/n1/n2": None,
    "nested/n1/n2/stay.txt": b"stay",
    "newdir_lower": None,
    "replaced.txt": b"new", "up.txt": b"up", "both_wr": b"upper",
    "link": "a/keep.txt",
    "fresh": None, "fresh/real": b"r",
}


def tree_of(root):
    """{relative path: bytes (file), None (dir), str (symlink target),
    ('chr', major, minor)} of everything under @root."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                out[rel] = None
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = os.readlink(p)
            elif stat.S_ISCHR(st.st_mode):
                out[rel] = ("chr", os.major(st.st_rdev),
                            os.minor(st.st_rdev))
            else:
                out[rel] = Path(p).read_bytes()
    return out


@contextlib.contextmanager
def overlay(upper, lower):
    """Stack two mounted layers with the kernel's overlayfs, read-only."""
    mnt = tempfile.mkdtemp(prefix="kiln-ovl-")
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={upper}:{lower}", mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(mnt)
        if "unknown filesystem type" in r.stderr:
            pytest.skip("needs overlayfs in the kernel")
        pytest.fail(f"overlayfs refused the layers: {r.stderr.strip()}")
    try:
        yield Path(mnt)
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        os.rmdir(mnt)


@pytest.fixture(scope="module")
def layers(kiln, tmp_path_factory):
    d = tmp_path_factory.mktemp("layers")
    lower_tar = make_tar(d / "lower.tar", LOWER)
    upper_tar = make_tar(d / "upper.tar", UPPER)
    lower = d / "lower.erofs"
    kiln.ok("build", "--tar", lower_tar, lower)
    kiln.ok("fsck", lower)
    return d, lower, upper_tar


def build_upper(kiln, layers, *opts):
    d, lower, upper_tar = layers
    img = d / ("upper" + "".join(o.replace("=", "-") for o in opts) +
               ".erofs")
    kiln.ok("build", "--verify", *opts, "--tar", upper_tar, img)
    kiln.ok("fsck", img)
    return img


def test_overlay_stack_shows_the_merged_tree(kiln, layers):
    img = build_upper(kiln, layers)            # overlay is the default
    _, lower, _ = layers
    with kernel_mount(lower) as lo, kernel_mount(img) as up:
        layer = tree_of(up)
        # the layer itself: whiteouts as 0:0 devices, markers gone
        assert layer["a/gone.txt"] == ("chr", 0, 0)
        assert layer["gone_dir"] == ("chr", 0, 0)
        assert layer["nested/n1/n2/del.txt"] == ("chr", 0, 0)
        assert layer["both_rw"] == ("chr", 0, 0)
        assert not [p for p in layer if ".wh." in p], layer
        # the whiteout keeps its own metadata
        st = os.lstat(up / "a/gone.txt")
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
                st.st_mtime) == (0o600, 7, 8, MTIME)
        assert os.getxattr(up / "opq", "trusted.overlay.opaque") == b"y"
        assert os.getxattr(up / "newdir_lower",
                           "trusted.overlay.opaque") == b"y"
        assert "trusted.overlay.opaque" not in os.listxattr(up / "a")
        # the parents of whiteouts are marked for overlayfs's listing
        for d in ("", "a", "nested/n1/n2", "fresh"):
            assert os.getxattr(up / d, "trusted.overlay.origin") == b"", d
        assert "trusted.overlay.origin" not in os.listxattr(up / "opq")
        with overlay(up, lo) as mnt:
            assert tree_of(mnt) == MERGED


def test_layer_bytes_do_not_depend_on_threads(kiln, layers, tmp_path):
    _, _, upper_tar = layers
    imgs = []
    for j in ("1", "2"):
        imgs.append(tmp_path / f"j{j}.erofs")
        kiln.ok("build", "-j", j, "-z", "lz4hc", "--tar", upper_tar,
                imgs[-1])
    assert imgs[0].read_bytes() == imgs[1].read_bytes()


def test_keep_stores_whiteouts_as_plain_files(kiln, layers):
    img = build_upper(kiln, layers, "--whiteouts=keep")
    _, lower, _ = layers
    with kernel_mount(lower) as lo, kernel_mount(img) as up:
        layer = tree_of(up)
        assert layer["a/.wh.gone.txt"] == b""
        assert layer["opq/.wh..wh..opq"] == b""
        assert layer[".wh..wh.plnk/123.456"] == b"aufs"
        assert not [v for v in layer.values() if isinstance(v, tuple)]
        with overlay(up, lo) as mnt:
            merged = tree_of(mnt)
        # nothing is deleted: the lower files show through
        assert merged["a/gone.txt"] == b"gone"
        assert merged["opq/old1"] == b"old1"
        assert merged["a/.wh.gone.txt"] == b""


def test_strip_drops_whiteouts_and_markers(kiln, layers, tmp_path):
    _, lower, _ = layers
    img = build_upper(kiln, layers, "--whiteouts=strip")
    with kernel_mount(img) as up:
        layer = tree_of(up)
        assert not [p for p in layer if ".wh." in p]
        assert not [v for v in layer.values() if isinstance(v, tuple)]
        assert "a/gone.txt" not in layer and "gone_dir" not in layer
        assert "trusted.overlay.opaque" not in os.listxattr(up / "opq")
        assert layer["opq/new1"] == b"new1"
        # a dropped whiteout deletes nothing, even after its member
        assert layer["both_rw"] == b"upper" and layer["both_wr"] == b"upper"
    # overlay-style whiteouts and opaque xattrs in the tar go as well
    t = tmp_path / "ovl.tar"
    with tarfile.open(t, "w", format=tarfile.PAX_FORMAT) as tf:
        add(tf, "wh", "chr")
        ti = tarfile.TarInfo("d")
        ti.type = tarfile.DIRTYPE
        ti.mode = 0o755
        ti.pax_headers = {"SCHILY.xattr.trusted.overlay.opaque": "y",
                          "SCHILY.xattr.user.keep": "k"}
        tf.addfile(ti)
        ti = tarfile.TarInfo("dev")
        ti.type = tarfile.CHRTYPE
        ti.devmajor, ti.devminor = 1, 3
        tf.addfile(ti)
    img2 = tmp_path / "ovl.erofs"
    kiln.ok("build", "--whiteouts=strip", "--tar", t, img2)
    with kernel_mount(img2) as m:
        assert sorted(os.listdir(m)) == ["d", "dev"]
        assert os.listxattr(m / "d") == ["user.keep"]
    # without strip they stay
    kiln.ok("build", "--tar", t, img2)
    with kernel_mount(img2) as m:
        assert sorted(os.listdir(m)) == ["d", "dev", "wh"]
        assert os.getxattr(m / "d", "trusted.overlay.opaque") == b"y"


def test_directory_source_keeps_by_default_and_converts_when_asked(
        kiln, srcfs, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for device nodes and trusted xattrs")
    src = srcfs / "wh-dir"
    subprocess.run(["rm", "-rf", str(src)], check=True)
    (src / "d/sub").mkdir(parents=True)
    (src / "d/.wh.gone").write_bytes(b"")
    os.chmod(src / "d/.wh.gone", 0o640)
    (src / "d/.wh..wh..opq").write_bytes(b"")
    (src / "d/.wh..wh.aufs").write_bytes(b"meta")
    (src / "d/sub/.wh.deep").write_bytes(b"")
    (src / "d/file").write_bytes(b"f")
    # a whiteout beside the file it names: the file wins
    (src / "d/.wh.file").write_bytes(b"")
    os.mknod(src / "ovl", stat.S_IFCHR | 0o600, os.makedev(0, 0))
    img = tmp_path / "keep.erofs"
    kiln.ok("build", src, img)
    with kernel_mount(img) as m:
        t = tree_of(m)
        assert t["d/.wh.gone"] == b"" and t["d/.wh..wh..opq"] == b""
        assert t["ovl"] == ("chr", 0, 0)    # already a whiteout: kept
    img = tmp_path / "ovl.erofs"
    kiln.ok("build", "--whiteouts=overlay", src, img)
    kiln.ok("fsck", img)
    with kernel_mount(img) as m:
        t = tree_of(m)
        assert t == {"d": None, "d/sub": None, "d/gone": ("chr", 0, 0),
                     "d/sub/deep": ("chr", 0, 0), "d/file": b"f",
                     "ovl": ("chr", 0, 0)}
        assert stat.S_IMODE(os.lstat(m / "d/gone").st_mode) == 0o640
        assert os.getxattr(m / "d", "trusted.overlay.opaque") == b"y"
        for d in ("d", "d/sub"):
            assert os.getxattr(m / d, "trusted.overlay.origin") == b""
        assert "trusted.overlay.origin" not in os.listxattr(m)
    img = tmp_path / "strip.erofs"
    kiln.ok("build", "--whiteouts=strip", src, img)
    with kernel_mount(img) as m:
        assert tree_of(m) == {"d": None, "d/sub": None, "d/file": b"f"}
        assert "trusted.overlay.opaque" not in os.listxattr(m / "d")


def test_whiteout_naming_nothing_is_a_clear_error(kiln, tmp_path):
    t = make_tar(tmp_path / "bad.tar", [("d/.wh..", "file")])
    img = tmp_path / "bad.erofs"
    r = kiln.fails("build", "--tar", t, img)
    assert "d/.wh.." in r.err and "names no file" in r.err, r.err
    assert not img.exists()
    # kept as a file it is only a name
    kiln.ok("build", "--whiteouts=keep", "--tar", t, img)


def test_bad_whiteouts_mode_is_a_usage_error(kiln, tmp_path):
    r = kiln.run("build", "--whiteouts=delete", "--tar", "x.tar",
                 tmp_path / "x.erofs")
    assert r.rc == 2 and "overlay, keep or strip" in r.err


def mkfs_version():
    if not shutil.which("mkfs.erofs"):
        return None
    r = subprocess.run(["mkfs.erofs", "--version"], capture_output=True,
                       text=True)
    m = re.search(r"(\d+)\.(\d+)", r.stdout) if r.returncode == 0 else None
    return (int(m.group(1)), int(m.group(2))) if m else (1, 5)


def test_layer_matches_mkfs_erofs_aufs(kiln, layers):
    """mkfs.erofs --tar=f --aufs (1.9) makes the same layer: same names,
    types, data and opaque directories (its whiteouts have mode 0). It
    leaves aufs bookkeeping (.wh..wh.plnk) in, as a whiteout of
    ".wh.plnk" and a directory, which kiln drops."""
    v = mkfs_version()
    if not v or v < (1, 9):
        pytest.skip(f"needs mkfs.erofs 1.9 or newer on PATH, found {v}")
    d, _, upper_tar = layers
    ref = d / "upper-mkfs.erofs"
    subprocess.run(["mkfs.erofs", "--tar=f", "--aufs", "--quiet", str(ref),
                    str(upper_tar)], check=True, capture_output=True)
    img = build_upper(kiln, layers)
    with kernel_mount(ref) as want, kernel_mount(img) as got:
        ref_tree = {rel: v for rel, v in tree_of(want).items()
                    if "plnk" not in rel}
        assert tree_of(got) == ref_tree
        assert sorted(os.listxattr(got)) == sorted(os.listxattr(want))
        for rel, v in ref_tree.items():
            if v is None:
                assert (sorted(os.listxattr(got / rel)) ==
                        sorted(os.listxattr(want / rel))), rel
