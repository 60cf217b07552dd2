# SPDX-License-Identifier: MIT
"""Fragments (file tails and small files in the packed inode) with every
codec and layout, with dedupe and ztailpacking: every byte must come back
from a loop mount without an erofs complaint, from kiln's own reader and
through kiln fsck; identical fragments are stored once."""

import os
import random
import subprocess

import pytest

from helpers import dmesg_tail, have, matrix, tree_compare
from test_compress import CODECS, kernel_errors, text, ztree  # noqa: F401

pytestmark = pytest.mark.sanitize

VARIANTS = {
    "frag": ["--fragments"],
    "frag-big": ["-C", "65536", "--fragments"],
    "frag-dedupe": ["-C", "32768", "--fragments", "--dedupe"],
    "frag-ztail": ["-C", "16384", "--fragments", "--ztailpacking"],
    "frag-extents": ["--layout", "extents", "--fragments"],
    "frag-extents-128k": ["--layout", "extents", "-C", "131072",
                          "--fragments"],
    "frag-1k": ["-b", "1024", "-C", "8192", "--fragments",
                "--ztailpacking"],
}


def mount_compare(img, src, kernel_mount):
    before = len(kernel_errors())
    with kernel_mount(img) as mnt:
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                       capture_output=True)
        tree_compare(src, mnt)
    errs = kernel_errors()[before:]
    assert not errs, "kernel complained:\n" + "\n".join(errs) + \
        "\n" + dmesg_tail()


def reads_back(kiln, img, src, kernel_mount, scratch):
    """@img equals tree @src through kiln fsck, kiln extract (into
    @scratch) and a kernel mount. kiln's own checks come first: they run
    whether or not the kernel can mount images here."""
    kiln.ok("fsck", img)
    kiln.ok("extract", img, scratch)
    tree_compare(src, scratch, fields=("type", "size", "data", "listing"),
                 root_attrs=False)
    mount_compare(img, src, kernel_mount)


@pytest.mark.parametrize("codec,variant", matrix(CODECS, sorted(VARIANTS)))
def test_fragmented_tree_survives_a_kernel_mount(kiln, ztree, tmp_path,
                                                 kernel_mount, codec,
                                                 variant):
    img = tmp_path / "f.erofs"
    kiln.build(ztree, img, "-z", codec, *VARIANTS[variant])
    info = kiln.info(img)
    assert info["packed_nid"], "no packed inode"
    assert "fragments" in info["features_incompat"]
    mount_compare(img, ztree, kernel_mount)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("codec", ["lz4hc", "zstd"])
def test_kiln_reads_and_checks_fragmented_images(kiln, ztree, tmp_path,
                                                 scratch, codec, variant):
    img = tmp_path / "f.erofs"
    kiln.build(ztree, img, "-z", codec, *VARIANTS[variant])
    kiln.ok("fsck", img)
    kiln.ok("extract", img, scratch)
    tree_compare(ztree, scratch, fields=("type", "size", "data", "listing"),
                 root_attrs=False)
    cat = kiln.ok("cat", img, "/sub/small-7")
    assert cat.out == (ztree / "sub" / "small-7").read_bytes()


@pytest.mark.parametrize("codec", ["lz4hc", "zstd"])
def test_fragments_make_a_tree_of_small_files_smaller(kiln, ztree, tmp_path,
                                                      codec):
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(ztree, a, "-z", codec, "--no-fragments")
    kiln.build(ztree, b, "-z", codec)   # fragments: the default
    # the tails of ~30 compressed files each end in a block of their own
    # without fragments (small files are inline either way)
    assert os.path.getsize(b) <= os.path.getsize(a) - 8 * 4096


@pytest.fixture(scope="session")
def dup_tree(srcfs):
    """Incompressible small files, many of them identical, and files
    whose tails are equal: only dedupe keeps the packed inode small."""
    root = srcfs / "fragdup"
    if root.exists():
        return root
    rng = random.Random(7)
    root.mkdir()
    blob = rng.randbytes(3000)
    for i in range(60):
        (root / f"same-{i}").write_bytes(blob)
    head = rng.randbytes(3 * 4096)
    for i in range(20):
        (root / f"tail-{i}").write_bytes(head + blob)
    (root / "other").write_bytes(rng.randbytes(3001))
    return root


