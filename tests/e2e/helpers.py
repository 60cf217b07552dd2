# SPDX-License-Identifier: MIT
"""What the end-to-end tests share: running kiln, kernel mounts, and a
comparison of two trees that looks at every byte and attribute."""

import contextlib
import errno
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"

SANITIZED = os.environ.get("KILN_SANITIZED") == "1"
# Sanitized builds run several times slower.
SLOW = 4 if SANITIZED else 1

SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "SUMMARY: UndefinedBehaviorSanitizer",
    "SUMMARY: AddressSanitizer",
    "ThreadSanitizer",
    "MemorySanitizer",
)


def kiln_path():
    p = os.environ.get("KILN")
    return Path(p) if p else REPO / "build" / "tools" / "kiln" / "kiln"


def fsb(x):
    """Any path-like or str into bytes for argv."""
    return os.fsencode(x)


def check_sanitizer(what, stderr):
    for m in SANITIZER_MARKERS:
        if m in stderr:
            pytest.fail(f"{what}: sanitizer report on stderr:\n{stderr[-6000:]}")


@dataclass
class Result:
    argv: list
    rc: int
    out: bytes
    err: str

    @property
    def text(self):
        return self.out.decode("utf-8", "surrogateescape")

    def describe(self):
        cmd = " ".join(os.fsdecode(a) for a in self.argv)
        return (f"$ {cmd}\nexit {self.rc}\n--- stdout (head)\n"
                f"{self.text[:2000]}\n--- stderr\n{self.err[-4000:]}")


class Kiln:
    """Runs the kiln CLI; every run is checked for crashes and sanitizer
    reports, whatever its exit status."""

    def __init__(self, path):
        self.path = Path(path)

    def run(self, *args, env=None, timeout=120, input=None, cwd=None,
            wrapper=()):
        argv = [fsb(w) for w in wrapper] + [fsb(self.path)] + \
            [fsb(a) for a in args]
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        try:
            p = subprocess.run(argv, input=input, capture_output=True,
                               env=full_env, timeout=timeout * SLOW, cwd=cwd)
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"kiln hung (> {timeout * SLOW}s): "
                        f"{' '.join(os.fsdecode(a) for a in argv)}\n"
                        f"{(e.stderr or b'').decode(errors='replace')[-3000:]}")
        err = p.stderr.decode("utf-8", "replace")
        r = Result(argv, p.returncode, p.stdout, err)
        check_sanitizer(" ".join(os.fsdecode(a) for a in argv), err)
        if p.returncode < 0 or p.returncode >= 128:
            pytest.fail(f"kiln died (signal or abort):\n{r.describe()}")
        return r

    def ok(self, *args, **kw):
        r = self.run(*args, **kw)
        assert r.rc == 0, r.describe()
        return r

    def fails(self, *args, **kw):
        r = self.run(*args, **kw)
        assert r.rc != 0, "expected a failure\n" + r.describe()
        assert r.err.strip(), "failed without a message\n" + r.describe()
        return r

    def build(self, src, img, *opts, env=None, timeout=600):
        r = self.run("build", *opts, src, img, env=env, timeout=timeout)
        assert r.rc == 0, r.describe()
        assert os.path.isfile(img), f"build exited 0 but wrote no {img}"
        return r

    def info(self, img):
        r = self.ok("info", "--json", img)
        try:
            return json.loads(r.out)
        except ValueError as e:
            pytest.fail(f"kiln info --json is not JSON ({e}):\n{r.describe()}")

    def help_text(self, cmd):
        r = self.run(cmd, "--help")
        return r.text + r.err


def info_field(info, *names):
    """The first of @names present in kiln info --json (nested dicts too)."""
    stack = [info]
    while stack:
        d = stack.pop(0)
        for n in names:
            if n in d:
                return d[n]
        stack += [v for v in d.values() if isinstance(v, dict)]
    pytest.fail(f"kiln info --json has none of {names}: {sorted(info)}")


