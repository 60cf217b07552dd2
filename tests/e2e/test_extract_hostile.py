# SPDX-License-Identifier: MIT
"""kiln extract into a hostile destination: symlinks already in DEST that
point outside, a second thread swapping directories and files for symlinks
while the extraction runs, a read-only DEST and a full disk. Never a write
(data, mode, owner, times or xattrs) outside DEST; clear errors."""

import os
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from helpers import have

pytestmark = pytest.mark.sanitize

N_SPECIAL = 150         # FIFOs in each race directory


@pytest.fixture(scope="module")
def image(kiln, tmp_path_factory):
    """d/: files, FIFOs (mode 0666) and a subdirectory; f; a symlink."""
    src = tmp_path_factory.mktemp("src")
    d = src / "d"
    (d / "sub").mkdir(parents=True)
    for i in range(N_SPECIAL):
        os.mkfifo(d / f"p{i:03d}", 0o666)
        os.chmod(d / f"p{i:03d}", 0o666)
        (d / f"f{i:03d}").write_bytes(b"data %d\n" % i)
        os.chmod(d / f"f{i:03d}", 0o666)
    (d / "sub/deep").write_bytes(b"deep")
    (src / "f").write_bytes(b"top")
    (src / "big").write_bytes(os.urandom(3 << 20))
    os.symlink("d/f000", src / "ln")
    os.utime(src / "f", (1000, 1000))
    img = tmp_path_factory.mktemp("img") / "h.erofs"
    kiln.build(src, img)
    return img


@pytest.fixture
def outside(tmp_path):
    """A directory beside DEST that must stay as it is, with a canary."""
    o = tmp_path / "outside"
    o.mkdir()
    (o / "canary").write_bytes(b"canary")
    os.chmod(o / "canary", 0o600)
    os.utime(o / "canary", (5, 5))
    os.chmod(o, 0o755)
    return o


def untouched(o):
    """Assert @o holds only the canary, as it was made."""
    assert sorted(os.listdir(o)) == ["canary"], os.listdir(o)
    st = os.stat(o / "canary")
    assert (o / "canary").read_bytes() == b"canary"
    assert stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_mtime == 5
    assert os.listxattr(o / "canary") == []
    assert stat.S_IMODE(os.stat(o).st_mode) == 0o755


# -- what DEST already holds ----------------------------------------------

def test_symlinked_directory_in_dest(kiln, image, tmp_path, outside):
    """DEST/d is a symlink to a directory outside: not entered; with
    --force it is replaced by the real directory."""
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside, dest / "d")
    r = kiln.fails("extract", image, dest)
    assert "/d: not replaced without --force" in r.err, r.err
    untouched(outside)
    assert os.path.islink(dest / "d")
    kiln.ok("extract", "--force", image, dest)
    assert not os.path.islink(dest / "d")
    assert (dest / "d/sub/deep").read_bytes() == b"deep"
    untouched(outside)


def test_symlinked_files_in_dest(kiln, image, tmp_path, outside):
    """DEST/f and DEST/d/f000 are symlinks to the canary: never written
    through; --force replaces the links themselves."""
    dest = tmp_path / "dest"
    (dest / "d").mkdir(parents=True)
    os.symlink(outside / "canary", dest / "f")
    os.symlink(outside / "canary", dest / "d/f000")
    os.symlink(outside / "canary", dest / "d/p000")
    r = kiln.fails("extract", image, dest)
    assert "/f: not replaced without --force" in r.err, r.err
    assert "/d/p000: not replaced without --force" in r.err, r.err
    untouched(outside)
    kiln.ok("extract", "--force", image, dest)
    assert (dest / "f").read_bytes() == b"top"
    assert stat.S_ISFIFO(os.lstat(dest / "d/p000").st_mode)
    untouched(outside)


def test_dest_itself_a_symlink_is_followed(kiln, image, tmp_path, outside):
    """DEST given as a symlink is the user's choice: it is followed (as
    cp and tar do); what lands there stays below it."""
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "link")
    kiln.ok("extract", image, tmp_path / "link", "/d/sub")
    assert (real / "deep").read_bytes() == b"deep"
    untouched(outside)


