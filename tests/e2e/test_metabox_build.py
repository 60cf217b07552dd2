# SPDX-License-Identifier: MIT
"""kiln build --metabox: every inode but the packed one lives in the
compressed content of the metabox inode (Linux 6.17+). The kernel must
mount such images and give back every byte and attribute; kiln's reader,
fsck and extract must read them; the images must be smaller than without
the metabox, and the same for every thread count."""

import os
import random

import pytest

from helpers import tree_compare
from test_compress import text
from test_fragments import mount_compare

pytestmark = pytest.mark.sanitize

CONFIGS = {
    "zstd": ["-z", "zstd"],
    "zstd-128k": ["-z", "zstd:3", "-C", "131072"],
    "zstd-classic": ["-z", "zstd", "--layout", "classic", "-C", "16384"],
    "lz4hc": ["-z", "lz4hc"],
    "lz4-extents": ["-z", "lz4", "--layout", "extents"],
    "deflate-nofrag": ["-z", "deflate", "--no-fragments"],
    "lzma": ["-z", "lzma"],
    "zstd-ztailpacking": ["-z", "zstd", "--ztailpacking"],
    "lz4hc-ztailpacking": ["-z", "lz4hc", "--ztailpacking", "--no-dedupe"],
    "zstd-1k-blocks": ["-z", "zstd", "-b", "1024", "-C", "8192"],
}


@pytest.fixture(scope="session")
def many_tree(srcfs):
    """Thousands of small files with differing mtimes, a few big ones and
    directories large enough to need full directory blocks."""
    root = srcfs / "metabox-many"
    if root.exists():
        return root
    rng = random.Random(17)
    root.mkdir()
    for d in range(12):
        sub = root / f"dir-{d:02d}"
        sub.mkdir()
        for f in range(250):
            p = sub / f"file-with-a-longish-name-{f:04d}.txt"
            p.write_bytes(text(rng, rng.randrange(0, 3000)))
            t = 1_600_000_000 + rng.randrange(0, 200_000_000)
            os.utime(p, (t, t))
    (root / "big.txt").write_bytes(text(rng, 3 * 1024 * 1024 + 5))
    (root / "random.bin").write_bytes(rng.randbytes(300_001))
    os.symlink("dir-00/file-with-a-longish-name-0001.txt", root / "link")
    return root


def is_metabox_image(kiln, img):
    info = kiln.info(img)
    assert "metabox" in info["features_incompat"], info
    assert info["root_nid"] >= 1 << 63, "root is not in the metabox"
    assert 0 < info["metabox_nid"] < 1 << 63, info["metabox_nid"]


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_metabox_images_mount_and_read_back(kiln, rich_tree, tmp_path,
                                            kernel_mount, scratch, config):
    img = tmp_path / "m.erofs"
    r = kiln.build(rich_tree.root, img, "--metabox", *CONFIGS[config])
    assert "6.17" in r.text + r.err, "no kernel version named"
    is_metabox_image(kiln, img)
    mount_compare(img, rich_tree.root, kernel_mount)
    kiln.ok("fsck", img)
    kiln.ok("extract", img, scratch)
    tree_compare(rich_tree.root, scratch, root_attrs=False)


@pytest.mark.parametrize("config", ["zstd", "lz4hc", "lzma"])
def test_metabox_many_files_mount_and_shrink(kiln, many_tree, tmp_path,
                                             kernel_mount, scratch, config):
    on, off = tmp_path / "on.erofs", tmp_path / "off.erofs"
    kiln.build(many_tree, on, "--metabox", *CONFIGS[config])
    kiln.build(many_tree, off, *CONFIGS[config])
    is_metabox_image(kiln, on)
    mount_compare(on, many_tree, kernel_mount)
    kiln.ok("fsck", on)
    kiln.ok("extract", on, scratch)
    tree_compare(many_tree, scratch, root_attrs=False)
    # 3000 inodes of 64+ bytes each compress to a fraction
    saved = os.path.getsize(off) - os.path.getsize(on)
    assert saved >= 64 * 1024, f"the metabox saved only {saved} bytes"
    rel = "dir-03/file-with-a-longish-name-0042.txt"
    assert kiln.ok("cat", on, "/" + rel).out == (many_tree / rel).read_bytes()


@pytest.mark.parametrize("config", ["zstd", "lz4hc"])
def test_metabox_images_are_the_same_for_any_thread_count(kiln, many_tree,
                                                          tmp_path, config):
    imgs = []
    for j in ("1", "2", "8"):
        img = tmp_path / f"j{j}.erofs"
        kiln.build(many_tree, img, "-j", j, "--metabox", *CONFIGS[config])
        imgs.append(img.read_bytes())
    assert imgs[0] == imgs[1] == imgs[2]


def test_metabox_build_verifies(kiln, rich_tree, tmp_path):
    img = tmp_path / "v.erofs"
    kiln.build(rich_tree.root, img, "--metabox", "-z", "zstd", "--verify")
    is_metabox_image(kiln, img)


def test_metabox_needs_compression(kiln, rich_tree, tmp_path):
    img = tmp_path / "none.erofs"
    r = kiln.fails("build", "--metabox", rich_tree.root, img)
    assert "--metabox" in r.err
    assert not img.exists()


def test_compact_inodes_keep_distinct_mtimes_in_48bit_images(
        kiln, many_tree, tmp_path, kernel_mount):
    """In images only 6.15+ kernels mount, compact inodes store their
    mtime as seconds after the epoch: 32 bytes per inode instead of 64,
    and every mtime still comes back from the kernel."""
    img = tmp_path / "c.erofs"
    kiln.build(many_tree, img, "-z", "zstd", "--layout", "extents")
    info = kiln.info(img)
    assert "48bit" in info["features_incompat"]
    mount_compare(img, many_tree, kernel_mount)
    raw = img.read_bytes()
    base = info["meta_blkaddr"] * info["block_size"]
    with kernel_mount(img) as mnt:
        mtimes = set()
        for d in range(3):
            for f in range(0, 250, 25):
                st = os.lstat(mnt / f"dir-{d:02d}" /
                              f"file-with-a-longish-name-{f:04d}.txt")
                i_format = int.from_bytes(raw[base + st.st_ino * 32:
                                              base + st.st_ino * 32 + 2],
                                          "little")
                assert i_format & 1 == 0, "extended inode for a plain file"
                mtimes.add(st.st_mtime_ns)
        assert len(mtimes) > 20, "the tree's mtimes should differ"


@pytest.mark.parametrize("codec", ["lz4hc", "zstd"])
def test_a_metabox_too_small_to_compress_is_stored_plain(kiln, srcfs,
                                                         tmp_path,
                                                         kernel_mount, codec):
    """One directory and one small file: their inodes take less than a
    block, so compressing them cannot save one; the metabox is kept as
    plain blocks and the image is still read back by the kernel."""
    src = srcfs / f"metabox-tiny-{codec}"
    if not src.exists():
        src.mkdir()
        (src / "f").write_bytes(b"hello\n")
    img = tmp_path / "t.erofs"
    kiln.build(src, img, "--metabox", "-z", codec)
    is_metabox_image(kiln, img)
    info = kiln.info(img)
    # superblock block, the plain metabox block, the outer inode block
    assert info["blocks"] <= 4, info["blocks"]
    mount_compare(img, src, kernel_mount)
    kiln.ok("fsck", img)
    assert kiln.ok("cat", img, "/f").out == b"hello\n"
