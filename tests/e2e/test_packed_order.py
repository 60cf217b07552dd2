# SPDX-License-Identifier: MIT
"""The packed inode's similarity order and its bigger pclusters: small
files grouped by suffix and content fingerprint must read back byte for
byte through the kernel (also with random reads), check clean, give the
same bytes for every thread count and build, and compress clearly better
than in path order when similar files are interleaved with others."""

import os
import random
import subprocess

import pytest

from helpers import tree_compare
from test_fragments import mount_compare, reads_back

FAMILIES = 48
PER_FAMILY = 24
FILE_SIZE = 6000


def drop_caches():
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                   capture_output=True)


@pytest.fixture(scope="module")
def similar_tree(srcfs):
    """Families of near-copies of random (incompressible) bytes, one
    member of each family in every directory: in path order no two of a
    family sit close, and every name has the same suffix. Some text
    files and an odd suffix or two ride along."""
    root = srcfs / "packed-order"
    if root.exists():
        return root
    rnd = random.Random(13)
    bases = [rnd.randbytes(FILE_SIZE) for _ in range(FAMILIES)]
    for d in range(PER_FAMILY):
        sub = root / f"d{d:03}"
        sub.mkdir(parents=True)
        for f in range(FAMILIES):
            b = bytearray(bases[f])
            for _ in range(3):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            # a per-file length: the files differ at their ends too
            (sub / f"m{(f * 7919 + d) % 1000:03}.bin").write_bytes(
                bytes(b[:FILE_SIZE - rnd.randrange(64)]))
        (sub / "notes.txt").write_text(
            "".join(f"line {i} of {d}\n" for i in range(rnd.randrange(400))))
        (sub / "Makefile").write_text(f"obj-y += d{d}.o\n" * (d + 1))
        (sub / "empty.cfg").write_bytes(b"")
    return root


def build(kiln, src, img, *opts):
    kiln.build(src, img, "-z", "zstd:3", "--layout", "classic",
               "-C", "16384", *opts)
    return img.read_bytes()


def test_similar_files_grouped_compress_clearly_better(kiln, similar_tree,
                                                       tmp_path):
    path = build(kiln, similar_tree, tmp_path / "p.erofs",
                 "--packed-order=path")
    sim = build(kiln, similar_tree, tmp_path / "s.erofs",
                "--packed-order=similar")
    dflt = build(kiln, similar_tree, tmp_path / "d.erofs")
    assert dflt == path, "path is not the default order"
    # near-copies together compress to a fraction of the path order's
    assert len(sim) * 3 < len(path), (len(sim), len(path))


@pytest.mark.parametrize("order", ["similar", "path"])
def test_packed_order_reads_back(kiln, similar_tree, tmp_path, kernel_mount,
                                 scratch, order):
    img = tmp_path / "f.erofs"
    build(kiln, similar_tree, img, f"--packed-order={order}")
    info = kiln.info(img)
    assert info["packed_nid"], "no packed inode"
    reads_back(kiln, img, similar_tree, kernel_mount, scratch)


def test_every_thread_count_and_build_gives_the_same_bytes(kiln,
                                                           similar_tree,
                                                           tmp_path):
    sim = "--packed-order=similar"
    imgs = [build(kiln, similar_tree, tmp_path / f"j{j}.erofs", f"-j{j}", sim)
            for j in (1, 2, 8)]
    again = build(kiln, similar_tree, tmp_path / "again.erofs", "-j2", sim)
    assert imgs[0] == imgs[1] == imgs[2] == again


def test_big_packed_pclusters_read_back_at_random(kiln, similar_tree,
                                                  tmp_path, kernel_mount):
    small = tmp_path / "small.erofs"
    big = tmp_path / "big.erofs"
    build(kiln, similar_tree, small, "--packed-pcluster-size=16384")
    build(kiln, similar_tree, big, "--packed-pcluster-size=1048576")
    assert big.stat().st_size < small.stat().st_size
    kiln.ok("fsck", big)
    mount_compare(big, similar_tree, kernel_mount)
    files = sorted(p for p in similar_tree.rglob("*") if p.is_file()
                   and p.stat().st_size)
    rnd = random.Random(5)
    with kernel_mount(big) as mnt:
        drop_caches()
        for _ in range(600):
            src = rnd.choice(files)
            size = src.stat().st_size
            off = rnd.randrange(size)
            n = min(4096, size - off)
            with open(mnt / src.relative_to(similar_tree), "rb") as f:
                f.seek(off)
                got = f.read(n)
            with open(src, "rb") as f:
                f.seek(off)
                assert got == f.read(n), (src, off)


def test_bad_packed_options_are_refused(kiln, similar_tree, tmp_path):
    r = kiln.fails("build", "-z", "zstd", "--packed-order=random",
                   similar_tree, tmp_path / "x.erofs")
    assert "--packed-order" in r.err
    r = kiln.fails("build", "-z", "zstd", "--layout", "classic",
                   "--packed-pcluster-size=5000", similar_tree,
                   tmp_path / "x.erofs")
    assert "packed pcluster size 5000" in r.err
    assert not (tmp_path / "x.erofs").exists()
