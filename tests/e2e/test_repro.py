# SPDX-License-Identifier: MIT
"""Hostile inputs: a tar whose sparse member claims 2^62 bytes, an inode
whose size runs past the image end, a directory cycle, an entry renamed to
"..", a name of 1,200 bytes. Each test makes its input (tarfile, or a good
image patched in place); the reproducers in ../shared/repro, when that
directory is there, are run too."""

import io
import lzma
import os
import struct
import sys
import tarfile
import time

import pytest

from helpers import DATA, REPO

sys.path.insert(0, str(DATA))
import mkcorrupt  # noqa: E402

REPRO = REPO.parent / "shared" / "repro"


def repro(name, tmp_path):
    """The decompressed reproducer @name, or None when it is not there."""
    src = REPRO / (name + ".xz")
    if not src.is_file():
        return None
    dst = tmp_path / name
    dst.write_bytes(lzma.decompress(src.read_bytes()))
    return dst


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0xFFFFFFFF):
    """EROFS's superblock checksum: CRC32C, no final inversion."""
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def reseal(buf):
    """Recompute the superblock checksum of @buf, if it has one."""
    sb = mkcorrupt.SB_OFF
    if not struct.unpack_from("<I", buf, sb + 8)[0] & 1:
        return
    bs = 1 << buf[sb + 12]
    end = min(len(buf), sb + (bs - sb if bs > sb else bs))
    region = bytearray(buf[sb:end])
    region[4:8] = b"\0\0\0\0"
    struct.pack_into("<I", buf, sb + 4, crc32c(region))


def patched(good, edits):
    buf = bytearray(good)
    for off, b in edits:
        buf[off:off + len(b)] = b
    reseal(buf)
    return bytes(buf)


def entry(img, dir_path, name):
    """(dirent offset, nid) of @name in directory @dir_path."""
    dino = next(i for i in img.inodes.values() if i.path == dir_path)
    for n, nid, _ft, off, i, _no in img.dirs[dino.nid]:
        if n == name:
            return off + 12 * i, nid
    pytest.fail(f"no {name!r} in {dir_path}")


def name_off(img, dir_path, name):
    """Image offset of the bytes of @name in directory @dir_path."""
    dino = next(i for i in img.inodes.values() if i.path == dir_path)
    for n, _nid, _ft, off, _i, no in img.dirs[dino.nid]:
        if n == name:
            return off + no
    pytest.fail(f"no {name!r} in {dir_path}")


@pytest.fixture
def tree(tmp_path):
    """A few directories, a file of 10,000 random bytes (two blocks and an
    inline tail), a couple of small ones."""
    root = tmp_path / "tree"
    (root / "sub" / "deep" / "deeper").mkdir(parents=True)
    (root / "d1" / "inner").mkdir(parents=True)
    (root / "d1" / "inner" / "f").write_bytes(b"inside d1\n")
    (root / "sub" / "deep" / "g").write_bytes(b"deep file\n")
    (root / "blob").write_bytes(os.urandom(10000))
    (root / "small").write_bytes(b"small\n")
    return root


@pytest.fixture
def good(kiln, tree, tmp_path):
    img = tmp_path / "good.img"
    kiln.build(tree, img)
    kiln.ok("fsck", img)
    return img


# -- a sparse member that claims 2^62 bytes --------------------------------

def sparse_tar(path, size, extents, name="sparse"):
    """A pax archive with one GNU sparse 1.0 member of @size bytes: the
    map (decimal lines in the member's first data block) comes before the
    data of each (offset, bytes) extent."""
    lines = [str(len(extents))] + [f"{o}\n{len(d)}" for o, d in extents]
    body = ("\n".join(lines) + "\n").encode()
    body += b"\0" * (-len(body) % 512)
    body += b"".join(d for _o, d in extents)
    ti = tarfile.TarInfo("GNUSparseFile.0/" + name)
    ti.size = len(body)
    ti.mode = 0o644
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                      "GNU.sparse.name": name,
                      "GNU.sparse.realsize": str(size)}
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        t.addfile(ti, io.BytesIO(body))


def _refuses_fast(kiln, tar, img, *opts):
    t0 = time.monotonic()
    r = kiln.fails("build", *opts, "--tar", tar, img, timeout=60)
    assert time.monotonic() - t0 < 30, r.describe()
    assert "sparse" in r.err and "holes" in r.err, r.describe()
    assert not img.exists(), "a refused build left an image behind"


@pytest.mark.parametrize("opts", [(), ("-z", "lz4"), ("--verify",)],
                         ids=["plain", "lz4", "verify"])
