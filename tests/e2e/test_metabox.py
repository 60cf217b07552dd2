# SPDX-License-Identifier: MIT
"""Metadata-compressed (metabox) images: inodes, xattrs, inline tails,
directories and compressed-file indexes live in the decoded data of one
regular file, the metabox inode. kiln reads them as the kernel does, and a
damaged metabox gives clean errors.

The images come from erofs-utils' mkfs.erofs 1.9 or newer (-m); with an
older one on PATH these tests skip, naming the version they saw."""

import collections
import os
import random
import re
import shutil
import struct
import subprocess

import pytest

from helpers import assert_same, have, tree_compare
from test_mkfs_erofs_compat import regular_files

SB = 1024                       # superblock offset
SB_FEATURE_COMPAT = SB + 0x08
SB_EXTSLOTS = SB + 0x0D
SB_META_BLKADDR = SB + 0x28
SB_INCOMPAT = SB + 0x50
SB_ROOTNID_8B = SB + 0x70
SB_METABOX_NID = SB + 0x80
COMPAT_SB_CHKSUM = 0x1
INCOMPAT_METABOX = 0x100
NID_METABOX = 1 << 63


def mkfs_version():
    if not have("mkfs.erofs"):
        return None
    r = subprocess.run(["mkfs.erofs", "--version"], capture_output=True,
                       text=True)
    m = re.search(r"(\d+)\.(\d+)", r.stdout) if r.returncode == 0 else None
    return (int(m.group(1)), int(m.group(2))) if m else (1, 5)


def _skip_reason():
    v = mkfs_version()
    if v is None:
        return "mkfs.erofs (erofs-utils) not installed"
    if v < (1, 9):
        return ("metabox images need mkfs.erofs 1.9 or newer on PATH, "
                "found %d.%d" % v)
    return None


pytestmark = [pytest.mark.sanitize,
              pytest.mark.skipif(_skip_reason() is not None,
                                 reason=_skip_reason() or "")]


