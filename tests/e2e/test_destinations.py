# SPDX-License-Identifier: MIT
"""What `kiln build SRC DEST` does with DEST: a regular file or a new name
is replaced atomically; a block device is written in place (within its
size, never while mounted) and stays a block device; a symlink is followed
(a dangling one creates its target); a FIFO, socket, directory or
character device is refused and left as it was."""

import hashlib
import os
import socket
import stat

import pytest

from helpers import loop_devices, mount_device, tree_compare


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "rand.bin").write_bytes(os.urandom(3 << 20))
    (root / "d" / "seq.txt").write_bytes(
        b"".join(b"%d\n" % i for i in range(100000)))
    (root / "small").write_bytes(b"small\n")
    os.symlink("d/seq.txt", root / "link")
    return root


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def private_node(tmp_path, name, mode, rdev):
    """A device node of our own for @rdev: a kiln that regressed to
    replacing its destination replaces this node, never one in /dev."""
    node = tmp_path / name
    os.mknod(node, mode | 0o600, rdev)
    return str(node)


@pytest.fixture
def loopdev(tmp_path):
    """loopdev(size) -> (node, /dev/loopN): a loop device of @size bytes
    (helpers.loop_devices) and a private node for it to build onto."""
    with loop_devices(tmp_path) as attach:
        def make(size):
            dev = attach(size)
            node = private_node(tmp_path, f"node-{os.path.basename(dev)}",
                                stat.S_IFBLK, os.stat(dev).st_rdev)
            return node, dev
        yield make


# the same build time for builds compared byte for byte (later than any
# mtime, which it would clamp)
SDE = {"SOURCE_DATE_EPOCH": "4000000000"}  # after every mtime


def build_onto(kiln, tree, dest, *opts, env=None):
    r = kiln.run("build", *opts, tree, dest, env=env)
    assert r.rc == 0, r.describe()
    return r


@pytest.mark.parametrize("opts", [(), ("--verify",), ("-z", "lz4", "--verify")],
                         ids=["plain", "verify", "lz4-verify"])
def test_block_device_is_written_in_place(kiln, tree, loopdev, opts):
    node, dev = loopdev(64 << 20)
    build_onto(kiln, tree, node, *opts)
    assert stat.S_ISBLK(os.stat(node).st_mode), "the device node was replaced"
    kiln.ok("fsck", node)
    with mount_device(dev) as mnt:
        tree_compare(tree, mnt)


def test_block_device_gets_the_same_bytes_as_a_file(kiln, tree, loopdev,
                                                    tmp_path):
    """Every byte of the image, gaps included, as a file build makes it:
    what the device held before never shows through."""
    img = tmp_path / "ref.img"
    kiln.build(tree, img, env=SDE)
    node, dev = loopdev(64 << 20)
    build_onto(kiln, tree, node, env=SDE)
    size = img.stat().st_size
    with open(dev, "rb") as f:
        on_dev = f.read(size)
    assert on_dev == img.read_bytes()


def test_image_bigger_than_16m_on_a_device(kiln, tmp_path, loopdev):
    root = tmp_path / "big"
    root.mkdir()
    for k in range(5):
        (root / f"f{k}").write_bytes(os.urandom(5 << 20) + b"tail%d" % k)
    img = tmp_path / "ref.img"
    kiln.build(root, img, env=SDE)
    node, dev = loopdev(64 << 20)
    build_onto(kiln, root, node, "--verify", env=SDE)
    with open(dev, "rb") as f:
        assert f.read(img.stat().st_size) == img.read_bytes()
    with mount_device(dev) as mnt:
        tree_compare(root, mnt)


def test_too_small_device_is_refused_and_unchanged(kiln, tree, loopdev):
    node, dev = loopdev(1 << 20)
    before = digest(dev)
    r = kiln.fails("build", tree, node)
    assert "does not fit" in r.err and node in r.err, r.describe()
    assert "not written" in r.err, r.describe()
    assert stat.S_ISBLK(os.stat(node).st_mode)
    assert digest(dev) == before


