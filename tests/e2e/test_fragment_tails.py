# SPDX-License-Identifier: MIT
"""Fragments that end like bytes already in the packed inode are not stored
again: a file whose tail (or whole content) is the end of an earlier
fragment points at it, and a file that only ends like one is split at
commit, its first bytes into pclusters of its own. Every image must read
back byte for byte through the kernel, kiln's reader and kiln fsck, and
come out the same for any thread count."""

import os
import random
import re
import subprocess

import pytest

from helpers import have
from test_compress import text
from test_fragments import mount_compare, reads_back

pytestmark = pytest.mark.sanitize

TAIL = 60 * 1024            # the end the files of a family share


def hex_text(rng, n):
    """Text that compresses to about half (one hex digit a nibble)."""
    return rng.randbytes(n // 2 + 1).hex().encode()[:n]


def make_family(root, shared):
    """Files of one family end in the same TAIL bytes (@shared) or each in
    TAIL bytes of its own (not @shared), after heads that differ."""
    rng = random.Random(11)
    common = hex_text(rng, TAIL)
    root.mkdir()
    (root / "gen").mkdir()
    # heads of 40 KiB to 1.4 MiB: whole-file fragments (under one 128 KiB
    # pcluster compressed) and files with pclusters of their own before
    # their tail
    heads = [40, 90, 150, 300, 700, 1400]
    for i, kib in enumerate(heads):
        head = text(rng, kib * 1024 + 13 * i)
        end = common if shared else hex_text(rng, TAIL)
        (root / "gen" / f"regs-{i}.h").write_bytes(head + end)
    # the shared end alone and a shorter end of it: all of it is there
    end = common if shared else hex_text(rng, TAIL)
    (root / "gen" / "zz-end-only.h").write_bytes(end)
    end = common if shared else hex_text(rng, TAIL)
    (root / "gen" / "zz-end-part.h").write_bytes(end[-40 * 1024:])
    # an unrelated file and small ones around them
    (root / "other.txt").write_bytes(text(rng, 123457))
    for i in range(20):
        (root / f"small-{i}").write_bytes(text(rng, 500 + 97 * i))
    return root


@pytest.fixture(scope="session")
def tails_tree(srcfs):
    root = srcfs / "fragtails"
    return root if root.exists() else make_family(root, True)


@pytest.fixture(scope="session")
def unique_tree(srcfs):
    root = srcfs / "fragtails-unique"
    return root if root.exists() else make_family(root, False)


def shared_bytes(build_result):
    m = re.search(r"packed inode: \d+ bytes of fragments \((\d+) more shared\)",
                  build_result.err + build_result.text)
    assert m, "no packed-inode line in -v output:\n" + build_result.err
    return int(m.group(1))


@pytest.mark.parametrize("codec", ["lz4hc", "zstd", "deflate", "lzma"])
def test_files_that_end_alike_store_their_end_once(kiln, tails_tree,
                                                   unique_tree, tmp_path,
                                                   kernel_mount, codec):
    a, b = tmp_path / "shared.erofs", tmp_path / "unique.erofs"
    opts = ["-z", codec, "--layout", "classic", "-C", "131072",
            "--fragments"]
    r = kiln.build(tails_tree, a, "-v", *opts)
    kiln.build(unique_tree, b, *opts)
    # 8 files end in the same 60 KiB (the last one in 40 KiB of them):
    # the later 7 point at the first one's (the two biggest files keep
    # less than all of it in their fragment)
    assert shared_bytes(r) >= 5 * TAIL
    # 60 KiB of hex text compresses to about 30 KiB in every codec
    saved = os.path.getsize(b) - os.path.getsize(a)
    assert saved >= 5 * 20 * 1024, f"only {saved} bytes smaller"
    mount_compare(a, tails_tree, kernel_mount)


@pytest.mark.parametrize("opts", [
    ["-z", "lz4hc", "-C", "65536", "--fragments", "--dedupe"],
    ["-z", "lz4", "--layout", "classic", "--fragments", "--no-dedupe"],
    ["-z", "zstd", "--layout", "extents", "-C", "131072", "--fragments"],
    ["-z", "lz4hc", "-b", "1024", "-C", "8192", "--fragments"],
    ["-z", "lz4hc", "--layout", "classic", "-C", "131072", "--fragments",
     "--metabox"],
])
def test_shared_tails_read_back_everywhere(kiln, tails_tree, tmp_path,
                                           kernel_mount, scratch, opts):
    img = tmp_path / "t.erofs"
    kiln.build(tails_tree, img, *opts)
    reads_back(kiln, img, tails_tree, kernel_mount, scratch)
    for name in ("regs-0.h", "regs-5.h", "zz-end-part.h"):
        cat = kiln.ok("cat", img, f"/gen/{name}")
        assert cat.out == (tails_tree / "gen" / name).read_bytes()
    # erofs-utils' own check decodes every file too, where it knows the
    # image's features (Debian's 1.5 predates fragments, metabox and
    # blocks smaller than a page)
    if have("fsck.erofs"):
        r = subprocess.run(["fsck.erofs", str(img)], capture_output=True,
                           text=True)
        if not re.search("unidentified incompatible feature|"
                         "isn't supported", r.stderr):
            assert r.returncode == 0, r.stdout + r.stderr


def test_a_split_file_reads_from_any_offset(kiln, tails_tree, tmp_path,
                                            kernel_mount):
    """regs-3.h compresses into less than one 128 KiB pcluster: it was a
    whole-file fragment and is split into pclusters and the shared end;
    cold reads across the split come back right."""
    img = tmp_path / "s.erofs"
    kiln.build(tails_tree, img, "-z", "lz4hc", "--layout", "classic",
               "-C", "131072", "--fragments")
    src = (tails_tree / "gen" / "regs-3.h").read_bytes()
    split = len(src) - TAIL
    with kernel_mount(img) as mnt:
        for off, n in [(split - 5000, 10000), (split, 1), (split - 1, 2),
                       (len(src) - 100, 100), (0, 4096)]:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            with open(os.path.join(mnt, "gen", "regs-3.h"), "rb") as f:
                f.seek(off)
                assert f.read(n) == src[off:off + n], \
                    f"bytes {off}+{n} differ"


@pytest.mark.parametrize("opts", [["-z", "lz4hc", "--layout", "classic",
                                   "-C", "131072", "--fragments"],
                                  ["-z", "zstd", "--fragments", "--dedupe"]])
def test_shared_tails_do_not_depend_on_the_thread_count(kiln, tails_tree,
                                                        tmp_path, opts):
    imgs = []
    for j in ("1", "2", "8"):
        img = tmp_path / f"j{j}.erofs"
        kiln.build(tails_tree, img, "-j", j, "--memory-limit", "32M", *opts)
        imgs.append(img.read_bytes())
    assert imgs[0] == imgs[1] == imgs[2]
