# SPDX-License-Identifier: MIT
"""kiln build --tar on hostile archives: names that try to leave the tree,
names without end, members that replace or point at each other, sizes that
lie, truncated members and decompression bombs. Each is a clear error
naming the member, or the defined result docs/tar.md gives; never an image
holding a name with '/' or a '..' entry of its own."""

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

from helpers import have, stray_files, tmpfs_mount, write_tar

pytestmark = pytest.mark.sanitize


# -- archives --------------------------------------------------------------

def header(name, size=0, typeflag=b"0", linkname=b"", gnu=False,
           size_field=None):
    """One 512-byte ustar (or GNU) header, written by hand: @name and
    @linkname fill their fields with no NUL when they are that long."""
    def octal(v, n):
        return b"%0*o\0" % (n - 1, v)
    h = bytearray(512)
    h[0:len(name)] = name[:100]
    h[100:108] = octal(0o644, 8)
    h[108:116] = octal(0, 8)
    h[116:124] = octal(0, 8)
    h[124:136] = size_field if size_field is not None else octal(size, 12)
    h[136:148] = octal(1600000000, 12)
    h[148:156] = b" " * 8
    h[156:157] = typeflag
    h[157:157 + len(linkname)] = linkname[:100]
    h[257:265] = b"ustar  \0" if gnu else b"ustar\x0000"
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def blocks(data):
    return data + b"\0" * (-len(data) % 512)


END = b"\0" * 1024


def build(kiln, tar, img, *opts, ok):
    r = (kiln.ok if ok else kiln.fails)("build", *opts, "--tar", tar, img)
    if not ok:
        assert not os.path.exists(img), "a failed build left an image"
    return r


def assert_clean_names(kiln, img, kernel_mount):
    """Every name in the image, as kiln and as the kernel list it, is one
    path component: no '/', no NUL, not '.' or '..' (those only as the
    directory's own entries)."""
    r = kiln.ok("ls", "-R", "-a", img, "/")
    for line in r.text.splitlines():
        if not line or line.endswith(":") and line.startswith("/"):
            continue
        assert "/" not in line and "\0" not in line, line
    names = []
    with kernel_mount(img) as mnt:
        # by directory fd: paths past PATH_MAX are walked too
        for top, dirs, files, _ in os.fwalk(mnt):
            for n in dirs + files:
                assert n not in (".", "..") and "/" not in n, (top, n)
                names.append(os.path.relpath(os.path.join(top, n), mnt))
    return sorted(names)


def ls_names(kiln, img):
    """Entry names kiln ls -R -a gives, "." and ".." included, per dir."""
    r = kiln.ok("ls", "-R", "-a", img, "/")
    out, cur = {}, None
    for line in r.text.splitlines():
        if line.startswith("/") and line.endswith(":"):
            cur = out.setdefault(line[:-1], [])
        elif line and cur is not None:
            cur.append(line)
    return out


# -- names ------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "../x", "a/../../x", "a/..", "x/../y", "./../x", "a/b/../../..",
])
def test_dotdot_names_refused(kiln, tmp_path, name):
    t = write_tar(tmp_path / "t.tar", [("ok", "file", {"data": b"1"}),
                                      (name, "file", {"data": b"2"})])
    r = build(kiln, t, tmp_path / "t.erofs", ok=False)
    assert f"t.tar: {name}: member name contains '..'" in r.err, r.err


@pytest.mark.parametrize("kind", ["sym", "hard"])
def test_dotdot_in_link_names(kiln, tmp_path, kind, kernel_mount):
    """A hardlink target is a member name (refused with '..'); a symlink
    target is the link's content, stored as it is."""
    t = write_tar(tmp_path / "t.tar", [
        ("f", "file", {"data": b"1"}),
        ("l", kind, {"target": "../../etc/passwd"})])
    img = tmp_path / "t.erofs"
    if kind == "hard":
        r = build(kiln, t, img, ok=False)
        assert "t.tar: l: member name contains '..'" in r.err, r.err
        return
    build(kiln, t, img, ok=True)
    assert assert_clean_names(kiln, img, kernel_mount) == ["f", "l"]
    with kernel_mount(img) as mnt:
        assert os.readlink(mnt / "l") == "../../etc/passwd"


