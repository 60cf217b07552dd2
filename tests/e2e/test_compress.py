# SPDX-License-Identifier: MIT
"""Compressed files through the kernel: every codec, both layouts, big
pclusters, ztailpacking and dedupe; every byte must come back from a loop
mount, with no erofs complaint in the kernel log."""

import os
import re
import random
import subprocess

import pytest

from helpers import dmesg_tail, have, matrix, tree_compare

pytestmark = pytest.mark.sanitize

CODECS = ["lz4", "lz4hc", "lzma", "deflate", "zstd"]

VARIANTS = {
    "classic": [],
    "big-pcluster": ["-C", "65536"],
    "ztailpacking": ["-C", "16384", "--ztailpacking"],
    "ztailpacking-4k": ["--ztailpacking"],
    "dedupe": ["-C", "32768", "--dedupe", "--ztailpacking"],
    "extents-64k": ["--layout", "extents"],
    "extents-128k": ["--layout", "extents", "-C", "131072"],
    "subpage-1k": ["-b", "1024", "-C", "8192", "--ztailpacking"],
    "extents-512": ["-b", "512", "--layout", "extents", "-C", "4096"],
}

WORDS = [b"kiln ", b"erofs ", b"pcluster ", b"lcluster\n", b"extent ",
         b"zstd ", b"deflate ", b"0padding "]


def text(rng, n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(WORDS)
    return bytes(out[:n])


@pytest.fixture(scope="session")
def ztree(srcfs):
    """Files that exercise extent boundaries: sizes around block and
    pcluster sizes, incompressible and half-compressible data, zero runs
    (holes in the extent layout), duplicates and shared prefixes."""
    root = srcfs / "ztree"
    if root.exists():
        return root
    rng = random.Random(42)
    root.mkdir()
    (root / "sub").mkdir()
    sizes = [1, 100, 511, 512, 513, 1023, 1025, 4095, 4096, 4097, 8191,
             12289, 16385, 65535, 65536, 65537, 131073, 300001]
    for n in sizes:
        (root / f"text-{n}").write_bytes(text(rng, n))
    (root / "big-text").write_bytes(text(rng, 3 * 1024 * 1024 + 7))
    (root / "random").write_bytes(rng.randbytes(700001))
    mixed = bytearray()
    for i in range(24):
        kind = i % 3
        if kind == 0:
            mixed += text(rng, 50000)
        elif kind == 1:
            mixed += rng.randbytes(50000)
        else:
            mixed += bytes(50000)
    (root / "mixed").write_bytes(bytes(mixed))
    (root / "zeros").write_bytes(bytes(2 * 1024 * 1024 + 3))
    (root / "sub" / "dup-of-big").write_bytes((root / "big-text").read_bytes())
    (root / "sub" / "prefix-of-big").write_bytes(
        (root / "big-text").read_bytes()[:1000000])
    (root / "sub" / "dup-of-mixed").write_bytes(bytes(mixed))
    for n in range(40):
        (root / "sub" / f"small-{n}").write_bytes(text(rng, 37 * n + 5))
    return root


def kernel_errors():
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    return [l for l in r.stdout.splitlines()
            if "erofs" in l and ("error" in l or "failed" in l or
                                 "corrupt" in l or "bogus" in l or
                                 "invalid" in l)]


@pytest.mark.parametrize("codec,variant", matrix(CODECS, sorted(VARIANTS)))
def test_compressed_tree_survives_a_kernel_mount(kiln, ztree, tmp_path,
                                                 kernel_mount, codec,
                                                 variant):
    img = tmp_path / "z.erofs"
    kiln.build(ztree, img, "-z", codec, *VARIANTS[variant])
    before = len(kernel_errors())
    with kernel_mount(img) as mnt:
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                       capture_output=True)
        tree_compare(ztree, mnt)
    errs = kernel_errors()[before:]
    assert not errs, "kernel complained:\n" + "\n".join(errs) + \
        "\n" + dmesg_tail()


@pytest.mark.parametrize("codec", CODECS)
def test_compression_shrinks_text_and_leaves_random_data_alone(
        kiln, ztree, tmp_path, codec):
    plain, packed = tmp_path / "plain.erofs", tmp_path / "packed.erofs"
    kiln.build(ztree, plain)
    kiln.build(ztree, packed, "-z", codec)
    assert os.path.getsize(packed) < os.path.getsize(plain) * 0.6


