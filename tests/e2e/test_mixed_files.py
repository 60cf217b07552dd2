# SPDX-License-Identifier: MIT
"""Files mixing incompressible and compressible runs: random heads of 1, 10
and 28 MiB before text (longer than a segment, 8 MiB), text before random
bytes, alternating 1 MiB stripes and a file random from end to end. The
random runs get raw pclusters and the text compressed ones, whatever
their order and length, in both layouts, from a directory and from a tar
stream; every byte comes back through the kernel and kiln fsck is clean."""

import os
import random
import re
import shutil
import subprocess

import pytest

from helpers import tree_compare

MiB = 1 << 20
CODECS = ["lz4", "lz4hc", "zstd", "lzma", "deflate"]
LAYOUTS = ["classic", "extents"]

# name -> runs of (random?, MiB)
FILES = {
    "head1": [(True, 1), (False, 2)],
    "head10": [(True, 10), (False, 2)],
    "head28": [(True, 28), (False, 2)],
    "tail10": [(False, 2), (True, 10)],
    "stripes": [(i % 2 == 0, 1) for i in range(6)],
    "random": [(True, 10)],
}


def text(rng, n):
    """Lines of words drawn at random: compresses to about half."""
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz")
                   for _ in range(rng.randint(2, 9))) for _ in range(2048)]
    out = bytearray()
    while len(out) < n:
        out += b" ".join(rng.choices(words, k=2000)) + b"\n"
    return bytes(out[:n])


@pytest.fixture(scope="module")
def mixed(srcfs, tmp_path_factory):
    """The mixed files; a tree of their text runs alone, to compare image
    sizes with; and a tar of the mixed files."""
    root, texts = srcfs / "mixed-files", srcfs / "mixed-texts"
    for d in (root, texts):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
    rng = random.Random(13)
    random_bytes = 0
    for name, runs in FILES.items():
        body = bytearray()
        for i, (is_random, mib) in enumerate(runs):
            if is_random:
                body += rng.randbytes(mib * MiB)
                random_bytes += mib * MiB
            else:
                t = text(rng, mib * MiB)
                (texts / f"{name}-{i}").write_bytes(t)
                body += t
        (root / name).write_bytes(bytes(body))
    tar = tmp_path_factory.mktemp("mixed-tar") / "mixed.tar"
    subprocess.run(["tar", "--numeric-owner", "--format=pax", "--sort=name",
                    "-C", str(root), "-cf", str(tar), "."], check=True)
    return root, texts, tar, random_bytes


_text_sizes = {}


def text_image_size(kiln, texts, tmp_path, opts):
    key = tuple(opts)
    if key not in _text_sizes:
        img = tmp_path / "texts.erofs"
        kiln.build(texts, img, *opts)
        _text_sizes[key] = img.stat().st_size
    return _text_sizes[key]


def build(kiln, mixed, img, source, opts):
    root, _, tar, _ = mixed
    if source == "dir":
        kiln.build(root, img, *opts)
    else:
        kiln.ok("build", *opts, "--tar", tar, img, timeout=600)