# -- kernel mounts ---------------------------------------------------------

def kernel_mount_unavailable():
    """Why the kernel cannot mount images here, or None."""
    if os.geteuid() != 0:
        return "needs root and loop devices: not running as root"
    if not os.path.exists("/dev/loop-control"):
        return "needs root and loop devices: no /dev/loop-control"
    if "erofs" not in Path("/proc/filesystems").read_text():
        subprocess.run(["modprobe", "erofs"], capture_output=True)
        if "erofs" not in Path("/proc/filesystems").read_text():
            return "needs root and loop devices: erofs not in /proc/filesystems"
    return None


def dmesg_tail(n=8):
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    lines = [l for l in r.stdout.splitlines() if "erofs" in l or "loop" in l]
    return "\n".join(lines[-n:])


def _loop_of(mnt):
    r = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "--mountpoint",
                        str(mnt)], capture_output=True, text=True)
    return r.stdout.strip() or None


def _detach(loopdev, image):
    """Detach @loopdev if it still serves @image (autoclear usually did)."""
    if not loopdev or not loopdev.startswith("/dev/loop"):
        return
    r = subprocess.run(["losetup", "-n", "-O", "BACK-FILE", loopdev],
                       capture_output=True, text=True)
    back = r.stdout.strip()
    if r.returncode == 0 and back and \
            os.path.realpath(back.split(" (deleted)")[0]) == \
            os.path.realpath(image):
        subprocess.run(["losetup", "-d", loopdev], capture_output=True)


