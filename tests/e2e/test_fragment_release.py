# SPDX-License-Identifier: MIT
"""Fragment bytes leave memory once their segment of the packed inode is
compressed; dedupe's compares against them decode the segment's
pclusters again. Whole-fragment and suffix matches against released
bytes must still be found (the same sharing, the same bytes at every
thread count) and every byte must come back."""

import random
import re

import pytest

from test_compress import text
from test_fragments import reads_back

pytestmark = pytest.mark.sanitize

CONFIGS = {
    "zstd-classic": ["-z", "zstd:3", "--layout", "classic"],
    "lz4hc-classic": ["-z", "lz4hc", "--layout", "classic"],
    "lz4-extents": ["-z", "lz4", "--layout", "extents"],
}

NR_EARLY = 20
EARLY_LEN = 5500
END_LEN = 4500  # a suffix match needs 4 KiB


@pytest.fixture(scope="session")
def release_tree(srcfs):
    """1500 small files (several 1 MiB segments of fragments), then
    copies of the first ones and of their last bytes: they come last,
    so they are compared with bytes released long before."""
    root = srcfs / "fragment-release"
    if root.exists():
        return root
    rng = random.Random(1301)
    (root / "a").mkdir(parents=True)
    (root / "z").mkdir()
    early = []
    for i in range(1500):
        n = EARLY_LEN if i < NR_EARLY else rng.randint(2000, 6000)
        data = text(rng, n)
        (root / "a" / f"f{i:04d}").write_bytes(data)
        if i < NR_EARLY:
            early.append(data)
    for i, data in enumerate(early):
        (root / "z" / f"dup{i:02d}").write_bytes(data)
        (root / "z" / f"end{i:02d}").write_bytes(data[-END_LEN:])
    return root


def packed_stats(err):
    decoded = re.search(r"(\d+) extents decoded again for dedupe", err)
    shared = re.search(r"bytes of fragments \((\d+) more shared\)", err)
    assert decoded and shared, err
    return int(decoded.group(1)), int(shared.group(1))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_compares_with_released_fragments_still_share(
        kiln, release_tree, tmp_path, kernel_mount, config):
    opts = ["--fragments", "--dedupe", "--packed-segment", "1M",
            *CONFIGS[config]]
    one = tmp_path / "j1.erofs"
    r = kiln.build(release_tree, one, "-v", "-j", "1", *opts,
                   env={"KILN_DEBUG": "1"})
    decoded, shared = packed_stats(r.err)
    # one thread: each segment is compressed, committed and released as
    # soon as the buffer passes its end, so the late files need decoding
    assert decoded > 0, r.err
    # every copy whole, every file that is the end of one
    assert shared >= NR_EARLY * (EARLY_LEN + END_LEN), r.err
    two = tmp_path / "j2.erofs"
    kiln.build(release_tree, two, "-j", "2", *opts)
    assert one.read_bytes() == two.read_bytes()
    reads_back(kiln, one, release_tree, kernel_mount, tmp_path / "out")
