# SPDX-License-Identifier: MIT
"""kiln build --kernel: for each target kernel and codec, the image carries
only feature bits that kernel knows, mounts here with every byte intact,
and makes the kernel log no EXPERIMENTAL line unless the options named
such a feature. Debian's fsck.erofs 1.5 accepts the images up to 5.15."""

import json
import os
import random
import re
import struct
import subprocess
from pathlib import Path

import pytest

import helpers
from helpers import tree_compare

TARGETS = ["5.4", "5.10", "5.15", "6.1", "6.6", "6.12", "6.15", "6.17",
           "latest"]
LATEST = 617

# The test's own table (not the library's): first kernel of each codec
# and of each superblock bit kiln may set.
CODEC_RANK = {"none": 504, "lz4": 504, "lz4hc": 504, "lzma": 516,
              "deflate": 606, "zstd": 610}
INCOMPAT_RANK = {
    0x001: 504,     # 0padding
    0x002: 513,     # big pclusters, config records
    0x004: 515,     # chunk-based files
    0x008: 516,     # two algorithms, devices
    0x010: 517,     # ztailpacking
    0x020: 601,     # fragments, partial dedupe references
    0x040: 604,     # long xattr prefixes
    0x080: 615,     # 48-bit layout
    0x100: 617,     # metabox
}
# Compat bits every kernel mounts, ignoring what it does not know: the
# superblock checksum (verified from 5.5), the informational mtime bit
# and the xattr name filter (read from 6.6; before, a reserved word).
COMPAT_ANY = 0x1 | 0x2 | 0x4
ALG_RANK = {1: 516, 2: 606, 3: 610}


def rank(target):
    if target == "latest":
        return LATEST
    major, minor = target.split(".")
    return int(major) * 100 + int(minor)


def cases():
    for t in TARGETS:
        for codec, r in CODEC_RANK.items():
            if r > rank(t):
                continue
            yield t, codec, "defaults"
            if codec != "none":
                yield t, codec, "no-savers"


def text(rng, n):
    words = [b"kiln ", b"erofs ", b"target ", b"kernel\n", b"pcluster "]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words)
    return bytes(out[:n])


@pytest.fixture(scope="module")
def ttree(srcfs):
    """About 3 MiB: small and big files, text and noise, duplicates, a
    sparse file, a symlink, an xattr."""
    root = srcfs / "kernel-targets"
    if root.exists():
        return root
    rng = random.Random(615)
    (root / "sub").mkdir(parents=True)
    for n in (1, 100, 4095, 4096, 4097, 20000, 65537):
        (root / f"t-{n}").write_bytes(text(rng, n))
    (root / "big").write_bytes(text(rng, 1500000))
    (root / "sub" / "big-copy").write_bytes((root / "big").read_bytes())
    (root / "noise").write_bytes(rng.randbytes(300000))
    for i in range(30):
        (root / "sub" / f"small-{i}").write_bytes(text(rng, 50 * i + 3))
    with open(root / "sparse", "wb") as f:
        f.write(text(rng, 5000))
        f.seek(1 << 20)
        f.write(b"end")
    os.symlink("sub/small-3", root / "link")
    try:
        os.setxattr(root / "t-100", "user.kiln", b"target")
    except OSError:
        pass
    return root


def superblock(img):
    with open(img, "rb") as f:
        f.seek(1024)
        sb = f.read(128)
    magic, _, compat, blkszbits = struct.unpack_from("<IIIB", sb, 0)
    incompat, algs = struct.unpack_from("<IH", sb, 80)
    assert magic == 0xE0F5E1E2
    return compat, incompat, (algs if incompat & 0x2 else 0), blkszbits


def bits_too_new(img, target_rank):
    """Superblock features a kernel of @target_rank does not know."""
    compat, incompat, algs, _ = superblock(img)
    bad = []
    if compat & ~COMPAT_ANY:
        bad.append(f"compat 0x{compat & ~COMPAT_ANY:x}")
    for bit, r in INCOMPAT_RANK.items():
        if incompat & bit and r > target_rank:
            bad.append(f"incompat 0x{bit:x} (Linux {r // 100}.{r % 100})")
    if incompat & ~sum(INCOMPAT_RANK):
        bad.append(f"unknown incompat 0x{incompat:x}")
    for alg, r in ALG_RANK.items():
        if algs & (1 << alg) and r > target_rank:
            bad.append(f"algorithm {alg}")
    return bad


def erofs_log():
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    return r.stdout.splitlines()


def mount_and_compare(img, src):
    """Mount @img, compare it with @src, return the kernel's new lines
    about this mount's loop device."""
    before = set(erofs_log())
    with helpers.kernel_mount(img) as mnt:
        loop = os.path.basename(helpers._loop_of(mnt) or "?")
        tree_compare(src, mnt)
        lines = [l for l in erofs_log() if l not in before and
                 f"erofs (device {loop})" in l]
    return lines