def test_absolute_and_doubled_slashes_normalized(kiln, tmp_path,
                                                 kernel_mount):
    t = write_tar(tmp_path / "t.tar", [
        ("/abs/f", "file", {"data": b"abs"}),
        ("///root3", "file", {"data": b"r3"}),
        ("a//b///c", "file", {"data": b"abc"}),
        ("d/", "dir", {}),
        ("e//", "dir", {}),
        ("./g", "file", {"data": b"g"}),
        ("q/./r/.", "file", {"data": b"qr"}),
        ("/abs/h", "hard", {"target": "/abs/f"}),
    ])
    img = tmp_path / "t.erofs"
    r = build(kiln, t, img, ok=True)
    assert "removing leading '/' from member names" in r.err
    names = assert_clean_names(kiln, img, kernel_mount)
    assert names == ["a", "a/b", "a/b/c", "abs", "abs/f", "abs/h", "d", "e",
                     "g", "q", "q/r", "root3"], names
    with kernel_mount(img) as mnt:
        assert (mnt / "a/b/c").read_bytes() == b"abc"
        assert os.stat(mnt / "abs/h").st_ino == os.stat(mnt / "abs/f").st_ino
        assert (mnt / "q/r").read_bytes() == b"qr"
    dirs = ls_names(kiln, img)
    for d, entries in dirs.items():
        assert entries.count(".") == 1 and entries.count("..") == 1, (d, entries)


def test_ustar_name_filling_its_field(kiln, tmp_path, kernel_mount):
    """A 100-byte name with no NUL ends at its field: a name, not junk."""
    name = b"n" * 100
    t = tmp_path / "t.tar"
    t.write_bytes(header(name, 3) + blocks(b"abc") + END)
    img = tmp_path / "t.erofs"
    build(kiln, t, img, ok=True)
    assert assert_clean_names(kiln, img, kernel_mount) == ["n" * 100]


def test_giant_gnu_longname_without_nul(kiln, tmp_path):
    """A GNU long-name record of 70,000 bytes, no NUL, no '/': one
    component far over 255 bytes, refused naming the reason."""
    name = b"L" * 70000
    t = tmp_path / "t.tar"
    t.write_bytes(header(b"././@LongLink", len(name), b"L", gnu=True) +
                  blocks(name) + header(b"short", 1, gnu=True) +
                  blocks(b"x") + END)
    r = build(kiln, t, tmp_path / "t.erofs", ok=False)
    assert "name component longer than 255 bytes" in r.err, r.err[-300:]
    assert "LLLLLLLL" in r.err


def test_long_paths_and_depth(kiln, tmp_path, kernel_mount):
    """Components up to 255 bytes make any path length; depth is bounded
    (1024, as for directory sources)."""
    long_path = "/".join(["b" * 255] * 20) + "/f"
    t = write_tar(tmp_path / "long.tar", [(long_path, "file", {"data": b"x"})])
    img = tmp_path / "long.erofs"
    build(kiln, t, img, ok=True)
    assert len(assert_clean_names(kiln, img, kernel_mount)) == 21
    t = write_tar(tmp_path / "deep.tar", [("d/" * 1100 + "f", "file",
                                          {"data": b"x"})])
    r = build(kiln, t, tmp_path / "deep.erofs", ok=False)
    assert "path too deep" in r.err and "/d/d/d/f" in r.err, r.err[-300:]


# -- members that replace or point at each other ---------------------------

def test_duplicates_last_wins(kiln, tmp_path, kernel_mount):
    t = write_tar(tmp_path / "t.tar", [
        ("f", "file", {"data": b"one"}),
        ("f", "file", {"data": b"two"}),
        ("d/x", "file", {"data": b"in d"}),
        ("d", "file", {"data": b"d is a file now"}),
        ("s", "file", {"data": b"file"}),
        ("s", "sym", {"target": "f"}),
        ("k", "sym", {"target": "f"}),
        ("k", "dir", {}),
        ("k/y", "file", {"data": b"y"}),
    ])
    img = tmp_path / "t.erofs"
    build(kiln, t, img, ok=True)
    assert assert_clean_names(kiln, img, kernel_mount) == \
        ["d", "f", "k", "k/y", "s"]
    with kernel_mount(img) as mnt:
        assert (mnt / "f").read_bytes() == b"two"
        assert (mnt / "d").read_bytes() == b"d is a file now"
        assert os.readlink(mnt / "s") == "f"
        assert (mnt / "k/y").read_bytes() == b"y"


