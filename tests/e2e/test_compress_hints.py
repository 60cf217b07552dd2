# SPDX-License-Identifier: MIT
"""Compress hints: per-file codec, level and pcluster size from a file of
glob lines. The image must mount and compare, each file's map must name
the codec its hint chose, and hints needing a third algorithm fail."""

import random
import struct
import subprocess

import pytest

from helpers import dmesg_tail, tree_compare
from test_compress import kernel_errors, text

pytestmark = pytest.mark.sanitize

ZSTD, LZ4 = 3, 0
WHOLE_FRAGMENT = "fragment"  # all in the packed inode: no codec of its own
COMPRESSED = (1, 3)          # COMPRESSED_FULL, COMPRESSED_COMPACT


@pytest.fixture(scope="session")
def htree(srcfs):
    root = srcfs / "hints"
    if root.exists():
        return root
    rng = random.Random(11)
    (root / "docs" / "deep").mkdir(parents=True)
    for i in range(6):
        (root / f"note-{i}.txt").write_bytes(text(rng, 9000 + 5111 * i))
        (root / "docs" / "deep" / f"blob-{i}.bin").write_bytes(
            text(rng, 40000 + 3001 * i))
        (root / "docs" / f"other-{i}.dat").write_bytes(
            text(rng, 20000 + 777 * i))
    (root / "docs" / "keep.log").write_bytes(text(rng, 30000))
    return root


def write_hints(tmp_path, lines):
    p = tmp_path / "hints"
    p.write_text("# kiln compress hints\n\n" + "\n".join(lines) + "\n")
    return p


def map_of(kiln, img, path):
    """(datalayout, HEAD1 algorithm, None or WHOLE_FRAGMENT) of @path, from
    the inode."""
    info = kiln.info(img)
    bs = info["block_size"]
    nid = int(kiln.ok("ls", "-d", "-i", img, path).out.split()[0])
    data = img.read_bytes()
    pos = info["meta_blkaddr"] * bs + nid * 32
    fmt, icount = struct.unpack_from("<HH", data, pos)
    core = 64 if fmt & 1 else 32
    layout = (fmt >> 1) & 7
    xattrs = 12 + 4 * (icount - 1) if icount else 0
    if layout not in COMPRESSED:
        return layout, None
    hdr = (pos + core + xattrs + 7) // 8 * 8
    if data[hdr + 7] & 0x80:
        return layout, WHOLE_FRAGMENT
    return layout, data[hdr + 6] & 15


@pytest.mark.parametrize("extra", [[], ["--no-fragments"], ["--fragments"],
                                   ["--dedupe"],
                                   ["-C", "16384", "--ztailpacking"]])
def test_hints_choose_each_files_codec(kiln, htree, tmp_path, kernel_mount,
                                       extra):
    hints = write_hints(tmp_path, ["*.txt zstd:19", "docs/deep/*.bin lz4",
                                   "keep.log none", "*.bin lz4hc:12"])
    img = tmp_path / "h.erofs"
    # the classic layout: its map header names each file's algorithm;
    # one-block pclusters (lines without a size take -C), so the lz4 blob
    # fills more than one and is not a whole-file fragment
    kiln.build(htree, img, "-z", "zstd:3", "--layout", "classic",
               "-C", "4096", "--compress-hints", hints, *extra)
    info = kiln.info(img)
    assert sorted(info["compression"]) == ["lz4", "zstd"]
    # with fragments a file that compresses into less than a pcluster is
    # all in the packed inode (the image's codec), with no codec of its own
    whole = "--no-fragments" not in extra and "--ztailpacking" not in extra
    zstd = (ZSTD, WHOLE_FRAGMENT) if whole else (ZSTD,)
    assert map_of(kiln, img, "/note-3.txt")[1] in zstd
    assert map_of(kiln, img, "/docs/deep/blob-2.bin")[1] == LZ4
    assert map_of(kiln, img, "/docs/other-1.dat")[1] in zstd
    assert map_of(kiln, img, "/docs/keep.log")[1] is None
    before = len(kernel_errors())
    with kernel_mount(img) as mnt:
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                       capture_output=True)
        tree_compare(htree, mnt)
    errs = kernel_errors()[before:]
    assert not errs, "kernel complained:\n" + "\n".join(errs) + \
        "\n" + dmesg_tail()
    kiln.ok("fsck", img)


