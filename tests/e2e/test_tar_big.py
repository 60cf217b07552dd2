# SPDX-License-Identifier: MIT
"""kiln build --tar with members bigger than a segment (8 MiB): the reading
thread reads them a segment at a time and the workers compress the
segments, as for a file of a directory. The image equals, byte for byte,
the one built from the unpacked directory (the tar lists the members in
the order a directory build places them), for every -j, codec and
layout; a stream cut inside a big member fails cleanly."""

import os
import random
import subprocess
import tarfile

import pytest

from helpers import stray_files, tree_compare

MiB = 1 << 20


def text(n, seed):
    """@n bytes of numbered lines: compressible, cheap for every codec."""
    out = bytearray()
    i = seed * 10**6
    while len(out) < n:
        out += b"%09d kiln erofs tar segment %d\n" % (i, i % 97)
        i += 1
    return bytes(out[:n])


@pytest.fixture(scope="module")
def big_tree(srcfs, tmp_path_factory):
    """One directory whose names sort in the order a directory build
    writes them, so the tar stream has the same order."""
    root = srcfs / "tar-big-members"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    root.mkdir()
    rng = random.Random(4)
    rand9 = rng.randbytes(9 * MiB)
    rand_tail = rng.randbytes(8 * MiB + 3000)
    t16 = text(16 * MiB + 4097, 1)
    files = {
        # three segments, the last one short
        "a-text": t16,
        # incompressible: stored raw, decided within the first segment
        "b-random": rand9,
        # 2 MiB random, then text: the first segment still compresses
        "c-late": rng.randbytes(2 * MiB) + text(7 * MiB, 2),
        # identical to earlier members: shared pclusters and raw blocks
        "e-text-copy": t16,
        "f-random-copy": rand9,
        # exactly one segment (one item), and one byte more (two)
        "h-exact": text(8 * MiB, 3),
        "i-over": text(8 * MiB + 1, 4),
        # small raw members, the second a copy of the first
        "j-small-random": rand9[:200000],
        "k-small-random-copy": rand9[:200000],
        "l-small": text(5000, 5),
        # raw with a tail; then its whole blocks alone (one item), then
        # the same blocks with another tail (big, raw): both share them
        "m-random-tail": rand_tail,
        "n-random-blocks": rand_tail[:8 * MiB],
        "o-random-other-tail": rand_tail[:8 * MiB] + rng.randbytes(3000),
    }
    for name, body in files.items():
        (root / name).write_bytes(body)
    # sparse: text, a hole of 10 MiB, text, a hole to the end
    with open(root / "d-sparse", "wb") as f:
        f.write(text(MiB, 6))
        f.seek(11 * MiB)
        f.write(text(MiB, 7))
        f.truncate(17 * MiB + 100)
    # a hardlink to a big member
    os.link(root / "a-text", root / "g-link")
    t = tmp_path_factory.mktemp("big-tar") / "big.tar"
    r = subprocess.run(["tar", "--numeric-owner", "--format=pax", "--sparse",
                        "--sort=name", "-C", str(root), "-cf", str(t), "."],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with tarfile.open(t) as tf:
        names = [m.name for m in tf.getmembers()]
    assert names == sorted(names), names
    return root, t


def member_data_offset(tar, name):
    with tarfile.open(tar) as tf:
        return tf.getmember("./" + name).offset_data


CODECS = [("lz4", "lz4"), ("lz4hc", "lz4hc"), ("deflate", "deflate:1"),
          ("zstd", "zstd"), ("lzma", "lzma:0")]


@pytest.mark.parametrize("layout", ["classic", "extents"])
@pytest.mark.parametrize("codec", [c[0] for c in CODECS])
def test_big_members_same_bytes_as_directory(kiln, big_tree, tmp_path,
                                             kernel_mount, codec, layout):
    root, t = big_tree
    spec = dict(CODECS)[codec]
    # fragments on and off, alternating over codecs and layouts
    on = ([c[0] for c in CODECS].index(codec) + (layout == "extents")) % 2
    opts = ("-z", spec, "--layout", layout,
            "--fragments" if on else "--no-fragments")
    dimg = tmp_path / "dir.erofs"
    # a tar is read once: shifted dedupe, which reads big files twice,
    # is a directory build's own
    kiln.ok("build", "-j2", *opts, "--no-dedupe-shifted", root, dimg,
            timeout=600)
    want = dimg.read_bytes()
    runs = [("-j1",), ("-j2", "--verify"), ("-j8",),
            ("-j2", "--memory-limit", "1")]
    for extra in runs:
        img = tmp_path / "tar.erofs"
        kiln.ok("build", *extra, *opts, "--tar", t, img, timeout=600)
        assert img.read_bytes() == want, \
            f"tar image with {extra + opts} differs from the directory's"
    with kernel_mount(img) as mnt:
        tree_compare(root, mnt)


def test_dedupe_off_and_stdin(kiln, big_tree, tmp_path):
    root, t = big_tree
    opts = ("-z", "lz4hc", "--no-dedupe")
    dimg, img = tmp_path / "dir.erofs", tmp_path / "tar.erofs"
    kiln.ok("build", *opts, root, dimg, timeout=600)
    kiln.ok("build", "-j2", *opts, "--tar", "-", img, input=t.read_bytes(),
            timeout=600)
    assert img.read_bytes() == dimg.read_bytes()


def test_raw_big_copies_are_shared(kiln, big_tree, tmp_path):
    """Identical incompressible members are stored once, as from a
    directory (and without dedupe, twice)."""
    root, t = big_tree
    sizes = {}
    for dd in ("--dedupe", "--no-dedupe"):
        img = tmp_path / f"{dd}.erofs"
        kiln.ok("build", "-z", "zstd", dd, "--tar", t, img, timeout=600)
        sizes[dd] = img.stat().st_size
    # f-random-copy (9 MiB), k-small-random-copy, n- and o-random-*:
    # about 25 MiB less with dedupe
    assert sizes["--no-dedupe"] - sizes["--dedupe"] > 24 * MiB, sizes


@pytest.mark.parametrize("member,into", [
    ("a-text", 9 * MiB + 123),          # the second segment, being read
    ("b-random", 8 * MiB + 4096),       # raw: its first segment's commit
                                        # reads the rest of the stream
    ("f-random-copy", 8 * MiB + 4096),  # raw, stored as raw pclusters
    ("c-late", MiB),                    # the first segment
])
@pytest.mark.parametrize("j", ["1", "2"])
def test_stream_cut_inside_big_member(kiln, big_tree, tmp_path, member,
                                      into, j):
    root, t = big_tree
    cut = member_data_offset(t, member) + into
    data = t.read_bytes()[:cut]
    out = tmp_path / "out"
    out.mkdir()
    r = kiln.fails("build", f"-j{j}", "-z", "lz4", "--tar", "-",
                   out / "t.erofs", input=data, timeout=600)
    assert "runcated" in r.err and member in r.err, r.err
    assert stray_files(out) == [], "image or temp file left behind"
    # nothing else but the one error
    assert len(r.err.strip().splitlines()) == 1, r.err


@pytest.mark.nosanitize     # the sanitizers change the memory use
def test_big_member_memory_bounded(kiln, srcfs, tmp_path):
    """A member far bigger than the in-flight bound is never held whole:
    the reader holds a few segments at a time."""
    root = srcfs / "tar-huge"
    subprocess.run(["rm", "-rf", str(root)], check=True)
    root.mkdir()
    body = text(8 * MiB, 8)
    with open(root / "huge", "wb") as f:
        for i in range(20):     # 160 MiB, no two segments alike
            f.write(body[:-16] + b"%015d\n" % i)
    t = tmp_path / "huge.tar"
    subprocess.run(["tar", "-C", str(root), "-cf", str(t), "."], check=True)
    subprocess.run(["rm", "-rf", str(root)], check=True)
    peak = {}
    for opts in (("-j2",), ("-j2", "--memory-limit", "24M")):
        img = tmp_path / "h.erofs"
        r = kiln.ok("build", *opts, "-z", "lz4", "--tar", t, img,
                    wrapper=("/usr/bin/time", "-f", "peak %M"), timeout=600)
        peak[opts] = int(r.err.strip().splitlines()[-1].split()[-1]) >> 10
    # segment cost 17 MiB: default bound 64 MiB, 24M: 18 MiB (one at a time)
    assert peak[("-j2",)] < 100, peak
    assert peak[("-j2", "--memory-limit", "24M")] < 60, peak


def test_raw_copy_is_shared_without_a_temporary_file(kiln, big_tree,
                                                    tmp_path):
    """A big raw member keeps its first segment as raw pclusters, which
    dedupe finds again for its later copy: no unnamed file in $TMPDIR is
    needed to hold it until hashed, so a missing $TMPDIR is no error and
    the copy is still stored once."""
    root, t = big_tree
    out = tmp_path / "out"
    out.mkdir()
    env = {"TMPDIR": str(tmp_path / "missing")}
    img, nodd = out / "t.erofs", out / "nodd.erofs"
    kiln.ok("build", "-j1", "-z", "lz4", "--tar", t, img, env=env,
            timeout=600)
    kiln.ok("build", "-j1", "-z", "lz4", "--no-dedupe", "--tar", t, nodd,
            env=env, timeout=600)
    kiln.ok("fsck", img)
    assert not (tmp_path / "missing").exists()
    # f-random-copy alone is 9 MiB of raw data stored once
    assert nodd.stat().st_size - img.stat().st_size > 9 * MiB