def test_device_too_small_past_the_held_start_says_undefined(kiln, tmp_path,
                                                             loopdev):
    """An image that outgrows the first 16 MiB kept in memory before it
    outgrows the device: the build fails, and says the device's content
    is undefined now; the node stays a block device."""
    root = tmp_path / "big"
    root.mkdir()
    # files of 4 MiB: the fifth goes past the held start, the sixth past
    # the device's end
    for k in range(6):
        (root / f"f{k}").write_bytes(os.urandom(4 << 20))
    node, dev = loopdev(20 << 20)
    r = kiln.fails("build", root, node)
    assert "does not fit" in r.err and "undefined" in r.err, r.describe()
    assert stat.S_ISBLK(os.stat(node).st_mode)


def test_mounted_device_is_refused(kiln, tree, loopdev):
    node, dev = loopdev(64 << 20)
    build_onto(kiln, tree, node)
    with mount_device(dev) as mnt:
        before = digest(dev)
        r = kiln.fails("build", tree, node)
        assert "mounted" in r.err or "in use" in r.err, r.describe()
        assert digest(dev) == before
        tree_compare(tree, mnt)


def test_symlink_to_a_block_device_writes_the_device(kiln, tree, loopdev,
                                                     tmp_path):
    node, dev = loopdev(64 << 20)
    link = tmp_path / "dev-link"
    os.symlink(node, link)
    build_onto(kiln, tree, link)
    assert os.readlink(link) == node
    assert stat.S_ISBLK(os.stat(node).st_mode)
    with mount_device(dev) as mnt:
        tree_compare(tree, mnt)


def test_symlink_to_a_file_replaces_the_target(kiln, tree, tmp_path):
    (tmp_path / "images").mkdir()
    target = tmp_path / "images" / "current.img"
    target.write_bytes(b"old")
    link = tmp_path / "out.img"
    os.symlink("images/current.img", link)
    build_onto(kiln, tree, link)
    assert os.path.islink(link) and os.readlink(link) == "images/current.img"
    assert target.stat().st_size > 4096
    kiln.ok("fsck", link)
    assert sorted(os.listdir(tmp_path / "images")) == ["current.img"]


def test_dangling_symlink_creates_its_target(kiln, tree, tmp_path):
    (tmp_path / "images").mkdir()
    link = tmp_path / "out.img"
    os.symlink("images/new.img", link)
    build_onto(kiln, tree, link)
    assert os.path.islink(link)
    target = tmp_path / "images" / "new.img"
    assert target.is_file() and not target.is_symlink()
    kiln.ok("fsck", target)


def test_symlink_loop_is_refused(kiln, tree, tmp_path):
    link = tmp_path / "loop.img"
    os.symlink("loop.img", link)
    r = kiln.fails("build", tree, link)
    assert "symbolic links" in r.err, r.describe()
    assert os.readlink(link) == "loop.img"


def _refused(kiln, tree, dest, word):
    st = os.lstat(dest)
    r = kiln.fails("build", tree, dest)
    assert word in r.err and "refusing" in r.err, r.describe()
    after = os.lstat(dest)
    assert (after.st_ino, after.st_mode, after.st_rdev) == \
        (st.st_ino, st.st_mode, st.st_rdev)
    return r


def test_fifo_is_refused(kiln, tree, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _refused(kiln, tree, fifo, "FIFO")
    assert sorted(os.listdir(tmp_path)) == ["fifo", "tree"]


def test_socket_is_refused(kiln, tree, tmp_path):
    path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        _refused(kiln, tree, path, "socket")
    finally:
        s.close()


def test_directory_is_refused(kiln, tree, tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    _refused(kiln, tree, d, "directory")
    assert os.listdir(d) == []


def test_character_device_is_refused(kiln, tree, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a device node")
    null = private_node(tmp_path, "null", stat.S_IFCHR, os.makedev(1, 3))
    _refused(kiln, tree, null, "character device")
    link = tmp_path / "null-link"
    os.symlink(null, link)
    r = _refused(kiln, tree, link, "character device")
    assert str(link) in r.err, r.describe()
    assert os.readlink(link) == null


def test_regular_file_is_replaced_atomically(kiln, tree, tmp_path):
    img = tmp_path / "out.img"
    img.write_bytes(b"old")
    other = tmp_path / "other"
    os.link(img, other)
    kiln.build(tree, img)
    # a new inode took the name; the old one is untouched
    assert other.read_bytes() == b"old"
    assert os.stat(img).st_ino != os.stat(other).st_ino
    kiln.ok("fsck", img)