def test_dedupe_stores_duplicate_files_once(kiln, ztree, tmp_path):
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(ztree, a, "-z", "lz4hc", "--no-dedupe")
    kiln.build(ztree, b, "-z", "lz4hc", "--dedupe")
    big = os.path.getsize(ztree / "big-text")
    # the duplicate of big-text alone compresses to well over 100 KiB
    assert os.path.getsize(b) < os.path.getsize(a) - big // 10


@pytest.mark.parametrize("codec", ["lz4hc", "zstd", "deflate"])
def test_a_file_incompressible_only_at_its_start_is_still_compressed(
        kiln, srcfs, tmp_path, kernel_mount, codec):
    """2 MiB of random bytes, then 6 MiB of text: the first megabyte
    alone gives no compressed pcluster, yet the file must not be stored
    whole uncompressed."""
    root = srcfs / "late-text"
    if not root.exists():
        rng = random.Random(11)
        root.mkdir()
        (root / "f").write_bytes(rng.randbytes(2 << 20) + text(rng, 6 << 20))
    img = tmp_path / "late.erofs"
    kiln.build(root, img, "-z", codec, "--no-dedupe")
    assert os.path.getsize(img) < (2 << 20) + (3 << 20)
    with kernel_mount(img) as mnt:
        assert (mnt / "f").read_bytes() == (root / "f").read_bytes()


@pytest.mark.parametrize("opts", [["-z", "zstd", "-C", "65536"],
                                  ["-z", "deflate", "--layout", "extents"],
                                  ["-z", "lz4hc", "--dedupe",
                                   "--ztailpacking"]])
def test_compressed_images_are_reproducible_across_thread_counts(
        kiln, ztree, tmp_path, opts):
    a, b = tmp_path / "j1.erofs", tmp_path / "j4.erofs"
    kiln.build(ztree, a, "-j", "1", *opts)
    kiln.build(ztree, b, "-j", "4", *opts)
    assert a.read_bytes() == b.read_bytes()


def fsck_erofs_version():
    r = subprocess.run(["fsck.erofs", "-V"], capture_output=True, text=True)
    m = re.search(r"(\d+)\.(\d+)", r.stdout + r.stderr)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


# fsck.erofs 1.5 (Debian 12) predates fragments: those images need 1.6+
@pytest.mark.skipif(not have("fsck.erofs"), reason="fsck.erofs not installed")
@pytest.mark.parametrize("opts", [["--no-fragments"],
                                  ["-C", "65536", "--no-fragments"],
                                  ["-C", "16384", "--ztailpacking"],
                                  ["--dedupe", "--no-fragments"],
                                  [], ["-C", "65536"]])
def test_erofs_utils_fsck_extracts_lz4_images(kiln, ztree, tmp_path,
                                              scratch, opts):
    frags = "--no-fragments" not in opts and "--ztailpacking" not in opts
    if frags and fsck_erofs_version() < (1, 6):
        pytest.skip("fsck.erofs %d.%d cannot read fragments (1.6+ can)"
                    % fsck_erofs_version())
    img = tmp_path / "fsck.erofs"
    kiln.build(ztree, img, "-z", "lz4hc", *opts)
    if frags:
        # fsck.erofs 1.9's --extract stumbles on the packed inode of any
        # image (mkfs.erofs's own too): check the image, extract nothing
        r = subprocess.run(["fsck.erofs", str(img)], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        return
    out = scratch / "x"
    out.mkdir()     # newer fsck.erofs wants it to exist
    r = subprocess.run(["fsck.erofs", f"--extract={out}", str(img)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    tree_compare(ztree, out, fields=("type", "size", "data", "listing"),
                 root_attrs=False)


@pytest.mark.parametrize("bad", [["-z", "lz4", "-C", "5000"],
                                 ["-z", "zstd", "--layout", "extents",
                                  "-C", "12288"],
                                 ["-z", "zstd:99"],
                                 ["-z", "nosuchcodec"],
                                 ["-z", "lz4", "--layout", "sideways"]])
def test_bad_compression_options_are_refused(kiln, ztree, tmp_path, bad):
    r = kiln.run("build", *bad, ztree, tmp_path / "bad.erofs")
    assert r.rc != 0
    assert r.err.strip()
    assert not (tmp_path / "bad.erofs").exists()