def test_member_under_a_file_refused(kiln, tmp_path):
    t = write_tar(tmp_path / "t.tar", [("e", "file", {"data": b"3"}),
                                      ("e/y", "file", {"data": b"4"})])
    r = build(kiln, t, tmp_path / "t.erofs", ok=False)
    assert "t.tar: e/y: parent 'e' is not a directory" in r.err, r.err


@pytest.mark.parametrize("entries,what", [
    ([("l", "hard", {"target": "f"}), ("f", "file", {"data": b"x"})],
     "hardlink target 'f' not earlier in the archive"),
    ([("l", "hard", {"target": "nowhere"})],
     "hardlink target 'nowhere' not earlier in the archive"),
    ([("d", "dir", {}), ("l", "hard", {"target": "d"})],
     "hardlink to a directory"),
    ([("l", "hard", {"target": "."})], "hardlink to the root"),
])
def test_bad_hardlinks_refused(kiln, tmp_path, entries, what):
    t = write_tar(tmp_path / "t.tar", entries)
    r = build(kiln, t, tmp_path / "t.erofs", ok=False)
    assert f"t.tar: l: {what}" in r.err, r.err


def test_symlink_loops_stored_as_links(kiln, tmp_path, kernel_mount):
    t = write_tar(tmp_path / "t.tar", [
        ("a", "sym", {"target": "b"}), ("b", "sym", {"target": "a"}),
        ("c", "sym", {"target": "c"}), ("d", "dir", {}),
        ("d/up", "sym", {"target": ".."}),
        ("d/self", "sym", {"target": "../d/self"}),
    ])
    img = tmp_path / "t.erofs"
    build(kiln, t, img, ok=True)
    assert assert_clean_names(kiln, img, kernel_mount) == \
        ["a", "b", "c", "d", "d/self", "d/up"]
    with kernel_mount(img) as mnt:
        assert os.readlink(mnt / "a") == "b"
        for n in ("a", "c", "d/self"):
            with pytest.raises(OSError) as e:
                (mnt / n).read_bytes()
            assert e.value.errno == 40      # ELOOP
    # kiln's own resolver stops too
    for n in ("/a", "/c"):
        r = kiln.fails("cat", img, n)
        assert f"{n}: too many levels of symbolic links" in r.err, r.err


def test_devices_built_by_an_ordinary_user(kiln, kernel_mount, need_root,
                                           request):
    """Device members are data in the archive: any user can build them
    (no mknod), and the kernel sees the device numbers."""
    if not have("setpriv"):
        pytest.fail("setpriv (util-linux) is missing")
    # a directory the user can reach (pytest's tmp_path is root's alone)
    work = Path(tempfile.mkdtemp(prefix="kiln-user-"))
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    os.chmod(work, 0o755)
    write_tar(work / "t.tar", [
        ("dev/null", "chr", {"dev": (1, 3), "mode": 0o666}),
        ("dev/sda", "blk", {"dev": (8, 0), "mode": 0o660}),
    ])
    os.chown(work, 65534, 65534)
    os.chown(work / "t.tar", 65534, 65534)
    img = work / "t.erofs"
    kiln.ok("build", "--tar", work / "t.tar", img,
            wrapper=("setpriv", "--reuid=65534", "--regid=65534",
                     "--clear-groups"))
    assert os.stat(img).st_uid == 65534
    assert assert_clean_names(kiln, img, kernel_mount) == \
        ["dev", "dev/null", "dev/sda"]
    with kernel_mount(img) as mnt:
        c = os.lstat(mnt / "dev/null")
        assert stat.S_ISCHR(c.st_mode) and c.st_rdev == os.makedev(1, 3)
        b = os.lstat(mnt / "dev/sda")
        assert stat.S_ISBLK(b.st_mode) and b.st_rdev == os.makedev(8, 0)


