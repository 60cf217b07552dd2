# SPDX-License-Identifier: MIT
"""Deduplication in both compressed layouts: identical extents and
pclusters (across files and inside one file) and identical uncompressed
files are stored once. Every byte must come back from a loop mount, from
kiln's own reader and through kiln fsck; the image must be smaller than
with --no-dedupe and the same for every thread count."""

import os
import random

import pytest

from helpers import tree_compare
from test_compress import text
from test_fragments import mount_compare

pytestmark = pytest.mark.sanitize

# Every codec in the layouts that store it, with and without fragments.
CONFIGS = {
    "zstd": ["-z", "zstd", "--layout", "extents"],
    "zstd-frag": ["-z", "zstd", "--fragments", "--layout", "extents"],
    "zstd-128k": ["-z", "zstd:5", "-C", "131072", "--layout", "extents"],
    "deflate": ["-z", "deflate", "--layout", "extents"],
    "deflate-frag-16k": ["-z", "deflate", "-C", "16384", "--fragments",
                         "--layout", "extents"],
    "lzma-extents": ["-z", "lzma", "--layout", "extents"],
    "lz4-extents": ["-z", "lz4", "--layout", "extents"],
    "lz4hc-classic": ["-z", "lz4hc"],
    "lz4hc-classic-frag": ["-z", "lz4hc", "-C", "16384", "--fragments"],
    "zstd-classic": ["-z", "zstd", "--layout", "classic", "-C", "32768"],
    "extents-1k": ["-z", "zstd", "-b", "1024", "-C", "8192", "--layout",
                   "extents"],
}

BLK = 65536


@pytest.fixture(scope="session")
def dd_tree(srcfs):
    """Duplicate files (compressible, incompressible, block-aligned or
    not), files made of repeated 64 KiB regions, regions shared between
    different files at the same and at other offsets, prefixes."""
    root = srcfs / "dedupe-tree"
    if root.exists():
        return root
    rng = random.Random(7)
    root.mkdir()
    for d in ("a", "b", "c/d"):
        (root / d).mkdir(parents=True)
    t = text(rng, 3 * 1024 * 1024 + 11)
    rnd = rng.randbytes(900001)
    region = text(rng, BLK)
    noise = rng.randbytes(BLK)
    files = {
        "a/text": t,
        "b/text-copy": t,
        "c/d/text-copy2": t,
        "a/text-prefix": t[:2 * 1024 * 1024],
        "a/random": rnd,
        "b/random-copy": rnd,
        "b/random-aligned": rnd[:40 * 4096],
        "c/random-aligned-copy": rnd[:40 * 4096],
        "a/regions": region * 6 + noise + region * 3 + b"tail",
        "b/regions-shifted": b"x" * 100 + region * 4,
        "b/noise-regions": noise * 5,
        "c/mixed": rnd[:200000] + t[:1500000] + rnd[:200000],
        "c/mixed-copy": rnd[:200000] + t[:1500000] + rnd[:200000],
        "c/zeros": bytes(5 * BLK + 17),
    }
    for n in range(30):
        small = text(rng, 50 * n + 3)
        files[f"a/small-{n}"] = small
        files[f"c/d/small-{n}"] = small
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    return root


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_deduped_images_mount_and_read_back(kiln, dd_tree, tmp_path,
                                            kernel_mount, scratch, config):
    img = tmp_path / "d.erofs"
    kiln.build(dd_tree, img, *CONFIGS[config])
    mount_compare(img, dd_tree, kernel_mount)
    kiln.ok("fsck", img)
    kiln.ok("extract", img, scratch)
    tree_compare(dd_tree, scratch, fields=("type", "size", "data", "listing"),
                 root_attrs=False)
    for rel in ("a/regions", "b/random-copy", "c/mixed-copy"):
        assert kiln.ok("cat", img, "/" + rel).out == \
            (dd_tree / rel).read_bytes()


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_dedupe_is_the_default_and_saves_the_copies(kiln, dd_tree, tmp_path,
                                                    config):
    on, off = tmp_path / "on.erofs", tmp_path / "off.erofs"
    explicit = tmp_path / "explicit.erofs"
    kiln.build(dd_tree, on, *CONFIGS[config])
    kiln.build(dd_tree, explicit, *CONFIGS[config], "--dedupe")
    kiln.build(dd_tree, off, *CONFIGS[config], "--no-dedupe")
    assert on.read_bytes() == explicit.read_bytes()
    saved = os.path.getsize(off) - os.path.getsize(on)
    # two more copies of the text (each well over 300 KiB compressed),
    # and the 900 KB incompressible file stored once
    assert saved >= 900000 + 2 * 300 * 1024, \
        f"dedupe saved only {saved} bytes"


def test_identical_uncompressed_files_share_their_blocks(kiln, dd_tree,
                                                         tmp_path):
    on, off = tmp_path / "on.erofs", tmp_path / "off.erofs"
    kiln.build(dd_tree, on, "-z", "zstd", "--fragments")
    kiln.build(dd_tree, off, "-z", "zstd", "--fragments", "--no-dedupe")
    # random-copy (900001 bytes) and random-aligned-copy (40 blocks) are
    # stored uncompressed; only the copies' data blocks go
    assert os.path.getsize(off) - os.path.getsize(on) >= \
        (900001 // 4096 + 40) * 4096


@pytest.mark.parametrize("config", ["zstd", "zstd-frag", "deflate",
                                    "lzma-extents", "lz4hc-classic",
                                    "lz4hc-classic-frag"])
def test_deduped_images_are_the_same_for_any_thread_count(kiln, dd_tree,
                                                          tmp_path, config):
    imgs = []
    for j in ("1", "2", "8"):
        img = tmp_path / f"j{j}.erofs"
        kiln.build(dd_tree, img, "-j", j, *CONFIGS[config])
        imgs.append(img.read_bytes())
    assert imgs[0] == imgs[1] == imgs[2]


def test_dedupe_is_off_for_uncompressed_images(kiln, dd_tree, tmp_path):
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(dd_tree, a)
    kiln.build(dd_tree, b, "--no-dedupe")
    assert a.read_bytes() == b.read_bytes()


def test_a_file_larger_than_a_segment_is_shared_whole(kiln, srcfs, tmp_path,
                                                      kernel_mount):
    """Files over 8 MiB are compressed in segments by several workers;
    an incompressible one is stored uncompressed, a compressible one in
    extents: either way its copy costs (almost) nothing."""
    root = srcfs / "dedupe-big"
    if not root.exists():
        rng = random.Random(9)
        root.mkdir()
        big_rnd = rng.randbytes(9 * 1024 * 1024 + 5)
        big_txt = text(rng, 10 * 1024 * 1024 + 3)
        for name, data in (("r1", big_rnd), ("r2", big_rnd),
                           ("t1", big_txt), ("t2", big_txt)):
            (root / name).write_bytes(data)
    on, off = tmp_path / "on.erofs", tmp_path / "off.erofs"
    kiln.build(root, on, "-z", "zstd", "-j", "2")
    kiln.build(root, off, "-z", "zstd", "-j", "2", "--no-dedupe")
    assert os.path.getsize(off) - os.path.getsize(on) >= 9 * 1024 * 1024
    mount_compare(on, root, kernel_mount)
    kiln.ok("fsck", on)
