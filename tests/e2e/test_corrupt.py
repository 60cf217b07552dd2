# SPDX-License-Identifier: MIT
"""Corrupt images (tests/data/mkcorrupt.py): kiln fsck catches structural
damage, and no reader command ever crashes, hangs or fails silently."""

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import have

import mkcorrupt

pytestmark = pytest.mark.sanitize

SEED = int(os.environ.get("KILN_CORRUPT_SEED", "20261130"))
RANDOM_FLIPS = int(os.environ.get("KILN_CORRUPT_RANDOM", "16"))
# may-pass variants per image in the (slow) reader walk; all must-fail ones
# always run.
MAY_LIMIT = int(os.environ.get("KILN_CORRUPT_MAY", "60"))
JOBS = int(os.environ.get("KILN_TEST_JOBS", str((os.cpu_count() or 2) + 1)))

IMAGES = ["kiln-4096", "kiln-1024", "mkfs", "mkfs-chunked"]

CATEGORIES = {
    "truncated": ("trunc-",),
    "superblock": ("sb-",),
    "inode": ("ino-",),
    "dirent": ("dir-",),
    "xattr": ("xattr-",),
}


@pytest.fixture(scope="session")
def corrupt_tree(make_tree):
    # Small files, xattrs that fit ext4, names mkfs.erofs 1.5 accepts.
    return make_tree("corrupt", seed=9, many=100, light=True,
                     big_xattrs=False, name_max=254)


@pytest.fixture(scope="session")
def good_images(kiln, corrupt_tree, tmp_path_factory):
    made = {}
    d = tmp_path_factory.mktemp("good")

    def get(name):
        if name in made:
            return made[name]
        img = d / f"{name}.erofs"
        if name.startswith("kiln-"):
            kiln.build(corrupt_tree.root, img, "-b", name.split("-")[1])
        else:
            if not have("mkfs.erofs"):
                pytest.skip("mkfs.erofs not installed")
            opts = ["--chunksize=4096"] if name == "mkfs-chunked" else []
            r = subprocess.run(["mkfs.erofs", "--quiet", *opts, str(img),
                                corrupt_tree.root], capture_output=True,
                               text=True)
            assert r.returncode == 0, r.stderr
        # The image must be sound before we break it.
        kiln.ok("fsck", img)
        made[name] = (img, img.read_bytes())
        return made[name]
    return get


def variants_of(good):
    return mkcorrupt.variants(good, seed=SEED, random_flips=RANDOM_FLIPS)


def write(tmp_path, v, good):
    p = tmp_path / "variant.erofs"
    p.write_bytes(v.apply(good))
    return p


@pytest.mark.parametrize("category", sorted(CATEGORIES))
@pytest.mark.parametrize("image", IMAGES)
def test_fsck_rejects_structural_damage(kiln, good_images, tmp_path, image,
                                        category):
    img, good = good_images(image)
    missed = []
    checked = 0
    for v in variants_of(good):
        if v.kind != mkcorrupt.MUST or \
                not v.name.startswith(CATEGORIES[category]):
            continue
        checked += 1
        p = write(tmp_path, v, good)
        r = kiln.run("fsck", p, timeout=60)
        if r.rc == 0:
            missed.append(f"{v.name}: {v.what}")
        elif not r.err.strip():
            missed.append(f"{v.name}: failed without a message")
    if checked == 0:
        pytest.skip(f"no {category} variant for this image")
    assert not missed, f"kiln fsck accepted {len(missed)} of {checked} " \
        f"broken images (seed {SEED}):\n  " + "\n  ".join(missed)


@pytest.mark.parametrize("image", ["kiln-4096", "mkfs"])
def test_fsck_messages_name_the_broken_inode(kiln, good_images, tmp_path,
                                             image):
    img, good = good_images(image)
    unnamed = []
    for v in variants_of(good):
        m = re.match(r"ino-(\d+)-", v.name)
        if v.kind != mkcorrupt.MUST or not m:
            continue
        path = re.match(r"\S+ (.*) \(nid \d+\)", v.what).group(1)
        r = kiln.run("fsck", write(tmp_path, v, good), timeout=60)
        if r.rc == 0:
            continue        # reported by the test above
        base = os.path.basename(path.rstrip("/")) or "/"
        if m.group(1) not in r.err and base not in r.err:
            unnamed.append(f"{v.name}: {r.err.strip()[:200]!r}")
    assert not unnamed, "fsck did not name the inode (nid or name):\n  " + \
        "\n  ".join(unnamed)


def probe_ls_recursive(kiln, img):
    r = kiln.run("ls", "-R", img)
    return ["ls", "-R"] if r.rc == 0 else ["ls", "-l"]