def test_device_numbers_at_the_limit_kept(kiln, tmp_path, kernel_mount):
    """The largest major (4095) and minor (1048575) the image stores come
    back as they were (GNU tar writes them in base-256 fields)."""
    t = write_tar(tmp_path / "t.tar", [
        ("max", "chr", {"dev": (4095, 1048575)}),
        ("mixed", "blk", {"dev": (259, 300000)}),
    ], fmt=tarfile.GNU_FORMAT)
    img = tmp_path / "t.erofs"
    kiln.ok("build", "--tar", t, img)
    kiln.ok("fsck", img)
    with kernel_mount(img) as mnt:
        c = os.lstat(mnt / "max")
        assert stat.S_ISCHR(c.st_mode)
        assert (os.major(c.st_rdev), os.minor(c.st_rdev)) == (4095, 1048575)
        b = os.lstat(mnt / "mixed")
        assert stat.S_ISBLK(b.st_mode)
        assert (os.major(b.st_rdev), os.minor(b.st_rdev)) == (259, 300000)


@pytest.mark.parametrize("dev", [
    (4096, 0), (0, 1 << 20),
    ((1 << 32) + 1, 3), (1, (1 << 32) + 3),  # 1:3 once cut to 32 bits
    (1 << 40, 1 << 40)], ids=str)
def test_device_numbers_beyond_erofs_refused(kiln, tmp_path, dev):
    t = write_tar(tmp_path / "t.tar", [
        ("ok", "file", {"data": b"1"}),
        ("dev/big", "blk", {"dev": dev}),
    ], fmt=tarfile.GNU_FORMAT)
    img = tmp_path / "t.erofs"
    r = kiln.fails("build", "--tar", t, img)
    assert "dev/big" in r.err and f"{dev[0]}:{dev[1]}" in r.err, r.describe()
    assert "majors up to 4095 and minors up to 1048575" in r.err, r.err
    assert not img.exists()
    assert stray_files(tmp_path, keep=("t.tar",)) == [], r.describe()


# -- sizes that lie, truncated members --------------------------------------

def test_size_larger_than_the_data(kiln, tmp_path):
    t = tmp_path / "t.tar"
    t.write_bytes(header(b"first", 1) + blocks(b"1") +
                  header(b"liar", 100000) + blocks(b"only this") + END)
    r = build(kiln, t, tmp_path / "t.erofs", ok=False)
    assert "t.tar: liar" in r.err and "runcated" in r.err, r.err


def test_size_smaller_than_the_data(kiln, tmp_path):
    """The bytes past the claimed size are read as the next header: its
    checksum fails, and the error names the member before it."""
    t = tmp_path / "t.tar"
    t.write_bytes(header(b"liar", 10) + blocks(b"z" * 3000) + END)
    r = build(kiln, t, tmp_path / "t.erofs", ok=False)
    assert "t.tar: liar (after it)" in r.err, r.err


def test_huge_claimed_size_fails_fast(kiln, tmp_path):
    """A few KiB claiming exabytes (base-256 size field), compressed or
    stored: refused at once, no allocation sized by the claim."""
    size = b"\x80" + (2 ** 62).to_bytes(11, "big")
    t = tmp_path / "t.tar"
    t.write_bytes(header(b"huge", size_field=size) + blocks(b"q" * 5000) +
                  END)
    for opts in ((), ("-z", "lz4")):
        r = kiln.run("build", *opts, "--tar", t, tmp_path / "t.erofs",
                     timeout=30)
        assert r.rc != 0, r.describe()
        assert "t.tar: huge" in r.err, r.err
        assert not (tmp_path / "t.erofs").exists()


def test_sparse_claim_without_sparse_map_fails(kiln, tmp_path):
    """pax GNU.sparse headers libarchive cannot read, claiming 2^62 bytes:
    the member's data ends early; the missing bytes are not holes."""
    t = tmp_path / "t.tar"
    with tarfile.open(t, "w", format=tarfile.PAX_FORMAT) as tf:
        ti = tarfile.TarInfo("sparsehuge")
        ti.size = 4096
        ti.pax_headers = {"GNU.sparse.major": "0", "GNU.sparse.minor": "0",
                          "GNU.sparse.name": "sparsehuge",
                          "GNU.sparse.realsize": str(2 ** 62)}
        tf.addfile(ti, io.BytesIO(b"s" * 4096))
    for opts in ((), ("-z", "lz4")):
        r = kiln.run("build", *opts, "--tar", t, tmp_path / "t.erofs",
                     timeout=30)
        assert r.rc != 0, r.describe()
        assert re.search(r"t\.tar: sparsehuge: (file data ends early|"
                         r"\d+ bytes of data: more than an image of 2\^32 "
                         r"blocks holds)", r.err), r.err
        assert not (tmp_path / "t.erofs").exists()


