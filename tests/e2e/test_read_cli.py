# SPDX-License-Identifier: MIT
"""kiln ls, cat, extract, info and fsck on images kiln built, checked
against the source tree."""

import os
import random
import re
import shutil
import stat
import tempfile
import uuid
from pathlib import Path

import pytest

from helpers import info_field, snapshot, tree_compare

pytestmark = pytest.mark.sanitize

def entries(tree_root, rel):
    d = os.path.join(tree_root, rel)
    return {n: os.lstat(os.path.join(d, n)) for n in os.listdir(d)}


def ls_names(out):
    names = [l for l in out.decode("utf-8", "surrogateescape").splitlines()
             if l not in (".", "..")]
    return names


def test_ls_lists_exactly_the_names_of_each_directory(kiln, rich_tree,
                                                      rich_image):
    for rel in rich_tree.listing_dirs + [""]:
        want = set(os.listdir(os.path.join(rich_tree.root, rel)))
        got = kiln.ok("ls", "-a", rich_image, "/" + rel).out
        assert set(ls_names(got)) == want, f"kiln ls /{rel}"


def test_ls_hides_dot_names_unless_asked(kiln, rich_tree, rich_image):
    got = set(ls_names(kiln.ok("ls", rich_image, "/names").out))
    want = set(os.listdir(os.path.join(rich_tree.root, "names")))
    assert got == {n for n in want if not n.startswith(".")} or got == want


def test_ls_with_no_path_lists_the_root(kiln, rich_tree, rich_image):
    got = set(ls_names(kiln.ok("ls", "-a", rich_image).out))
    assert got == set(os.listdir(rich_tree.root))


def test_ls_of_the_big_directory_has_every_entry(kiln, rich_tree, rich_image):
    got = ls_names(kiln.ok("ls", "-a", rich_image, "/many").out)
    want = set(os.listdir(os.path.join(rich_tree.root, "many")))
    assert len(got) == len(want) and set(got) == want


def test_ls_shows_odd_names_one_per_line(kiln, rich_tree, rich_image):
    """Names with control bytes or invalid UTF-8 may be escaped, but each
    entry is still one line."""
    got = ls_names(kiln.ok("ls", "-a", rich_image, "/names").out)
    assert len(got) == len(os.listdir(os.path.join(rich_tree.root, "names")))
    printable = {n for n in os.listdir(os.path.join(rich_tree.root, "names"))
                 if n.isprintable() and n.encode("utf-8", "surrogateescape")
                 .decode("utf-8", "replace") == n}
    assert printable <= set(got)


def find_line(lines, name, st):
    for l in lines:
        if l.startswith("l"):
            if stat.S_ISLNK(st.st_mode) and f" {name} -> " in l:
                return l
        elif not stat.S_ISLNK(st.st_mode) and l.endswith(" " + name):
            return l
    return None


def test_ls_long_shows_mode_owner_size_and_link_target(kiln, rich_tree,
                                                       rich_image):
    for rel in rich_tree.listing_dirs:
        out = kiln.ok("ls", "-l", "-a", "-n", rich_image, "/" + rel).text
        lines = out.splitlines()
        for name, st in entries(rich_tree.root, rel).items():
            l = find_line(lines, name, st)
            assert l, f"kiln ls -l /{rel}: no line for {name!r}\n{out}"
            toks = l.split()
            assert toks[0].startswith(stat.filemode(st.st_mode)), \
                f"mode of /{rel}/{name}: {l!r}, want {stat.filemode(st.st_mode)}"
            assert str(st.st_uid) in toks and str(st.st_gid) in toks, \
                f"owner of /{rel}/{name} ({st.st_uid}:{st.st_gid}): {l!r}"
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                assert str(st.st_size) in toks, \
                    f"size of /{rel}/{name} ({st.st_size}): {l!r}"
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(os.path.join(rich_tree.root, rel, name))
                if target.isprintable():
                    assert l.endswith(" -> " + target), l
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                nums = re.findall(r"\d+", l)
                assert str(os.major(st.st_rdev)) in nums and \
                    str(os.minor(st.st_rdev)) in nums, \
                    f"device numbers of /{rel}/{name}: {l!r}"


