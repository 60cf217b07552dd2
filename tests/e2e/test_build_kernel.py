# SPDX-License-Identifier: MIT
"""kiln build, checked through the kernel: every byte and attribute of the
source comes back from a loop mount, under every build option."""

import fnmatch
import os
import re
import shutil
import subprocess
import time

import pytest

from helpers import (assert_same, file_digest, have,
                     info_field, snapshot, tree_compare)

pytestmark = pytest.mark.sanitize

UUID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"


def fixed_time_expect(sec):
    def expect(rel, n):
        n.mtime = sec * 10**9
    return expect


@pytest.mark.parametrize("block_size", [4096, 512, 1024, 2048])
def test_every_byte_and_attribute_survives_a_kernel_mount(
        kiln, rich_tree, tmp_path, kernel_mount, block_size):
    img = tmp_path / "rich.erofs"
    if block_size == 4096:
        kiln.build(rich_tree.root, img)
    else:
        kiln.build(rich_tree.root, img, "-b", str(block_size))
    assert os.path.getsize(img) % block_size == 0
    with kernel_mount(img) as mnt:
        assert os.statvfs(mnt).f_bsize == block_size
        tree_compare(rich_tree.root, mnt)


def test_long_option_names_match_short_ones(kiln, small_tree, tmp_path):
    a, b = tmp_path / "short.erofs", tmp_path / "long.erofs"
    kiln.build(small_tree.root, a, "-b", "1024", "-L", "vol", "-T", "77",
               "-U", UUID)
    kiln.build(small_tree.root, b, "--block-size", "1024", "--label", "vol",
               "--mtime", "77", "--uuid", UUID)
    assert a.read_bytes() == b.read_bytes()


def test_all_root_owns_everything_by_root(kiln, rich_tree, tmp_path,
                                          kernel_mount):
    img = tmp_path / "root.erofs"
    kiln.build(rich_tree.root, img, "--all-root")

    def expect(rel, n):
        n.uid = n.gid = 0
    with kernel_mount(img) as mnt:
        tree_compare(rich_tree.root, mnt, expect=expect)


def test_force_uid_and_gid_apply_to_every_inode(kiln, rich_tree, tmp_path,
                                                kernel_mount):
    img = tmp_path / "forced.erofs"
    kiln.build(rich_tree.root, img, "--force-uid", "4000000001",
               "--force-gid", "1234")

    def expect(rel, n):
        n.uid, n.gid = 4000000001, 1234
    with kernel_mount(img) as mnt:
        tree_compare(rich_tree.root, mnt, expect=expect)


def test_force_gid_alone_keeps_uids(kiln, small_tree, tmp_path, kernel_mount):
    img = tmp_path / "gid.erofs"
    kiln.build(small_tree.root, img, "--force-gid", "65536")

    def expect(rel, n):
        n.gid = 65536
    with kernel_mount(img) as mnt:
        tree_compare(small_tree.root, mnt, expect=expect)


