# SPDX-License-Identifier: MIT
"""Extra devices: images whose file data live on another device. kiln
reads mkfs.erofs 1.9's --blobdev, --chunksize and --tar=i images with
--device exactly as the kernel mounts them with -o device=, says which
device is missing without it and refuses a wrong one; kiln build
--tar-index writes index images the kernel and fsck.erofs accept, whose
files are the tar's bytes."""

import contextlib
import os
import re
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from helpers import (assert_same, diff_snapshots, dmesg_tail, have,
                     kernel_mount_unavailable, snapshot, tree_compare)
from test_mount import fuse_unavailable, kiln_mount

pytestmark = pytest.mark.sanitize

GNU_TAR = ("tar", "--numeric-owner", "--format=pax", "--xattrs",
           "--xattrs-include=*")


def erofs_utils_19(tool="mkfs.erofs"):
    """Skip unless @tool on PATH is erofs-utils 1.9 or newer."""
    if not have(tool):
        pytest.skip(f"{tool} (erofs-utils 1.9) not on PATH")
    r = subprocess.run([tool, "--version"], capture_output=True, text=True)
    m = re.search(r"(\d+)\.(\d+)", r.stdout + r.stderr)
    v = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    if v < (1, 9):
        pytest.skip(f"needs {tool} 1.9 or newer on PATH, found %d.%d" % v)


@contextlib.contextmanager
def kernel_mount_dev(image, devices):
    """Mount @image with the kernel, each of @devices on a read-only loop
    device passed as -o device= (in table order); always cleans up."""
    why = kernel_mount_unavailable()
    if why:
        pytest.skip(why)
    loops = []
    mnt = tempfile.mkdtemp(prefix="kiln-mnt-")
    try:
        for d in devices:
            r = subprocess.run(["losetup", "-r", "-f", "--show", str(d)],
                               capture_output=True, text=True)
            assert r.returncode == 0, f"losetup {d}: {r.stderr}"
            loops.append(r.stdout.strip())
        opts = ",".join(["loop", "ro"] + [f"device={l}" for l in loops])
        r = subprocess.run(["mount", "-t", "erofs", "-o", opts,
                            os.path.realpath(image), mnt],
                           capture_output=True, text=True)
        if r.returncode:
            pytest.fail(f"the kernel refused {image} with devices "
                        f"{devices}: {r.stderr.strip()}\n{dmesg_tail()}")
        try:
            yield Path(mnt)
        finally:
            if subprocess.run(["umount", mnt]).returncode:
                subprocess.run(["umount", "-l", mnt])
    finally:
        for l in loops:
            subprocess.run(["losetup", "-d", l], capture_output=True)
        with contextlib.suppress(OSError):
            os.rmdir(mnt)


def make_tar(src, dest):
    # no --sparse: a sparse member cannot be indexed (tested below)
    r = subprocess.run(list(GNU_TAR) + ["-C", str(src), "-cf", str(dest),
                                        "."], capture_output=True, text=True)
    assert r.returncode in (0, 1), r.stderr     # 1: "socket ignored"
    return dest


def mkfs(img, src, *opts):
    r = subprocess.run(["mkfs.erofs", "--quiet", *map(str, opts), str(img),
                        str(src)], capture_output=True, text=True)
    assert r.returncode == 0, f"mkfs.erofs {opts}: {r.stderr}"
    return img


def short_copy(path, dest, size):
    with open(path, "rb") as f, open(dest, "wb") as g:
        g.write(f.read(size))
    return dest


@pytest.fixture(scope="module")
def tree(make_tree):
    return make_tree("devices-src", seed=23, many=60, light=True)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("devices")


@pytest.fixture(scope="module")
def layer(tree, work):
    return make_tar(tree.root, work / "layer.tar")


@pytest.fixture(scope="module")
def index(kiln, layer, work):
    img = work / "index.erofs"
    r = kiln.ok("build", "--tar-index", layer, img)
    assert "Linux 6.4" in r.text, r.describe()
    return img


@pytest.fixture(scope="module")
def tar_image(kiln, layer, work):
    """The same tar built with --tar: the same tree, data copied."""
    img = work / "copied.erofs"
    kiln.ok("build", "--tar", layer, img)
    return img


