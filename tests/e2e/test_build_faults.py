# SPDX-License-Identifier: MIT
"""kiln build when the world misbehaves: the destination's filesystem
fills up, a source file grows or is rewritten while it is read. A clear
error naming the file, no image, no temporary file, and an image already
at the destination intact. (EIO and short reads: tests/unit's
test-builder-faults, through the library's I/O fault hook.)"""

import os
import threading

import pytest

from helpers import stray_files, tmpfs_mount

pytestmark = pytest.mark.sanitize

BIG = 24 << 20


@pytest.fixture
def small_fs(tmp_path, need_root):
    """A 2 MiB tmpfs holding an existing small image."""
    with tmpfs_mount(tmp_path / "fs", "2M") as d:
        yield d


def tree(root, big=0):
    root.mkdir()
    (root / "a").write_bytes(b"a" * 1000)
    if big:
        with open(root / "big", "wb") as f:
            f.write(os.urandom(1 << 20) * (big >> 20))
    return root


@pytest.mark.parametrize("opts", [(), ("-z", "lz4")])
def test_enospc_keeps_the_old_image(kiln, tmp_path, small_fs, opts):
    img = small_fs / "x.erofs"
    kiln.build(tree(tmp_path / "small"), img)
    old = img.read_bytes()
    src = tree(tmp_path / "big", big=8 << 20)
    r = kiln.fails("build", *opts, src, img,
                   env={"TMPDIR": str(small_fs)})
    assert "x.erofs" in r.err and "No space left on device" in r.err, r.err
    assert img.read_bytes() == old
    assert stray_files(small_fs, keep=["x.erofs"]) == []
    st = os.statvfs(small_fs)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    assert used <= len(old) + 8192, f"{used} bytes still used"


def writer(path, stop, mode):
    """Until @stop: append to @path, or rewrite its first bytes in place."""
    n = 0
    with open(path, "r+b") as f:
        while not stop.is_set():
            if mode == "append":
                os.pwrite(f.fileno(), b"more", os.fstat(f.fileno()).st_size)
            else:
                os.pwrite(f.fileno(), b"%08d" % n, 4096 * (n % 64))
            n += 1
    return n


@pytest.mark.parametrize("mode,why", [
    ("append", "changed size"),
    ("rewrite", "changed"),
])
@pytest.mark.parametrize("opts", [(), ("-z", "lz4", "-j2")])
def test_source_changing_while_read(kiln, tmp_path, mode, why, opts):
    src = tree(tmp_path / "src", big=BIG)
    out = tmp_path / "out"
    out.mkdir()
    img = out / "x.erofs"
    kiln.build(tree(tmp_path / "small"), img)
    old = img.read_bytes()
    stop = threading.Event()
    t = threading.Thread(target=writer, args=(src / "big", stop, mode))
    t.start()
    try:
        r = kiln.run("build", *opts, src, img, timeout=120)
    finally:
        stop.set()
        t.join()
    assert r.rc != 0, "a build over a file being written succeeded\n" + \
        r.describe()
    assert "/big: file " + why in r.err, r.err
    assert img.read_bytes() == old
    assert stray_files(out, keep=["x.erofs"]) == []
