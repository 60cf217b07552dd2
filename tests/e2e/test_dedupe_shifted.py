# SPDX-License-Identifier: MIT
"""--dedupe-shifted: data that recurs at another offset (one file embedded
in another, a shared library and its archive) is stored once, because
extents (pclusters in the classic layout) are cut at both ends of
content-defined chunks that more than one file holds, in runs of 2 MiB or
more. It is on by default for directory sources. Images must read back
byte for byte through a loop mount, kiln's reader and fsck, be the same
for any thread count, and a tree with nothing shared (or only short runs)
must come out exactly as without the option."""

import os
import random

import pytest

from test_compress import text
from test_fragments import reads_back

pytestmark = pytest.mark.sanitize

MIB = 1024 * 1024

CONFIGS = {
    "zstd": ["-z", "zstd", "-C", "131072", "--layout", "extents"],
    "lz4hc": ["-z", "lz4hc", "-C", "65536", "--layout", "extents"],
    "deflate-frag": ["-z", "deflate", "--fragments", "--layout", "extents"],
    "lzma": ["-z", "lzma", "-C", "131072", "--layout", "extents"],
    "lz4-metabox": ["-z", "lz4", "--metabox", "--layout", "extents"],
    "zstd-1k": ["-z", "zstd", "-b", "1024", "-C", "16384", "--layout",
                "extents"],
    # the classic layout: pclusters end at the cuts
    "lz4hc-classic": ["-z", "lz4hc", "-C", "65536"],
    # packed pclusters as big as the files' own: bigger ones compress the
    # off image's unshared copies better and hide what the option saves
    "lzma-classic": ["-z", "lzma", "-C", "65536", "--packed-pcluster-size", "65536"],
    "lz4-classic-metabox": ["-z", "lz4", "--layout", "classic",
                            "--metabox"],
    "zstd-classic-1k": ["-z", "zstd", "--layout", "classic", "-b", "1024",
                        "-C", "8192"],
}
CLASSIC = {k for k in CONFIGS if "classic" in k}