def regular_files(root, limit):
    out = []
    for dirpath, dirnames, filenames in sorted(os.walk(os.fsencode(root))):
        for n in sorted(filenames):
            p = os.path.join(dirpath, n)
            if os.path.isfile(p) and not os.path.islink(p):
                out.append(os.path.relpath(p, os.fsencode(root)))
    step = max(1, len(out) // limit)
    return out[::step][:limit]


def check_variant(kiln, p, dest, ls_cmd):
    """Problems with one variant: every command exits cleanly (no signal,
    no sanitizer report, no hang: Kiln.run fails the test for those), every
    failure says why, and a variant fsck accepts reads back consistently."""
    problems = []
    fsck = kiln.run("fsck", p, timeout=60)
    if fsck.rc != 0 and not fsck.err.strip():
        problems.append("fsck failed without a message")
    ls = kiln.run(*ls_cmd, p, timeout=60)
    if ls.rc != 0 and not ls.err.strip():
        problems.append("ls failed without a message")
    dest.mkdir()
    ex = kiln.run("extract", p, dest, timeout=60)
    if ex.rc != 0 and not ex.err.strip():
        problems.append("extract failed without a message")
    if fsck.rc != 0:
        c = kiln.run("cat", p, "/sizes/r4097", timeout=60)
        if c.rc != 0 and not c.err.strip():
            problems.append("cat failed without a message")
        return problems
    if ls.rc != 0:
        problems.append(f"fsck passed but ls failed: {ls.err.strip()}")
    if ex.rc != 0:
        problems.append(f"fsck passed but extract failed: "
                        f"{ex.err.strip()[:300]}")
        return problems
    for rel in regular_files(dest, 4):
        with open(os.path.join(os.fsencode(dest), rel), "rb") as f:
            want = f.read()
        c = kiln.run("cat", p, b"/" + rel, timeout=60)
        if c.rc != 0 or c.out != want:
            problems.append(f"fsck passed, but cat /{rel!r} ({c.rc}, "
                            f"{len(c.out)} bytes) differs from extract "
                            f"({len(want)} bytes)")
    return problems


def sample(vs, may_limit):
    """Every must-fail variant and an even spread of the may-pass ones."""
    must = [v for v in vs if v.kind == mkcorrupt.MUST]
    may = [v for v in vs if v.kind != mkcorrupt.MUST]
    step = max(1, -(-len(may) // may_limit))
    return must + may[::step]


@pytest.mark.parametrize("image", IMAGES)
def test_readers_survive_every_variant(kiln, good_images, scratch, image):
    # scratch is on tmpfs (as root): a damaged but legal xattr of up to
    # 64 KiB must extract, and ext4 keeps only about 4 KiB per inode.
    tmp_path = scratch
    img, good = good_images(image)
    ls_cmd = probe_ls_recursive(kiln, img)
    vs = sample(variants_of(good), MAY_LIMIT)

    def one(i):
        v = vs[i]
        d = tmp_path / f"v{i}"
        d.mkdir()
        p = d / "variant.erofs"
        p.write_bytes(v.apply(good))
        try:
            problems = check_variant(kiln, p, d / "out", ls_cmd)
        except pytest.fail.Exception as e:      # crash, hang, sanitizer
            problems = [str(e)[:1500]]
        shutil.rmtree(d, ignore_errors=True)
        return [f"{v.name} ({v.kind}: {v.what}): {x}" for x in problems]

    with ThreadPoolExecutor(JOBS) as pool:
        report = [x for r in pool.map(one, range(len(vs))) for x in r]
    assert not report, f"{len(report)} problems over {len(vs)} variants " \
        f"(seed {SEED}; rebuild one with tests/data/mkcorrupt.py):\n  " + \
        "\n  ".join(report)


@pytest.mark.parametrize("image", ["kiln-4096", "mkfs"])
def test_truncated_images_fail_fsck_and_reads_fail_cleanly(
        kiln, good_images, tmp_path, image):
    img, good = good_images(image)
    bs = 4096
    for cut in sorted({0, 512, 1024, 1100, bs, len(good) // 3,
                       len(good) - bs, len(good) - 1}):
        p = tmp_path / f"cut{cut}.erofs"
        p.write_bytes(good[:cut])
        r = kiln.fails("fsck", p)
        assert "cut" in r.err or str(p) in r.err, r.describe()
        kiln.run("extract", p, tmp_path / f"x{cut}")
        kiln.run("ls", "-l", p, "/sizes")


def test_mkcorrupt_is_deterministic(good_images):
    img, good = good_images("kiln-4096")
    a = [(v.name, v.kind, v.apply(good)) for v in
         mkcorrupt.variants(good, seed=3, random_flips=5)]
    b = [(v.name, v.kind, v.apply(good)) for v in
         mkcorrupt.variants(good, seed=3, random_flips=5)]
    assert a == b
    assert all(x[2] != good for x in a), "a variant equals the good image"