@pytest.fixture(scope="module")
def untarred(layer, work):
    """The tar extracted by GNU tar: what the index's files must hold."""
    d = work / "untarred"
    d.mkdir()
    subprocess.run(["tar", "--numeric-owner", "-xpf", str(layer), "-C",
                    str(d)], check=True)
    return d


DATA_FIELDS = ("type", "size", "data", "target", "listing")


# -- kiln build --tar-index --------------------------------------------------

def test_index_mounts_with_the_tar_as_device_and_holds_the_tar(
        index, layer, tar_image, untarred, kernel_mount):
    assert index.stat().st_size < layer.stat().st_size // 10
    with kernel_mount_dev(index, [layer]) as mnt:
        # every byte of every file is the tar's, as tar extracts it
        tree_compare(untarred, mnt, fields=DATA_FIELDS, root_attrs=False)
        # and every attribute is what --tar makes of the same archive
        with kernel_mount(tar_image) as cmnt:
            assert_same(diff_snapshots(snapshot(cmnt), snapshot(mnt)),
                        "--tar-index differs from --tar")


def test_index_read_by_kiln_with_device(kiln, index, layer, tree, untarred,
                                        scratch):
    r = kiln.ok("fsck", "--device", layer, index)
    assert "clean" in r.text
    kiln.ok("extract", "--device", layer, index, scratch / "x")
    tree_compare(untarred, scratch / "x", fields=DATA_FIELDS,
                 root_attrs=False)
    big = max((p for p in untarred.rglob("*")
               if p.is_file() and not p.is_symlink()),
              key=lambda p: p.stat().st_size)
    rel = "/" + str(big.relative_to(untarred))
    assert kiln.ok("cat", "--device", layer, index, rel).out == \
        big.read_bytes()
    ls = kiln.ok("ls", "--device", layer, index, "/").text.split()
    assert sorted(ls) == sorted(p.name for p in untarred.iterdir())
    info = kiln.ok("info", "--json", "--device", layer, index)
    import json
    j = json.loads(info.out)
    assert j["block_size"] == 512
    assert j["devices"] == [{"id": 1, "tag": "layer.tar",
                             "blocks": (layer.stat().st_size + 511) // 512,
                             "uniaddr": j["blocks"], "given": str(layer)}]
    assert "devices:" in kiln.ok("info", index).text


def test_index_served_by_kiln_mount_with_device(kiln, index, layer,
                                                tar_image, kernel_mount):
    why = fuse_unavailable()
    if why:
        pytest.skip(why)
    with kiln_mount(kiln, index, "--device", str(layer)) as m:
        with kernel_mount(tar_image) as cmnt:
            assert_same(diff_snapshots(snapshot(cmnt), snapshot(m.mnt)),
                        "kiln mount --device differs from the --tar image")


