# SPDX-License-Identifier: MIT
"""Compression config records (format notes 1.5): kiln writes what the
kernel accepts, and refuses, as the kernel does, records it would refuse."""

import os
import re
import struct
import subprocess
import tempfile

import pytest

import helpers
import mkcorrupt

pytestmark = pytest.mark.sanitize

SB_OFF = 1024

# algorithm id, kiln options, [(payload offset, bad bytes, reason regex)]
CASES = {
    "lz4": (0, ("-z", "lz4", "-C", "65536"), [
        (2, struct.pack("<H", 512), r"lz4 config: pclusters of 512 blocks"),
    ]),
    "lzma": (1, ("-z", "lzma"), [
        (0, struct.pack("<I", 16 << 20), r"lzma config: dictionary"),
        (0, struct.pack("<I", 2048), r"lzma config: dictionary"),
        (4, struct.pack("<H", 1), r"lzma config: unknown format"),
    ]),
    "deflate": (2, ("-z", "deflate"), [
        (0, bytes([16]), r"deflate config: window bits 16"),
    ]),
    "zstd": (3, ("-z", "zstd"), [
        (0, bytes([1]), r"zstd config: unknown format"),
        (1, bytes([11]), r"zstd config: window log 21"),
    ]),
}


def records(buf):
    """{alg: (payload offset, length)} of the records after the sb."""
    sb_size = 128 + 16 * buf[SB_OFF + 0x4F]
    incompat = struct.unpack_from("<I", buf, SB_OFF + 0x50)[0]
    assert incompat & 0x2, "COMPR_CFGS not set"
    algs = struct.unpack_from("<H", buf, SB_OFF + 0x54)[0]
    pos, out = SB_OFF + sb_size, {}
    for alg in range(4):
        if algs & (1 << alg):
            pos = (pos + 3) & ~3
            length = struct.unpack_from("<H", buf, pos)[0] or 65536
            out[alg] = (pos + 2, length)
            pos += 2 + length
    return out


@pytest.fixture(scope="module")
def cfg_tree(tmp_path_factory):
    d = tmp_path_factory.mktemp("cfg-src")
    text = b"".join(b"line %d of a compressible file\n" % i
                    for i in range(20000))
    (d / "text").write_bytes(text)
    (d / "small").write_bytes(text[:3000])
    (d / "random").write_bytes(os.urandom(70000))
    return d


def kernel_refuses(image):
    mnt = tempfile.mkdtemp(prefix="kiln-cfg-")
    try:
        r = subprocess.run(["mount", "-t", "erofs", "-o", "loop,ro",
                            str(image), mnt], capture_output=True, text=True)
        if r.returncode == 0:
            subprocess.run(["umount", mnt], capture_output=True)
        return r.returncode != 0
    finally:
        os.rmdir(mnt)


@pytest.mark.parametrize("codec", sorted(CASES))
def test_records_written_as_kernel_expects(kiln, cfg_tree, tmp_path, codec):
    alg, opts, _ = CASES[codec]
    img = tmp_path / "good.erofs"
    kiln.build(cfg_tree, img, *opts)
    buf = img.read_bytes()
    recs = records(buf)
    assert alg in recs
    off, length = recs[alg]
    assert length == (14 if alg in (0, 1) else 6)
    kiln.ok("fsck", img)
    with helpers.kernel_mount(img) as mnt:
        for name in ("text", "small", "random"):
            assert (mnt / name).read_bytes() == (cfg_tree / name).read_bytes()


@pytest.mark.parametrize("codec,case", [(c, i) for c in sorted(CASES)
                                        for i in range(len(CASES[c][2]))])
def test_bad_record_refused(kiln, cfg_tree, tmp_path, codec, case):
    alg, opts, bad = CASES[codec]
    rel, data, reason = bad[case]
    img = tmp_path / "bad.erofs"
    kiln.build(cfg_tree, img, *opts)
    buf = bytearray(img.read_bytes())
    off, _ = records(buf)[alg]
    buf[off + rel:off + rel + len(data)] = data
    mkcorrupt.reseal(buf)
    img.write_bytes(bytes(buf))
    for cmd in (("fsck", img), ("info", img), ("cat", img, "/text")):
        r = kiln.fails(*cmd)
        assert "config" in r.err and str(img) in r.err, r.describe()
    r = kiln.fails("fsck", img)

    assert re.search(reason, r.err), r.describe()
    why = helpers.kernel_mount_unavailable()
    if why:
        pytest.skip(f"kernel check skipped: {why}")
    assert kernel_refuses(img), "the kernel mounted an image kiln refuses"


def test_short_record_refused(kiln, cfg_tree, tmp_path):
    """A zstd record shorter than the kernel's struct is corrupt."""
    img = tmp_path / "short.erofs"
    kiln.build(cfg_tree, img, "-z", "zstd")
    buf = bytearray(img.read_bytes())
    off, _ = records(buf)[3]
    struct.pack_into("<H", buf, off - 2, 4)
    mkcorrupt.reseal(buf)
    img.write_bytes(bytes(buf))
    r = kiln.fails("fsck", img)
    assert "compression config 3: 4 bytes, at least 6 expected" in r.err, \
        r.describe()
