# SPDX-License-Identifier: MIT
"""kiln reads images made by erofs-utils' mkfs.erofs exactly as the kernel
does: ls, cat, extract and fsck against a loop mount of the same image."""

import os
import random
import re
import subprocess

import pytest

from helpers import have, info_field, tree_compare

pytestmark = pytest.mark.skipif(not have("mkfs.erofs"),
                                reason="mkfs.erofs (erofs-utils) not installed")


def mkfs_help():
    r = subprocess.run(["mkfs.erofs", "--help"], capture_output=True,
                       text=True)
    return r.stdout + r.stderr


VARIANTS = {
    "default": [],
    "all-root": ["--all-root"],
    "no-xattrs": ["-x-1"],
    "share-all-xattrs": ["-x1"],
    "fixed-time": ["-T0"],
    "no-inline": ["-Enoinline_data"],
    "chunk-4k": ["--chunksize=4096"],
    "chunk-1m": ["--chunksize=1048576"],
    "exclude": ["--exclude-regex=^many/0"],
    "force-owner": ["--force-uid=65536", "--force-gid=7"],
    # newer erofs-utils only (1.5 has no -b): skipped where refused
    "bs-512": ["-b", "512"],
    "bs-1024": ["-b", "1024"],
    "bs-2048": ["-b", "2048"],
    "lz4": ["-zlz4"],
    "lz4hc": ["-zlz4hc,9"],
}

# Features of newer erofs-utils (1.9): run when the mkfs.erofs on PATH is
# that new (a hand-built one first on PATH), skipped with the version seen
# otherwise.
NEWER = {
    "zstd": ["-zzstd,level=3", "-C65536"],
    "zstd-48bit-fragments": ["-zzstd,level=3", "-E48bit", "-C65536",
                             "-Efragments"],
    "zstd-48bit-dedupe": ["-zzstd,level=9", "-E48bit", "-C131072",
                          "-Ededupe"],
    "zstd-all-fragments": ["-zzstd", "-Eall-fragments,dedupe", "-C32768"],
    "lzma": ["-zlzma,level=6", "-C131072"],
    "lzma-48bit": ["-zlzma", "-E48bit", "-C65536"],
    "deflate": ["-zdeflate,level=6", "-C65536"],
    "deflate-48bit-ztailpacking": ["-zdeflate", "-E48bit", "-Eztailpacking"],
    "libdeflate": ["-zlibdeflate,level=12", "-C16384", "-Ededupe"],
    # lz4hc with fragments and dedupe together takes mkfs.erofs 1.9.4 over
    # ten minutes on the tree's sparse files: one of each
    "lz4hc-big-fragments": ["-zlz4hc,level=12", "-C65536", "-Efragments"],
    "lz4hc-big-dedupe": ["-zlz4hc,level=9", "-C65536", "-Ededupe"],
    "lz4-ztailpacking": ["-zlz4", "-Eztailpacking"],
    "lz4hc-all-fragments": ["-zlz4hc", "-Eall-fragments"],
    "two-algorithms": ["-zlz4hc:zstd", "-C65536"],
    "plain-48bit": ["-E48bit"],
}


def mkfs_version():
    r = subprocess.run(["mkfs.erofs", "--version"], capture_output=True,
                       text=True)
    m = re.search(r"(\d+)\.(\d+)", r.stdout) if r.returncode == 0 else None
    return (int(m.group(1)), int(m.group(2))) if m else (1, 5)


@pytest.fixture(scope="session")
def compat_tree(make_tree):
    # mkfs.erofs 1.5 fails on 255-byte names; 254 is its longest.
    return make_tree("compat", seed=2, many=1000, name_max=254)


def mkfs(tree, img, opts):
    r = subprocess.run(["mkfs.erofs", "--quiet", *opts, str(img), tree.root],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and ("invalid option" in r.stderr or
                              "unrecognized option" in r.stderr or
                              "unsupported" in r.stderr.lower()):
        pytest.skip(f"this mkfs.erofs lacks {' '.join(opts)}: "
                    f"{r.stderr.strip().splitlines()[0][:200]}")
    assert r.returncode == 0, r.stdout + r.stderr
    return img


def regular_files(root, rng, limit=150):
    out = []
    for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
        for n in filenames:
            p = os.path.join(dirpath, n)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append(os.path.relpath(p, os.fsencode(root)))
    out.sort()
    return out if len(out) <= limit else sorted(rng.sample(out, limit))


@pytest.mark.parametrize("variant", sorted(VARIANTS) + sorted(NEWER))
def test_kiln_reads_mkfs_erofs_images_like_the_kernel(
        kiln, compat_tree, tmp_path, scratch, kernel_mount, need_root,
        variant):
    if variant in NEWER and mkfs_version() < (1, 9):
        pytest.skip("needs mkfs.erofs 1.9 or newer on PATH, found %d.%d"
                    % mkfs_version())
    opts = VARIANTS[variant] if variant in VARIANTS else NEWER[variant]
    img = mkfs(compat_tree, tmp_path / f"{variant}.erofs", opts)
    kiln.ok("fsck", img, timeout=300)
    with kernel_mount(img) as mnt:
        dest = scratch / "out"
        dest.mkdir()
        kiln.ok("extract", img, dest, timeout=600)
        tree_compare(mnt, dest, root_attrs=False)

        rng = random.Random(variant)
        for rel in regular_files(mnt, rng):
            with open(os.path.join(os.fsencode(mnt), rel), "rb") as f:
                want = f.read()
            got = kiln.ok("cat", img, b"/" + rel).out
            assert got == want, f"kiln cat /{rel!r} differs from the mount"

        for d in ("", "sizes", "links", "special", "hard", "many"):
            if not os.path.isdir(mnt / d):
                continue
            names = [l for l in kiln.ok("ls", "-a", img, "/" + d).text.splitlines()
                     if l not in (".", "..")]
            assert sorted(names) == sorted(os.listdir(mnt / d)), f"ls /{d}"


@pytest.mark.parametrize("variant", ["default", "chunk-4k"])
def test_info_agrees_with_dump_erofs(kiln, compat_tree, tmp_path, variant):
    if not have("dump.erofs"):
        pytest.skip("no dump.erofs")
    img = mkfs(compat_tree, tmp_path / "i.erofs", VARIANTS[variant])
    r = subprocess.run(["dump.erofs", "-s", str(img)], capture_output=True,
                       text=True)
    kv = {}
    for line in r.stdout.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            kv[k.strip()] = v.strip()
    info = kiln.info(img)
    assert info_field(info, "blocks") == int(kv["Filesystem blocks"])
    assert info_field(info, "inodes", "inos") == \
        int(kv["Filesystem inode count"])
    assert info_field(info, "root_nid", "root-nid", "rootnid") == \
        int(kv["Filesystem root nid"])
    assert str(info_field(info, "uuid", "UUID")).lower() == \
        kv["Filesystem UUID"].lower()


def test_extracting_a_subdirectory_of_a_chunked_image(
        kiln, compat_tree, tmp_path, scratch, kernel_mount, need_root):
    img = mkfs(compat_tree, tmp_path / "c.erofs", ["--chunksize=8192"])
    dest = scratch / "out"
    dest.mkdir()
    kiln.ok("extract", img, dest, "/sparse")
    with kernel_mount(img) as mnt:
        got = dest / "sparse" if os.listdir(dest) == ["sparse"] else dest
        tree_compare(mnt / "sparse", got, root_attrs=got != dest)