def test_index_accepted_by_fsck_erofs(index, layer, untarred, scratch):
    erofs_utils_19("fsck.erofs")
    out = scratch / "fsck-x"
    r = subprocess.run(["fsck.erofs", f"--device={layer}",
                        f"--extract={out}", str(index)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    tree_compare(untarred, out, fields=DATA_FIELDS, root_attrs=False)


def test_index_and_tar_concatenated_mount_without_device(
        kiln, index, layer, untarred, work, kernel_mount):
    flat = work / "flat.erofs"
    with open(flat, "wb") as f:
        f.write(index.read_bytes())
        f.write(layer.read_bytes())
    assert "clean" in kiln.ok("fsck", flat).text
    with kernel_mount(flat) as mnt:
        tree_compare(untarred, mnt, fields=DATA_FIELDS, root_attrs=False)


def test_index_without_its_device_says_which_one(kiln, index, layer,
                                                 scratch):
    r = kiln.fails("fsck", index)
    assert r.rc == 1
    assert "needs device 1 (layer.tar)" in r.err, r.describe()
    assert "corrupt" not in r.err, r.describe()
    r = kiln.fails("extract", index, scratch / "x")
    assert "needs device 1 (layer.tar)" in r.err
    # metadata needs no device
    kiln.ok("ls", "-lR", index)
    assert "not given" in kiln.ok("info", index).text


def test_wrong_device_refused(kiln, index, layer, work):
    short = short_copy(layer, work / "short.tar", 2048)
    r = kiln.fails("fsck", "--device", short, index)
    assert "not this device" in r.err, r.describe()
    r = kiln.fails("cat", "--device", layer, "--device", layer, index, "/x")
    assert "device table lists 1" in r.err, r.describe()
    r = kiln.fails("ls", "--device", work / "missing.tar", index)
    assert "missing.tar" in r.err


def test_compressed_or_streamed_tar_cannot_be_indexed(kiln, layer, work):
    gz = work / "layer.tar.gz"
    with open(gz, "wb") as f:
        subprocess.run(["gzip", "-c", str(layer)], stdout=f, check=True)
    img = work / "gz.erofs"
    r = kiln.fails("build", "--tar-index", gz, img)
    assert "gzip-compressed tar cannot be indexed" in r.err, r.describe()
    assert not img.exists()
    r = kiln.fails("build", "--tar-index", "-", img, input=layer.read_bytes())
    assert "not a stream" in r.err
    r = kiln.fails("build", "--tar-index", layer, "-z", "lz4", img)
    assert "nothing to compress" in r.err
    cut = short_copy(layer, work / "cut.tar", layer.stat().st_size // 2)
    r = kiln.fails("build", "--tar-index", cut, img)
    assert "cut.tar: " in r.err and re.search("runcated|amaged", r.err), \
        r.describe()
    assert not img.exists()


def test_index_is_reproducible(kiln, index, layer, work):
    again = work / "again.erofs"
    kiln.ok("build", "-j1", "--tar-index", layer, again)
    assert again.read_bytes() == index.read_bytes()


def test_index_needs_linux_6_4(kiln, layer, work):
    img = work / "old.erofs"
    r = kiln.fails("build", "--kernel", "6.3", "--tar-index", layer, img)
    assert "--tar-index needs Linux 6.4" in r.err, r.describe()
    assert not img.exists()
    kiln.ok("build", "--kernel", "6.4", "--verify", "--tar-index", layer,
            img)
    assert kiln.info(img)["min_kernel"] == "6.4"


@pytest.mark.parametrize("fmt", ["pax", "gnu"])
def test_sparse_members_and_hardlinks(kiln, tmp_path, fmt):
    """Sparse members keep their holes (hole chunks, data chunks on the
    tar's runs); hardlink members are one inode."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"shared data\n" * 100)
    os.link(src / "f", src / "g")
    with open(src / "sparse", "wb") as f:
        for at in (0, 1 << 20, (3 << 20) + 4096):
            f.seek(at)
            f.write(os.urandom(9000))
        f.truncate(8 << 20)                 # ends in a hole
    layer = tmp_path / "l.tar"
    subprocess.run(["tar", "-S", f"--format={fmt}", "-cf", str(layer), "-C",
                    str(src), "f", "g", "sparse"], check=True)
    out = tmp_path / "untarred"
    out.mkdir()
    subprocess.run(["tar", "-xSf", str(layer), "-C", str(out)], check=True)
    img = tmp_path / "i.erofs"
    kiln.ok("build", "--verify", "--tar-index", layer, img)
    assert img.stat().st_size < layer.stat().st_size // 2
    with kernel_mount_dev(img, [layer]) as mnt:
        a, b = os.stat(mnt / "f"), os.stat(mnt / "g")
        assert (a.st_ino, a.st_nlink) == (b.st_ino, 2)
        tree_compare(out, mnt, fields=DATA_FIELDS, root_attrs=False)
        with open(mnt / "sparse", "rb") as f:
            # the holes are holes: the first data after 9000 is at 1 MiB
            assert os.lseek(f.fileno(), 16384, os.SEEK_DATA) == 1 << 20
    assert kiln.ok("cat", "--device", layer, img, "/sparse").out == \
        (out / "sparse").read_bytes()


# -- mkfs.erofs 1.9 images with extra devices --------------------------------

@pytest.fixture(scope="module")
def mkfs_images(tree, layer, work):
    """{name: (image, [devices], source)} built by mkfs.erofs 1.9."""
    erofs_utils_19()
    out = {}
    blob = work / "m-blob.img"
    out["blobdev"] = (mkfs(work / "m-blobdev.erofs", tree.root,
                           f"--blobdev={blob}", "--chunksize=4096"),
                      [blob], tree.root)
    out["chunksize"] = (mkfs(work / "m-chunk.erofs", tree.root,
                             "--chunksize=8192"), [], tree.root)
    out["tar-index"] = (mkfs(work / "m-tari.erofs", layer, "--tar=i"),
                        [layer], None)
    return out


@pytest.mark.parametrize("name", ["blobdev", "chunksize", "tar-index"])
def test_mkfs_images_read_like_the_kernel(kiln, mkfs_images, name, tree,
                                          scratch):
    img, devs, src = mkfs_images[name]
    dev_args = [a for d in devs for a in ("--device", d)]
    assert "clean" in kiln.ok("fsck", *dev_args, img).text
    kiln.ok("extract", *dev_args, img, scratch / "x")
    with kernel_mount_dev(img, devs) as mnt:
        if src is not None:
            # mkfs.erofs marks the 0:0 character device as an overlayfs
            # whiteout (an xattr): the source compares by content
            tree_compare(src, mnt, fields=DATA_FIELDS)
        tree_compare(mnt, scratch / "x", root_attrs=False)
        for p in sorted(mnt.rglob("*"))[:200]:
            if p.is_file() and not p.is_symlink() and p.stat().st_size:
                rel = "/" + str(p.relative_to(mnt))
                assert kiln.ok("cat", *dev_args, img, rel).out == \
                    p.read_bytes(), rel
                break
        assert sorted(kiln.ok("ls", *dev_args, img).text.split()) == \
            sorted(x.name for x in mnt.iterdir())
        if fuse_unavailable() is None:
            with kiln_mount(kiln, img, *map(str, dev_args)) as m:
                assert_same(diff_snapshots(snapshot(mnt), snapshot(m.mnt)),
                            f"kiln mount of {name} differs from the kernel")


@pytest.mark.parametrize("name", ["blobdev", "tar-index"])
def test_mkfs_images_without_or_with_a_wrong_device(kiln, mkfs_images, name,
                                                    work):
    img, devs, _ = mkfs_images[name]
    r = kiln.fails("fsck", img)
    assert r.rc == 1
    assert "needs device 1 (untagged" in r.err, r.describe()
    assert "corrupt" not in r.err, r.describe()
    wrong = short_copy(devs[0], work / f"wrong-{name}", 1024)
    r = kiln.fails("fsck", "--device", wrong, img)
    assert "not this device" in r.err, r.describe()


def test_mkfs_merged_image_devices_checked_by_uuid(kiln, tree, work,
                                                   scratch):
    """mkfs.erofs merging images: each source image is a device, tagged
    with its UUID; a different EROFS image of a fitting size is refused."""
    erofs_utils_19()
    small = work / "merge-small"
    small.mkdir()
    (small / "only-here").write_bytes(b"second layer\n")
    a = mkfs(work / "merge-a.erofs", tree.root, "-Enoinline_data")
    b = mkfs(work / "merge-b.erofs", small, "-Enoinline_data")
    merged = work / "merged.erofs"
    r = subprocess.run(["mkfs.erofs", "--quiet", str(merged), str(a),
                        str(b)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    info = kiln.info(merged)
    assert [len(d["tag"]) for d in info["devices"]] == [32, 32]
    assert "clean" in kiln.ok("fsck", "--device", a, "--device", b,
                              merged).text
    with kernel_mount_dev(merged, [a, b]) as mnt:
        kiln.ok("extract", "--device", a, "--device", b, merged,
                scratch / "x")
        tree_compare(mnt, scratch / "x", root_attrs=False)
    # a is big enough for slot 2, but it is not that image
    r = kiln.fails("fsck", "--device", a, "--device", a, merged)
    assert "another EROFS image (its UUID differs)" in r.err, r.describe()