@pytest.mark.parametrize("layout", ["classic", "extents"])
def test_identical_fragments_are_stored_once(kiln, dup_tree, tmp_path,
                                             kernel_mount, layout):
    img = tmp_path / "d.erofs"
    extra = ["-C", "4096"] if layout == "extents" else []
    kiln.build(dup_tree, img, "-z", "lz4hc", "--layout", layout,
               "--fragments", *extra)
    # without fragment dedupe the packed inode alone would hold
    # 80 * 3000 bytes of random data
    assert os.path.getsize(img) < 40 * 4096 + 20 * 3 * 4096
    mount_compare(img, dup_tree, kernel_mount)


@pytest.mark.parametrize("opts", [["-z", "zstd", "--fragments"],
                                  ["-z", "lz4hc", "--fragments", "--dedupe",
                                   "-C", "65536"],
                                  ["-z", "deflate", "--layout", "extents",
                                   "--fragments"]])
def test_fragmented_images_are_reproducible_across_thread_counts(
        kiln, ztree, tmp_path, opts):
    a, b = tmp_path / "j1.erofs", tmp_path / "j4.erofs"
    kiln.build(ztree, a, "-j", "1", *opts)
    kiln.build(ztree, b, "-j", "4", *opts)
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.skipif(not have("fsck.erofs"), reason="fsck.erofs not installed")
def test_erofs_utils_fsck_extracts_fragmented_lz4_images(kiln, ztree,
                                                         tmp_path, scratch):
    img = tmp_path / "fsck.erofs"
    kiln.build(ztree, img, "-z", "lz4hc", "--fragments")
    r = subprocess.run(["fsck.erofs", str(img)], capture_output=True,
                       text=True)
    if "unidentified incompatible feature" in r.stderr:
        pytest.skip("this fsck.erofs predates fragments")
    assert r.returncode == 0, r.stdout + r.stderr
    out = scratch / "x"
    r = subprocess.run(["fsck.erofs", f"--extract={out}", str(img)],
                       capture_output=True, text=True)
    if "failed to verify packed file" in r.stderr or out.is_file():
        # erofs-utils 1.9.3 writes the packed inode to the extract path
        # itself, and fails so on its own mkfs.erofs images too
        pytest.skip("this fsck.erofs cannot extract images with fragments")
    assert r.returncode == 0, r.stdout + r.stderr
    tree_compare(ztree, out, fields=("type", "size", "data", "listing"),
                 root_attrs=False)


DOC = "/usr/share/doc"


@pytest.mark.nosanitize     # a corpus: the plain pass builds it
@pytest.mark.skipif(not os.path.isdir(DOC), reason=f"no {DOC}")
@pytest.mark.parametrize("codec", ["lz4hc", "zstd"])
def test_fragments_shrink_usr_share_doc(kiln, tmp_path, kernel_mount, codec,
                                        capsys):
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(DOC, a, "-z", codec, "--ztailpacking")
    kiln.build(DOC, b, "-z", codec, "--fragments", "--dedupe")
    sa, sb = os.path.getsize(a), os.path.getsize(b)
    with capsys.disabled():
        print(f"\n{DOC} {codec}: ztailpacking {sa} bytes, "
              f"fragments+dedupe {sb} bytes ({100 * (sa - sb) / sa:.1f}% "
              f"smaller)")
    assert sb < sa
    mount_compare(b, DOC, kernel_mount)


@pytest.mark.parametrize("fragoff", [1 << 40, (1 << 63) - 1])
def test_a_fragment_past_the_packed_inode_is_reported_not_read(
        kiln, ztree, tmp_path, fragoff):
    import struct
    img = tmp_path / "c.erofs"
    kiln.build(ztree, img, "-z", "lz4hc", "--fragments")
    info = kiln.info(img)
    nid = int(kiln.ok("ls", "-d", "-i", img, "/sub/small-3").out.split()[0])
    data = bytearray(img.read_bytes())
    pos = info["meta_blkaddr"] * info["block_size"] + nid * 32
    fmt, icount = struct.unpack_from("<HH", data, pos)
    core = 64 if fmt & 1 else 32
    hdr = (pos + core + (12 + 4 * (icount - 1) if icount else 0) + 7) // 8 * 8
    assert data[hdr + 7] & 0x80, "small-3 should be a whole-file fragment"
    struct.pack_into("<Q", data, hdr, fragoff | 1 << 63)
    img.write_bytes(bytes(data))
    r = kiln.fails("cat", img, "/sub/small-3")
    assert "fragment" in r.err or "corrupt" in r.err.lower()
    kiln.fails("fsck", img)