# -- a second thread swapping things for symlinks -------------------------

def swapper(dest, outside, stop, counts):
    """Until @stop: swap DEST/d for a symlink to @outside and back, and
    replace whatever appears in DEST/d with symlinks to the canary."""
    canary = str(outside / "canary")
    while not stop.is_set():
        d = dest / "d"
        try:
            os.rename(d, dest / "d.real")
            os.symlink(outside, d)
            counts["dir"] += 1
            time.sleep(0)
            os.unlink(d)
            os.rename(dest / "d.real", d)
        except OSError:
            pass
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names[-8:]:
            try:
                os.unlink(d / n)
                os.symlink(canary, d / n)
                counts["leaf"] += 1
            except OSError:
                pass


@pytest.mark.parametrize("force", [False, True])
def test_symlink_race_never_writes_outside(kiln, image, tmp_path, outside,
                                           force):
    counts = {"dir": 0, "leaf": 0}
    for run in range(6):
        dest = tmp_path / f"dest{run}"
        dest.mkdir()
        stop = threading.Event()
        t = threading.Thread(target=swapper,
                             args=(dest, outside, stop, counts))
        t.start()
        try:
            args = ["extract", "--no-times"] if run % 2 else ["extract"]
            if force:
                args.append("--force")
            r = kiln.run(*args, image, dest, timeout=60)
        finally:
            stop.set()
            t.join()
        # errors are expected (the ground moved); a crash or a write
        # outside is not
        assert r.rc in (0, 1), r.describe()
        untouched(outside)
    assert counts["dir"] > 0 and counts["leaf"] > 0, counts


# -- read-only and full destinations ---------------------------------------

@pytest.fixture
def tmpfs(tmp_path, need_root):
    mounted = []

    def make(name, *opts):
        d = tmp_path / name
        d.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o",
                        ",".join(("mode=0755",) + opts), "tmpfs", d],
                       check=True)
        mounted.append(d)
        return d
    yield make
    for d in mounted:
        subprocess.run(["umount", "-l", d], check=False)


def test_read_only_dest(kiln, image, tmpfs, outside):
    dest = tmpfs("ro")
    subprocess.run(["mount", "-o", "remount,ro", dest], check=True)
    r = kiln.fails("extract", image, dest)
    assert "Read-only file system" in r.err or \
        "read-only file system" in r.err, r.err
    assert os.listdir(dest) == []
    untouched(outside)


def test_read_only_dest_for_a_user(kiln, image, request, need_root):
    """Not writable for the caller (an ordinary user): permission denied,
    exit 1, nothing made."""
    if not have("setpriv"):
        pytest.fail("setpriv (util-linux) is missing")
    # a place the user can reach (pytest's tmp_path is root's alone)
    work = Path(tempfile.mkdtemp(prefix="kiln-user-"))
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    os.chmod(work, 0o755)
    shutil.copy(image, work / "h.erofs")
    os.chmod(work / "h.erofs", 0o644)
    dest = work / "ro"
    dest.mkdir()
    os.chmod(dest, 0o555)
    r = kiln.run("extract", work / "h.erofs", dest, "/d/sub",
                 wrapper=("setpriv", "--reuid=65534", "--regid=65534",
                          "--clear-groups"))
    assert r.rc == 1, r.describe()
    assert "/d/sub/deep" in r.err and "ermission denied" in r.err, r.err
    assert os.listdir(dest) == []


def test_full_disk(kiln, image, tmpfs, outside):
    """3 MiB into a 1 MiB tmpfs: ENOSPC naming the file, which is not left
    half written; the rest goes on (--keep-going is the default) and
    nothing lands outside."""
    dest = tmpfs("full", "size=1M")
    r = kiln.fails("extract", image, dest)
    assert "/big: writing: no space left on device" in r.err.lower(), r.err
    assert not os.path.lexists(dest / "big")
    assert (dest / "f").read_bytes() == b"top"
    untouched(outside)
    r = kiln.fails("extract", "--fail-fast", image, dest, "/big")
    assert r.err.lower().count("no space left on device") == 1, r.err
    assert not os.path.lexists(dest / "big")