@pytest.mark.parametrize("source", ["dir", "tar"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("codec", CODECS)
def test_mixed_files_store_random_runs_raw_and_text_compressed(
        kiln, mixed, tmp_path, kernel_mount, codec, layout, source):
    root, texts, _, random_bytes = mixed
    opts = ["-j2", "-z", codec, "--layout", layout]
    img = tmp_path / "mixed.erofs"
    build(kiln, mixed, img, source, opts)
    kiln.ok("fsck", img)
    # the random bytes raw, the text about as small as on its own: a file
    # stored whole uncompressed would add its text's size
    size = img.stat().st_size
    bound = random_bytes + \
        1.1 * text_image_size(kiln, texts, tmp_path, opts) + 128 * 1024
    assert size <= bound, (size, bound)
    with kernel_mount(img) as mnt:
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"],
                       capture_output=True)
        tree_compare(root, mnt, fields=("type", "size", "data", "listing"),
                     root_attrs=False)


@pytest.mark.parametrize("source", ["dir", "tar"])
@pytest.mark.parametrize("opts", [["-z", "lz4"],
                                  ["-z", "zstd", "--layout", "classic"],
                                  ["-z", "zstd", "--layout", "extents"],
                                  ["-z", "deflate", "--layout", "extents",
                                   "--no-fragments"]])
def test_mixed_files_are_the_same_bytes_for_any_thread_count(
        kiln, mixed, tmp_path, source, opts):
    a, b = tmp_path / "j1.erofs", tmp_path / "j2.erofs"
    build(kiln, mixed, a, source, ["-j1", *opts])
    build(kiln, mixed, b, source, ["-j2", *opts])
    assert a.read_bytes() == b.read_bytes()


def test_a_tar_stream_gives_the_directory_image(kiln, mixed, tmp_path):
    opts = ["-j2", "-z", "zstd", "--layout", "extents"]
    a, b = tmp_path / "dir.erofs", tmp_path / "tar.erofs"
    build(kiln, mixed, a, "dir", opts)
    build(kiln, mixed, b, "tar", opts)
    assert a.read_bytes() == b.read_bytes()


def dump_erofs():
    """erofs-utils 1.9's dump.erofs (extent lists of 48-bit images)."""
    for p in (os.path.expanduser(
                  "~/.cache/kiln-peers/erofs-utils-1.9.4/bin/dump.erofs"),
              shutil.which("dump.erofs")):
        if not p or not os.access(p, os.X_OK):
            continue
        r = subprocess.run([p, "-V"], capture_output=True, text=True)
        m = re.search(r"(\d+)\.(\d+)", r.stdout + r.stderr)
        if m and (int(m.group(1)), int(m.group(2))) >= (1, 9):
            return p
    return None


EXTENT = re.compile(r"^\s*\d+:\s*(\d+)\.\.\s*(\d+)\s*\|\s*(\d+)\s*:"
                    r"\s*(\d+)\.\.\s*(\d+)\s*\|\s*(\d+)")


def extents(dump, img, name):
    r = subprocess.run([dump, f"--path=/{name}", "-e", str(img)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    head = r.stdout.split("Ext:")[0]
    layout = int(re.search(r"Layout: (\d+)", head).group(1))
    out = []
    for line in r.stdout.splitlines():
        m = EXTENT.match(line)
        if m:
            lstart, lend, _, _, _, plen = map(int, m.groups())
            out.append((lstart, lend - lstart, plen))
    return layout, out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("codec", ["lz4hc", "zstd"])
def test_each_run_gets_its_kind_of_pcluster(kiln, mixed, tmp_path, codec,
                                            layout):
    """The map itself: an extent inside a random run is raw (as long as
    its input), one inside text is compressed; the random file of more
    than one segment keeps raw pclusters, one of a single segment is
    stored uncompressed."""
    dump = dump_erofs()
    if not dump:
        pytest.skip("no dump.erofs 1.9 to list extents with")
    root, _, _, _ = mixed
    img = tmp_path / "map.erofs"
    kiln.build(root, img, "-j2", "-z", codec, "--layout", layout,
               "--no-fragments")
    margin = 256 * 1024     # a pcluster across a change of kind
    for name, runs in FILES.items():
        lay, ext = extents(dump, img, name)
        assert lay != 0, f"{name} stored uncompressed"
        spans, at = [], 0
        for is_random, mib in runs:
            spans.append((at, at + mib * MiB, is_random))
            at += mib * MiB
        raw = packed = 0
        for lstart, llen, plen in ext:
            for start, end, is_random in spans:
                if lstart >= start + margin and \
                        lstart + llen <= end - margin:
                    if is_random:
                        assert plen >= llen, (name, lstart, llen, plen)
                    else:
                        assert plen < llen, (name, lstart, llen, plen)
            if plen >= llen:
                raw += llen
            else:
                packed += llen
        want_raw = sum(m for r, m in runs if r) * MiB
        assert want_raw - 2 * margin <= raw <= want_raw + len(runs) * margin
        assert packed >= sum(m for r, m in runs if not r) * MiB - \
            len(runs) * margin
    small = tmp_path / "small"
    small.mkdir()
    (small / "r").write_bytes(random.Random(3).randbytes(5 * MiB + 3000))
    img = tmp_path / "small.erofs"
    kiln.build(small, img, "-z", codec, "--layout", layout)
    lay, _ = extents(dump, img, "r")
    assert lay in (0, 2), "an all random file of one segment is compressed"
