# SPDX-License-Identifier: MIT
"""Fixed-output pclusters for zstd and deflate (the classic layout): zstd
fills each pcluster in one flushed pass, deflate aims whole compressions
by the stream's last ratio. Every pcluster must still fit its budget and
decode to its input: random trees come back byte for byte from a kernel
mount, kiln fsck finds nothing, and the thread count changes no byte."""

import os
import random
import subprocess
from pathlib import Path

import pytest

from helpers import dmesg_tail, tree_compare

PEER_FSCK = Path("/root/.cache/kiln-peers/erofs-utils-1.9.4/bin/fsck.erofs")

WORDS = [b"the ", b"pcluster ", b"fills ", b"its ", b"budget ", b"zstd ",
         b"deflate ", b"flush\n", b"0123 ", b"block "]


def text(rng, n):
    out = bytearray()
    while len(out) < n:
        out += rng.choice(WORDS)
        if rng.random() < 0.05:
            out += rng.randbytes(rng.randrange(1, 40))
    return bytes(out[:n])


def mixed(rng, n):
    """Stretches of text, random bytes and runs, as a stream changes."""
    out = bytearray()
    while len(out) < n:
        k = rng.randrange(3)
        m = rng.randrange(1, 90000)
        out += text(rng, m) if k == 0 else rng.randbytes(m) if k == 1 \
            else bytes([rng.randrange(256)]) * m
    return bytes(out[:n])


@pytest.fixture(scope="module")
def ftree(srcfs):
    """Random files whose sizes straddle block and pcluster sizes, one
    big file whose compressibility changes as it goes, and small ones."""
    root = srcfs / "fixed-output"
    if root.exists():
        return root
    rng = random.Random(1313)
    root.mkdir()
    (root / "d").mkdir()
    for i, n in enumerate([0, 1, 511, 513, 4095, 4097, 65535, 65537,
                           131071, 131073, 400000]):
        (root / f"text-{i}").write_bytes(text(rng, n))
    (root / "random").write_bytes(rng.randbytes(300001))
    (root / "mixed").write_bytes(mixed(rng, 3 << 20))
    (root / "zeros").write_bytes(bytes(1 << 20))
    for i in range(60):
        n = rng.randrange(1, 30000)
        data = text(rng, n) if i % 3 else mixed(rng, n)
        (root / "d" / f"f{i}").write_bytes(data)
    return root


def kernel_errors():
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    return [l for l in r.stdout.splitlines()
            if "erofs" in l and ("error" in l or "failed" in l or
                                 "corrupt" in l or "bogus" in l or
                                 "invalid" in l)]


@pytest.mark.parametrize("pcluster", [4096, 65536, 131072])
@pytest.mark.parametrize("block", [512, 1024, 4096])
@pytest.mark.parametrize("codec", ["zstd", "deflate"])
def test_classic_fills_come_back_whole(kiln, ftree, tmp_path, kernel_mount,
                                       codec, block, pcluster):
    opts = ["-z", codec, "--layout", "classic", "-b", str(block),
            "-C", str(pcluster)]
    a, b = tmp_path / "j1.erofs", tmp_path / "j2.erofs"
    kiln.build(ftree, a, "-j", "1", *opts)
    kiln.build(ftree, b, "-j", "2", *opts)
    assert a.read_bytes() == b.read_bytes(), "-j1 and -j2 images differ"
    kiln.ok("fsck", a)
    before = len(kernel_errors())
    with kernel_mount(a) as mnt:
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                       capture_output=True)
        tree_compare(ftree, mnt)
    errs = kernel_errors()[before:]
    assert not errs, "kernel complained:\n" + "\n".join(errs) + \
        "\n" + dmesg_tail()


@pytest.mark.parametrize("level", [3, 15])
def test_zstd_fills_beat_no_compression_by_far(kiln, ftree, tmp_path, level):
    plain, packed = tmp_path / "plain.erofs", tmp_path / "packed.erofs"
    kiln.build(ftree, plain)
    kiln.build(ftree, packed, "-z", f"zstd:{level}", "--layout", "classic",
               "-C", "65536")
    assert os.path.getsize(packed) < os.path.getsize(plain) * 0.6


@pytest.mark.skipif(not PEER_FSCK.exists(),
                    reason="erofs-utils 1.9 fsck.erofs not built")
@pytest.mark.parametrize("codec", ["zstd", "deflate"])
def test_erofs_utils_extracts_the_fills(kiln, ftree, tmp_path, scratch,
                                        codec):
    """Another reader of the fills: erofs-utils 1.9's decoders (the
    filled zstd frames end in an empty block kiln writes itself)."""
    img = tmp_path / "peer.erofs"
    kiln.build(ftree, img, "-z", codec, "--layout", "classic", "-C",
               "65536", "--no-fragments")
    out = scratch / "x"
    out.mkdir()
    r = subprocess.run([str(PEER_FSCK), f"--extract={out}", str(img)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    tree_compare(ftree, out, fields=("type", "size", "data", "listing"),
                 root_attrs=False)
