# SPDX-License-Identifier: MIT
"""kiln build --verity: the dm-verity tree after the image is what
veritysetup verifies and the kernel's dm-verity serves, with the printed
root hash, salt and hash offset; a flipped byte fails the kernel's read of
that file, kiln fsck --verity (naming the file) and kiln mount --verity
(EIO); the tree is reproducible, for files and block devices."""

import errno
import json
import os
import re
import stat
import subprocess

import pytest

from helpers import (have, kernel_mount_unavailable, loop_devices,
                     mount_device, tree_compare)

pytestmark = pytest.mark.sanitize

SDE = {"SOURCE_DATE_EPOCH": "4000000000"}  # after every mtime
VICTIM = b"".join(b"victim line %06d\n" % i for i in range(6000))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("verity") / "tree"
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "e" / "rand.bin").write_bytes(os.urandom(1 << 20))
    (root / "d" / "seq.txt").write_bytes(
        b"".join(b"%d\n" % i for i in range(60000)))
    (root / "victim.txt").write_bytes(VICTIM)
    (root / "small").write_bytes(b"small\n")
    (root / "empty").mkdir()
    os.symlink("d/seq.txt", root / "link")
    return root


def build(kiln, src, img, *opts):
    """kiln build --verity: the values it prints."""
    r = kiln.run("build", "--verity", *opts, src, img, env=SDE)
    assert r.rc == 0, r.describe()
    got = {}
    for key, name in (("root", "root hash"), ("salt", "salt"),
                      ("offset", "hash offset"), ("blocks", "data blocks")):
        m = re.search(rf"verity {name}: (\S+)", r.text)
        assert m, f"kiln build printed no verity {name}:\n{r.describe()}"
        got[key] = m.group(1)
    assert re.fullmatch(r"[0-9a-f]{64}", got["root"]), got
    got["offset"] = int(got["offset"])
    got["blocks"] = int(got["blocks"])
    return got


def need_veritysetup():
    why = kernel_mount_unavailable()
    if why:
        pytest.skip(why)
    if not have("veritysetup"):
        pytest.skip("needs veritysetup (Debian cryptsetup-bin)")


def dm_unavailable():
    """Why the kernel cannot serve a dm-verity device here, or None."""
    why = kernel_mount_unavailable()
    if why:
        return why
    try:
        with open("/proc/misc") as f:
            if "device-mapper" not in f.read():
                return ("the kernel has no device-mapper (dm_mod): "
                        "veritysetup open cannot run")
    except OSError as e:
        return f"cannot read /proc/misc: {e}"
    return None


def veritysetup(*args):
    return subprocess.run(["veritysetup", *map(str, args)],
                          capture_output=True, text=True)


@pytest.fixture
def dm():
    """dm(img, root, offset) -> /dev/mapper/NAME through veritysetup
    open; every device (and the loop devices under it) is closed after
    the test, pass or fail."""
    need_veritysetup()
    why = dm_unavailable()
    if why:
        pytest.skip(why)
    names = []

    def open_(img, root, offset):
        name = f"kiln-verity-{os.getpid()}-{len(names)}"
        r = veritysetup("open", img, name, img, root,
                        f"--hash-offset={offset}")
        assert r.returncode == 0, f"veritysetup open: {r.stderr}"
        names.append(name)
        return f"/dev/mapper/{name}"
    yield open_
    for name in names:
        veritysetup("close", name)


def flip_victim(img):
    """Flip one byte inside victim.txt's stored (uncompressed) data."""
    data = bytearray(img.read_bytes())
    at = data.find(VICTIM[40000:40064])
    assert at > 0, "victim.txt's data not found in the image"
    data[at + 7] ^= 0x01
    img.write_bytes(bytes(data))
    return at + 7


def flip_name(img, name):
    """Flip one bit in the directory entry @name (metadata): its last
    byte changes, as a plain read shows."""
    data = bytearray(img.read_bytes())
    at = data.find(name)
    assert at > 0 and data.find(name, at + 1) < 0, \
        f"{name!r} not found once in the image"
    data[at + len(name) - 1] ^= 0x01
    img.write_bytes(bytes(data))
    return at


READ_FILES = ("victim.txt", "small", "d/seq.txt", "d/e/rand.bin")


OPTS = pytest.mark.parametrize(
    "opts", [(), ("-z", "zstd:3"), ("-b", "512"), ("-b", "512", "-z", "zstd:3")],
    ids=["4096", "4096-zstd", "512", "512-zstd"])