def test_ls_long_of_a_file_describes_that_file(kiln, rich_tree, rich_image):
    st = os.lstat(os.path.join(rich_tree.root, "sizes", "r4097"))
    out = kiln.ok("ls", "-l", "-n", rich_image, "/sizes/r4097").text.strip()
    assert out.count("\n") == 0 and out.endswith("r4097"), out
    assert out.split()[0].startswith(stat.filemode(st.st_mode))
    assert "4097" in out.split()


def cat_candidates(tree, extra_many=40):
    files = [f for f in tree.files if not f.startswith(b"sparse/big")]
    many = sorted(os.listdir(os.path.join(os.fsencode(tree.root), b"many")))
    rng = random.Random(11)
    for n in rng.sample(many, min(extra_many, len(many))):
        p = os.path.join(b"many", n)
        if os.path.isfile(os.path.join(os.fsencode(tree.root), p)):
            files.append(p)
    for n in os.listdir(os.path.join(os.fsencode(tree.root), b"names")):
        p = os.path.join(b"names", n)
        if os.path.isfile(os.path.join(os.fsencode(tree.root), p)):
            files.append(p)
    return files


def test_cat_gives_the_bytes_of_every_file(kiln, rich_tree, rich_image):
    root = os.fsencode(rich_tree.root)
    for rel in cat_candidates(rich_tree):
        with open(os.path.join(root, rel), "rb") as f:
            want = f.read()
        got = kiln.ok("cat", rich_image, b"/" + rel).out
        assert got == want, f"kiln cat /{rel!r}: {len(got)} bytes, " \
                            f"want {len(want)}"


def test_cat_of_a_hardlink_gives_the_shared_bytes(kiln, rich_tree,
                                                  rich_image):
    a = kiln.ok("cat", rich_image, "/hard/a/orig").out
    assert a == kiln.ok("cat", rich_image, "/hard/b/link1").out
    assert a == kiln.ok("cat", rich_image, "hard/link2").out
    assert len(a) == 10000


def test_cat_of_a_missing_path_fails_and_names_it(kiln, rich_image):
    r = kiln.fails("cat", rich_image, "/sizes/no-such-file")
    assert "no-such-file" in r.err
    assert r.out == b""


def test_cat_of_a_directory_fails(kiln, rich_image):
    r = kiln.fails("cat", rich_image, "/sizes")
    assert "sizes" in r.err


def test_cat_through_a_missing_directory_fails(kiln, rich_image):
    kiln.fails("cat", rich_image, "/sizes/r1/below-a-file")
    kiln.fails("cat", rich_image, "/nope/r1")


def test_extract_recreates_the_whole_tree(kiln, rich_tree, rich_image,
                                          scratch, need_root):
    dest = scratch / "out"
    dest.mkdir()
    kiln.ok("extract", rich_image, dest, timeout=600)
    tree_compare(rich_tree.root, dest, root_attrs=False)


def test_extract_of_a_subdirectory_holds_just_that_subtree(
        kiln, rich_tree, rich_image, scratch, need_root):
    dest = scratch / "sub"
    dest.mkdir()
    kiln.ok("extract", rich_image, dest, "/sizes")
    names = os.listdir(dest)
    src = os.path.join(rich_tree.root, "sizes")
    if names == ["sizes"]:
        tree_compare(src, dest / "sizes")
    else:
        tree_compare(src, dest, root_attrs=False)


def test_extract_of_a_missing_path_fails(kiln, rich_image, tmp_path):
    dest = tmp_path / "none"
    dest.mkdir()
    kiln.fails("extract", rich_image, dest, "/does/not/exist")
    assert os.listdir(dest) == []