def mkfs(src, img, opts):
    r = subprocess.run(["mkfs.erofs", "--quiet", *opts, str(img), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"mkfs.erofs {' '.join(opts)}: {r.stderr}"
    return img


def superblock(img):
    """Superblock fields dump.erofs shows, as a dict."""
    r = subprocess.run(["dump.erofs", "-s", str(img)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    kv = {}
    for line in r.stdout.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            kv[k.strip()] = v.strip()
    return kv


# name -> mkfs.erofs options; every one sets -m (metadata compression)
VARIANTS = {
    # no data compression: the metabox inode is stored flat
    "plain": ["-m4096"],
    "lz4hc": ["-zlz4hc", "-m4096"],
    "lz4hc-16k-meta": ["-zlz4hc", "-C65536", "-m16384:lz4hc"],
    "lz4-meta-zstd": ["-zlz4", "-m4096:zstd"],
    "zstd-64k": ["-zzstd", "-C65536", "-m16384"],
    "zstd-shared-xattrs": ["-zzstd", "-m4096", "-x1"],
    "lzma-fragments-ztailpacking-48bit": [
        "-zlzma", "-C65536", "-m4096", "-Efragments,ztailpacking,48bit"],
    "deflate-compressed-dirs": ["-zdeflate", "-C16384", "-m8192", "--zD=1"],
    "lz4hc-ztailpacking": ["-zlz4hc", "-Eztailpacking", "-m4096"],
    "zstd-all-fragments-dedupe": ["-zzstd", "-Eall-fragments,dedupe",
                                  "-m4096"],
    "chunked": ["--chunksize=4096", "-m4096"],
    # long xattr name prefixes: their table lives in the metabox too
    "long-xattr-prefixes": ["-zlz4hc", "-m4096", "--xattr-prefix=user.attr",
                            "--xattr-prefix=user.uniq", "-x1"],
}


@pytest.fixture(scope="session")
def mbx_tree(make_tree):
    # 1000 entries in one directory: multi-block directories in the metabox
    return make_tree("metabox", seed=5, many=1000)


@pytest.fixture(scope="session")
def mbx_images(mbx_tree, tmp_path_factory):
    """Images built lazily, once per variant."""
    d = tmp_path_factory.mktemp("metabox-images")
    made = {}

    def get(variant):
        if variant not in made:
            made[variant] = mkfs(mbx_tree.root, d / f"{variant}.erofs",
                                 VARIANTS[variant])
        return made[variant]
    return get


def ls_lines(kiln, img):
    """`kiln ls -R -a /` as a multiset of entry lines (headers dropped)."""
    out = kiln.ok("ls", "-R", "-a", img, "/", timeout=300).out
    lines = out.split(b"\n")
    headers = sum(1 for l in lines if l.startswith(b"/"))
    return headers, collections.Counter(
        l for l in lines if l and not l.startswith(b"/"))


def walk_lines(mnt):
    dirs = 0
    names = collections.Counter()
    for dirpath, dirnames, filenames in os.walk(os.fsencode(mnt)):
        dirs += 1
        for n in [b".", b".."] + dirnames + filenames:
            names.update(x for x in n.split(b"\n") if x)
    return dirs, names


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_kiln_reads_metabox_images_like_the_kernel(
        kiln, mbx_images, scratch, kernel_mount, need_root, variant):
    img = mbx_images(variant)
    sb = superblock(img)
    assert "metabox" in sb["Filesystem incompatible features"].split()
    kiln.ok("fsck", img, timeout=300)
    with kernel_mount(img) as mnt:
        dest = scratch / "out"
        dest.mkdir()
        kiln.ok("extract", img, dest, timeout=600)
        tree_compare(mnt, dest, root_attrs=False)

        assert ls_lines(kiln, img) == walk_lines(mnt), "kiln ls -R -a /"

        rng = random.Random(variant)
        for rel in regular_files(mnt, rng):
            with open(os.path.join(os.fsencode(mnt), rel), "rb") as f:
                want = f.read()
            got = kiln.ok("cat", img, b"/" + rel).out
            assert got == want, f"kiln cat /{rel!r} differs from the mount"


def test_the_variants_put_the_root_in_the_metabox(mbx_images):
    """What the variants cover: the root inode is a metabox nid (from the
    superblock's 64-bit root field). (erofs-utils 1.9 keeps the shared
    xattr area outside the metabox: SHARED_EA_IN_METABOX is never set.)"""
    for variant in ("lz4hc", "chunked", "zstd-shared-xattrs"):
        sb = superblock(mbx_images(variant))
        assert int(sb["Filesystem root nid"]) & NID_METABOX, variant
    sb = superblock(mbx_images("long-xattr-prefixes"))
    assert "plain_xattr_pfx" not in \
        sb["Filesystem compatible features"].split()


def test_kiln_mount_of_a_metabox_image_matches_the_kernel(
        kiln, mbx_images, need_root):
    from test_mount import fuse_unavailable, mount_vs_kernel
    why = fuse_unavailable()
    if why:
        pytest.skip(why)
    img = mbx_images("lzma-fragments-ztailpacking-48bit")
    diffs, _, _ = mount_vs_kernel(kiln, img)
    assert_same(diffs, "kiln mount of a metabox image vs the kernel's mount")


# -- damaged metaboxes -------------------------------------------------------

@pytest.fixture(scope="session")
def small_mbx(make_tree, tmp_path_factory):
    """A small lz4hc metabox image and its metabox inode's extents."""
    tree = make_tree("metabox-small", seed=11, many=200, light=True)
    img = mkfs(tree.root, tmp_path_factory.mktemp("mbx-small") / "s.erofs",
               ["-zlz4hc", "-m4096", "-Eztailpacking", "-x1"])
    return img


def patched(src, dst, fn):
    d = bytearray(open(src, "rb").read())
    d[SB_FEATURE_COMPAT] &= ~COMPAT_SB_CHKSUM & 0xFF  # keep damage visible
    fn(d)
    open(dst, "wb").write(d)
    return dst


def metabox_nid(d):
    return struct.unpack_from("<Q", d, SB_METABOX_NID)[0]


def metabox_inode_off(d):
    meta_blkaddr = struct.unpack_from("<I", d, SB_META_BLKADDR)[0]
    return meta_blkaddr * 4096 + metabox_nid(d) * 32


def metabox_pclusters(img):
    """(offset, length) of each pcluster of the metabox inode."""
    nid = metabox_nid(open(img, "rb").read(SB + 256))
    r = subprocess.run(["dump.erofs", "-e", f"--nid={nid}", str(img)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = []
    for m in re.finditer(r"\|\s*\d+\s*:\s*(\d+)\.\.\s*(\d+)\s*\|", r.stdout):
        out.append((int(m.group(1)), int(m.group(2)) - int(m.group(1))))
    assert out, r.stdout
    return out


def fails_cleanly(kiln, img, *expect):
    r = kiln.fails("fsck", img, timeout=120)
    for e in expect:
        assert e in r.err, r.describe()
    kiln.run("ls", "-R", img, "/")
    return r


def test_a_metabox_nid_in_the_metabox_is_a_self_loop(kiln, small_mbx,
                                                     tmp_path):
    def fn(d):
        struct.pack_into("<Q", d, SB_METABOX_NID, metabox_nid(d) | NID_METABOX)
    img = patched(small_mbx, tmp_path / "loop.erofs", fn)
    fails_cleanly(kiln, img, "self-loop")


def test_a_metabox_nid_past_the_image_end(kiln, small_mbx, tmp_path):
    def fn(d):
        struct.pack_into("<Q", d, SB_METABOX_NID, 1 << 40)
    img = patched(small_mbx, tmp_path / "far.erofs", fn)
    fails_cleanly(kiln, img, "outside the image")


def test_a_metabox_that_is_not_a_regular_file(kiln, small_mbx, tmp_path):
    def fn(d):
        off = metabox_inode_off(d)
        mode = struct.unpack_from("<H", d, off + 4)[0]
        struct.pack_into("<H", d, off + 4, (mode & 0o7777) | 0o040000)
    img = patched(small_mbx, tmp_path / "dir.erofs", fn)
    fails_cleanly(kiln, img, "not a regular file")


def test_a_metabox_without_the_superblock_slot_for_its_nid(kiln, small_mbx,
                                                           tmp_path):
    def fn(d):
        d[SB_EXTSLOTS] = 0
    img = patched(small_mbx, tmp_path / "slots.erofs", fn)
    fails_cleanly(kiln, img, "metabox")


def test_a_metabox_larger_than_its_data(kiln, small_mbx, tmp_path):
    def fn(d):
        off = metabox_inode_off(d)
        assert struct.unpack_from("<H", d, off)[0] & 1 == 0  # compact
        struct.pack_into("<I", d, off + 8, 0xFFFFF000)
    img = patched(small_mbx, tmp_path / "size.erofs", fn)
    kiln.fails("fsck", img, timeout=120)
    kiln.run("ls", "-R", img, "/")


def test_a_root_nid_past_the_metabox_end(kiln, small_mbx, tmp_path):
    def fn(d):
        struct.pack_into("<Q", d, SB_ROOTNID_8B, NID_METABOX | (1 << 40))
    img = patched(small_mbx, tmp_path / "root.erofs", fn)
    fails_cleanly(kiln, img, "outside the metabox")


def test_metabox_nids_without_a_metabox_are_corrupt(kiln, small_mbx,
                                                    tmp_path):
    def fn(d):
        v = struct.unpack_from("<I", d, SB_INCOMPAT)[0]
        struct.pack_into("<I", d, SB_INCOMPAT, v & ~INCOMPAT_METABOX)
    img = patched(small_mbx, tmp_path / "nombx.erofs", fn)
    fails_cleanly(kiln, img, "metabox the image lacks")


def test_bit_flips_in_the_metabox_pclusters_fail_cleanly(kiln, small_mbx,
                                                         tmp_path):
    """Every flip either leaves a readable image or gives an error with a
    message; none crashes, hangs or trips a sanitizer. Most are caught."""
    rng = random.Random(3)
    pclusters = metabox_pclusters(small_mbx)
    spots = []
    for off, length in rng.sample(pclusters, min(len(pclusters), 8)):
        spots += [off + rng.randrange(length) for _ in range(6)]
    caught = 0
    for i, pos in enumerate(spots):
        bit = 1 << rng.randrange(8)

        def fn(d, pos=pos, bit=bit):
            d[pos] ^= bit
        img = patched(small_mbx, tmp_path / f"flip{i}.erofs", fn)
        r = kiln.run("fsck", img, timeout=120)
        if r.rc:
            caught += 1
            assert r.err.strip(), r.describe()
        kiln.run("extract", img, tmp_path / f"x{i}", timeout=120)
        shutil.rmtree(tmp_path / f"x{i}", ignore_errors=True)
        os.unlink(img)
    # flipped literals (names, times) decode to other valid metadata
    assert caught, f"none of {len(spots)} flips was noticed"