@OPTS
def test_veritysetup_verifies_the_tree(kiln, tree, tmp_path, opts,
                                       kernel_mount):
    need_veritysetup()
    img = tmp_path / "v.img"
    v = build(kiln, tree, img, *opts)
    bsz = 512 if "512" in opts else 4096
    assert v["offset"] == v["blocks"] * bsz
    assert img.stat().st_size > v["offset"]
    r = veritysetup("verify", img, img, v["root"],
                    f"--hash-offset={v['offset']}")
    assert r.returncode == 0, f"veritysetup verify: {r.stderr}"
    r = veritysetup("dump", img, f"--hash-offset={v['offset']}")
    assert r.returncode == 0, r.stderr
    assert re.search(rf"Data blocks:\s+{v['blocks']}\b", r.stdout), r.stdout
    assert re.search(rf"Data block size:\s+{bsz}\b", r.stdout), r.stdout
    assert re.search(r"Hash algorithm:\s+sha256", r.stdout), r.stdout
    kiln.ok("fsck", "--verity", v["root"], img)
    # the tree after it does not bother a plain loop mount of the image
    with kernel_mount(img) as mnt:
        tree_compare(tree, mnt)


@OPTS
@pytest.mark.dm
def test_the_kernel_reads_the_verity_device(kiln, tree, tmp_path, dm, opts):
    img = tmp_path / "v.img"
    v = build(kiln, tree, img, *opts)
    with mount_device(dm(img, v["root"], v["offset"])) as mnt:
        tree_compare(tree, mnt)


@pytest.mark.dm
def test_flipped_byte_fails_the_kernel_read_of_that_file(kiln, tree,
                                                         tmp_path, dm):
    img = tmp_path / "v.img"
    v = build(kiln, tree, img)
    flip_victim(img)
    with mount_device(dm(img, v["root"], v["offset"])) as mnt:
        with pytest.raises(OSError) as e:
            with open(os.path.join(mnt, "victim.txt"), "rb") as f:
                f.read()
        assert e.value.errno == errno.EIO
        assert (open(os.path.join(mnt, "d", "seq.txt"), "rb").read() ==
                (tree / "d" / "seq.txt").read_bytes())


def test_flipped_byte_fails_veritysetup_fsck_and_kiln_mount(kiln, tree,
                                                            tmp_path):
    from test_mount import fuse_unavailable, kiln_mount

    need_veritysetup()
    img = tmp_path / "v.img"
    v = build(kiln, tree, img)
    flip_victim(img)
    r = veritysetup("verify", img, img, v["root"],
                    f"--hash-offset={v['offset']}")
    assert r.returncode != 0, "veritysetup verified a changed image"
    # kiln fsck: plain, it cannot see the change; with verity it names it
    kiln.ok("fsck", img)
    r = kiln.fails("fsck", "-v", "--verity", v["root"], img)
    assert r.rc == 1, r.describe()
    named = [l for l in r.err.splitlines() if "/victim.txt" in l]
    assert named and "fails dm-verity" in named[0], r.describe()
    assert "<data>" in r.err, r.describe()
    assert "/d/seq.txt" not in r.err, r.describe()
    # kiln mount --verity: EIO for that file only
    if fuse_unavailable():
        pytest.skip(fuse_unavailable())
    with kiln_mount(kiln, img, "--verity", v["root"]) as m:
        with pytest.raises(OSError) as e:
            (m.mnt / "victim.txt").read_bytes()
        assert e.value.errno == errno.EIO
        assert ((m.mnt / "d" / "e" / "rand.bin").read_bytes() ==
                (tree / "d" / "e" / "rand.bin").read_bytes())


def test_kiln_mount_verity_reads_the_good_image(kiln, tree, tmp_path):
    from test_mount import fuse_unavailable, kiln_mount

    if fuse_unavailable():
        pytest.skip(fuse_unavailable())
    for opts in ((), ("-z", "lz4hc")):
        img = tmp_path / "v.img"
        v = build(kiln, tree, img, *opts)
        with kiln_mount(kiln, img, "--verity", v["root"]) as m:
            tree_compare(tree, m.mnt)
        with kiln_mount(kiln, img, "--verity", v["root"], "-o",
                        "nosplice") as m:
            tree_compare(tree, m.mnt)


