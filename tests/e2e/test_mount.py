# SPDX-License-Identifier: MIT
"""kiln mount: the FUSE view of an image holds every byte and attribute of
the source tree (and of the kernel's own mount), survives concurrent
readers and corrupt images, and always goes away cleanly."""

import contextlib
import ctypes
import errno
import os
import random
import re
import signal
import stat
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from helpers import (SLOW, assert_same, check_sanitizer, diff_snapshots,
                     force_unmount, have, is_mounted, kernel_mount,
                     snapshot, tree_compare)

pytestmark = pytest.mark.sanitize

KiB = 1024
MiB = 1024 * KiB

EROFS_SB_OFF = 1024
# mkfs.erofs 1.5 fails on mktree's 255-byte directory name under names/;
# its images of mktree trees leave that directory out.
MKFS_MKTREE = ("--exclude-regex=^names",)


# -- mounting ---------------------------------------------------------------

def fuse_unavailable():
    """Why FUSE mounts cannot be made here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "kiln mount needs /dev/fuse, which this machine lacks"
    if not have("fusermount3"):
        return "kiln mount needs fusermount3 on PATH"
    return None


@pytest.fixture(autouse=True)
def need_fuse():
    why = fuse_unavailable()
    if why:
        pytest.skip(why)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Mount:
    """A foreground `kiln mount -f` and its mount point."""

    def __init__(self, kiln, image, opts, mnt, ignore=()):
        """@ignore: signals the mount starts with ignored, as under nohup;
        the others start at their default, however this suite was
        started (a shell's background job ignores SIGINT)."""
        self.mnt = Path(mnt)
        self.errfile = tempfile.TemporaryFile()
        self.argv = [str(kiln.path), "mount", "-f", *opts, str(image), mnt]

        def dispositions():
            for sig in STOP_SIGNALS:
                signal.signal(sig, signal.SIG_IGN if sig in ignore
                              else signal.SIG_DFL)

        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL,
                                     stderr=self.errfile,
                                     preexec_fn=dispositions)

    def stderr(self):
        self.errfile.seek(0)
        return self.errfile.read().decode("utf-8", "replace")

    def wait_mounted(self, timeout=30):
        end = time.monotonic() + timeout * SLOW
        while time.monotonic() < end:
            if is_mounted(self.mnt):
                return
            if self.proc.poll() is not None:
                pytest.fail(f"kiln mount exited {self.proc.returncode} "
                            f"before mounting:\n{self.stderr()}")
            time.sleep(0.02)
        pytest.fail(f"kiln mount did not mount within {timeout}s:\n"
                    f"{self.stderr()}")

    def alive(self):
        return self.proc.poll() is None and is_mounted(self.mnt)

    def stop(self):
        """Unmount, then expect the server to exit 0 by itself."""
        force_unmount(str(self.mnt))
        try:
            rc = self.proc.wait(timeout=20 * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("kiln mount did not exit after the unmount:\n"
                        + self.stderr())
        return rc


@contextlib.contextmanager
def kiln_mount(kiln, image, *opts, ignore=()):
    """with kiln_mount(kiln, image, "-o", "cache=none") as m: ... m.mnt.
    Always unmounts and removes the mount point; fails on a crash, a
    non-zero exit or a sanitizer report."""
    mnt = tempfile.mkdtemp(prefix="kiln-fuse-")
    m = Mount(kiln, image, opts, mnt, ignore)
    rc = None
    try:
        m.wait_mounted()
        yield m
    finally:
        rc = m.stop()
        force_unmount(mnt)
        with contextlib.suppress(OSError):
            os.rmdir(mnt)
    err = m.stderr()
    check_sanitizer("kiln mount", err)
    assert rc == 0, f"kiln mount exited {rc}:\n{err}"


# -- images -----------------------------------------------------------------

def mkfs_erofs(src, img, *opts):
    """Build with mkfs.erofs (a dependency: missing or failing is a test
    failure)."""
    assert have("mkfs.erofs"), "mkfs.erofs is not on PATH"
    r = subprocess.run(["mkfs.erofs", "--quiet", *opts, str(img), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, f"mkfs.erofs failed: {r.stderr}"
    return img


@pytest.fixture(scope="session")
def images(kiln, rich_tree, tmp_path_factory):
    """Images of the rich tree: {name: (path, built_by_kiln)}. kiln build's
    images are compared with the source; mkfs.erofs ones with the kernel's
    mount of the same image."""
    d = tmp_path_factory.mktemp("fuse-images")
    out = {}
    for name, opts in (("kiln", ()), ("kiln-lz4hc", ("-z", "lz4hc"))):
        img = d / f"{name}.erofs"
        kiln.build(rich_tree.root, img, *opts)
        out[name] = (img, True)
    for name, opts in (("mkfs", ()), ("mkfs-lz4hc", ("-zlz4hc",)),
                       ("mkfs-chunked", ("--chunksize=8192",))):
        out[name] = (mkfs_erofs(rich_tree.root, d / f"{name}.erofs",
                                *MKFS_MKTREE, *opts), False)
    return out


IMAGE_KINDS = ("kiln", "kiln-lz4hc", "mkfs", "mkfs-lz4hc", "mkfs-chunked")


def image_of(images, kind):
    return images[kind]


# -- the tree through FUSE --------------------------------------------------

@pytest.mark.parametrize("kind", ("kiln", "kiln-lz4hc"))
def test_mount_holds_every_byte_and_attribute_of_the_source(kiln, rich_tree,
                                                            images, kind):
    img, _ = image_of(images, kind)
    with kiln_mount(kiln, img) as m:
        tree_compare(rich_tree.root, m.mnt)


def _kernel_view(image):
    with kernel_mount(image) as kmnt:
        snap = snapshot(kmnt)
        extra = {}
        for rel, n in snap.items():
            p = os.path.join(os.fsencode(kmnt), rel) if rel else \
                os.fsencode(kmnt)
            st = os.lstat(p)
            extra[rel] = (st.st_size, st.st_blocks, st.st_blksize)
        sv = os.statvfs(kmnt)
    return snap, extra, sv


def mount_vs_kernel(kiln, img):
    """Differences between kiln mount of @img and the kernel's mount of it
    (snapshot, then every st_size), and both statvfs results."""
    ksnap, kextra, ksv = _kernel_view(img)
    with kiln_mount(kiln, img) as m:
        fsnap = snapshot(m.mnt)
        diffs = diff_snapshots(ksnap, fsnap)
        for rel, (size, _blocks, _blksize) in kextra.items():
            p = os.path.join(os.fsencode(m.mnt), rel) if rel else \
                os.fsencode(m.mnt)
            st = os.lstat(p)
            if st.st_size != size:
                diffs.append(f"/{rel!r}: st_size {st.st_size}, kernel {size}")
        sv = os.statvfs(m.mnt)
    return diffs, sv, ksv


@pytest.mark.parametrize("kind", IMAGE_KINDS)
def test_mount_matches_the_kernel_mount(kiln, images, kind):
    """The kernel's EROFS is the reference for any image: same paths, types,
    modes, owners, sizes (directories too), nanosecond times, link counts
    and hard-link groups, targets, devices, xattrs, bytes, listings."""
    img, _ = image_of(images, kind)
    diffs, sv, ksv = mount_vs_kernel(kiln, img)
    assert_same(diffs, f"kiln mount of {kind} vs the kernel's mount")
    # (the kernel reports f_files as "unlimited"; kiln the inode count)
    assert (sv.f_bsize, sv.f_frsize, sv.f_blocks, sv.f_bfree) == \
        (ksv.f_bsize, ksv.f_frsize, ksv.f_blocks, ksv.f_bfree)


def test_root_is_inode_1_and_readdir_agrees_with_stat(kiln, images):
    img, _ = image_of(images, "mkfs")
    with kiln_mount(kiln, img) as m:
        assert os.stat(m.mnt).st_ino == 1
        seen = {}
        for d in (m.mnt, m.mnt / "links", m.mnt / "sizes", m.mnt / "many"):
            if not d.is_dir():
                continue
            for e in os.scandir(d):
                st = os.lstat(e.path)
                assert e.inode() == st.st_ino, e.path
                assert st.st_ino > 1, e.path
                # distinct inodes never share a number
                other = seen.setdefault(st.st_ino, e.path)
                assert other == e.path or os.path.samefile(other, e.path)


def test_statfs_describes_a_read_only_image(kiln, images):
    img, _ = image_of(images, "mkfs")
    with kiln_mount(kiln, img) as m:
        sv = os.statvfs(m.mnt)
        assert sv.f_flag & os.ST_RDONLY
        assert sv.f_bsize == 4096
        assert sv.f_blocks * sv.f_frsize == os.path.getsize(img)
        assert sv.f_bfree == 0 and sv.f_bavail == 0
        assert sv.f_namemax == 255


def test_writes_are_refused_with_erofs(kiln, images):
    img, _ = image_of(images, "mkfs")
    with kiln_mount(kiln, img) as m:
        some = next(p for p in m.mnt.rglob("*") if p.is_file()
                    and not p.is_symlink())
        for what in (lambda: open(some, "r+b"),
                     lambda: os.mkdir(m.mnt / "new-dir"),
                     lambda: open(m.mnt / "new-file", "wb"),
                     lambda: os.unlink(some),
                     lambda: os.chmod(some, 0o600)):
            with pytest.raises(OSError) as e:
                what()
            assert e.value.errno == errno.EROFS


# -- xattr size probes ------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.lgetxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                            ctypes.c_void_p, ctypes.c_size_t]
_libc.lgetxattr.restype = ctypes.c_ssize_t
_libc.llistxattr.argtypes = [ctypes.c_char_p, ctypes.c_void_p,
                             ctypes.c_size_t]
_libc.llistxattr.restype = ctypes.c_ssize_t


def _call(fn, *args):
    r = fn(*args)
    return r if r >= 0 else -ctypes.get_errno()


def test_xattr_size_probes_and_short_buffers(kiln, rich_tree, images):
    img, _ = image_of(images, "mkfs")
    checked = 0
    with kiln_mount(kiln, img) as m:
        for p in sorted((m.mnt / "xattrs").iterdir()):
            bp = os.fsencode(p)
            names = os.listxattr(p, follow_symlinks=False)
            want_list = b"".join(os.fsencode(n) + b"\0" for n in names)
            assert _call(_libc.llistxattr, bp, None, 0) == len(want_list)
            if want_list:
                small = ctypes.create_string_buffer(len(want_list) - 1)
                assert _call(_libc.llistxattr, bp, small,
                             len(want_list) - 1) == -errno.ERANGE
            for n in names:
                v = os.getxattr(p, n, follow_symlinks=False)
                bn = os.fsencode(n)
                assert _call(_libc.lgetxattr, bp, bn, None, 0) == len(v)
                if len(v) > 1:      # (a 0-byte buffer is a size probe)
                    small = ctypes.create_string_buffer(len(v) - 1)
                    assert _call(_libc.lgetxattr, bp, bn, small,
                                 len(v) - 1) == -errno.ERANGE
                buf = ctypes.create_string_buffer(len(v) + 10)
                assert _call(_libc.lgetxattr, bp, bn, buf,
                             len(v) + 10) == len(v)
                assert buf.raw[:len(v)] == v
                checked += 1
            assert _call(_libc.lgetxattr, bp, b"user.no-such-name", None,
                         0) == -errno.ENODATA
    assert checked > 0


# -- options, lifecycle -----------------------------------------------------

@pytest.mark.parametrize("opts", (("-s",), ("-o", "cache=none"),
                                  ("-o", "threads=2,ro"), ("-d",),
                                  ("-o", "readahead=0,nosplice"),
                                  ("-o", "readahead=8192")),
                         ids=("single-thread", "cache-none", "threads-2",
                              "debug", "no-readahead-no-splice",
                              "readahead-8m"))
def test_options_serve_the_same_tree(kiln, rich_tree, images, opts):
    img, _ = image_of(images, "mkfs-lz4hc")
    sizes = os.path.join(rich_tree.root, "sizes")
    with kiln_mount(kiln, img, *opts) as m:
        tree_compare(sizes, m.mnt / "sizes", fields=("type", "size", "data",
                                                     "listing"))


@pytest.mark.parametrize("opts,msg", (
    (("-o", "rw"), "read-only"),
    (("-o", "cache=maybe"), "cache"),
    (("-o", "threads=0"), "threads"),
    (("-o", "threads"), "value"),
    (("-o", "readahead=lots"), "readahead"),
    (("-o", "readahead=-1"), "readahead"),
    (("-o", "readahead=99999999"), "readahead"),
    (("-o", "nosplice=1"), "no value"),
    (("-x",), "unknown option"),
))
def test_bad_options_are_usage_errors(kiln, images, opts, msg, tmp_path):
    img, _ = image_of(images, "mkfs")
    r = kiln.run("mount", *opts, img, tmp_path)
    assert r.rc == 2, r.describe()
    assert msg in r.err
    assert not is_mounted(tmp_path)


def test_background_mount_returns_once_mounted_and_umount_ends_it(
        kiln, rich_tree, images, tmp_path):
    img, by_kiln = image_of(images, "kiln" if "kiln" in images else "mkfs")
    want = set(os.listdir(rich_tree.root))
    if not by_kiln:
        want.discard("names")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        r = kiln.run("mount", img, mnt, timeout=60)
        assert r.rc == 0, r.describe()
        # mounted by the time the command returns
        assert is_mounted(mnt)
        assert set(os.listdir(mnt)) == want
        fstype = subprocess.run(["findmnt", "-n", "-o", "FSTYPE,SOURCE",
                                 "--mountpoint", str(mnt)],
                                capture_output=True, text=True).stdout.split()
        assert fstype[0] == "fuse.kiln"
        assert fstype[1] == os.path.realpath(img)
        r = kiln.run("umount", mnt)
        assert r.rc == 0, r.describe()
        assert not is_mounted(mnt)
        # the daemon went with it: its image is no longer held open
        end = time.monotonic() + 10
        while time.monotonic() < end and _holders(img):
            time.sleep(0.05)
        assert not _holders(img)
    finally:
        force_unmount(str(mnt))


def _holders(path):
    """PIDs with @path open (as a descriptor or a mapping)."""
    real = os.path.realpath(path)
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
            fds = [os.readlink(f"/proc/{pid}/fd/{fd}")
                   for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        if real in maps or real in fds:
            pids.append(int(pid))
    return pids


def test_umount_refuses_what_is_not_a_kiln_mount(kiln, tmp_path):
    r = kiln.run("umount", tmp_path)
    assert r.rc == 1 and "not a mount point" in r.err
    r = kiln.run("umount", "/proc")
    assert r.rc == 1 and "not a kiln mount" in r.err
    assert os.path.ismount("/proc")


def test_umount_clears_the_mount_of_a_killed_server(kiln, images, tmp_path):
    """A dead server leaves "Transport endpoint is not connected" behind;
    kiln umount (given a relative path) still removes it."""
    img, _ = image_of(images, "mkfs")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = Mount(kiln, img, (), str(mnt))
    try:
        m.wait_mounted()
        m.proc.kill()
        m.proc.wait()
        with pytest.raises(OSError) as e:
            os.listdir(mnt)
        assert e.value.errno == errno.ENOTCONN
        r = kiln.run("umount", "mnt", cwd=tmp_path)
        assert r.rc == 0, r.describe()
        assert not is_mounted(mnt)
    finally:
        force_unmount(str(mnt))


@pytest.mark.parametrize("problem", ("missing-image", "garbage-image",
                                     "missing-mountpoint", "file-mountpoint"))
def test_mount_errors_are_reported_before_detaching(kiln, images, tmp_path,
                                                    problem):
    img, _ = image_of(images, "mkfs")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if problem == "missing-image":
        img = tmp_path / "nope.erofs"
    elif problem == "garbage-image":
        img = tmp_path / "garbage.erofs"
        img.write_bytes(random.Random(3).randbytes(64 * KiB))
    elif problem == "missing-mountpoint":
        mnt = tmp_path / "no-such-dir"
    else:
        mnt = tmp_path / "plain-file"
        mnt.write_bytes(b"x")
    try:
        r = kiln.run("mount", img, mnt, timeout=60)
        assert r.rc != 0, r.describe()
        assert r.err.strip(), r.describe()
        shown = img if "image" in problem else mnt
        assert os.fsdecode(shown) in r.err or shown.name in r.err
        assert not is_mounted(mnt)
    finally:
        force_unmount(str(mnt))


@pytest.mark.parametrize("sig", (signal.SIGTERM, signal.SIGINT))
def test_signals_unmount_cleanly(kiln, images, sig):
    img, _ = image_of(images, "mkfs")
    with kiln_mount(kiln, img) as m:
        os.listdir(m.mnt)
        m.proc.send_signal(sig)
        rc = m.proc.wait(timeout=20 * SLOW)
        assert rc == 0, m.stderr()
        assert not is_mounted(m.mnt)


def test_a_stop_signal_ignored_at_start_stays_ignored(kiln, images):
    """Started with SIGINT ignored (nohup, a shell's background job), the
    mount leaves it ignored, as libfuse does: SIGINT neither stops it nor
    breaks its reads; SIGTERM still stops it cleanly."""
    img, _ = image_of(images, "kiln")
    with kiln_mount(kiln, img, ignore=(signal.SIGINT,)) as m:
        names = sorted(os.listdir(m.mnt))
        m.proc.send_signal(signal.SIGINT)
        time.sleep(0.5 * SLOW)
        assert m.proc.poll() is None, m.stderr()
        assert sorted(os.listdir(m.mnt)) == names
        m.proc.send_signal(signal.SIGTERM)
        assert m.proc.wait(timeout=20 * SLOW) == 0, m.stderr()
        assert not is_mounted(m.mnt)


def test_helper_threads_leave_stop_signals_to_the_request_loop(kiln, images):
    """A stop signal taken by a thread outside libfuse's loop would set the
    loop's exit flag without waking it: the mount's own threads (counters,
    page cache stores) block SIGTERM, SIGINT and SIGHUP; the main thread
    does not."""
    img, _ = image_of(images, "kiln")
    stop = (1 << (signal.SIGHUP - 1)) | (1 << (signal.SIGINT - 1)) | \
        (1 << (signal.SIGTERM - 1))
    with kiln_mount(kiln, img) as m:
        os.listdir(m.mnt)
        blocked = {}
        for task in Path(f"/proc/{m.proc.pid}/task").iterdir():
            name = (task / "comm").read_text().strip()
            status = (task / "status").read_text()
            mask = int(re.search(r"^SigBlk:\s*([0-9a-f]+)$", status,
                                 re.M)[1], 16)
            blocked[(int(task.name), name)] = mask & stop
        helpers = {k: v for k, v in blocked.items()
                   if k[1] in ("kiln-stats", "kiln-store")}
        assert {k[1] for k in helpers} == {"kiln-stats", "kiln-store"}, \
            blocked
        assert all(v == stop for v in helpers.values()), blocked
        assert blocked[(m.proc.pid, "kiln")] == 0, blocked
        # and SIGTERM ends it: the mount exits 0, unmounted
        m.proc.send_signal(signal.SIGTERM)
        assert m.proc.wait(timeout=20 * SLOW) == 0, m.stderr()
        assert not is_mounted(m.mnt)


# -- concurrency ------------------------------------------------------------

@pytest.fixture(scope="session")
def big_tree(srcfs):
    """A few larger files: random (incompressible), text and zeros."""
    root = srcfs / "fuse-big"
    if root.exists():
        return root
    root.mkdir()
    rng = random.Random(11)
    (root / "random-24m").write_bytes(rng.randbytes(24 * MiB + 1234))
    words = [b"kiln ", b"erofs ", b"fuse ", b"read ", b"\n", b"page "]
    text = b"".join(rng.choice(words) for _ in range(3 * MiB))
    (root / "text").write_bytes(text[:12 * MiB + 77])
    (root / "mixed").write_bytes(rng.randbytes(MiB) + bytes(3 * MiB) +
                                 text[:2 * MiB] + rng.randbytes(5))
    return root


@pytest.fixture(scope="session")
def big_images(kiln, big_tree, tmp_path_factory):
    d = tmp_path_factory.mktemp("fuse-big-images")
    out = {}
    for name, opts in (("kiln", ()), ("kiln-lz4hc", ("-z", "lz4hc"))):
        img = d / f"{name}.erofs"
        kiln.build(big_tree, img, *opts)
        out[name] = img
    for name, opts in (("mkfs", ()), ("mkfs-lz4hc", ("-zlz4hc",)),
                       ("mkfs-chunked", ("--chunksize=65536",))):
        out[name] = mkfs_erofs(big_tree, d / f"{name}.erofs", *opts)
    return out


def _drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@pytest.mark.nosanitize     # big_tree: the plain pass reads it
@pytest.mark.parametrize("kind", ("kiln", "kiln-lz4hc", "mkfs", "mkfs-lz4hc"))
def test_four_threads_reading_random_ranges_get_the_right_bytes(
        kiln, big_tree, big_images, kind):
    names = ("random-24m", "text", "mixed")
    want = {n: (big_tree / n).read_bytes() for n in names}
    errors = []
    with kiln_mount(kiln, big_images[kind]) as m:
        shared = {n: os.open(m.mnt / n, os.O_RDONLY) for n in names}
        direct = {n: os.open(m.mnt / n, os.O_RDONLY | os.O_DIRECT)
                  for n in names}

        def reader(seed):
            rng = random.Random(seed)
            try:
                own = {n: os.open(m.mnt / n, os.O_RDONLY) for n in names}
                for i in range(300):
                    n = rng.choice(names)
                    size = len(want[n])
                    off = rng.randrange(0, size + 100)
                    ln = rng.choice((1, 4096, 4096 * 3 + 17, 128 * KiB,
                                     rng.randrange(1, 2 * MiB)))
                    # a private descriptor, one shared by all threads, and
                    # O_DIRECT (each read goes to the server)
                    fd = rng.choice((own, shared, direct))[n]
                    got = os.pread(fd, ln, off)
                    if got != want[n][off:off + ln]:
                        errors.append(f"{n} [{off}, +{ln}): wrong bytes")
                        return
                    if i % 50 == 49:
                        _drop_cache(m.mnt / n)
                for fd in own.values():
                    os.close(fd)
            except OSError as e:
                errors.append(f"thread {seed}: {e}")

        threads = [threading.Thread(target=reader, args=(s,))
                   for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for fd in list(shared.values()) + list(direct.values()):
            os.close(fd)
    assert not errors, errors[:10]


def _bdi_readahead_kb(mnt):
    st = os.stat(mnt)
    p = f"/sys/class/bdi/{os.major(st.st_dev)}:{os.minor(st.st_dev)}" \
        "/read_ahead_kb"
    with open(p) as f:
        return int(f.read())


@pytest.mark.nosanitize     # big_tree: the plain pass reads it
@pytest.mark.parametrize("opts", ((), ("-o", "nosplice"),
                                  ("-o", "readahead=4096"),
                                  ("-o", "readahead=0")),
                         ids=("default", "nosplice", "readahead-4m",
                              "readahead-0"))
@pytest.mark.parametrize("kind", ("kiln", "kiln-lz4hc", "mkfs", "mkfs-lz4hc",
                                  "mkfs-chunked"))
def test_cold_sequential_reads_get_the_right_bytes(kiln, big_tree, big_images,
                                                    kind, opts):
    """Whole files read front to back from a cold cache, in large and odd
    sizes: what readahead (large requests, several in flight) and splicing
    raw runs straight from the image deliver."""
    with kiln_mount(kiln, big_images[kind], *opts) as m:
        ra = dict(o.split("=") for o in ",".join(opts[1:]).split(",")
                  if "=" in o).get("readahead", "1024")
        if os.geteuid() == 0 and int(ra):
            # the window asked for, on this mount's own bdi
            assert _bdi_readahead_kb(m.mnt) == int(ra)
        for n in ("random-24m", "text", "mixed"):
            want = (big_tree / n).read_bytes()
            for bs in (1 * MiB, 128 * KiB + 4096 * 3 + 5):
                _drop_cache(m.mnt / n)
                got = bytearray()
                with open(m.mnt / n, "rb", buffering=0) as f:
                    while True:
                        chunk = f.read(bs)
                        if not chunk:
                            break
                        got += chunk
                assert len(got) == len(want), (n, bs)
                assert bytes(got) == want, f"{n}: wrong bytes reading {bs}"
            # and from the page cache, now filled
            assert (m.mnt / n).read_bytes() == want, n
        assert m.alive()


def test_many_opens_of_many_files_read_right(kiln, rich_tree, images):
    """Files are read without a FUSE open where the kernel allows it: the
    server keeps a few open by nid. Read more files than it keeps, several
    times over, interleaved, each open many times at once."""
    img, _ = image_of(images, "kiln-lz4hc" if "kiln-lz4hc" in images
                      else "mkfs-lz4hc")
    src = Path(rich_tree.root)
    with kiln_mount(kiln, img) as m:
        files = sorted(p.relative_to(m.mnt) for p in m.mnt.rglob("*")
                       if p.is_file() and not p.is_symlink())[:200]
        assert len(files) > 40
        rng = random.Random(3)
        held = []
        for rnd in range(3):
            rng.shuffle(files)
            for rel in files:
                f = open(m.mnt / rel, "rb", buffering=0)
                held.append(f)
                want = (src / rel).read_bytes()
                off = rng.randrange(0, len(want) + 1)
                assert os.pread(f.fileno(), 70000, off) == \
                    want[off:off + 70000], rel
                if len(held) > 50:
                    held.pop(rng.randrange(len(held))).close()
                if rnd == 1:
                    _drop_cache(m.mnt / rel)
        for f in held:
            f.close()
        assert m.alive()


@pytest.mark.nosanitize     # big_tree: the plain pass reads it
def test_seek_data_and_hole_agree_with_the_bytes(kiln, big_tree, big_images):
    img = big_images.get("kiln") or big_images.get("mkfs")
    with kiln_mount(kiln, img) as m:
        for n in ("random-24m", "text", "mixed"):
            want = (big_tree / n).read_bytes()
            fd = os.open(m.mnt / n, os.O_RDONLY)
            try:
                off = 0
                while off < len(want):
                    data = os.lseek(fd, off, os.SEEK_DATA)
                    assert off <= data <= len(want)
                    assert want[off:data] == bytes(data - off), \
                        f"{n}: [{off}, {data}) reported as a hole"
                    if data == len(want):
                        break
                    hole = os.lseek(fd, data, os.SEEK_HOLE)
                    assert data < hole <= len(want)
                    off = hole
                with pytest.raises(OSError) as e:
                    os.lseek(fd, len(want), os.SEEK_DATA)
                assert e.value.errno == errno.ENXIO
            finally:
                os.close(fd)


# -- corrupt images ---------------------------------------------------------

def _dump_inode(img, path):
    """(nid, inode size, xattr size, layout, extents) from dump.erofs."""
    r = subprocess.run(["dump.erofs", f"--path={path}", "-e", str(img)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    nid = int(out.split("NID:")[1].split()[0])
    layout = int(out.split("Layout:")[1].split()[0])
    isize = int(out.split("Inode size:")[1].split()[0])
    xsize = int(out.split("Xattr size:")[1].split()[0])
    extents = []
    for line in out.splitlines():
        parts = line.replace("..", " ").replace("|", " ").replace(":", " ") \
            .split()
        if len(parts) == 7 and parts[0].isdigit():
            extents.append((int(parts[1]), int(parts[2]), int(parts[4]),
                            int(parts[5])))
    return nid, isize, xsize, layout, extents


def _inode_off(img, nid):
    with open(img, "rb") as f:
        f.seek(EROFS_SB_OFF)
        sb = f.read(128)
    blkszbits = sb[12]
    meta_blkaddr = struct.unpack_from("<I", sb, 40)[0]
    return (meta_blkaddr << blkszbits) + nid * 32


def _drop_sb_checksum(img):
    """Clear the superblock-checksum feature, so edits in block 0 stay
    readable rather than failing the whole image."""
    with open(img, "r+b") as f:
        f.seek(EROFS_SB_OFF + 8)
        compat = struct.unpack("<I", f.read(4))[0]
        f.seek(EROFS_SB_OFF + 8)
        f.write(struct.pack("<I", compat & ~1))


def _poke(img, off, data):
    with open(img, "r+b") as f:
        f.seek(off)
        f.write(data)


def corrupt_victim(img, how):
    """Break file /victim of @img so that a reader can tell; returns its
    nid."""
    nid, isize, xsize, layout, extents = _dump_inode(img, "/victim")
    ioff = _inode_off(img, nid)
    _drop_sb_checksum(img)
    if how == "compressed-data":
        assert layout in (1, 3), f"victim not compressed (layout {layout})"
        # 0xff everywhere: an LZ4 stream with an endless literal length
        _, _, phys, plen = extents[len(extents) // 2]
        _poke(img, phys, b"\xff" * plen)
    elif how == "block-address":
        assert layout in (0, 2), layout
        # i_u.raw_blkaddr (offset 16 in both inode versions) far past the end
        _poke(img, ioff + 16, struct.pack("<I", 0xFFFFFF00))
    elif how == "chunk-table":
        assert layout == 4, layout
        with open(img, "rb") as f:
            f.seek(ioff + 16)
            chunk_format = struct.unpack("<H", f.read(2))[0]
        table = ioff + isize + xsize
        if chunk_format & 0x20:     # 8-byte indexes: startblk_lo at +4
            table = (table + 7) & ~7
            _poke(img, table + 4, struct.pack("<I", 0xFFFFFF00))
        else:                       # 4-byte block map
            _poke(img, table, struct.pack("<I", 0xFFFFFF00))
    else:
        raise ValueError(how)
    return nid


@pytest.fixture(scope="session")
def victim_tree(srcfs):
    root = srcfs / "fuse-victim"
    if root.exists():
        return root
    root.mkdir()
    rng = random.Random(5)
    words = [b"kiln ", b"erofs ", b"victim ", b"\n"]

    def text(n):
        return b"".join(rng.choice(words) for _ in range(n // 4))[:n]
    (root / "victim").write_bytes(text(600 * KiB))
    (root / "before").write_bytes(text(300 * KiB))
    (root / "after").write_bytes(text(300 * KiB))
    (root / "random").write_bytes(rng.randbytes(200 * KiB + 3))
    (root / "dir").mkdir()
    (root / "dir" / "small").write_bytes(b"small file\n")
    os.symlink("victim", root / "link")
    return root


@pytest.mark.parametrize("how,opts", (
    ("compressed-data", ("-zlz4hc",)),
    ("block-address", ()),
    ("chunk-table", ("--chunksize=4096",)),
))
def test_corrupt_file_gives_eio_and_the_rest_stays_readable(
        kiln, victim_tree, tmp_path, how, opts):
    assert have("dump.erofs"), "dump.erofs is not on PATH"
    img = mkfs_erofs(victim_tree, tmp_path / "victim.erofs", *opts)
    nid = corrupt_victim(img, how)
    with kiln_mount(kiln, img) as m:
        for attempt in range(2):        # the error is not cached as data
            with pytest.raises(OSError) as e:
                (m.mnt / "victim").read_bytes()
            assert e.value.errno == errno.EIO
        # the inode itself may or may not decode: either way no wrong data
        try:
            assert (m.mnt / "victim").stat().st_size == 600 * KiB
        except OSError as e:
            assert e.errno == errno.EIO
        # everything else reads back intact
        assert sorted(os.listdir(m.mnt)) == sorted(os.listdir(victim_tree))
        for rel in ("before", "after", "random", "dir/small"):
            assert (m.mnt / rel).read_bytes() == \
                (victim_tree / rel).read_bytes(), rel
        assert os.readlink(m.mnt / "link") == "victim"
        assert m.alive()
        err = m.stderr()
    lines = [l for l in err.splitlines() if f"nid {nid}" in l]
    assert lines, f"no log line names nid {nid}:\n{err}"
    # one line per failed request, not a flood
    assert len(err.splitlines()) <= 20, err


def _flip_metadata(img, seed, count=24):
    """Flip random bytes in the metadata part of @img (superblock excluded,
    so it still mounts)."""
    _drop_sb_checksum(img)
    data = bytearray(Path(img).read_bytes())
    rng = random.Random(seed)
    blkszbits = data[EROFS_SB_OFF + 12]
    meta = struct.unpack_from("<I", data, EROFS_SB_OFF + 40)[0] << blkszbits
    lo = max(meta, EROFS_SB_OFF + 128)
    hi = min(len(data), lo + 16 * KiB)
    for _ in range(count):
        off = rng.randrange(lo, hi)
        data[off] ^= 1 << rng.randrange(8)
    Path(img).write_bytes(bytes(data))


def _walk_everything(root, deadline):
    """Read all that can be read; errors are fine, hangs and crashes not."""
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: None):
        for n in dirnames + filenames:
            if time.monotonic() > deadline:
                return
            p = os.path.join(dirpath, n)
            with contextlib.suppress(OSError):
                st = os.lstat(p)
                os.listxattr(p, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    os.readlink(p)
                elif stat.S_ISREG(st.st_mode):
                    with open(p, "rb") as f:
                        while f.read(1 << 20):
                            pass


@pytest.mark.parametrize("seed", range(6))
def test_hostile_metadata_never_kills_the_server(kiln, small_tree, tmp_path,
                                                 seed):
    opts = ("-zlz4hc",) if seed % 2 else ()
    img = mkfs_erofs(small_tree.root, tmp_path / "hostile.erofs",
                     *MKFS_MKTREE, *opts)
    _flip_metadata(img, seed)
    mnt = tempfile.mkdtemp(prefix="kiln-fuse-")
    m = Mount(kiln, img, (), mnt)
    try:
        # a root inode that no longer decodes is refused up front
        end = time.monotonic() + 30 * SLOW
        while not is_mounted(mnt) and m.proc.poll() is None and \
                time.monotonic() < end:
            time.sleep(0.02)
        if m.proc.poll() is not None:
            assert m.proc.returncode == 1, m.stderr()
            assert m.stderr().strip()
            return
        _walk_everything(mnt, time.monotonic() + 60 * SLOW)
        assert m.alive(), m.stderr()
        os.statvfs(mnt)
    finally:
        rc = m.stop()
        force_unmount(mnt)
        os.rmdir(mnt)
    check_sanitizer("kiln mount", m.stderr())
    assert rc == 0, m.stderr()