def test_hints_work_with_the_extents_layout(kiln, htree, tmp_path,
                                            kernel_mount, scratch):
    hints = write_hints(tmp_path, ["*.txt zstd:19 131072", "*.bin lz4hc",
                                   "*.dat lz4hc"])
    img = tmp_path / "e.erofs"
    kiln.build(htree, img, "-z", "zstd", "--layout", "extents",
               "--fragments", "--compress-hints", hints)
    assert sorted(kiln.info(img)["compression"]) == ["lz4", "zstd"]
    with kernel_mount(img) as mnt:
        tree_compare(htree, mnt)
    kiln.ok("extract", img, scratch)
    tree_compare(htree, scratch, fields=("type", "size", "data", "listing"),
                 root_attrs=False)


@pytest.mark.parametrize("lines,default", [
    (["*.txt zstd", "*.bin lzma"], "lz4"),
    (["*.txt lzma", "*.bin zstd:5"], "deflate:6"),
    (["*.txt zstd", "*.bin deflate", "*.dat lz4"], "zstd"),
])
def test_a_third_algorithm_is_refused(kiln, htree, tmp_path, lines,
                                      default):
    hints = write_hints(tmp_path, lines)
    img = tmp_path / "bad.erofs"
    r = kiln.fails("build", "-z", default, "--compress-hints", hints,
                   htree, img)
    assert "at most 2" in r.err
    assert not img.exists()


@pytest.mark.parametrize("lines,why", [
    (["*.txt"], "expected PATTERN"),
    (["*.txt zstd 4096 extra"], "expected PATTERN"),
    (["*.txt nosuchcodec"], "nosuchcodec"),
    (["*.txt zstd:99"], "99"),
    (["*.txt lz4 12k"], "12k"),
    (["*.txt lz4 5000"], "5000"),
])
def test_bad_hint_lines_are_refused_with_their_line(kiln, htree, tmp_path,
                                                    lines, why):
    hints = write_hints(tmp_path, lines)
    r = kiln.fails("build", "-z", "lz4", "--compress-hints", hints, htree,
                   tmp_path / "bad.erofs")
    assert why in r.err
    assert "hints" in r.err


def test_hints_without_a_default_codec_are_refused(kiln, htree, tmp_path):
    hints = write_hints(tmp_path, ["*.txt zstd"])
    kiln.fails("build", "--compress-hints", hints, htree,
               tmp_path / "bad.erofs")


def test_hinted_images_are_reproducible_across_thread_counts(kiln, htree,
                                                             tmp_path):
    hints = write_hints(tmp_path, ["*.txt zstd:19", "*.bin lz4 65536"])
    a, b = tmp_path / "j1.erofs", tmp_path / "j4.erofs"
    for img, j in ((a, "1"), (b, "4")):
        kiln.build(htree, img, "-j", j, "-z", "zstd", "--fragments",
                   "--compress-hints", hints)
    assert a.read_bytes() == b.read_bytes()


def test_hints_apply_to_tar_input(kiln, htree, tmp_path, kernel_mount):
    tar = tmp_path / "h.tar"
    subprocess.run(["tar", "-C", str(htree), "-cf", str(tar), "."],
                   check=True)
    hints = write_hints(tmp_path, ["*.txt zstd:19", "docs/deep/*.bin lz4",
                                   "keep.log none"])
    img = tmp_path / "t.erofs"
    kiln.ok("build", "-z", "zstd", "--layout", "classic", "--fragments",
            "-C", "4096", "--compress-hints", hints,
            "--tar", tar, img)
    assert map_of(kiln, img, "/docs/deep/blob-2.bin")[1] == LZ4
    assert map_of(kiln, img, "/note-1.txt")[1] in (ZSTD, WHOLE_FRAGMENT)
    assert map_of(kiln, img, "/docs/keep.log")[1] is None
    with kernel_mount(img) as mnt:
        tree_compare(htree, mnt, fields=("type", "size", "data", "listing"),
                     root_attrs=False)
