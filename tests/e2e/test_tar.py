# SPDX-License-Identifier: MIT
"""kiln build --tar: images built from tar streams (GNU tar's pax, gnu and
ustar formats, compressed or not, from a file or stdin) hold exactly the
tree that was archived, and equal the image built from the directory."""

import base64
import os
import shutil
import stat
import subprocess
import tarfile

import pytest

from helpers import (assert_same, diff_snapshots, have, snapshot,
                     stray_files, tree_compare, write_tar)

pytestmark = pytest.mark.sanitize

GNU_TAR = ("tar", "--numeric-owner")
XATTR_FLAGS = ("--xattrs", "--xattrs-include=*")

COMPRESSORS = {
    "gz": ("gzip", "-c"),
    "xz": ("xz", "-c", "-T1"),
    "zst": ("zstd", "-c", "-q"),
    "bz2": ("bzip2", "-c"),
}


def tar_unsupported(rel):
    """What tar itself cannot carry: sockets."""
    return rel.endswith(b"/sock") or rel == b"sock"


def tar_limits(seconds_only=False):
    """expect() for tree_compare: what a tar archive cannot express.

    GNU tar stores a hardlinked fifo as two fifos. libarchive before 3.8.1
    reads a pax time in (-1 s, 0) as its absolute value.
    """
    def expect(rel, n):
        if n.type == "fifo" and len(n.links) > 1:
            n.nlink = 1
            n.links = (rel,)
        if seconds_only:
            n.mtime = (n.mtime // 10**9) * 10**9
        elif -10**9 < n.mtime < 0 and not libarchive_fixed_negative():
            n.mtime = -n.mtime
    return expect


def libarchive_fixed_negative():
    r = subprocess.run(["bsdtar", "--version"], capture_output=True,
                       text=True) if have("bsdtar") else None
    if not r or r.returncode:
        return False
    for word in r.stdout.split():
        if word[:1].isdigit() and word.count(".") == 2:
            return tuple(int(x) for x in word.split(".")) >= (3, 8, 1)
    return False


def make_tar(src, dest, fmt="pax", compress=None, xattrs=True):
    argv = list(GNU_TAR) + [f"--format={fmt}"]
    if fmt != "ustar":
        argv.append("--sparse")     # ustar has no sparse files
    if xattrs:
        argv += XATTR_FLAGS
    raw = dest if not compress else str(dest) + ".raw"
    r = subprocess.run(argv + ["-C", str(src), "-cf", str(raw), "."],
                       capture_output=True, text=True)
    # exit 1 with "socket ignored" is fine; anything worse is not
    assert r.returncode in (0, 1), r.stderr
    if compress:
        tool = COMPRESSORS[compress]
        if not have(tool[0]):
            pytest.skip(f"{tool[0]} not installed")
        with open(dest, "wb") as out:
            subprocess.run(list(tool) + [raw], stdout=out, check=True)
        os.unlink(raw)
    return dest


@pytest.fixture(scope="module")
def tree(make_tree):
    return make_tree("tar-src", seed=5, many=400, light=True)


@pytest.fixture(scope="module")
def dir_image(kiln, tree, tmp_path_factory):
    img = tmp_path_factory.mktemp("tar-dir") / "dir.erofs"
    kiln.build(tree.root, img)
    return img


@pytest.fixture(scope="module")
def pax_tar(tree, tmp_path_factory):
    return make_tar(tree.root, tmp_path_factory.mktemp("tars") / "t.tar")


def check_against(kernel_mount, tree_root, img, dir_image, **kw):
    """The tar-built image holds the source tree and equals the image
    built from the directory (listing, content, attributes)."""
    seconds_only = kw.pop("seconds_only", False)
    fields = kw.pop("fields", None)
    extra = {"fields": fields} if fields else {}
    with kernel_mount(img) as mnt:
        tree_compare(tree_root, mnt, ignore=tar_unsupported,
                     expect=tar_limits(seconds_only), **extra, **kw)
        if dir_image is None:
            return
        with kernel_mount(dir_image) as dmnt:
            exp = snapshot(dmnt)
            act = snapshot(mnt)
            for nodes in (exp, act):
                for rel in [r for r in nodes if tar_unsupported(r)]:
                    del nodes[rel]
                for n in nodes.values():
                    if n.listing is not None:
                        n.listing = tuple(x for x in n.listing
                                          if not tar_unsupported(x))
            for rel, n in exp.items():
                tar_limits(seconds_only)(rel, n)
            fields_ = fields or ("type", "mode", "uid", "gid", "size",
                                 "mtime", "nlink", "links", "target", "rdev",
                                 "xattrs", "data", "listing")
            assert_same(diff_snapshots(exp, act, fields_),
                        f"{img} differs from the directory-built image")


def test_pax_file_equals_source_and_dir_image(kiln, tree, pax_tar, dir_image,
                                              tmp_path, kernel_mount):
    img = tmp_path / "pax.erofs"
    kiln.ok("build", "--tar", pax_tar, img)
    check_against(kernel_mount, tree.root, img, dir_image)


def test_pax_from_stdin(kiln, tree, pax_tar, dir_image, tmp_path,
                        kernel_mount):
    img = tmp_path / "stdin.erofs"
    with open(pax_tar, "rb") as f:
        kiln.ok("build", "--tar", "-", img, input=f.read())
    check_against(kernel_mount, tree.root, img, dir_image)


@pytest.mark.parametrize("comp", sorted(COMPRESSORS))
@pytest.mark.parametrize("via", ["file", "stdin"])
def test_compressed_streams_detected(kiln, tree, tmp_path, kernel_mount,
                                     comp, via):
    t = make_tar(tree.root, tmp_path / f"t.tar.{comp}", compress=comp)
    img = tmp_path / "c.erofs"
    if via == "stdin":
        kiln.ok("build", "--tar", "-", img, input=t.read_bytes())
    else:
        kiln.ok("build", "--tar", t, img)
    check_against(kernel_mount, tree.root, img, None)


def test_gnu_format_long_names_and_sparse(kiln, tree, tmp_path,
                                          kernel_mount):
    # gnu format: ././@LongLink names, old GNU sparse maps, base-256 ids,
    # whole-second times, no xattrs
    t = make_tar(tree.root, tmp_path / "gnu.tar", fmt="gnu", xattrs=False)
    img = tmp_path / "gnu.erofs"
    kiln.ok("build", "--tar", t, img)
    check_against(kernel_mount, tree.root, img, None, seconds_only=True,
                  fields=("type", "mode", "uid", "gid", "size", "mtime",
                          "nlink", "links", "target", "rdev", "data",
                          "listing"))


def test_sparse_files_stay_sparse(kiln, srcfs, tmp_path, kernel_mount):
    root = srcfs / "tar-sparse"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    with open(root / "holes", "wb") as f:
        for off in (0, (64 << 20) + 123, 200 << 20):
            f.seek(off)
            f.write(os.urandom(5000))
        f.truncate(256 << 20)
    with open(root / "all-hole", "wb") as f:
        f.truncate(100 << 20)
    with open(root / "tail-data", "wb") as f:
        f.seek((32 << 20) - 10)
        f.write(b"0123456789")
    t = make_tar(root, tmp_path / "s.tar", xattrs=False)
    assert os.path.getsize(t) < (1 << 20)
    for opts in ((), ("-b", "512")):
        img = tmp_path / "s.erofs"
        kiln.ok("build", *opts, "--tar", t, img)
        assert os.path.getsize(img) < (1 << 20), "holes were written out"
        with kernel_mount(img) as mnt:
            tree_compare(root, mnt)
    shutil.rmtree(root)


@pytest.fixture
def simple_tree(srcfs, request):
    """What ustar can hold: short names, small ids, whole-second times."""
    root = srcfs / ("ustar-" + request.node.name[:40])
    if root.exists():
        shutil.rmtree(root)
    os.makedirs(root / "d" / "e")
    (root / "d" / "e" / "f").write_bytes(b"hello\n" * 1000)
    (root / "small").write_bytes(b"x")
    (root / "empty").write_bytes(b"")
    os.link(root / "small", root / "d" / "hard")
    os.symlink("d/e/f", root / "link")
    os.mkfifo(root / "fifo")
    os.chmod(root / "d", 0o750)
    for p in ["d/e/f", "small", "empty", "link", "fifo", "d/e", "d", ""]:
        os.utime(root / p, ns=(0, 1500000000 * 10**9), follow_symlinks=False)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_ustar_simple_tree(kiln, simple_tree, tmp_path, kernel_mount):
    t = make_tar(simple_tree, tmp_path / "u.tar", fmt="ustar", xattrs=False)
    img = tmp_path / "u.erofs"
    kiln.ok("build", "--tar", t, img)
    with kernel_mount(img) as mnt:
        tree_compare(simple_tree, mnt,
                     fields=("type", "mode", "uid", "gid", "size", "mtime",
                             "nlink", "links", "target", "data", "listing"))


@pytest.mark.parametrize("opts", [("-z", "lz4hc"), ("-z", "zstd", "--dedupe"),
                                  ("-z", "lz4hc", "--fragments"),
                                  ("-z", "lzma", "--layout", "extents",
                                   "--ztailpacking"),
                                  ("-b", "1024", "-z", "lz4",
                                   "--ztailpacking")])
def test_compressed_image_from_tar(kiln, tree, pax_tar, tmp_path,
                                   kernel_mount, opts):
    img = tmp_path / "z.erofs"
    kiln.ok("build", *opts, "--tar", pax_tar, img)
    check_against(kernel_mount, tree.root, img, None)


def test_incompressible_big_file_replayed(kiln, srcfs, tmp_path,
                                          kernel_mount):
    # a file the compressor hands back after its hold window, bigger than
    # a segment (8 MiB): its first segment's commit stores it from the
    # segments read so far and the rest of the stream
    root = srcfs / "tar-big"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    (root / "random").write_bytes(os.urandom(9 << 20))
    (root / "text").write_bytes(b"kiln erofs block\n" * 300000)
    (root / "mixed").write_bytes(os.urandom(1 << 20) + bytes(3 << 20))
    # random far beyond what a stream can replay, then compressible: the
    # keep-or-hand-back probe looks no further than the first segment, so
    # this one is stored raw, from a tar stream as from a directory
    (root / "late").write_bytes(os.urandom(40 << 20) +
                                b"compressible at last\n" * 200000)
    (root / "early").write_bytes(os.urandom(2 << 20) +
                                 b"compressible soon\n" * 400000)
    t = make_tar(root, tmp_path / "big.tar", xattrs=False)
    for opts in (("-z", "lz4"), ("-z", "zstd", "--layout", "extents"),
                 ("-z", "lz4hc", "--no-dedupe")):
        img = tmp_path / "big.erofs"
        dimg = tmp_path / "dir.erofs"
        kiln.ok("build", *opts, "--verify", "--tar", t, img)
        kiln.ok("build", *opts, root, dimg)
        # the same keep-or-raw decisions as a directory build: sizes
        # differ only by metadata (streamed inodes are extended ones)
        assert abs(img.stat().st_size - dimg.stat().st_size) <= 64 << 10, \
            (opts, img.stat().st_size, dimg.stat().st_size)
        with kernel_mount(img) as mnt:
            tree_compare(root, mnt)
    shutil.rmtree(root)


@pytest.fixture(scope="module")
def many_tar(srcfs, tmp_path_factory):
    """Hundreds of members the workers compress while the stream is read
    on (text, random, zeros, empty, sparse), between members bigger than
    a segment (8 MiB), read and compressed a segment at a time."""
    import random
    root = srcfs / "tar-many"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    rng = random.Random(31)
    words = [b"tar ", b"member ", b"worker ", b"kiln\n", b"stream "]
    for d in range(6):
        sub = root / f"d{d}"
        sub.mkdir()
        for i in range(100):
            n = rng.choice([0, 1, 700, 4096, 5000, 40000, 200000])
            kind = rng.random()
            if kind < 0.15:
                body = rng.randbytes(n)
            elif kind < 0.2:
                body = bytes(n)
            else:
                body = b"".join(rng.choice(words)
                                for _ in range(n // 5 + 1))[:n]
            (sub / f"f{i}").write_bytes(body)
        if d == 2:
            (sub / "big-text").write_bytes(b"kiln erofs tar\n" * 700000)
        if d == 4:
            (sub / "big-random").write_bytes(rng.randbytes(9 << 20))
    with open(root / "d1" / "sparse", "wb") as f:
        f.write(b"head" * 1000)
        f.seek(3 << 20)
        f.write(b"tail" * 1000)
    t = make_tar(root, tmp_path_factory.mktemp("many") / "many.tar",
                 xattrs=False)
    return root, t


@pytest.mark.parametrize("opts", [("-z", "zstd", "--fragments"),
                                  ("-z", "lz4hc", "--no-dedupe", "--verify"),
                                  ("-z", "lzma", "--layout", "extents",
                                   "--memory-limit", "1"),
                                  ("-z", "lz4", "--ztailpacking"),
                                  ()])
def test_tar_members_compressed_in_parallel_same_for_any_j(
        kiln, many_tar, tmp_path, kernel_mount, opts):
    root, t = many_tar
    imgs = {}
    for j in ("1", "2", "8"):
        imgs[j] = tmp_path / f"j{j}.erofs"
        r = kiln.run("build", "-j", j, *opts, "--tar", t, imgs[j],
                     timeout=600)
        assert r.rc == 0, r.describe()
    one = imgs["1"].read_bytes()
    assert imgs["2"].read_bytes() == one, f"-j2 differs from -j1 with {opts}"
    assert imgs["8"].read_bytes() == one, f"-j8 differs from -j1 with {opts}"
    opts = tuple(o for o in opts if o != "--verify")
    dir_img = tmp_path / "dir.erofs"
    kiln.ok("build", *opts, root, dir_img, timeout=600)
    check_against(kernel_mount, root, imgs["2"], dir_img)


def test_options_apply_like_directory_input(kiln, tree, pax_tar, tmp_path,
                                            kernel_mount):
    opts = ("--all-root", "-T", "1234567", "-x", "names", "-x", "*.txt",
            "-x", "sizes/r1*")
    a, b = tmp_path / "tar.erofs", tmp_path / "dir.erofs"
    kiln.ok("build", *opts, "--tar", pax_tar, a)
    kiln.build(tree.root, b, *opts)
    with kernel_mount(a) as ma, kernel_mount(b) as mb:
        exp, act = snapshot(mb), snapshot(ma)
        for nodes in (exp, act):
            for rel in [r for r in nodes if tar_unsupported(r)]:
                del nodes[rel]
            for n in nodes.values():
                if n.listing is not None:
                    n.listing = tuple(x for x in n.listing
                                      if not tar_unsupported(x))
        for rel, n in exp.items():
            tar_limits()(rel, n)
        assert_same(diff_snapshots(exp, act), "tar vs directory with options")
        assert not any(r.startswith(b"names") for r in act)
        assert all(n.uid == 0 and n.gid == 0 for n in act.values())
        assert all(n.mtime == 1234567 * 10**9 for n in act.values())


# -- crafted archives (Python's tarfile) ---------------------------------

def crafted(path, entries, fmt=tarfile.PAX_FORMAT):
    """helpers.write_tar, owned by 1000:1000 unless an entry says."""
    return write_tar(path, entries, fmt, owner=(1000, 1000))


def test_implicit_parents_duplicates_hardlinks(kiln, tmp_path, kernel_mount):
    t = crafted(tmp_path / "c.tar", [
        ("a/b/c", "file", {"data": b"first"}),
        ("./x/", "dir", {"mode": 0o700}),
        ("/abs/file", "file", {"data": b"abs"}),
        ("a/b/c", "file", {"data": b"second", "mode": 0o600}),
        ("link-to-c", "hard", {"target": "a/b/c"}),
        ("a/b/c", "file", {"data": b"third"}),
        ("dup", "file", {"data": b"file"}),
        ("dup", "sym", {"target": "a/b/c"}),
        ("x/f", "fifo", {}),
        ("x", "dir", {"mode": 0o711, "mtime": 1700000000}),
        ("xa", "file", {"data": b"x" * 10000,
                        "pax": {"SCHILY.xattr.user.k": "v",
                                "SCHILY.xattr.trusted.t": "w",
                                "LIBARCHIVE.xattr.user.lib":
                                base64.b64encode(b"\0bin\xff").decode()}}),
        ("dev/c", "chr", {"dev": (4095, 1048575), "mode": 0o620}),
        ("dev/b", "blk", {"dev": (8, 1)}),
        ("big-owner", "file", {"uid": 4000000000, "gid": 65536,
                               "mtime": 2**33 + 0.5}),
    ])
    img = tmp_path / "c.erofs"
    r = kiln.ok("build", "--tar", t, img)
    assert "leading '/'" in r.err
    with kernel_mount(img) as mnt:
        st = os.stat(mnt / "a")
        assert (st.st_mode & 0o7777, st.st_uid, st.st_gid) == (0o755, 0, 0)
        # the later entry replaced the earlier; the hardlink kept the
        # second version, as extraction would
        assert (mnt / "a/b/c").read_bytes() == b"third"
        assert (mnt / "link-to-c").read_bytes() == b"second"
        assert os.stat(mnt / "link-to-c").st_nlink == 1
        assert os.stat(mnt / "link-to-c").st_mode & 0o7777 == 0o600
        assert os.readlink(mnt / "dup") == "a/b/c"
        assert (mnt / "abs/file").read_bytes() == b"abs"
        x = os.stat(mnt / "x")
        assert x.st_mode & 0o7777 == 0o711 and x.st_nlink == 2
        assert sorted(os.listdir(mnt / "x")) == ["f"]
        assert os.getxattr(mnt / "xa", "user.k") == b"v"
        assert os.getxattr(mnt / "xa", "trusted.t") == b"w"
        assert os.getxattr(mnt / "xa", "user.lib") == b"\0bin\xff"
        c = os.lstat(mnt / "dev/c")
        assert stat.S_ISCHR(c.st_mode) and c.st_mode & 0o7777 == 0o620
        assert (os.major(c.st_rdev), os.minor(c.st_rdev)) == (4095, 1048575)
        b = os.lstat(mnt / "dev/b")
        assert stat.S_ISBLK(b.st_mode)
        assert (os.major(b.st_rdev), os.minor(b.st_rdev)) == (8, 1)
        o = os.lstat(mnt / "big-owner")
        assert (o.st_uid, o.st_gid) == (4000000000, 65536)
        assert o.st_mtime_ns == (2**33) * 10**9 + 5 * 10**8
        assert sorted(os.listdir(mnt)) == ["a", "abs", "big-owner", "dev",
                                           "dup", "link-to-c", "x", "xa"]


def test_implicit_parent_mtime_is_build_time(kiln, tmp_path, kernel_mount):
    t = crafted(tmp_path / "p.tar", [("p/q", "file", {"mtime": 1000})])
    img = tmp_path / "p.erofs"
    env = {"SOURCE_DATE_EPOCH": "1234"}
    kiln.ok("build", "--tar", t, img, env=env)
    with kernel_mount(img) as mnt:
        assert os.stat(mnt / "p").st_mtime == 1234
        assert os.stat(mnt).st_mtime == 1234
        assert os.stat(mnt / "p/q").st_mtime == 1000


@pytest.mark.parametrize("name,why", [
    ("a/../../etc/passwd", "'..'"),
    ("..", "'..'"),
])
def test_dotdot_names_refused(kiln, tmp_path, name, why):
    t = crafted(tmp_path / "bad.tar", [("ok", "file", {"data": b"1"}),
                                       (name, "file", {"data": b"2"})])
    img = tmp_path / "bad.erofs"
    r = kiln.fails("build", "--tar", t, img)
    assert why in r.err and name in r.err, r.err
    assert not img.exists()
    assert stray_files(tmp_path, keep=["bad.tar"]) == []


def test_hardlink_with_body_refused(kiln, tmp_path):
    t = crafted(tmp_path / "hb.tar", [
        ("f", "file", {"data": b"one"}),
        ("g", "hard", {"target": "f", "data": b"two",
                       "pax": {"comment": "pax: the size counts"}})])
    r = kiln.fails("build", "--tar", t, tmp_path / "hb.erofs")
    assert "hb.tar: g: hardlink entry carrying data" in r.err, r.err
    assert not (tmp_path / "hb.erofs").exists()


def test_hardlink_to_missing_target_refused(kiln, tmp_path):
    t = crafted(tmp_path / "h.tar", [("l", "hard", {"target": "nowhere"})])
    r = kiln.fails("build", "--tar", t, tmp_path / "h.erofs")
    assert "nowhere" in r.err and "l" in r.err
    assert not (tmp_path / "h.erofs").exists()


# -- broken streams --------------------------------------------------------

def test_truncated_stream_names_entry_leaves_no_image(kiln, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "aaa").write_bytes(b"a" * 5000)
    (src / "big").write_bytes(os.urandom(300000))
    (src / "zzz").write_bytes(b"z")
    t = make_tar(src, tmp_path / "t.tar", xattrs=False)
    data = t.read_bytes()
    out = tmp_path / "out"
    out.mkdir()
    for cut in (len(data) // 2, 700):
        cut_tar = tmp_path / "cut.tar"
        cut_tar.write_bytes(data[:cut])
        img = out / "t.erofs"
        r = kiln.fails("build", "--tar", cut_tar, img)
        assert "runcated" in r.err, r.err
        assert stray_files(out) == [], "image or temp file left behind"
        r = kiln.fails("build", "--tar", "-", img, input=data[:cut])
        assert "runcated" in r.err and "<stdin>" in r.err, r.err
        assert stray_files(out) == []
    # the entry being read when the stream ended is named
    r = kiln.fails("build", "--tar", "-", out / "t.erofs",
                   input=data[:len(data) // 2])
    assert "big" in r.err, r.err


def test_truncated_compressed_stream(kiln, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(200000))
    t = make_tar(src, tmp_path / "t.tar.gz", compress="gz", xattrs=False)
    data = t.read_bytes()
    img = tmp_path / "out.erofs"
    r = kiln.fails("build", "--tar", "-", img, input=data[:len(data) // 2])
    assert "<stdin>" in r.err
    assert not img.exists()


def test_corrupt_header_is_an_error(kiln, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(bytes([65 + i]) * 3000)
    t = make_tar(src, tmp_path / "t.tar", fmt="ustar", xattrs=False)
    data = bytearray(t.read_bytes())
    # damage the third header's checksum field (headers every 4096 B here)
    hdrs = [i for i in range(0, len(data), 512)
            if data[i + 257:i + 262] == b"ustar"]
    assert len(hdrs) >= 4
    data[hdrs[3] + 148:hdrs[3] + 156] = b"9999999\0"
    img = tmp_path / "out.erofs"
    r = kiln.fails("build", "--tar", "-", img, input=bytes(data))
    assert "<stdin>" in r.err
    assert not img.exists()


def test_not_a_tar(kiln, tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(os.urandom(10000))
    r = kiln.fails("build", "--tar", junk, tmp_path / "j.erofs")
    assert "junk" in r.err
    assert not (tmp_path / "j.erofs").exists()


def test_missing_tar_file(kiln, tmp_path):
    r = kiln.fails("build", "--tar", tmp_path / "nope.tar",
                   tmp_path / "n.erofs")
    assert "nope.tar" in r.err


def test_usage_wants_only_image_with_tar(kiln, tmp_path):
    r = kiln.run("build", "--tar", "x.tar", "a", "b")
    assert r.rc == 2 and "IMAGE" in r.err


def test_tar_acl_records_kept(kiln, srcfs, tmp_path, kernel_mount):
    if os.geteuid() != 0:
        pytest.skip("needs root for ACL xattrs")
    root = srcfs / "tar-acl"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    f = root / "f"
    f.write_bytes(b"acl")
    blob = bytes.fromhex("02000000" "01000600ffffffff" "02000400e8030000"
                         "04000400ffffffff" "10000500ffffffff"
                         "20000000ffffffff")
    try:
        os.setxattr(f, "system.posix_acl_access", blob)
    except OSError:
        pytest.skip("no POSIX ACLs where the trees live")
    # ACL records alone (test_tar_acls.py has the rest)
    t = tmp_path / "acl.tar"
    subprocess.run(["tar", "--format=pax", "--acls", "-C", str(root), "-cf",
                    str(t), "."], check=True, capture_output=True)
    img = tmp_path / "a.erofs"
    r = kiln.ok("build", "--verify", "--tar", t, img)
    assert "ACL" not in r.err, r.err
    with kernel_mount(img) as mnt:
        assert os.getxattr(mnt / "f", "system.posix_acl_access") == blob
        assert os.stat(mnt / "f").st_mode & 0o777 == os.stat(f).st_mode & 0o777
    # archived as xattrs they are kept too
    t2 = make_tar(root, tmp_path / "x.tar")
    img = tmp_path / "x.erofs"
    r = kiln.ok("build", "--verify", "--tar", t2, img)
    assert "ACL" not in r.err, r.err
    kiln.ok("ls", "-l", img, "/")
    shutil.rmtree(root)


def test_directory_replaced_by_file_and_back(kiln, tmp_path, kernel_mount):
    t = crafted(tmp_path / "r.tar", [
        ("d/old", "file", {"data": b"gone"}),
        ("d", "file", {"data": b"now a file"}),
        ("e", "file", {"data": b"was a file"}),
        ("e/", "dir", {"mode": 0o750}),
        ("e/new", "file", {"data": b"inside"}),
    ])
    img = tmp_path / "r.erofs"
    kiln.ok("build", "--verify", "--tar", t, img)
    with kernel_mount(img) as mnt:
        assert (mnt / "d").read_bytes() == b"now a file"
        assert os.stat(mnt / "e").st_mode & 0o7777 == 0o750
        assert os.listdir(mnt / "e") == ["new"]
        assert os.stat(mnt).st_nlink == 3


def test_compress_hints_apply_to_tar_entries(kiln, srcfs, tmp_path,
                                             kernel_mount):
    # the hints' codec per entry path; a file that does not compress is
    # replayed from the stream, a file hinted "none" is stored as it comes
    root = srcfs / "tar-hints"
    shutil.rmtree(root, ignore_errors=True)
    (root / "d").mkdir(parents=True)
    (root / "d" / "noise.bin").write_bytes(os.urandom(300000))
    (root / "d" / "text.txt").write_bytes(b"kiln erofs tar\n" * 20000)
    (root / "plain").write_bytes(b"p" * 5000)
    hints = tmp_path / "hints"
    hints.write_text("*.txt zstd\nplain none\n")
    t = make_tar(root, tmp_path / "h.tar", xattrs=False)
    img = tmp_path / "h.erofs"
    kiln.ok("build", "-z", "lz4", "--verify", "--compress-hints", hints,
            "--tar", t, img)
    assert os.path.getsize(img) < 300000 + 5000 + 100000
    with kernel_mount(img) as mnt:
        tree_compare(root, mnt)
    shutil.rmtree(root)