def inode_sizes(img, mnt, limit=400):
    """{path: 32 or 64} from dump.erofs --nid (the inode number is the nid)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(os.fsencode(mnt)):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            nid = os.lstat(p).st_ino
            r = subprocess.run(["dump.erofs", f"--nid={nid}", str(img)],
                               capture_output=True, text=True)
            m = re.search(r"Inode size:\s*(\d+)", r.stdout)
            if m:
                out[p] = int(m.group(1))
            if len(out) >= limit:
                return out
    return out


def test_fixed_mtime_gives_every_inode_that_exact_time(
        kiln, rich_tree, tmp_path, kernel_mount):
    img = tmp_path / "fixed.erofs"
    kiln.build(rich_tree.root, img, "-T", "1700000000")
    with kernel_mount(img) as mnt:
        tree_compare(rich_tree.root, mnt,
                     expect=fixed_time_expect(1700000000))
        if have("dump.erofs"):
            sizes = inode_sizes(img, mnt)
            if sizes:
                # One time for all: nothing needs an extended inode for it;
                # the files that still do have owners > 65535, sizes >
                # 4 GiB, or nlink > 65535.
                compact = [p for p, s in sizes.items() if s == 32]
                assert compact, "no compact inode although all mtimes agree"


def test_fixed_mtime_before_1970_is_exact(kiln, small_tree, tmp_path,
                                          kernel_mount):
    img = tmp_path / "old.erofs"
    kiln.build(small_tree.root, img, "--mtime", "-86400")
    with kernel_mount(img) as mnt:
        tree_compare(small_tree.root, mnt, expect=fixed_time_expect(-86400))


def test_compact_inodes_keep_exact_times_when_they_share_one(
        kiln, make_tree, tmp_path, kernel_mount):
    """All files share one mtime with nanoseconds: a builder that stores
    them in compact inodes must still give that time to the nanosecond."""
    t = make_tree("one-time", seed=3, many=50)
    stamp = 1600000000 * 10**9 + 987654321
    for dirpath, dirnames, filenames in os.walk(t.root):
        for n in dirnames + filenames:
            os.utime(os.path.join(dirpath, n), ns=(stamp, stamp),
                     follow_symlinks=False)
    os.utime(t.root, ns=(stamp, stamp))
    img = tmp_path / "one-time.erofs"
    kiln.build(t.root, img)
    with kernel_mount(img) as mnt:
        tree_compare(t.root, mnt)


def test_source_date_epoch_bounds_every_mtime_and_fixes_build_time(
        kiln, rich_tree, tmp_path, kernel_mount):
    sde = 1500000000
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(rich_tree.root, a, env={"SOURCE_DATE_EPOCH": str(sde)})
    time.sleep(1.1)
    kiln.build(rich_tree.root, b, env={"SOURCE_DATE_EPOCH": str(sde)})
    assert a.read_bytes() == b.read_bytes(), \
        "SOURCE_DATE_EPOCH builds a second apart differ"
    info = kiln.info(a)
    build_time = info_field(info, "build_time_unix", "build_time")
    if isinstance(build_time, (int, float)):
        assert int(build_time) == sde
    src = snapshot(rich_tree.root, data=False, xattrs=False)
    with kernel_mount(a) as mnt:
        img = snapshot(mnt, data=False, xattrs=False)
    bad = []
    for rel, n in img.items():
        s = src[rel].mtime
        allowed = {sde * 10**9} | ({s} if s <= sde * 10**9 else set())
        if n.mtime not in allowed:
            bad.append(f"/{rel.decode(errors='replace')}: "
                       f"{n.mtime} not in {sorted(allowed)}")
    assert_same(bad, "mtimes with SOURCE_DATE_EPOCH")


def test_exclude_patterns_drop_names_paths_and_whole_directories(
        kiln, rich_tree, tmp_path, kernel_mount):
    img = tmp_path / "excl.erofs"
    kiln.build(rich_tree.root, img, "-x", "many", "-x", "sizes/r4*",
               "--exclude", "*.hidden", "-x", "times/dir")

    patterns = [b"many", b"sizes/r4*", b"*.hidden", b"times/dir"]

    def excluded(rel):
        # fnmatch without FNM_PATHNAME, on the relative path and on the
        # bare name: "many" also drops /xattrs/many.
        name = os.path.basename(rel)
        return any(fnmatch.fnmatchcase(rel, p) or fnmatch.fnmatchcase(name, p)
                   for p in patterns)
    with kernel_mount(img) as mnt:
        assert not (mnt / "many").exists()
        assert not (mnt / "xattrs" / "many").exists()
        assert not (mnt / "names" / ".hidden").exists()
        assert (mnt / "sizes" / "r1").exists()
        assert not (mnt / "sizes" / "r4096").exists()
        tree_compare(rich_tree.root, mnt, exclude=excluded)


def test_exclude_from_reads_patterns_like_repeated_x(kiln, rich_tree,
                                                    tmp_path):
    # More patterns than the first allocation holds, with comments, blank
    # lines and CRLF endings: the same image as the patterns given by -x.
    patterns = ["many", "sizes/r4*", "*.hidden", "times/dir"]
    patterns += [f"no-such-name-{i}" for i in range(40)]
    listing = tmp_path / "excludes"
    listing.write_bytes(b"# skipped\n\n" + b"".join(
        p.encode() + (b"\r\n" if i % 2 else b"\n")
        for i, p in enumerate(patterns)))
    a, b = tmp_path / "from.erofs", tmp_path / "x.erofs"
    kiln.build(rich_tree.root, a, "--exclude-from", listing, "-T", "0")
    opts = [o for p in patterns for o in ("-x", p)]
    kiln.build(rich_tree.root, b, *opts, "-T", "0")
    assert a.read_bytes() == b.read_bytes()
    names = kiln.ok("ls", a, "/").text.split()
    assert "many" not in names and "sizes" in names, names


def test_no_xattrs_drops_every_xattr(kiln, small_tree, tmp_path,
                                     kernel_mount):
    img = tmp_path / "nox.erofs"
    kiln.build(small_tree.root, img, "--no-xattrs")

    def expect(rel, n):
        n.xattrs = {}
        # An ACL also shows in the mode; that stays as the source has it.
    with kernel_mount(img) as mnt:
        tree_compare(small_tree.root, mnt, expect=expect)


def test_label_and_uuid_are_stored(kiln, small_tree, tmp_path, kernel_mount):
    img = tmp_path / "label.erofs"
    kiln.build(small_tree.root, img, "-L", "kiln-test-lbl15", "-U", UUID)
    info = kiln.info(img)
    assert info_field(info, "label", "volume_name", "volume-name") == \
        "kiln-test-lbl15"
    assert str(info_field(info, "uuid", "UUID")).lower() == UUID
    if have("blkid"):
        r = subprocess.run(["blkid", "-p", "-o", "export", str(img)],
                           capture_output=True, text=True)
        tags = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
        assert tags.get("TYPE") == "erofs", r.stdout + r.stderr
        assert tags.get("UUID", "").lower() == UUID
        if "LABEL" in tags:
            assert tags["LABEL"] == "kiln-test-lbl15"
    if have("dump.erofs"):
        r = subprocess.run(["dump.erofs", "-s", str(img)],
                           capture_output=True, text=True)
        assert UUID in r.stdout.lower(), r.stdout + r.stderr
    with kernel_mount(img) as mnt:
        tree_compare(small_tree.root, mnt)


def test_label_longer_than_15_bytes_is_refused(kiln, small_tree, tmp_path):
    img = tmp_path / "long-label.erofs"
    r = kiln.fails("build", "-L", "sixteen-bytes-xx", small_tree.root, img)
    assert not img.exists()
    assert "label" in r.err.lower()


def test_same_tree_gives_identical_bytes_and_uuid(kiln, rich_tree, tmp_path):
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(rich_tree.root, a)
    time.sleep(1.1)
    kiln.build(rich_tree.root, b)
    assert file_digest(a, a.stat().st_size) == \
        file_digest(b, b.stat().st_size), "two builds of one tree differ"
    ua = info_field(kiln.info(a), "uuid", "UUID")
    assert ua == info_field(kiln.info(b), "uuid", "UUID")
    assert ua and ua != "00000000-0000-0000-0000-000000000000"


@pytest.mark.nosanitize     # the bytes, not new code: the plain pass
def test_thread_count_does_not_change_the_image(kiln, rich_tree, tmp_path):
    imgs = []
    for j in ("1", "2", "7"):
        img = tmp_path / f"j{j}.erofs"
        kiln.build(rich_tree.root, img, "-j", j)
        imgs.append(img)
    digests = {file_digest(i, i.stat().st_size) for i in imgs}
    assert len(digests) == 1, "-j1, -j2 and -j7 give different images"


def test_copy_of_the_tree_gives_the_same_image(kiln, small_tree, srcfs,
                                               tmp_path):
    """Inode numbers and directory order of the source must not leak into
    the image: a copy made in another order builds the same bytes."""
    copy = srcfs / "small-copy"
    if copy.exists():
        shutil.rmtree(copy)
    subprocess.run(["cp", "-a", small_tree.root, str(copy)], check=True)
    a, b = tmp_path / "a.erofs", tmp_path / "b.erofs"
    kiln.build(small_tree.root, a, "-U", UUID)
    kiln.build(copy, b, "-U", UUID)
    assert a.read_bytes() == b.read_bytes()


def test_quiet_build_prints_nothing(kiln, small_tree, tmp_path):
    r = kiln.build(small_tree.root, tmp_path / "q.erofs", "-q")
    assert r.out == b"" and r.err == ""


@pytest.mark.skipif(not have("fsck.erofs"), reason="no fsck.erofs")
@pytest.mark.parametrize("block_size", [4096, 1024])
def test_fsck_erofs_accepts_the_image(kiln, rich_tree, tmp_path, block_size):
    img = tmp_path / "rich.erofs"
    kiln.build(rich_tree.root, img, "-b", str(block_size))
    r = subprocess.run(["fsck.erofs", str(img)], capture_output=True,
                       text=True, timeout=300)
    if "isn't supported" in r.stderr:
        pytest.skip(f"this fsck.erofs: {r.stderr.strip().splitlines()[0]}")
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.skipif(not have("fsck.erofs"), reason="no fsck.erofs")
def test_fsck_erofs_extracts_what_the_source_holds(kiln, small_tree,
                                                   tmp_path, scratch):
    img = tmp_path / "small.erofs"
    kiln.build(small_tree.root, img)
    out = scratch / "out"
    r = subprocess.run(["fsck.erofs", f"--extract={out}", str(img)],
                       capture_output=True, text=True, timeout=300)
    if "unrecognized option" in r.stderr:
        pytest.skip("fsck.erofs cannot extract")
    assert r.returncode == 0, r.stdout + r.stderr
    # erofs-utils 1.5 extracts neither xattrs nor hardlinks as links, and
    # sets no directory times: compare what it does restore. It also
    # stops sparse files at their last data block (the kernel and kiln
    # read the same images with the full size), so those are left out.
    tree_compare(small_tree.root, out, root_attrs=False,
                 fields=("type", "size", "target", "rdev", "data", "listing"),
                 ignore=lambda rel: rel.startswith(b"sparse/"))


@pytest.mark.nosanitize     # 5 GiB: the plain pass reads it
def test_file_over_4gib_and_holes_read_back(kiln, make_tree, tmp_path,
                                           kernel_mount):
    t = make_tree("big-sparse", seed=5, many=0, big_sparse=True)
    img = tmp_path / "big.erofs"
    if os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize < 8 << 30:
        pytest.skip("less than 8 GiB free for an image that may hold 5 GiB")
    kiln.build(t.root, img)
    with kernel_mount(img) as mnt:
        big = mnt / "sparse" / "big-5g"
        assert big.stat().st_size == 5 << 30
        with open(os.path.join(t.root, "sparse", "big-5g"), "rb") as s, \
                open(big, "rb") as m:
            for off in (0, (1 << 32) - 100, (5 << 30) - 4096, 3 << 30):
                s.seek(off)
                m.seek(off)
                assert s.read(8192) == m.read(8192), f"differs at {off}"
        tree_compare(t.root, mnt)