@pytest.fixture(scope="session")
def big_tree(srcfs):
    """Files big enough to be compressed in segments (8 MiB each)."""
    root = srcfs / "fragbig"
    if root.exists():
        return root
    rng = random.Random(5)
    root.mkdir()
    (root / "big").write_bytes(text(rng, 17 * 1024 * 1024 + 4321))
    (root / "big-exact").write_bytes(text(rng, 16 * 1024 * 1024))
    (root / "big-tail-only").write_bytes(text(rng, 8 * 1024 * 1024 + 100))
    (root / "small").write_bytes(text(rng, 777))
    return root


@pytest.mark.parametrize("opts", [[], ["--dedupe", "-C", "65536"],
                                  ["--layout", "extents"]])
def test_segmented_files_keep_their_fragment_tails(kiln, big_tree, tmp_path,
                                                   kernel_mount, scratch,
                                                   opts):
    a, b = tmp_path / "j1.erofs", tmp_path / "j2.erofs"
    kiln.build(big_tree, a, "-j", "1", "-z", "lz4hc", "--fragments", *opts)
    kiln.build(big_tree, b, "-j", "2", "-z", "lz4hc", "--fragments", *opts)
    assert a.read_bytes() == b.read_bytes()
    mount_compare(a, big_tree, kernel_mount)
    kiln.ok("extract", a, scratch)
    tree_compare(big_tree, scratch, fields=("type", "size", "data"),
                 root_attrs=False)


@pytest.fixture(scope="session")
def many_small_tree(srcfs):
    """Over 15 MiB of small, distinct files: the packed inode spans
    several of the segments it is compressed in while the data pass runs
    (4 MiB with --packed-segment 4M), and its size is not a multiple of
    one."""
    root = srcfs / "fragmany"
    if root.exists():
        return root
    rng = random.Random(11)
    root.mkdir()
    for d in range(10):
        sub = root / f"d{d}"
        sub.mkdir()
        for i in range(200):
            n = rng.randrange(1, 16000)
            body = b"%d/%d " % (d, i) + text(rng, n)
            if i % 17 == 0:
                body = rng.randbytes(n)	# incompressible fragments too
            (sub / f"f{i}").write_bytes(body)
    (root / "tail").write_bytes(text(rng, 300000))
    return root


@pytest.mark.parametrize("opts", [
    ["-z", "zstd", "--layout", "extents", "-C", "131072"],
    ["-z", "lz4hc", "--ztailpacking"],
    ["-z", "lz4hc", "-C", "65536", "--no-dedupe"],
    ["-z", "lzma", "--memory-limit", "1"],
    # 48-bit: the segments' pclusters are packed byte by byte
    ["-z", "lz4hc", "-C", "131072", "--layout", "classic", "--metabox"],
    ["-z", "deflate", "--layout", "classic", "-C", "16384", "--metabox"],
])
def test_packed_inode_of_several_segments_is_the_same_for_any_j(
        kiln, many_small_tree, tmp_path, kernel_mount, opts):
    imgs, logs = {}, {}
    for j in ("1", "2", "8"):
        imgs[j] = tmp_path / f"j{j}.erofs"
        r = kiln.run("build", "-v", "-j", j, "--fragments",
                     "--packed-segment", "4M", *opts,
                     many_small_tree, imgs[j], timeout=600)
        assert r.rc == 0, r.describe()
        logs[j] = [ln for ln in r.err.splitlines() if "packed inode" in ln]
    one = imgs["1"].read_bytes()
    assert imgs["2"].read_bytes() == one and imgs["8"].read_bytes() == one
    assert logs["1"] and logs["1"] == logs["2"] == logs["8"]
    packed = int(logs["1"][0].split("packed inode:")[1].split()[0])
    assert packed > 2 * 4 * 1024 * 1024, "packed inode within 2 segments"
    assert kiln.info(imgs["1"])["packed_nid"], "no packed inode"
    kiln.ok("fsck", imgs["2"])
    mount_compare(imgs["2"], many_small_tree, kernel_mount)
