# SPDX-License-Identifier: MIT
"""The parallel build: the same bytes for -j1, -j2 and -j8 with every
codec and space saver, also when --memory-limit leaves room for only the
reserved workspace and one item in flight; files bigger than a segment
(8 MiB) come back intact from a kernel mount."""

import random
import subprocess

import pytest

from helpers import tree_compare

CODECS = ["lz4", "lz4hc", "lzma", "deflate", "zstd"]

SAVERS = {
    "plain": [],
    "ztailpacking": ["--ztailpacking"],
    "dedupe": ["--dedupe", "-C", "16384"],
    "fragments": ["--fragments"],
    "extents": ["--layout", "extents"],
}

WORDS = [b"kiln ", b"erofs ", b"segment ", b"worker\n", b"commit ",
         b"pipeline ", b"workspace ", b"order "]

SEG = 8 * 1024 * 1024


def text(rng, n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(WORDS)
    return bytes(out[:n])


@pytest.fixture(scope="session")
def ptree(srcfs):
    """Many small files around block sizes, duplicates, and files that
    span several segments: text, random, and a mix whose first segment
    compresses and whose later ones do not (and the reverse)."""
    root = srcfs / "ptree"
    if root.exists():
        return root
    rng = random.Random(2026)
    root.mkdir()
    for d in range(4):
        sub = root / f"d{d}"
        sub.mkdir()
        for i in range(60):
            n = rng.choice([0, 1, 100, 4095, 4096, 4097, 9000, 70000])
            (sub / f"f{i}").write_bytes(text(rng, n))
        (sub / "link").symlink_to("f0")
    (root / "d1" / "dup").write_bytes((root / "d0" / "f1").read_bytes())
    (root / "big-text").write_bytes(text(rng, 2 * SEG + 12345))
    (root / "text-then-random").write_bytes(text(rng, SEG) +
                                            rng.randbytes(300000))
    (root / "random-then-text").write_bytes(rng.randbytes(SEG) +
                                            text(rng, 5000))
    return root


def build(kiln, tree, img, *opts):
    r = kiln.run("build", "--mtime", "0", *opts, tree, img, timeout=900)
    assert r.rc == 0, r.describe()
    return img.read_bytes()


@pytest.mark.parametrize("saver", sorted(SAVERS))
@pytest.mark.parametrize("codec", CODECS)
def test_images_are_identical_for_1_2_and_8_threads(kiln, ptree, tmp_path,
                                                    codec, saver):
    opts = ["-z", codec, *SAVERS[saver]]
    one = build(kiln, ptree, tmp_path / "j1.erofs", "-j", "1", *opts)
    for j in ("2", "8"):
        other = build(kiln, ptree, tmp_path / f"j{j}.erofs", "-j", j, *opts)
        assert other == one, f"-j{j} differs from -j1 with {opts}"


@pytest.mark.parametrize("opts", [[], ["-z", "lz4hc"],
                                  ["-z", "zstd", "--dedupe"],
                                  ["-z", "lzma", "--layout", "extents"]])
def test_smallest_memory_limit_completes_with_the_same_bytes(kiln, ptree,
                                                              tmp_path, opts):
    one = build(kiln, ptree, tmp_path / "j1.erofs", "-j", "1", *opts)
    tight = build(kiln, ptree, tmp_path / "tight.erofs", "-j", "8",
                  "--memory-limit", "1", *opts)
    assert tight == one


@pytest.mark.parametrize("opts", [["-z", "lz4hc", "--ztailpacking"],
                                  ["-z", "zstd", "--layout", "extents"],
                                  ["-z", "deflate", "--dedupe"],
                                  ["-z", "zstd", "--fragments"],
                                  ["-z", "lz4hc", "--fragments", "--dedupe"]])
def test_segmented_files_read_back_through_the_kernel(kiln, ptree, tmp_path,
                                                      kernel_mount, opts):
    img = tmp_path / "seg.erofs"
    build(kiln, ptree, img, "-j", "2", *opts)
    with kernel_mount(img) as mnt:
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                       capture_output=True)
        tree_compare(ptree, mnt, fields=("type", "mode", "size", "target", "data",
                                         "listing"))


@pytest.mark.parametrize("bad", ["0", "-1", "12X", "K", "99999999999G"])
def test_memory_limit_rejects_nonsense(kiln, ptree, tmp_path, bad):
    r = kiln.run("build", "--memory-limit", bad, ptree, tmp_path / "x.erofs")
    assert r.rc == 2 and "--memory-limit" in r.err, r.describe()


def test_memory_limit_takes_suffixes(kiln, ptree, tmp_path):
    a = build(kiln, ptree, tmp_path / "a.erofs", "-z", "lz4",
              "--memory-limit", "3M")
    b = build(kiln, ptree, tmp_path / "b.erofs", "-z", "lz4",
              "--memory-limit", "3145728")
    assert a == b