@pytest.mark.parametrize("cut", [100, 512 + 100, 512 + 3000])
def test_truncated_member(kiln, tmp_path, cut):
    """Cut inside a header, inside the data, between records."""
    data = header(b"m", 8000) + blocks(b"m" * 8000) + END
    t = tmp_path / "t.tar"
    t.write_bytes(data[:cut])
    out = tmp_path / "out"
    out.mkdir()
    r = build(kiln, t, out / "t.erofs", ok=False)
    assert "t.tar" in r.err and ("runcated" in r.err or "amaged" in r.err), \
        r.err
    if cut > 512:
        assert "t.tar: m" in r.err, r.err
    assert stray_files(out) == []


# -- decompression bombs ---------------------------------------------------

BOMB = 256 << 20        # bytes of zeros in the archive's one member


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    """gzip and zstd tars of one BOMB-byte member of zeros (KiB each)."""
    d = tmp_path_factory.mktemp("bomb")
    hdr = header(b"zeros", BOMB)
    out = {}
    cmds = {"gz": ["gzip", "-1", "-c"], "zst": ["zstd", "-1", "-q", "-c"]}
    for ext, cmd in cmds.items():
        if not have(cmd[0]):
            pytest.fail(f"{cmd[0]} is missing")
        path = d / f"bomb.tar.{ext}"
        with open(path, "wb") as f:
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=f)
            p.stdin.write(hdr)
            chunk = bytes(1 << 20)
            for _ in range(BOMB >> 20):
                p.stdin.write(chunk)
            p.stdin.write(END)
            p.stdin.close()
            assert p.wait() == 0
        out[ext] = path
    return out


def max_rss_kib(result):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.err)
    assert m, result.err[-2000:]
    return int(m.group(1))


@pytest.fixture
def small_tmpfs(tmp_path, need_root):
    """A 32 MiB tmpfs: the bound on the image and any temporary file."""
    with tmpfs_mount(tmp_path / "small", "32M") as d:
        yield d


@pytest.mark.nosanitize
@pytest.mark.parametrize("ext", ["gz", "zst"])
def test_bomb_bounded_by_memory_limit(kiln, tmp_path, bombs, ext,
                                      kernel_mount):
    """Compressed, 256 MiB of zeros build into a small image with the RSS
    bounded by --memory-limit, not by the member's size."""
    img = tmp_path / "b.erofs"
    r = kiln.ok("build", "-z", "lz4", "-j2", "--memory-limit", "16M",
                "--tar", bombs[ext], img, timeout=120,
                wrapper=("/usr/bin/time", "-v"))
    rss = max_rss_kib(r)
    assert rss < 96 * 1024, f"peak RSS {rss} KiB for a 16 MiB limit"
    assert os.path.getsize(img) < 4 << 20
    with kernel_mount(img) as mnt:
        assert os.path.getsize(mnt / "zeros") == BOMB
        with open(mnt / "zeros", "rb") as f:
            f.seek(BOMB - 4096)
            assert f.read() == bytes(4096)


def test_bomb_stored_raw_hits_the_disk_bound(kiln, bombs, small_tmpfs):
    """Stored uncompressed the member needs 256 MiB: on a 32 MiB
    filesystem (the image's and TMPDIR's) the build fails with the reason,
    leaves nothing there, and stops (no unbounded temporary files)."""
    img = small_tmpfs / "b.erofs"
    r = kiln.fails("build", "--tar", bombs["gz"], img, timeout=120,
                   env={"TMPDIR": str(small_tmpfs)})
    assert "No space left on device" in r.err or \
        "no space left on device" in r.err, r.err
    assert stray_files(small_tmpfs) == []
    st = os.statvfs(small_tmpfs)
    assert st.f_bfree == st.f_blocks, "space still held on the tmpfs"