def opts_for(target, codec, savers):
    o = ["--kernel", target]
    if codec != "none":
        o += ["-z", codec]
    if savers == "no-savers":
        o += ["--no-fragments", "--no-dedupe", "--no-ztailpacking"]
    return o


@pytest.mark.parametrize("target,codec,savers", list(cases()))
def test_target_images_mount_with_known_features_only(
        kiln, ttree, tmp_path, target, codec, savers):
    why = helpers.kernel_mount_unavailable()
    if why:
        pytest.skip(why)
    img = tmp_path / "t.erofs"
    r = kiln.build(ttree, img, *opts_for(target, codec, savers))
    tr = rank(target)
    assert f"target: Linux {tr // 100}.{tr % 100} (as asked)" in r.text
    bad = bits_too_new(img, tr)
    assert not bad, f"--kernel {target} -z {codec}: image carries {bad}"
    # no codec or default turns on what a newer kernel needs
    _, incompat, _, _ = superblock(img)
    assert not incompat & 0x180, "48-bit or metabox from a target alone"
    lines = mount_and_compare(img, ttree)
    experimental = [l for l in lines if "EXPERIMENTAL" in l]
    if codec == "deflate":
        # the user's own choice; the summary says so too
        assert any("DEFLATE" in l for l in experimental), lines
        assert "note: Linux logs DEFLATE as EXPERIMENTAL" in r.text
    else:
        assert not experimental, f"kernel log: {experimental}"
        assert "EXPERIMENTAL" not in r.text


def test_targets_choose_their_savers(kiln, ttree, tmp_path):
    """5.4-5.12: no big pclusters; 5.15: ztailpacking impossible, so no
    savers beyond dedupe; 5.17-6.0: ztailpacking; 6.1+: fragments."""
    want = {"5.4": (0, 0x2 | 0x10 | 0x20), "5.12": (0, 0x2 | 0x10 | 0x20),
            "5.13": (0x2, 0x10 | 0x20), "5.17": (0x10, 0x20),
            "6.0": (0x10, 0x20), "6.1": (0x20, 0x10), "6.17": (0x20, 0x10)}
    for target, (must, never) in want.items():
        img = tmp_path / f"{target}.erofs"
        kiln.build(ttree, img, "--kernel", target, "-z", "lz4hc")
        _, incompat, _, _ = superblock(img)
        assert incompat & must == must, (target, hex(incompat))
        assert not incompat & never, (target, hex(incompat))
    # sparse files become chunk-based from 5.15 only
    for target, chunked in (("5.10", False), ("5.15", True)):
        img = tmp_path / f"plain-{target}.erofs"
        kiln.build(ttree, img, "--kernel", target)
        assert bool(superblock(img)[1] & 0x4) == chunked, target


def test_the_extents_layout_is_experimental_and_the_check_sees_it(
        kiln, ttree, tmp_path):
    """--layout extents names a feature Linux logs as EXPERIMENTAL: the
    summary says so and the kernel log shows it (the check above can
    fail)."""
    why = helpers.kernel_mount_unavailable()
    if why:
        pytest.skip(why)
    img = tmp_path / "x.erofs"
    r = kiln.build(ttree, img, "-z", "lz4", "--layout", "extents")
    assert "target: Linux 6.15 (the 48-bit layout)" in r.text
    assert "note: Linux logs the 48-bit layout as EXPERIMENTAL" in r.text
    assert bits_too_new(img, 614), "a 48-bit image passes as 6.14's"
    lines = mount_and_compare(img, ttree)
    assert any("EXPERIMENTAL" in l and "48-bit" in l for l in lines), lines


@pytest.mark.parametrize("codec,target", [
    ("none", "6.1"), ("lz4", "6.1"), ("zstd", "6.10"), ("deflate", "6.6"),
    ("lzma", "6.1")])
def test_default_target_is_fixed_and_raised_by_the_codec(
        kiln, ttree, tmp_path, codec, target):
    img = tmp_path / "d.erofs"
    opts = ["-z", codec] if codec != "none" else []
    r = kiln.build(ttree, img, *opts)
    m = re.search(r"target: Linux (\S+) \((.*)\)", r.text)
    assert m and m.group(1) == target, r.text
    assert not superblock(img)[1] & 0x180, "default turned on 48-bit"
    info = kiln.info(img)
    assert info["min_kernel"] == r.text.split("mountable by Linux ")[1].split()[0]