@pytest.fixture(scope="session")
def shift_tree(srcfs):
    """A 2.5 MiB compressible body copied into other files at odd offsets
    (1, 4095, 65537 bytes in, after other data, twice in one file), a copy
    that crosses the 8 MiB segment boundary of a big file, a raw
    (incompressible) body shared the same way, and unrelated files."""
    root = srcfs / "shift-tree"
    if root.exists():
        return root
    rng = random.Random(11)
    root.mkdir()
    body = text(rng, 5 * MIB // 2 + 7)
    noise = rng.randbytes(2500001)
    files = {
        "lib/body": body,
        "lib/at-1": b"\x01" + body,
        "lib/at-4095": text(rng, 4095) + body + text(rng, 333),
        "lib/at-65537": text(rng, 65537) + body,
        "lib/twice": body + text(rng, 100000) + body[5:],
        "lib/big": text(rng, 8 * MIB - 500000) + body + text(rng, 70000),
        "raw/noise": noise,
        "raw/noise-shifted": rng.randbytes(12345) + noise,
        "other/a": text(rng, 900000),
        "other/b": text(rng, 300000),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_shifted_copies_are_stored_once_and_read_back(kiln, shift_tree,
                                                      tmp_path, kernel_mount,
                                                      scratch, config):
    on, off = tmp_path / "on.erofs", tmp_path / "off.erofs"
    kiln.build(shift_tree, on, *CONFIGS[config], "--dedupe-shifted")
    kiln.build(shift_tree, off, *CONFIGS[config], "--no-dedupe-shifted")
    # six more copies of the body (100-230 KiB compressed each, by codec)
    # and most of the noise, which stays raw (raw extents): without the
    # option almost none of it is shared
    # (lcluster indexes: a cut inside a raw block is passed over, so the
    # noise, stored a block at a time, is not shared; every chunk of the
    # body ends a pcluster, partly filled, which lzma feels most)
    saved = os.path.getsize(off) - os.path.getsize(on)
    features = kiln.info(on)["features_incompat"]
    if config in CLASSIC and "metabox" not in config:
        assert "48bit" not in features, "classic cuts need no 6.15"
        assert saved >= 300000, f"shifted dedupe saved only {saved} bytes"
    else:
        assert "48bit" in features
        assert saved >= 900000, f"shifted dedupe saved only {saved} bytes"
    reads_back(kiln, on, shift_tree, kernel_mount, scratch)
    for rel in ("lib/twice", "lib/big", "raw/noise-shifted"):
        assert kiln.ok("cat", on, "/" + rel).out == \
            (shift_tree / rel).read_bytes()


@pytest.mark.parametrize("opts", [[], ["--metabox"]])
def test_raw_copies_with_other_ends_keep_their_blocks_shared(
        kiln, srcfs, tmp_path, kernel_mount, scratch, opts):
    """Incompressible files equal but for their last bytes (one gzip
    stream packaged three times): the part after the last cut does not go
    whole to the packed inode, where the copies could not share it, so
    the option costs next to nothing against sharing whole raw blocks."""
    root = srcfs / "shift-raw-ends"
    if not root.exists():
        rng = random.Random(13)
        body = rng.randbytes(2600000)
        for n in range(3):
            (root / f"pkg{n}").mkdir(parents=True)
            (root / f"pkg{n}" / "changelog.gz").write_bytes(
                body + b"pkg%d" % n * 5)
    on, off = tmp_path / "on.erofs", tmp_path / "off.erofs"
    r = kiln.ok("build", "-v", "-z", "lz4", "-C", "131072",
                "--dedupe-shifted", *opts, root, on)
    kiln.build(root, off, "-z", "lz4", "-C", "131072",
               "--no-dedupe-shifted", *opts)
    # (with extent records every cut ends a raw extent mid-block: about
    # 2% of the body here)
    assert os.path.getsize(on) <= os.path.getsize(off) + 65536, \
        (os.path.getsize(on), os.path.getsize(off))
    # only the last partial block of each copy is in the packed inode
    packed = [ln for ln in r.err.splitlines() if "packed inode:" in ln]
    assert packed, r.err
    assert int(packed[0].split("packed inode:")[1].split()[0]) < 3 * 4096
    assert os.path.getsize(on) < 2 * 2600000, "copies not shared"
    reads_back(kiln, on, root, kernel_mount, scratch)


@pytest.mark.parametrize("codec", ["zstd", "lz4hc"])
def test_shifted_images_are_the_same_for_any_thread_count(kiln, shift_tree,
                                                          tmp_path, codec):
    imgs = []
    for j in ("1", "2", "8"):
        img = tmp_path / f"j{j}.erofs"
        kiln.build(shift_tree, img, "-j", j, "-z", codec,
                   "--dedupe-shifted", "--memory-limit", "32M")
        imgs.append(img.read_bytes())
    assert imgs[0] == imgs[1] == imgs[2]


@pytest.mark.parametrize("layout", ["extents", "classic"])
def test_nothing_shared_means_nothing_cut(kiln, srcfs, tmp_path, layout):
    """Files with no chunk in common compress exactly as without it."""
    root = srcfs / "shift-none"
    if not root.exists():
        rng = random.Random(12)
        root.mkdir()
        for n in range(4):
            (root / f"f{n}").write_bytes(text(rng, 600000 + n))
        (root / "copy").write_bytes((root / "f1").read_bytes())
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(root, a, "-z", "lz4hc", "--layout", layout,
               "--dedupe-shifted")
    kiln.build(root, b, "-z", "lz4hc", "--layout", layout,
               "--no-dedupe-shifted")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("layout", ["extents", "classic"])
def test_short_shared_runs_are_not_cut(kiln, srcfs, tmp_path, layout):
    """A run shared by two files but shorter than 2 MiB costs more cuts
    than it saves: the image is the one without the option."""
    root = srcfs / "shift-short"
    if not root.exists():
        rng = random.Random(14)
        root.mkdir()
        run = text(rng, 1200000)
        (root / "a").write_bytes(text(rng, 300000) + run)
        (root / "b").write_bytes(run + text(rng, 400000))
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    r = kiln.ok("build", "-v", "-z", "zstd", "--layout", layout,
                "--dedupe-shifted", root, a)
    assert "extent cuts" not in r.err
    kiln.build(root, b, "-z", "zstd", "--layout", layout,
               "--no-dedupe-shifted")
    assert a.read_bytes() == b.read_bytes()


def test_directory_builds_share_shifted_copies_by_default(kiln, shift_tree,
                                                         tmp_path):
    """The default for a directory source; --no-dedupe-shifted and tar
    sources go without it."""
    img = tmp_path / "d.erofs"
    r = kiln.ok("build", "-v", "-z", "zstd", shift_tree, img)
    assert "shifted dedupe:" in r.err and "extent cuts" in r.err
    on = img.read_bytes()
    r = kiln.ok("build", "-v", "-z", "zstd", "--no-dedupe-shifted",
                shift_tree, img)
    assert "shifted dedupe:" not in r.err
    assert len(img.read_bytes()) > len(on) + 500000
    tar = tmp_path / "t.tar"
    assert os.system(f"tar -C {shift_tree} -cf {tar} .") == 0
    r = kiln.ok("build", "-v", "-z", "zstd", "--tar", tar, img)
    assert "shifted dedupe:" not in r.err


def test_verbose_build_reports_the_cuts(kiln, shift_tree, tmp_path):
    r = kiln.ok("build", "-v", "-z", "zstd", "--dedupe-shifted",
                shift_tree, tmp_path / "v.erofs")
    assert "shifted dedupe:" in r.err and "extent cuts" in r.err


@pytest.mark.parametrize("opts,why", [
    (["--dedupe-shifted"], "needs a compression algorithm"),
    (["-z", "zstd", "--dedupe-shifted", "--no-dedupe"], "contradict"),
])
def test_contradicting_options_are_refused(kiln, shift_tree, tmp_path,
                                           opts, why):
    img = tmp_path / "x.erofs"
    r = kiln.fails("build", *opts, shift_tree, img)
    assert why in r.err
    assert not img.exists()


def test_tar_input_is_refused(kiln, shift_tree, tmp_path):
    tar = tmp_path / "t.tar"
    os.system(f"tar -C {shift_tree} -cf {tar} .")
    img = tmp_path / "x.erofs"
    r = kiln.fails("build", "-z", "zstd", "--dedupe-shifted", "--tar", tar,
                   img)
    assert "directory SOURCE" in r.err
    assert not img.exists()
