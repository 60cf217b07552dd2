# SPDX-License-Identifier: MIT
"""The limit docs/fsck.md states: fsck proves structure, not data. EROFS
keeps no checksum of file data, so a flipped byte inside an uncompressed
file's blocks passes fsck, and the kernel serves it."""

import os
import sys

from helpers import DATA

sys.path.insert(0, str(DATA))
import mkcorrupt  # noqa: E402


def test_flipped_data_byte_passes_fsck_as_documented(kiln, tmp_path,
                                                     kernel_mount):
    root = tmp_path / "t"
    root.mkdir()
    data = os.urandom(64 << 10)
    (root / "data.bin").write_bytes(data)
    good = tmp_path / "good.img"
    kiln.build(root, good)
    img = mkcorrupt.Image(good.read_bytes())
    ino = next(i for i in img.inodes.values() if i.path == "/data.bin")
    assert ino.layout == mkcorrupt.FLAT_PLAIN
    start, length = img.flat_ranges(ino)[0]
    at = start + length // 2
    buf = bytearray(good.read_bytes())
    buf[at] ^= 0xFF
    bad = tmp_path / "bad.img"
    bad.write_bytes(bytes(buf))
    kiln.ok("fsck", bad)
    # the change is real: the kernel serves it, the source differs
    with kernel_mount(bad) as mnt:
        got = (mnt / "data.bin").read_bytes()
    assert got != data
    assert [k for k in range(len(data)) if got[k] != data[k]] == \
        [at - start]


def test_fsck_help_states_the_limit(kiln):
    text = kiln.help_text("fsck")
    assert "no checksum of file data" in " ".join(text.split())