def test_wrong_root_hash_or_salt_is_refused(kiln, tree, tmp_path):
    img = tmp_path / "v.img"
    v = build(kiln, tree, img)
    wrong = ("0" if v["root"][0] != "0" else "1") + v["root"][1:]
    r = kiln.fails("fsck", "--verity", wrong, img)
    assert "does not hash to the root hash" in r.err, r.describe()
    r = kiln.fails("fsck", "--verity", v["root"], "--verity-salt", "00",
                   img)
    assert "root hash" in r.err, r.describe()
    r = kiln.fails("fsck", "--verity", v["root"][:10], img)
    assert r.rc == 2 and "64 hex digits" in r.err, r.describe()
    r = kiln.fails("fsck", "--verity", v["root"], "--verity-hash-offset",
                   "4096", img)
    assert "no verity superblock at byte 4096" in r.err, r.describe()
    # the tree cut off: its blocks pass the end of the file
    data = img.read_bytes()
    img.write_bytes(data[:-4096])
    r = kiln.fails("fsck", "--verity", v["root"], img)
    assert "passes the end of the image" in r.err, r.describe()
    r = kiln.fails("build", "--verity-salt", "00", tree, tmp_path / "x.img")
    assert r.rc == 2 and "need --verity" in r.err, r.describe()
    r = kiln.fails("build", "--verity", "--verity-salt", "abc", tree,
                   tmp_path / "x.img")
    assert r.rc == 2, r.describe()
    tar = tmp_path / "t.tar"
    subprocess.run(["tar", "-cf", tar, "-C", tree, "."], check=True)
    r = kiln.fails("build", "--verity", "--tar-index", tar,
                   tmp_path / "x.img")
    assert "tar index keeps the file data in the tar" in r.err, r.describe()
    assert not (tmp_path / "x.img").exists()


def test_tree_is_reproducible_at_any_thread_count(kiln, tree, tmp_path):
    a, b, c = (tmp_path / n for n in ("a.img", "b.img", "c.img"))
    va = build(kiln, tree, a, "-z", "zstd:3", "-j1")
    vb = build(kiln, tree, b, "-z", "zstd:3", "-j2")
    vc = build(kiln, tree, c, "-z", "zstd:3", "-j2")
    assert a.read_bytes() == b.read_bytes() == c.read_bytes()
    assert va == vb == vc
    # the image part is the image a build without --verity makes
    plain = tmp_path / "plain.img"
    kiln.build(tree, plain, "-z", "zstd:3", env=SDE)
    assert a.read_bytes()[:va["offset"]] == plain.read_bytes()


def test_salt_given_or_derived(kiln, tree, tmp_path):
    need_veritysetup()
    img = tmp_path / "v.img"
    derived = build(kiln, tree, img)
    assert re.fullmatch(r"[0-9a-f]{64}", derived["salt"]), derived
    salt = "00112233445566778899aabbccddeeff"
    v = build(kiln, tree, img, "--verity-salt", salt.upper())
    assert v["salt"] == salt
    assert v["root"] != derived["root"]
    r = veritysetup("dump", img, f"--hash-offset={v['offset']}")
    assert r.returncode == 0 and salt in r.stdout, r.stdout + r.stderr
    r = veritysetup("verify", img, img, v["root"],
                    f"--hash-offset={v['offset']}")
    assert r.returncode == 0, r.stderr
    kiln.ok("fsck", "--verity", v["root"], img)
    kiln.ok("fsck", "--verity", v["root"], "--verity-salt", salt, img)
    # the derived salt follows the content
    (tmp_path / "t2").mkdir()
    (tmp_path / "t2" / "f").write_bytes(b"other\n")
    other = build(kiln, tmp_path / "t2", tmp_path / "o.img")
    assert other["salt"] != derived["salt"]


def test_root_hash_file(kiln, tree, tmp_path):
    img, rh = tmp_path / "v.img", tmp_path / "root.hex"
    r = kiln.run("build", "-q", "--verity", "--verity-root-hash-file", rh,
                 tree, img, env=SDE)
    assert r.rc == 0 and r.text == "", r.describe()
    v = build(kiln, tree, tmp_path / "w.img")
    assert rh.read_text() == v["root"]
    r = kiln.fails("build", "--verity", "--verity-root-hash-file",
                   tmp_path / "no" / "such", tree, img)
    assert "cannot write the root hash" in r.err, r.describe()