def test_sparse_member_claiming_2e62_bytes_is_refused_at_once(kiln, tmp_path,
                                                             opts):
    tar = tmp_path / "huge.tar"
    size = 1 << 62
    sparse_tar(tar, size, [(size - 4096, b"x" * 4096)])
    _refuses_fast(kiln, tar, tmp_path / "x.img", *opts)


def test_sparse_repro_is_refused_at_once(kiln, tmp_path):
    tar = repro("sparse-2e62.tar", tmp_path)
    if tar is None:
        return      # the generated archive above covers it
    _refuses_fast(kiln, tar, tmp_path / "x.img")


def _sparse_reads_back(kiln, tmp_path, kernel_mount, size, *opts):
    tar = tmp_path / "holes.tar"
    head, tail = os.urandom(4096), os.urandom(4096)
    sparse_tar(tar, size, [(0, head), (size - 4096, tail)])
    img = tmp_path / "holes.img"
    kiln.ok("build", *opts, "--tar", tar, img, timeout=120)
    kiln.ok("fsck", "--no-data", img)
    with kernel_mount(img) as mnt:
        f = mnt / "sparse"
        assert f.stat().st_size == size
        with open(f, "rb") as fh:
            assert os.pread(fh.fileno(), 4096, 0) == head
            assert os.pread(fh.fileno(), 4096, size - 4096) == tail
            assert os.pread(fh.fileno(), 4096, size // 2) == bytes(4096)
    return img


def test_sparse_holes_cost_no_writes(kiln, tmp_path, kernel_mount):
    """100 GiB of holes and 8 KiB of data: a small image, built at once,
    and the kernel reads the data where the archive put it."""
    t0 = time.monotonic()
    img = _sparse_reads_back(kiln, tmp_path, kernel_mount, 100 << 30)
    assert time.monotonic() - t0 < 20
    assert img.stat().st_size < 16 << 20, img.stat().st_size


def test_sparse_member_within_the_bound_compresses(kiln, tmp_path,
                                                   kernel_mount):
    _sparse_reads_back(kiln, tmp_path, kernel_mount, 256 << 20, "-z", "lz4")


# -- a size that runs past the image end -----------------------------------

def _fuse():
    import test_mount
    why = test_mount.fuse_unavailable()
    if why:
        pytest.skip(why)
    return test_mount.kiln_mount


def _reads_never_short(kiln, img, path, off, length):
    """Through kiln mount, pread(@length @ @off) of @path fails with EIO
    rather than coming back short; so does a read of the first bytes."""
    kiln_mount = _fuse()
    with kiln_mount(kiln, img) as m:
        fd = os.open(m.mnt / path.lstrip("/"), os.O_RDONLY)
        try:
            for o, n in ((off, length), (0, 4096)):
                try:
                    got = len(os.pread(fd, n, o))
                except OSError as e:
                    assert e.errno == 5, e
                    continue
                pytest.fail(f"pread({n} @ {o}) returned {got} bytes of a "
                            f"file whose blocks run past the image end")
        finally:
            os.close(fd)


def test_size_past_the_image_end_reads_eio_never_short(kiln, good, tmp_path):
    data = good.read_bytes()
    img = mkcorrupt.Image(data)
    ino = next(i for i in img.inodes.values() if i.path == "/blob")
    assert ino.layout in (mkcorrupt.FLAT_PLAIN, mkcorrupt.FLAT_INLINE)
    # keep the tail's length (the inline tail stays where it is), run the
    # blocks far past the end
    if ino.extended:
        new = ino.size + (1 << 55)
        edit = (ino.off + 8, struct.pack("<Q", new))
    else:
        new = ino.size + ((0xFFFFFFFF - ino.size) // img.bs) * img.bs
        edit = (ino.off + 8, struct.pack("<I", new))
    bad = tmp_path / "bad.img"
    bad.write_bytes(patched(data, [edit]))
    # a read that crosses the image end: 2 KiB before it, 10 KiB long
    off = len(data) - 2048 - ino.u * img.bs
    assert off > 0
    _reads_never_short(kiln, bad, "/blob", off, 10240)
    r = kiln.fails("cat", bad, "/blob")
    assert "past the image end" in r.err, r.describe()
    kiln.fails("fsck", bad)


def test_short_read_repro_reads_eio(kiln, tmp_path):
    img = repro("fuse-short-read.img", tmp_path)
    if img is None:
        return
    _reads_never_short(kiln, img, "/many/entry_with_longish_name_91",
                       583680, 10240)


# -- a directory cycle, an entry renamed to ".." ---------------------------

def _walks_report(kiln, img, scratch, words):
    """ls -R, extract and fsck all exit non-zero and say @words."""
    r = kiln.fails("ls", "-R", img, "/")
    assert all(w in r.err for w in words), r.describe()
    r = kiln.fails("extract", img, scratch / "x")
    assert all(w in r.err for w in words), r.describe()
    kiln.fails("fsck", img)


def test_directory_cycle_is_reported_by_ls_and_extract(kiln, good, tmp_path,
                                                       scratch):
    data = good.read_bytes()
    img = mkcorrupt.Image(data)
    off, _nid = entry(img, "/sub", b"deep")
    bad = tmp_path / "cycle.img"
    bad.write_bytes(patched(data, [(off, struct.pack("<Q", img.root_nid))]))
    _walks_report(kiln, bad, scratch, ("/sub/deep", "second time"))


def test_entry_renamed_to_dotdot_is_reported_by_ls_and_extract(kiln, good,
                                                               tmp_path,
                                                               scratch):
    data = good.read_bytes()
    img = mkcorrupt.Image(data)
    bad = tmp_path / "dotdot.img"
    bad.write_bytes(patched(data, [(name_off(img, "/", b"d1"), b"..")]))
    _walks_report(kiln, bad, scratch, ('".."', "parent"))
    # a plain ls of the directory says it too
    r = kiln.fails("ls", bad, "/")
    assert '".."' in r.err, r.describe()


def test_entry_renamed_to_dot_is_reported(kiln, tmp_path, scratch):
    root = tmp_path / "t"
    (root / "a" / "x").mkdir(parents=True)
    (root / "a" / "x" / "f").write_bytes(b"f\n")
    good = tmp_path / "g.img"
    kiln.build(root, good)
    data = good.read_bytes()
    img = mkcorrupt.Image(data)
    bad = tmp_path / "dot.img"
    bad.write_bytes(patched(data, [(name_off(img, "/a", b"x"), b".")]))
    _walks_report(kiln, bad, scratch, ('"."', "/a"))


@pytest.mark.parametrize("name,words", [
    ("dir-cycle.img", ("second time",)),
    ("dotdot-entry.img", ('".."',)),
])
def test_walk_repros_are_reported(kiln, tmp_path, scratch, name, words):
    img = repro(name, tmp_path)
    if img is None:
        return
    _walks_report(kiln, img, scratch, words)


# -- long messages ---------------------------------------------------------

def _long_name_fails_whole(kiln, tar, img):
    r = kiln.fails("build", "--tar", tar, img)
    assert "name component longer than 255 bytes" in r.err, r.describe()
    assert "L" * 1200 in r.err, "the name was cut:\n" + r.err[-300:]


def test_error_after_a_1200_byte_name_arrives_whole(kiln, tmp_path):
    tar = tmp_path / "long.tar"
    ti = tarfile.TarInfo("d/" + "L" * 1200)
    ti.size = 3
    with tarfile.open(tar, "w", format=tarfile.PAX_FORMAT) as t:
        t.addfile(ti, io.BytesIO(b"abc"))
    _long_name_fails_whole(kiln, tar, tmp_path / "x.img")


def test_long_name_repro_arrives_whole(kiln, tmp_path):
    tar = repro("longname-1200.tar", tmp_path)
    if tar is None:
        return
    r = kiln.fails("build", "--tar", tar, tmp_path / "x.img")
    assert "name component longer than 255 bytes" in r.err, r.describe()


def test_corrupt_message_after_a_long_path_arrives_whole(kiln, tmp_path):
    """A reader's corruption report for a file deep in a tree of long
    names keeps its reason."""
    root = tmp_path / "t"
    deep = root
    for k in range(6):
        deep = deep / (chr(ord("a") + k) * 250)
    deep.mkdir(parents=True)
    (deep / "blob").write_bytes(os.urandom(10000))
    good = tmp_path / "g.img"
    kiln.build(root, good)
    data = good.read_bytes()
    img = mkcorrupt.Image(data)
    ino = next(i for i in img.inodes.values() if i.path.endswith("/blob"))
    size = ino.size + ((0xFFFFFFFF - ino.size) // img.bs) * img.bs
    edit = (ino.off + 8, struct.pack("<Q" if ino.extended else "<I", size))
    bad = tmp_path / "bad.img"
    bad.write_bytes(patched(data, [edit]))
    r = kiln.fails("fsck", bad)
    line = next(l for l in r.err.splitlines() if "/blob" in l)
    assert len(line) > 1500 and "past the image end" in line, r.describe()