@pytest.mark.parametrize("opts,needs", [
    (["--metabox", "-z", "lz4", "--kernel", "6.6"], ("--metabox", "6.17")),
    (["-z", "zstd", "--kernel", "6.6"], ("-z zstd", "6.10")),
    (["-z", "lz4", "--layout", "extents", "--kernel", "6.1"],
     ("--layout extents", "6.15")),
    (["-z", "lzma", "--kernel", "5.15"], ("-z lzma", "5.16")),
    (["-z", "lz4", "--fragments", "--kernel", "5.15"], ("--fragments", "6.1")),
    (["-z", "lz4", "--ztailpacking", "--kernel", "5.15"],
     ("--ztailpacking", "5.17")),
    (["-z", "lz4", "-C", "65536", "--kernel", "5.10"],
     ("--pcluster-size 65536", "5.13")),
    (["-z", "lz4", "-b", "1024", "--kernel", "6.6"],
     ("-b 1024 with compression", "6.8")),
    (["-b", "1024", "--kernel", "6.1"], ("-b 1024", "6.4")),
])
def test_asking_for_more_than_the_target_names_both(
        kiln, ttree, tmp_path, opts, needs):
    img = tmp_path / "e.erofs"
    r = kiln.run("build", *opts, ttree, img)
    target = opts[opts.index("--kernel") + 1]
    assert r.rc == 2, r.describe()
    assert needs[0] in r.err and f"Linux {needs[1]}" in r.err, r.err
    assert f"the target is {target}" in r.err, r.err
    assert not img.exists()


@pytest.mark.parametrize("bad", ["4.9", "abc", "5.3", "6", "6.1x", ""])
def test_invalid_kernel_versions_are_clear_errors(kiln, ttree, tmp_path,
                                                  bad):
    r = kiln.run("build", "--kernel", bad, ttree, tmp_path / "e.erofs")
    assert r.rc == 2, r.describe()
    assert f"--kernel: '{bad}'" in r.err
    assert ("5.4 or newer" in r.err) == (bad in ("4.9", "5.3")), r.err


def debian_fsck():
    """Debian's erofs-utils 1.5 fsck.erofs, by path (a 1.9 one may be
    first on PATH)."""
    for p in ("/usr/sbin/fsck.erofs", "/usr/bin/fsck.erofs"):
        if os.access(p, os.X_OK):
            v = subprocess.run([p, "-V"], capture_output=True, text=True)
            if re.search(r"\b1\.5\b", v.stdout + v.stderr):
                return p
    return None


@pytest.mark.parametrize("target", ["5.4", "5.10", "5.15"])
@pytest.mark.parametrize("codec", ["none", "lz4", "lz4hc"])
def test_erofs_utils_1_5_accepts_old_target_images(kiln, ttree, tmp_path,
                                                    target, codec):
    fsck = debian_fsck()
    if not fsck:
        pytest.skip("Debian's fsck.erofs 1.5 is not installed")
    img = tmp_path / "f.erofs"
    kiln.build(ttree, img, *opts_for(target, codec, "defaults"))
    out = tmp_path / "x"
    r = subprocess.run([fsck, f"--extract={out}", str(img)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # not "sparse": 1.5 extracts the holes of chunk-based files (5.15+)
    # with stale bytes (1.9 and the kernel read zeros there)
    for p in ("big", "sub/big-copy", "noise", "t-65537", "sub/small-29"):
        assert (out / p).read_bytes() == (ttree / p).read_bytes(), p
    if target != "5.15":
        assert (out / "sparse").read_bytes() == \
            (ttree / "sparse").read_bytes()


def test_docs_table_is_the_librarys(kiln):
    """docs/kernels.md carries `kiln info --kernels` verbatim."""
    table = kiln.ok("info", "--kernels").text.strip().splitlines()
    doc = (Path(__file__).resolve().parents[2] / "docs" /
           "kernels.md").read_text().splitlines()
    start = doc.index(table[0])
    assert doc[start:start + len(table)] == table, \
        "docs/kernels.md's table differs from `kiln info --kernels`"
    assert len(table) == 2 + 18


@pytest.mark.parametrize("opts,oldest", [([], "5.4"),
                                         (["-zlz4hc", "-Eztailpacking"],
                                          "5.17")])
def test_info_names_the_oldest_kernel_of_mkfs_erofs_images(
        kiln, ttree, tmp_path, opts, oldest):
    mkfs = "/usr/bin/mkfs.erofs"
    if not os.access(mkfs, os.X_OK):
        pytest.skip("Debian's mkfs.erofs is not installed")
    img = tmp_path / "m.erofs"
    r = subprocess.run([mkfs, *opts, str(img), str(ttree)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert kiln.info(img)["min_kernel"] == oldest
    assert kiln.info(img)["experimental"] == []
    assert re.search(rf"oldest kernel: +Linux {re.escape(oldest)} \(",
                     kiln.ok("info", img).text)


def test_info_lists_experimental_features(kiln, ttree, tmp_path):
    img = tmp_path / "x.erofs"
    kiln.build(ttree, img, "-z", "deflate", "--layout", "extents")
    info = kiln.info(img)
    assert info["min_kernel"] == "6.15"
    assert info["experimental"] == ["DEFLATE", "the 48-bit layout"]