@contextlib.contextmanager
def kernel_mount(image, options="ro"):
    """Loop-mount @image read-only with the kernel's erofs; always unmounts
    and detaches the loop device."""
    why = kernel_mount_unavailable()
    if why:
        pytest.skip(why)
    image = os.path.realpath(image)
    mnt = tempfile.mkdtemp(prefix="kiln-mnt-")
    r = subprocess.run(["mount", "-t", "erofs", "-o", "loop," + options,
                        image, mnt], capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(mnt)
        pytest.fail(f"the kernel refused to mount {image}: "
                    f"{r.stderr.strip()}\n{dmesg_tail()}")
    loopdev = _loop_of(mnt)
    try:
        yield Path(mnt)
    finally:
        for attempt in range(5):
            u = subprocess.run(["umount", mnt], capture_output=True, text=True)
            if u.returncode == 0:
                break
            time.sleep(0.2 * (attempt + 1))
        else:
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        _detach(loopdev, image)
        with contextlib.suppress(OSError):
            os.rmdir(mnt)


@contextlib.contextmanager
def loop_devices(directory):
    """Yields attach(size) -> /dev/loopN: a loop device over a new file of
    @size bytes in @directory, random bytes in its first 16 MiB (old
    content an image must not leave showing through) and sparse after;
    every device is detached at the end. Skips without root or loop
    devices."""
    why = kernel_mount_unavailable()
    if why:
        pytest.skip(why)
    made = []

    def attach(size):
        back = Path(directory) / f"back{len(made)}.raw"
        with open(back, "wb") as f:
            f.truncate(size)
            f.write(os.urandom(min(size, 16 << 20)))
        r = subprocess.run(["losetup", "-f", "--show", str(back)],
                           capture_output=True, text=True)
        if r.returncode:
            pytest.fail(f"losetup: {r.stderr.strip()}")
        made.append(r.stdout.strip())
        return made[-1]
    try:
        yield attach
    finally:
        for dev in made:
            subprocess.run(["losetup", "-d", dev], capture_output=True)


@contextlib.contextmanager
def mount_device(dev):
    """Mount block device @dev read-only with the kernel's erofs; yields
    the mount point, always unmounted."""
    mnt = tempfile.mkdtemp(prefix="kiln-dev-")
    r = subprocess.run(["mount", "-t", "erofs", "-o", "ro", dev, mnt],
                       capture_output=True, text=True)
    if r.returncode:
        os.rmdir(mnt)
        pytest.fail(f"the kernel refused to mount {dev}: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        os.rmdir(mnt)


def write_tar(path, entries, fmt=None, mode="w", owner=(0, 0)):
    """Write a tar at @path with Python's tarfile (@mode, e.g. "w:gz";
    @fmt defaults to PAX) and return @path. entries: (name, kind, extra)
    with kind file/dir/sym/hard/fifo/chr/blk; extra may hold data, mode,
    mtime, uid, gid (else @owner), pax (headers), target (links; a
    hardlink with data gets a body, as pax allows) and dev (major, minor)."""
    with tarfile.open(path, mode,
                      format=tarfile.PAX_FORMAT if fmt is None else fmt) as t:
        for name, kind, extra in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = extra.get("mtime", 1600000000)
            ti.uid = extra.get("uid", owner[0])
            ti.gid = extra.get("gid", owner[1])
            ti.mode = extra.get("mode", 0o644)
            if "pax" in extra:
                ti.pax_headers = extra["pax"]
            data = None
            if kind == "file":
                data = extra.get("data", b"")
                ti.size = len(data)
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = extra.get("mode", 0o755)
            elif kind in ("sym", "hard"):
                ti.type = tarfile.SYMTYPE if kind == "sym" else \
                    tarfile.LNKTYPE
                ti.linkname = extra["target"]
                if kind == "hard" and "data" in extra:
                    data = extra["data"]
                    ti.size = len(data)
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            elif kind in ("chr", "blk"):
                ti.type = tarfile.CHRTYPE if kind == "chr" else \
                    tarfile.BLKTYPE
                ti.devmajor, ti.devminor = extra["dev"]
            else:
                raise ValueError(f"write_tar: unknown kind {kind!r}")
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


@contextlib.contextmanager
def wait_fuse_mount(proc, mnt, tries=100):
    """Wait (0.1 s a try) until `kiln mount -f` (@proc) has mounted @mnt;
    fail the test with its stderr when it exits first."""
    for _ in range(tries):
        if os.path.ismount(mnt):
            return
        if proc.poll() is not None:
            pytest.fail(f"kiln mount exited: {proc.stderr.read()}")
        time.sleep(0.1)


def is_mounted(mnt):
    mnt = os.path.realpath(mnt)
    with open("/proc/self/mountinfo", "rb") as f:
        for line in f:
            fields = line.split(b" ")
            mp = fields[4].decode("unicode_escape").encode("latin-1")
            if os.fsdecode(mp) == mnt:
                return True
    return False


def force_unmount(mnt):
    """Unmount @mnt whatever state its server is in: fusermount3 -u, then
    a lazy unmount."""
    if not is_mounted(mnt):
        return
    for argv in (["fusermount3", "-u", mnt], ["fusermount3", "-uz", mnt],
                 ["umount", "-l", mnt]):
        subprocess.run(argv, capture_output=True)
        if not is_mounted(mnt):
            return


@contextlib.contextmanager
def tmpfs_mount(directory, size):
    """Mount a tmpfs of @size (e.g. "2M") on a new @directory; yields it,
    always unmounted. Needs root (the need_root fixture)."""
    d = Path(directory)
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                    d], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], check=False)


# -- tree snapshots and comparison ----------------------------------------

TYPES = {stat.S_IFREG: "reg", stat.S_IFDIR: "dir", stat.S_IFLNK: "lnk",
         stat.S_IFCHR: "chr", stat.S_IFBLK: "blk", stat.S_IFIFO: "fifo",
         stat.S_IFSOCK: "sock"}

ALL_FIELDS = ("type", "mode", "uid", "gid", "size", "mtime", "nlink",
              "links", "target", "rdev", "xattrs", "data", "listing")

# Files above this are compared by samples (the 5 GiB sparse file).
FULL_HASH_LIMIT = 256 << 20
SAMPLE = 64 << 10