@pytest.fixture
def loopdev(tmp_path):
    """loopdev(size) -> /dev/loopN (helpers.loop_devices)."""
    with loop_devices(tmp_path) as attach:
        yield attach


def test_block_device_holds_image_and_tree(kiln, tree, tmp_path, loopdev):
    need_veritysetup()
    ref = tmp_path / "ref.img"
    v = build(kiln, tree, ref)
    node = tmp_path / "node"
    dev = loopdev(16 << 20)
    os.mknod(node, stat.S_IFBLK | 0o600, os.stat(dev).st_rdev)
    assert build(kiln, tree, node) == v
    size = ref.stat().st_size
    with open(dev, "rb") as f:
        assert f.read(size) == ref.read_bytes()
    r = veritysetup("verify", dev, dev, v["root"],
                    f"--hash-offset={v['offset']}")
    assert r.returncode == 0, r.stderr
    kiln.ok("fsck", "--verity", v["root"], node)
    # a device that holds the image but not its tree
    small = loopdev(v["offset"])
    node2 = tmp_path / "node2"
    os.mknod(node2, stat.S_IFBLK | 0o600, os.stat(small).st_rdev)
    r = kiln.fails("build", "--verity", tree, node2, env=SDE)
    assert "does not fit" in r.err, r.describe()


@pytest.mark.parametrize("bsz", [4096, 512])
def test_tree_is_what_veritysetup_format_writes(kiln, tree, tmp_path, bsz):
    """veritysetup format over the bare image with kiln's salt: the same
    root hash, the same tree bytes, the same superblock but its UUID."""
    need_veritysetup()
    img, bare = tmp_path / "v.img", tmp_path / "bare.img"
    v = build(kiln, tree, img, "-b", str(bsz))
    data = img.read_bytes()
    off = v["offset"]
    bare.write_bytes(data[:off])
    r = veritysetup("format", bare, bare, f"--hash-offset={off}",
                    f"--salt={v['salt']}", f"--data-blocks={v['blocks']}",
                    f"--data-block-size={bsz}", f"--hash-block-size={bsz}")
    assert r.returncode == 0, r.stderr
    m = re.search(r"Root hash:\s+([0-9a-f]{64})", r.stdout)
    assert m and m.group(1) == v["root"], r.stdout
    theirs = bare.read_bytes()
    assert len(theirs) == len(data)
    assert theirs[off + bsz:] == data[off + bsz:], "the trees differ"
    uuid = slice(off + 16, off + 32)
    assert (theirs[off:off + 512][:16] + theirs[off + 32:off + 512] ==
            data[off:off + 512][:16] + data[off + 32:off + 512]), \
        "the superblocks differ beyond the UUID"
    assert theirs[uuid] != b"\0" * 16


def test_tree_without_superblock_from_veritysetup(kiln, tree, tmp_path):
    """A tree veritysetup format --no-superblock wrote after a plain
    image: read with the salt given, refused without it."""
    need_veritysetup()
    img = tmp_path / "n.img"
    kiln.build(tree, img, env=SDE)
    off = img.stat().st_size
    salt = "a1b2c3"
    r = veritysetup("format", img, img, "--no-superblock", f"--salt={salt}",
                    f"--hash-offset={off}")
    assert r.returncode == 0, r.stderr
    root = re.search(r"Root hash:\s+([0-9a-f]{64})", r.stdout).group(1)
    kiln.ok("fsck", "--verity", root, "--verity-salt", salt, img)
    r = kiln.fails("fsck", "--verity", root, img)
    assert "no verity superblock" in r.err, r.describe()
    r = kiln.fails("fsck", "--verity", root, "--verity-salt", "00", img)
    assert "root hash" in r.err, r.describe()


def test_data_on_an_extra_device_is_not_served_unchecked(kiln, tree,
                                                         tmp_path):
    """A tar index's data lies in the tar, outside any tree over the
    image: with verity, reading it is refused, not served unchecked."""
    need_veritysetup()
    tar, img = tmp_path / "t.tar", tmp_path / "i.img"
    subprocess.run(["tar", "-cf", tar, "-C", tree, "."], check=True)
    r = kiln.run("build", "--tar-index", tar, img, env=SDE)
    assert r.rc == 0, r.describe()
    kiln.ok("fsck", "--device", tar, img)
    off = img.stat().st_size
    r = veritysetup("format", img, img, "--no-superblock", "--salt=00",
                    f"--hash-offset={off}", "--data-block-size=512",
                    "--hash-block-size=512")
    assert r.returncode == 0, r.stderr
    root = re.search(r"Root hash:\s+([0-9a-f]{64})", r.stdout).group(1)
    r = kiln.fails("fsck", "-v", "--device", tar, "--verity", root,
                   "--verity-salt", "00", img)
    assert "not covered by the image's dm-verity tree" in r.err, r.describe()
    assert "/victim.txt" in r.err, r.describe()