def test_extract_as_a_user_keeps_bytes_and_modes(kiln, small_image,
                                                 small_tree, scratch):
    """Without root the owners can't be set; everything else can. Run as
    root, the extract runs as nobody (setpriv drops the privileges), in a
    directory outside pytest's private one."""
    if os.geteuid() != 0:
        dest = scratch / "out"
        dest.mkdir()
        kiln.ok("extract", small_image, dest)
        tree_compare(small_tree.root, dest, root_attrs=False,
                     fields=("type", "size", "target", "data", "listing"))
        return
    assert shutil.which("setpriv"), "setpriv (util-linux) is not on PATH"
    # the tree root made has device nodes, which only root can create
    # (an overlayfs whiteout, 0:0, anyone can): each is an error that names
    # it, and the rest is extracted
    devs = {rel for rel, n in snapshot(small_tree.root, data=False,
                                       xattrs=False).items()
            if n.type in ("chr", "blk") and n.rdev != (0, 0)}
    base = Path(tempfile.mkdtemp(prefix="kiln-user-"))
    try:
        os.chmod(base, 0o755)
        img, dest = base / "small.erofs", base / "out"
        shutil.copyfile(small_image, img)
        os.chmod(img, 0o644)
        dest.mkdir()
        os.chmod(dest, 0o777)
        r = kiln.run("extract", "--no-xattrs", img, dest, wrapper=(
            "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"))
        assert r.rc == (1 if devs else 0), r.describe()
        for rel in devs:
            assert f"/{os.fsdecode(rel)}: creating the device node " \
                "(needs root)" in r.err, r.describe()
        assert {os.lstat(p).st_uid for p in dest.iterdir()} == {65534}
        tree_compare(small_tree.root, dest, root_attrs=False,
                     fields=("type", "size", "target", "data", "listing"),
                     ignore=lambda rel: rel in devs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_info_json_describes_the_image(kiln, rich_tree, rich_image):
    info = kiln.info(rich_image)
    size = os.path.getsize(rich_image)
    assert info_field(info, "block_size", "blocksize", "block-size") == 4096
    blocks = info_field(info, "blocks")
    assert blocks * 4096 == size, f"{blocks} blocks for {size} bytes"
    isz = info_field(info, "image_size", "image-size", "size")
    assert isz == size
    src = snapshot(rich_tree.root, data=False, xattrs=False)
    inodes = len({n.ino for n in src.values()})
    assert info_field(info, "inodes", "inos") == inodes
    root_nid = info_field(info, "root_nid", "root-nid", "rootnid")
    assert isinstance(root_nid, int) and 0 < root_nid * 32 < size
    u = info_field(info, "uuid", "UUID")
    uuid.UUID(str(u))


def test_info_without_json_is_readable_text(kiln, rich_image):
    out = kiln.ok("info", rich_image).text
    assert "4096" in out
    assert len(out.splitlines()) >= 3


@pytest.mark.parametrize("block_size", [4096, 512])
def test_fsck_passes_on_a_good_image(kiln, rich_tree, tmp_path, block_size):
    img = tmp_path / "good.erofs"
    kiln.build(rich_tree.root, img, "-b", str(block_size))
    kiln.ok("fsck", img, timeout=600)


def test_fsck_passes_on_the_small_image(kiln, small_image):
    kiln.ok("fsck", small_image)


@pytest.mark.parametrize("content", [b"", b"\0" * 8192,
                                     bytes(range(256)) * 64],
                         ids=["empty", "zeros", "pattern"])
@pytest.mark.parametrize("cmd", [["ls"], ["cat", "/x"], ["info"], ["fsck"],
                                 ["extract", "DEST"]],
                         ids=["ls", "cat", "info", "fsck", "extract"])
def test_commands_refuse_a_file_that_is_no_image(kiln, tmp_path, content,
                                                 cmd):
    img = tmp_path / "not-an-image"
    img.write_bytes(content)
    args = [a if a != "DEST" else tmp_path / "dest" for a in cmd[1:]]
    (tmp_path / "dest").mkdir()
    r = kiln.fails(cmd[0], img, *args)
    assert str(img) in r.err or "not-an-image" in r.err, r.describe()


def test_commands_refuse_a_missing_image(kiln, tmp_path):
    img = tmp_path / "missing.erofs"
    for cmd in (["ls"], ["info"], ["fsck"], ["cat", "/a"]):
        r = kiln.fails(cmd[0], img, *cmd[1:])
        assert "missing.erofs" in r.err