@dataclass
class Node:
    type: str
    mode: int
    uid: int
    gid: int
    size: int
    mtime: int                      # nanoseconds
    nlink: int
    ino: tuple
    links: tuple = ()               # every path sharing this inode
    target: bytes = None
    rdev: tuple = None
    xattrs: dict = field(default_factory=dict)
    data: str = None
    listing: tuple = None


def _sample_ranges(size):
    offs = set(range(0, size, 256 << 20))
    offs |= {max(0, (1 << 32) - SAMPLE), 1 << 32, max(0, size - SAMPLE)}
    return sorted(o for o in offs if o < size)


def file_digest(path, size):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= FULL_HASH_LIMIT:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                h.update(b)
        else:
            for off in _sample_ranges(size):
                f.seek(off)
                h.update(off.to_bytes(8, "little") + f.read(SAMPLE))
            f.seek(0, os.SEEK_END)
            h.update(f.tell().to_bytes(8, "little"))
    return h.hexdigest()


def read_xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return {}
        raise
    out = {}
    for n in names:
        try:
            out[n] = os.getxattr(path, n, follow_symlinks=False)
        except OSError as e:
            out[n] = f"<getxattr failed: {e}>".encode()
    return out


def snapshot(root, *, data=True, xattrs=True):
    """Everything about the tree under @root, keyed by relative bytes path
    (b"" is the root itself)."""
    root = os.fsencode(root)
    nodes = {}
    todo = [b""]
    while todo:
        rel = todo.pop()
        p = os.path.join(root, rel) if rel else root
        st = os.lstat(p)
        t = TYPES[stat.S_IFMT(st.st_mode)]
        n = Node(type=t, mode=st.st_mode, uid=st.st_uid, gid=st.st_gid,
                 size=st.st_size if t != "dir" else 0,
                 mtime=st.st_mtime_ns, nlink=st.st_nlink,
                 ino=(st.st_dev, st.st_ino))
        if t == "lnk":
            n.target = os.readlink(p)
        elif t in ("chr", "blk"):
            n.rdev = (os.major(st.st_rdev), os.minor(st.st_rdev))
        elif t == "reg" and data:
            n.data = file_digest(p, st.st_size)
        elif t == "dir":
            names = sorted(os.listdir(p))
            n.listing = tuple(names)
            todo += [join(rel, x) for x in names]
        if xattrs:
            n.xattrs = read_xattrs(p)
        nodes[rel] = n
    groups = {}
    for rel, n in nodes.items():
        if n.type != "dir":
            groups.setdefault(n.ino, []).append(rel)
    for rel, n in nodes.items():
        if n.type != "dir":
            n.links = tuple(sorted(groups[n.ino]))
    return nodes


def show(rel):
    return "/" + rel.decode("utf-8", "backslashreplace")


def _fmt(field_name, v):
    if field_name == "mode":
        return f"{v:o}"
    if field_name == "links":
        return "[" + ", ".join(show(x) for x in v) + "]"
    if field_name == "xattrs":
        return "{" + ", ".join(f"{k}: {len(x)}B" for k, x in sorted(v.items())) + "}"
    if field_name == "listing":
        return f"{len(v)} names"
    return repr(v)


def diff_snapshots(exp, act, fields=ALL_FIELDS, root_attrs=True):
    diffs = []
    missing = sorted(set(exp) - set(act))
    extra = sorted(set(act) - set(exp))
    diffs += [f"missing: {show(r)}" for r in missing]
    diffs += [f"unexpected: {show(r)}" for r in extra]
    for rel in sorted(set(exp) & set(act)):
        e, a = exp[rel], act[rel]
        for f in fields:
            if rel == b"" and not root_attrs and f not in ("type", "listing"):
                continue
            if f in ("data", "rdev", "target", "listing") and \
                    getattr(e, f) is None:
                continue
            ev, av = getattr(e, f), getattr(a, f)
            if f == "xattrs" and ev != av:
                keys = sorted(set(ev) | set(av))
                bad = [k for k in keys if ev.get(k) != av.get(k)]
                diffs.append(f"{show(rel)}: xattrs differ in {bad} "
                             f"(expected {_fmt(f, ev)}, got {_fmt(f, av)})")
            elif f == "listing" and ev != av:
                gone = sorted(set(ev) - set(av))[:5]
                new = sorted(set(av) - set(ev))[:5]
                diffs.append(f"{show(rel)}: listing lacks {gone}, has extra "
                             f"{new} ({len(ev)} vs {len(av)} names)")
            elif ev != av:
                diffs.append(f"{show(rel)}: {f} expected {_fmt(f, ev)}, "
                             f"got {_fmt(f, av)}")
            if f == "type" and ev != av:
                break
    return diffs