# -- ls, cat, extract and info with --verity ---------------------------------

def test_read_commands_verify_the_good_image(kiln, tree, tmp_path):
    img = tmp_path / "v.img"
    v = build(kiln, tree, img, "-z", "lz4hc")
    r = kiln.ok("ls", "-lR", "--verity", v["root"], img)
    assert "victim.txt" in r.text and "rand.bin" in r.text, r.describe()
    for rel in READ_FILES + ("link",):
        r = kiln.ok("cat", "--verity", v["root"], img, "/" + rel)
        assert r.out == (tree / rel).read_bytes(), rel
    dest = tmp_path / "out"
    dest.mkdir()
    kiln.ok("extract", "--verity", v["root"], img, dest)
    tree_compare(tree, dest, root_attrs=False)   # DEST itself is ours
    r = kiln.ok("info", "--verity", v["root"], img)
    assert re.search(r"verity root hash:\s+matches", r.text), r.text
    assert re.search(rf"verity salt:\s+{v['salt']}", r.text), r.text
    assert re.search(rf"verity hash offset:\s+{v['offset']}\n", r.text)
    assert re.search(rf"verity data blocks:\s+{v['blocks']} of 4096", r.text)
    assert re.search(r"verity blocks:\s+\d+ checked, 0 bad", r.text), r.text
    j = json.loads(kiln.ok("info", "--json", "--verity", v["root"], img).out)
    assert j["verity"]["root_hash_matches"] is True
    assert j["verity"]["tree_root_hash"] == v["root"]
    assert j["verity"]["salt"] == v["salt"]
    assert j["verity"]["hash_offset"] == v["offset"]
    assert j["verity"]["data_blocks"] == v["blocks"]
    assert j["verity"]["bad_blocks"] == 0


def test_flipped_data_byte_fails_cat_extract_and_info(kiln, tree, tmp_path):
    img = tmp_path / "v.img"
    v = build(kiln, tree, img)
    flip_victim(img)
    # without verity nothing can see it: cat gives the changed bytes
    r = kiln.ok("cat", img, "/victim.txt")
    assert r.out != VICTIM and len(r.out) == len(VICTIM)
    # cat: an error naming the file, exit 1; the other files still read
    r = kiln.fails("cat", "--verity", v["root"], img, "/victim.txt")
    assert r.rc == 1, r.describe()
    assert "/victim.txt" in r.err and "fails dm-verity" in r.err, r.err
    assert r.out == b"", "bytes of the bad block were written"
    r = kiln.fails("cat", "--verity", v["root"], img, "/small",
                   "/victim.txt", "/d/seq.txt")
    assert r.rc == 1
    assert r.out == b"small\n" + (tree / "d" / "seq.txt").read_bytes()
    # ls reads metadata only: all of it is good
    kiln.ok("ls", "-lR", "--verity", v["root"], img)
    # extract: exit 1 naming the file, which is not left half written
    dest = tmp_path / "out"
    dest.mkdir()
    r = kiln.fails("extract", "--verity", v["root"], img, dest)
    assert r.rc == 1 and "/victim.txt" in r.err, r.describe()
    assert not (dest / "victim.txt").exists()
    for rel in READ_FILES[1:]:
        assert (dest / rel).read_bytes() == (tree / rel).read_bytes(), rel
    # ... nor does it leave what stood there before as if extracted
    (dest / "victim.txt").write_bytes(b"old\n")
    r = kiln.fails("extract", "-f", "--verity", v["root"], img, dest,
                   "/victim.txt")
    assert r.rc == 1, r.describe()
    assert not (dest / "victim.txt").exists()
    # info: the root matches, the walk counts the bad block
    r = kiln.fails("info", "--verity", v["root"], img)
    assert r.rc == 1, r.describe()
    assert re.search(r"verity root hash:\s+matches", r.text), r.text
    assert re.search(r"verity blocks:\s+\d+ checked, 1 bad", r.text), r.text
    # --no-walk reads the superblock only, which is good
    kiln.ok("info", "--no-walk", "--verity", v["root"], img)


