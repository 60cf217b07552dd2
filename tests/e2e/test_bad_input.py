# SPDX-License-Identifier: MIT
"""kiln build on bad input: it fails with `kiln: <path>: <reason>`, leaves
no image and no temporary file, and never touches an image already at the
destination."""

import contextlib
import os
import shutil
import subprocess
import tempfile

import pytest

from helpers import stray_files, tree_compare

pytestmark = pytest.mark.sanitize

OLD = b"previous image, must survive\n" * 100


def assert_clean_failure(r, dest_dir, image, mentions, keep=()):
    assert r.rc != 0
    assert r.err.startswith("kiln: "), r.describe()
    assert any(str(m) in r.err for m in mentions), \
        f"message names none of {mentions}\n{r.describe()}"
    if os.path.isdir(dest_dir):
        assert stray_files(dest_dir, keep) == [], \
            f"left behind in {dest_dir}: {stray_files(dest_dir, keep)}"
    if os.path.basename(image) not in keep:
        assert not os.path.lexists(image)


def small_source(base):
    src = base / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f").write_bytes(b"hello\n")
    (src / "top").write_bytes(os.urandom(5000))
    return src


def test_missing_source_fails_and_names_it(kiln, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    img = out / "img.erofs"
    r = kiln.run("build", tmp_path / "no-such-dir", img)
    assert_clean_failure(r, out, img, [tmp_path / "no-such-dir"])


def test_source_that_is_a_regular_file_fails(kiln, tmp_path):
    src = tmp_path / "file"
    src.write_bytes(os.urandom(3000))
    out = tmp_path / "out"
    out.mkdir()
    img = out / "img.erofs"
    r = kiln.run("build", src, img)
    assert_clean_failure(r, out, img, [src])


def test_missing_destination_directory_fails_and_names_the_image(kiln,
                                                                 tmp_path):
    src = small_source(tmp_path)
    img = tmp_path / "nowhere" / "img.erofs"
    r = kiln.run("build", src, img)
    assert_clean_failure(r, tmp_path / "nowhere", img, [img, img.parent])
    assert not (tmp_path / "nowhere").exists()


def test_destination_that_is_a_directory_is_left_alone(kiln, tmp_path):
    src = small_source(tmp_path)
    img = tmp_path / "adir"
    img.mkdir()
    (img / "keep").write_text("x")
    r = kiln.run("build", src, img)
    assert r.rc != 0 and r.err.startswith("kiln: "), r.describe()
    assert os.listdir(img) == ["keep"]
    assert stray_files(tmp_path, ["src", "adir"]) == []


def test_existing_image_survives_a_failed_build(kiln, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    img = out / "img.erofs"
    img.write_bytes(OLD)
    r = kiln.run("build", tmp_path / "no-such-dir", img)
    assert_clean_failure(r, out, img, [tmp_path / "no-such-dir"],
                         keep=["img.erofs"])
    assert img.read_bytes() == OLD


def test_existing_image_is_replaced_by_a_good_build(kiln, tmp_path):
    src = small_source(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    img = out / "img.erofs"
    img.write_bytes(OLD)
    kiln.build(src, img)
    assert img.read_bytes()[1024:1028] == b"\xe2\xe1\xf5\xe0"
    assert os.listdir(out) == ["img.erofs"]


@pytest.mark.parametrize("opts", [["-b", "3000"], ["-b", "8192"],
                                  ["-b", "256"], ["--block-size", "0"],
                                  ["--force-uid", "-1"],
                                  ["--force-uid", "4294967296"],
                                  ["-T", "soon"], ["-U", "not-a-uuid"],
                                  ["--packed-segment", "1536K"],
                                  ["--packed-segment", "2G"],
                                  ["--packed-segment", "0"],
                                  ["--no-such-option"]])
def test_bad_options_fail_without_writing(kiln, tmp_path, opts):
    src = small_source(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    img = out / "img.erofs"
    r = kiln.run("build", *opts, src, img)
    assert r.rc != 0, r.describe()
    assert r.err.strip(), r.describe()
    assert os.listdir(out) == []


def test_bad_source_date_epoch_fails(kiln, tmp_path):
    src = small_source(tmp_path)
    img = tmp_path / "img.erofs"
    r = kiln.run("build", src, img, env={"SOURCE_DATE_EPOCH": "yesterday"})
    assert r.rc != 0 and "SOURCE_DATE_EPOCH" in r.err, r.describe()
    assert not img.exists()


def test_symlink_loops_are_stored_not_followed(kiln, tmp_path, kernel_mount):
    src = tmp_path / "src"
    src.mkdir()
    os.symlink("b", src / "a")
    os.symlink("a", src / "b")
    os.symlink("self", src / "self")
    os.symlink(".", src / "dot")
    os.symlink("..", src / "up")
    (src / "d").mkdir()
    os.symlink("../d", src / "d" / "back")
    img = tmp_path / "loops.erofs"
    kiln.build(src, img)
    with kernel_mount(img) as mnt:
        tree_compare(src, mnt)


def test_source_given_through_a_symlink_builds_its_target(kiln, tmp_path,
                                                          kernel_mount):
    src = small_source(tmp_path)
    link = tmp_path / "link-to-src"
    os.symlink(src, link)
    img = tmp_path / "img.erofs"
    kiln.build(link, img)
    with kernel_mount(img) as mnt:
        tree_compare(src, mnt, root_attrs=False)


@contextlib.contextmanager
def small_tmpfs(size):
    d = tempfile.mkdtemp(prefix="kiln-full-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                        "kiln-full", d], capture_output=True, text=True)
    if r.returncode:
        os.rmdir(d)
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", d], capture_output=True)
        os.rmdir(d)


def full_disk_source(tmp_path):
    src = tmp_path / "big"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(os.urandom(1 << 20))
    return src


def test_full_disk_fails_cleanly_and_names_the_image(kiln, tmp_path,
                                                     need_root):
    src = full_disk_source(tmp_path)
    with small_tmpfs("1M") as d:
        img = os.path.join(d, "img.erofs")
        r = kiln.run("build", src, img)
        assert_clean_failure(r, d, img, [img])
        assert os.listdir(d) == []


def test_full_disk_keeps_the_previous_image(kiln, tmp_path, need_root):
    src = full_disk_source(tmp_path)
    with small_tmpfs("1M") as d:
        img = os.path.join(d, "img.erofs")
        with open(img, "wb") as f:
            f.write(OLD)
        r = kiln.run("build", src, img)
        assert_clean_failure(r, d, img, [img], keep=["img.erofs"])
        with open(img, "rb") as f:
            assert f.read() == OLD


def unreadable(kiln, tmp_path, make_bad):
    """Build as 'nobody' from a tree where make_bad() hid something."""
    if os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("root without setpriv: cannot drop privileges")
    base = tempfile.mkdtemp(prefix="kiln-perm-")
    try:
        os.chmod(base, 0o777)
        src = os.path.join(base, "src")
        os.mkdir(src)
        with open(os.path.join(src, "fine"), "wb") as f:
            f.write(b"fine")
        bad = make_bad(src)
        out = os.path.join(base, "out")
        os.mkdir(out)
        os.chmod(out, 0o777)
        img = os.path.join(out, "img.erofs")
        if os.geteuid() == 0:
            for p in (src, os.path.join(src, "fine")):
                os.chmod(p, 0o755 if os.path.isdir(p) else 0o644)
            r = kiln.run("build", src, img, wrapper=[
                "setpriv", "--reuid=65534", "--regid=65534",
                "--clear-groups"])
        else:
            r = kiln.run("build", src, img)
        assert_clean_failure(r, out, img, [bad])
    finally:
        for dirpath, dirnames, filenames in os.walk(base):
            for n in dirnames:
                os.chmod(os.path.join(dirpath, n), 0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_unreadable_file_fails_and_names_it(kiln, tmp_path):
    def bad(src):
        p = os.path.join(src, "secret")
        with open(p, "wb") as f:
            f.write(b"x" * 100)
        os.chmod(p, 0)
        return p
    unreadable(kiln, tmp_path, bad)


def test_unreadable_directory_fails_and_names_it(kiln, tmp_path):
    def bad(src):
        p = os.path.join(src, "closed")
        os.mkdir(p)
        with open(os.path.join(p, "inside"), "wb") as f:
            f.write(b"y")
        os.chmod(p, 0)
        return p
    unreadable(kiln, tmp_path, bad)


@pytest.mark.parametrize("head", [b"", b"\0" * 8192, OLD],
                         ids=["empty", "zeros", "text"])
def test_a_file_that_is_no_image_is_refused_and_named(kiln, tmp_path, head):
    """Every reader refuses a file without an EROFS superblock, names it
    and the reason, and extract writes nothing."""
    bogus = tmp_path / "not-an-image.erofs"
    bogus.write_bytes(head)
    out = tmp_path / "out"
    for cmd in (("fsck", bogus), ("info", bogus), ("ls", bogus, "/"),
                ("cat", bogus, "/f"), ("extract", bogus, out)):
        r = kiln.fails(*cmd)
        assert f"{bogus}:" in r.err, r.describe()
        assert len(r.err.splitlines()) <= 4, r.describe()
    assert not out.exists() or os.listdir(out) == []