def assert_same(diffs, what):
    if diffs:
        shown = "\n  ".join(diffs[:60])
        more = f"\n  ... and {len(diffs) - 60} more" if len(diffs) > 60 else ""
        pytest.fail(f"{what}: {len(diffs)} differences\n  {shown}{more}")


def drop_paths(nodes, pred):
    """Remove the paths for which pred(rel) holds (and all below them)
    from @nodes, listings and hardlink groups included. Returns them."""
    gone = {r for r in nodes if r and pred(r)}
    gone |= {r for r in nodes if any(r.startswith(g + b"/") for g in gone)}
    for r in gone:
        del nodes[r]
    for rel, n in nodes.items():
        if n.listing is not None:
            n.listing = tuple(x for x in n.listing
                              if join(rel, x) not in gone)
        n.links = tuple(x for x in n.links if x not in gone)
    return gone


def tree_compare(src, dst, *, expect=None, fields=ALL_FIELDS,
                 root_attrs=True, exclude=None, ignore=None):
    """Assert that @dst holds exactly @src: paths, types, modes, owners,
    sizes, nanosecond mtimes, nlink and hardlink identity, symlink targets,
    device numbers, xattrs of every namespace, file bytes, listings.

    expect(rel, node) may rewrite the expected node (e.g. --all-root).
    exclude(rel) -> True: the path (and what is below it) must be absent
    from @dst; nlink of directories and hardlinks is recounted.
    ignore(rel) -> True: the path is compared on neither side.
    root_attrs=False compares only the root's listing (extract targets).
    """
    want_data = "data" in fields
    want_x = "xattrs" in fields
    exp = snapshot(src, data=want_data, xattrs=want_x)
    act = snapshot(dst, data=want_data, xattrs=want_x)
    if ignore:
        drop_paths(exp, ignore)
        drop_paths(act, ignore)
    if exclude:
        drop_paths(exp, exclude)
        recount_dir_nlink(exp)
    if expect:
        for rel, n in exp.items():
            expect(rel, n)
    assert_same(diff_snapshots(exp, act, fields, root_attrs),
                f"{os.fsdecode(dst)} does not match {os.fsdecode(src)}")
    return exp, act


def join(rel, name):
    return os.path.join(rel, name) if rel else name


def recount_dir_nlink(nodes):
    """nlink of every directory = 2 + its subdirectories (after excludes)."""
    for rel, n in nodes.items():
        if n.type == "dir":
            n.nlink = 2 + sum(1 for x in n.listing
                              if join(rel, x) in nodes and
                              nodes[join(rel, x)].type == "dir")
        elif n.links:
            n.nlink = len(n.links)


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def stray_files(directory, keep=()):
    """Names in @directory other than @keep (temporary files left behind)."""
    return sorted(set(os.listdir(directory)) - set(keep))


def have(tool):
    return shutil.which(tool) is not None


def matrix(firsts, seconds):
    """pytest.param for every (first, second) pair, first varying fastest
    as two stacked parametrize would give. The sanitizer pass keeps every
    second once, with the firsts in turn: the others are nosanitize."""
    out = []
    for j, b in enumerate(seconds):
        for i, a in enumerate(firsts):
            marks = () if i == j % len(firsts) else pytest.mark.nosanitize
            out.append(pytest.param(a, b, marks=marks))
    return out