def test_flipped_metadata_byte_fails_ls_cat_extract_and_info(kiln, tree,
                                                            tmp_path):
    img = tmp_path / "v.img"
    v = build(kiln, tree, img)
    flip_name(img, b"rand.bin")
    # without verity the changed name passes
    r = kiln.ok("ls", "-R", img)
    assert "rand.bio" in r.text and "rand.bin" not in r.text, r.text
    # ls: the entries on the bad block are errors naming them, exit 1
    r = kiln.fails("ls", "-R", "--verity", v["root"], img)
    assert r.rc == 1, r.describe()
    assert "fails dm-verity" in r.err and "/d/e" in r.err, r.err
    assert "rand.bi" not in r.text, r.text
    r = kiln.fails("ls", "-l", "--verity", v["root"], img, "/d")
    assert r.rc == 1 and "fails dm-verity" in r.err, r.describe()
    # cat: the file below the bad block cannot be reached, others can
    r = kiln.fails("cat", "--verity", v["root"], img, "/d/e/rand.bin")
    assert r.rc == 1 and "/d/e/rand.bin" in r.err, r.describe()
    assert "fails dm-verity" in r.err, r.err
    r = kiln.ok("cat", "--verity", v["root"], img, "/victim.txt")
    assert r.out == VICTIM
    # extract: exit 1 naming what it could not read; the rest is there
    dest = tmp_path / "out"
    dest.mkdir()
    r = kiln.fails("extract", "--verity", v["root"], img, dest)
    assert r.rc == 1 and "/d/e" in r.err, r.describe()
    assert not (dest / "d" / "e" / "rand.bin").exists()
    assert not (dest / "d" / "e" / "rand.bio").exists()
    assert (dest / "victim.txt").read_bytes() == VICTIM
    assert (dest / "small").read_bytes() == b"small\n"
    # info: the walk finds the bad block
    r = kiln.fails("info", "--verity", v["root"], img)
    assert r.rc == 1, r.describe()
    assert re.search(r"verity blocks:\s+\d+ checked, [1-9]\d* bad",
                     r.text), r.text


def test_info_says_whether_the_root_hash_matches(kiln, tree, tmp_path):
    img = tmp_path / "v.img"
    v = build(kiln, tree, img)
    wrong = ("0" if v["root"][0] != "0" else "1") + v["root"][1:]
    r = kiln.fails("info", "--verity", wrong, img)
    assert r.rc == 1, r.describe()
    assert f"does not match: the tree hashes to {v['root']}" in r.text, r.text
    assert re.search(rf"verity salt:\s+{v['salt']}", r.text), r.text
    assert "does not hash to the root hash given" in r.err, r.err
    r = kiln.fails("info", "--json", "--verity", wrong, img)
    j = json.loads(r.out)
    assert j["verity"]["root_hash_matches"] is False
    assert j["verity"]["tree_root_hash"] == v["root"]
    assert "blocks_checked" not in j["verity"]
    # the other readers refuse to open through a wrong root
    for argv in (("ls",), ("cat",), ("extract",)):
        extra = {"cat": ("/small",), "extract": (tmp_path / "o",)}
        r = kiln.fails(*argv, "--verity", wrong, img,
                       *extra.get(argv[0], ()))
        assert r.rc == 1, r.describe()
        assert "does not hash to the root hash given" in r.err, r.err
    # an image without a tree
    plain = tmp_path / "plain.img"
    kiln.build(tree, plain)
    r = kiln.fails("info", "--verity", v["root"], plain)
    assert "no tree found" in r.text, r.describe()


@pytest.mark.parametrize("cmd", ["ls", "cat", "extract", "info"])
def test_read_commands_verity_options_need_verity(kiln, tree, tmp_path, cmd):
    img = tmp_path / "v.img"
    build(kiln, tree, img)
    r = kiln.fails(cmd, "--verity-salt", "00", img)
    assert r.rc == 2 and "need --verity" in r.err, r.describe()
    r = kiln.fails(cmd, "--verity", "abc", img)
    assert r.rc == 2 and "64 hex digits" in r.err, r.describe()
