# SPDX-License-Identifier: MIT
"""kiln mount keeps what it decoded: a small read of a compressed file
decodes the whole extent, and the kernel's page cache gets every page of
it (FUSE_NOTIFY_STORE). Random reads from several threads still give the
source bytes in every layout, codec and cache mode, the pages of an
extent become resident after one read of one page (and stay out with -o
nostore), and under --verity a page that fails verification is never
stored."""

import ctypes
import errno
import os
import random
import threading
import time

import pytest

from helpers import SLOW
from test_mount import fuse_unavailable, kiln_mount, mkfs_erofs

pytestmark = pytest.mark.sanitize

KiB = 1024
MiB = 1024 * KiB
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(autouse=True)
def need_fuse():
    why = fuse_unavailable()
    if why:
        pytest.skip(why)


# -- page cache residency ------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
PROT_READ, MAP_SHARED = 1, 1


def resident_pages(path):
    """Indexes of the pages of @path in the page cache (mincore on a
    mapping of the file, which reads nothing)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        addr = _libc.mmap(None, size, PROT_READ, MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap {path}")
        try:
            n = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * n)()
            if _libc.mincore(addr, size, vec):
                raise OSError(ctypes.get_errno(), f"mincore {path}")
            return {i for i in range(n) if vec[i] & 1}
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def drop_caches(*paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass    # not root: the fadvise above dropped the files' pages


def wait_resident(path, want, timeout=5):
    """The resident pages of @path once at least @want are and the set
    has stopped changing (stores arrive after the reply, an extent's
    pages in several calls), or what is resident at the timeout."""
    end = time.monotonic() + timeout * SLOW
    last = None
    while True:
        got = resident_pages(path)
        if (len(got) >= want and got == last) or time.monotonic() > end:
            return got
        last = got
        time.sleep(0.1 if len(got) >= want else 0.02)


# -- the tree and its images ---------------------------------------------------

@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Files of several sizes: compressible, incompressible, mixed, small
    ones whose tails become fragments or inline pclusters."""
    root = tmp_path_factory.mktemp("fuse-store") / "tree"
    root.mkdir()
    rng = random.Random(15)
    words = [b"static ", b"int ", b"return ", b"struct ", b"(void)\n",
             b"{\n", b"}\n", b"kiln_", b"erofs_", b"0x1f, ", b"if (err)\n"]
    text = b"".join(rng.choice(words) for _ in range(1500000))
    files = {
        "text": text[:6 * MiB + 333],
        "random": rng.randbytes(2 * MiB + 5),
        "mixed": (rng.randbytes(512 * KiB) + bytes(MiB) + text[:700 * KiB] +
                  rng.randbytes(3)),
        "zeros": bytes(2 * MiB),
        "tiny": b"x",
        "small": text[100:5100],
        "tail": text[7:70008],
        "mid": rng.randbytes(100 * KiB) + text[:200 * KiB + 9],
    }
    for name, data in files.items():
        (root / name).write_bytes(data)
    return root


KINDS = {
    "zstd-classic": ("kiln", ("-z", "zstd:3", "-C", "131072")),
    "zstd-extents": ("kiln", ("-z", "zstd:3", "-C", "131072",
                              "--layout", "extents")),
    "lz4hc-fragments": ("kiln", ("-z", "lz4hc", "--fragments")),
    "lz4-tailpacking": ("kiln", ("-z", "lz4", "--ztailpacking",
                                 "-C", "65536")),
    "mkfs-lz4hc-fragments": ("mkfs", ("-zlz4hc", "-C65536",
                                      "-Efragments,ztailpacking")),
}


@pytest.fixture(scope="module")
def images(kiln, tree, tmp_path_factory):
    d = tmp_path_factory.mktemp("fuse-store-images")
    out = {}
    for kind, (tool, opts) in KINDS.items():
        img = d / f"{kind}.erofs"
        if tool == "kiln":
            kiln.build(tree, img, *opts)
            out[kind] = img
        else:
            out[kind] = mkfs_erofs(tree, img, *opts)
    return out


def random_reads(mnt, want, seed, count, errors):
    """@count preads at random offsets and sizes, page-sized ones most."""
    rng = random.Random(seed)
    names = sorted(want)
    fds = {n: os.open(mnt / n, os.O_RDONLY) for n in names}
    try:
        for _ in range(count):
            n = rng.choice(names)
            size = len(want[n])
            if rng.random() < 0.6:
                off = rng.randrange(0, size // PAGE + 1) * PAGE
                ln = PAGE
            else:
                off = rng.randrange(0, size + 10)
                ln = rng.choice((1, 100, PAGE + 1, 3 * PAGE - 5, 64 * KiB,
                                 rng.randrange(1, 300 * KiB)))
            got = os.pread(fds[n], ln, off)
            if got != want[n][off:off + ln]:
                errors.append(f"{n} [{off}, +{ln}): wrong bytes")
                return
    except OSError as e:
        errors.append(f"reader {seed}: {e}")
    finally:
        for fd in fds.values():
            os.close(fd)


def check_threads(mnt, want, threads=4, count=250):
    errors = []
    ts = [threading.Thread(target=random_reads,
                           args=(mnt, want, s, count, errors))
          for s in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:10]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_random_reads_from_threads_give_the_source_bytes(kiln, tree, images,
                                                         kind):
    want = {p.name: p.read_bytes() for p in tree.iterdir()}
    with kiln_mount(kiln, images[kind]) as m:
        check_threads(m.mnt, want)
        # the pages stored so far, then a reread from a cold cache
        for name, data in want.items():
            assert (m.mnt / name).read_bytes() == data, name
        drop_caches(*(m.mnt / n for n in want))
        check_threads(m.mnt, want, threads=2, count=150)
        for name, data in want.items():
            assert (m.mnt / name).read_bytes() == data, name


@pytest.mark.parametrize("opts", [("-o", "cache=none"), ("-s",),
                                  ("-o", "threads=2"), ("-o", "nosplice")],
                         ids=["cache-none", "single-thread", "threads-2",
                              "nosplice"])
def test_every_cache_and_thread_mode_reads_the_source_bytes(
        kiln, tree, images, opts):
    want = {p.name: p.read_bytes() for p in tree.iterdir()}
    with kiln_mount(kiln, images["zstd-classic"], *opts) as m:
        check_threads(m.mnt, want)
        drop_caches(*(m.mnt / n for n in want))
        for name, data in want.items():
            assert (m.mnt / name).read_bytes() == data, name


def read_one_page(path, index):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, PAGE, index * PAGE)
    finally:
        os.close(fd)


@pytest.mark.parametrize("kind", ["zstd-classic", "zstd-extents",
                                  "lz4hc-fragments"])
@pytest.mark.parametrize("opts", [(), ("-o", "cache=none")],
                         ids=["cache", "cache-none"])
def test_one_page_read_makes_its_whole_extent_resident(kiln, tree, images,
                                                       kind, opts):
    want = (tree / "text").read_bytes()
    with kiln_mount(kiln, images[kind], *opts) as m:
        f = m.mnt / "text"
        drop_caches(f)
        index = len(want) // PAGE // 2
        assert read_one_page(f, index) == want[index * PAGE:][:PAGE]
        got = wait_resident(f, 8)
        # the page read and its neighbours, one run of pages around it:
        # the extent, not readahead (which a random read does not start)
        assert index in got and len(got) >= 8, sorted(got)
        run = sorted(got)
        assert run == list(range(run[0], run[-1] + 1)), run
        assert run[0] <= index <= run[-1]
        # served from the cache: the same bytes
        fd = os.open(f, os.O_RDONLY)
        try:
            for i in run:
                assert os.pread(fd, PAGE, i * PAGE) == \
                    want[i * PAGE:(i + 1) * PAGE], i
        finally:
            os.close(fd)


def test_nostore_hands_the_kernel_only_the_page_asked_for(kiln, tree,
                                                          images):
    """The control of the test above: it fails without the stores."""
    want = (tree / "text").read_bytes()
    with kiln_mount(kiln, images["zstd-classic"], "-o", "nostore") as m:
        f = m.mnt / "text"
        drop_caches(f)
        index = len(want) // PAGE // 2
        assert read_one_page(f, index) == want[index * PAGE:][:PAGE]
        time.sleep(0.3)
        assert resident_pages(f) == {index}


def test_an_uncompressed_file_is_not_stored(kiln, tree, images):
    with kiln_mount(kiln, images["zstd-classic"]) as m:
        f = m.mnt / "random"    # incompressible: stored as it is
        drop_caches(f)
        read_one_page(f, 100)
        time.sleep(0.3)
        assert resident_pages(f) == {100}


def test_verity_stores_only_verified_pages(kiln, tree, tmp_path):
    """A flipped byte in one pcluster of a compressed file: with --verity
    the pages of that extent fail with EIO and never become resident,
    the other extents read right and are stored."""
    from test_verity import build

    src = tmp_path / "src"
    src.mkdir()
    want = (tree / "text").read_bytes()[:3 * MiB]
    (src / "text").write_bytes(want)
    img = tmp_path / "v.img"
    v = build(kiln, src, img, "-z", "zstd:3", "-C", "131072")
    data = bytearray(img.read_bytes())
    # the data blocks of the one file sit between the metadata and the
    # tree: the middle of the image part is inside one of its pclusters
    at = v["blocks"] * 4096 // 2
    data[at] ^= 0x40
    img.write_bytes(bytes(data))
    bad = set()
    pages = (len(want) + PAGE - 1) // PAGE
    order = list(range(pages))
    random.Random(3).shuffle(order)

    def read_pages(fd, which):
        for i in which:
            try:
                got = os.pread(fd, PAGE, i * PAGE)
            except OSError as e:
                assert e.errno == errno.EIO, e
                bad.add(i)
                continue
            assert got == want[i * PAGE:(i + 1) * PAGE], i

    with kiln_mount(kiln, img, "--verity", v["root"]) as m:
        f = m.mnt / "text"
        fd = os.open(f, os.O_RDONLY)
        try:
            # 0. one page of a good extent: its neighbours come with it
            for i in order:
                read_pages(fd, [i])
                if i not in bad:
                    break
            assert len(wait_resident(f, 8)) >= 8, "nothing stored"
            # 1. a quarter of the pages
            first = order[:pages // 4]
            read_pages(fd, first)
            time.sleep(0.3)
            stored = resident_pages(f)
            # 2. every page: which ones the flipped byte spoils
            read_pages(fd, order)
        finally:
            os.close(fd)
        assert bad, "the flipped byte failed no read"
        assert len(bad) < pages // 4, "the flip failed too many reads"
        assert not stored & bad, sorted(stored & bad)
        assert not resident_pages(f) & bad


@pytest.mark.parametrize("opts", [(), ("-s",)], ids=["threads", "single"])
def test_sigterm_while_reading_ends_the_mount(kiln, tree, images, opts):
    """Stores in flight when the request loop stops never keep the
    server (or its readers) from ending."""
    import signal
    import tempfile

    from test_mount import Mount, force_unmount, is_mounted
    from helpers import check_sanitizer

    mnt = tempfile.mkdtemp(prefix="kiln-fuse-")
    m = Mount(kiln, images["zstd-classic"], opts, mnt)
    stop = threading.Event()

    def reader(seed):
        rng = random.Random(seed)
        while not stop.is_set():
            try:
                fd = os.open(os.path.join(mnt, "text"), os.O_RDONLY)
                try:
                    os.pread(fd, PAGE, rng.randrange(0, 6 * MiB // PAGE) *
                             PAGE)
                finally:
                    os.close(fd)
            except OSError:
                return      # the mount went away: expected

    ts = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    try:
        m.wait_mounted()
        for t in ts:
            t.start()
        time.sleep(0.5)
        m.proc.send_signal(signal.SIGTERM)
        rc = m.proc.wait(timeout=20 * SLOW)
        assert rc == 0, m.stderr()
        assert not is_mounted(mnt)
    finally:
        stop.set()
        if m.proc.poll() is None:
            m.proc.kill()
            m.proc.wait()
        force_unmount(mnt)
        for t in ts:
            t.join(timeout=20 * SLOW)
        os.rmdir(mnt)
    assert not any(t.is_alive() for t in ts), "a reader is stuck"
    check_sanitizer("kiln mount", m.stderr())


def logged_reads(m):
    """The read count of the last stats line SIGUSR1 made the mount log."""
    import re
    import signal

    before = m.stderr().count("stats:")
    m.proc.send_signal(signal.SIGUSR1)
    end = time.monotonic() + 10 * SLOW
    while m.stderr().count("stats:") == before:
        assert time.monotonic() < end, "no stats line after SIGUSR1"
        time.sleep(0.02)
    line = [ln for ln in m.stderr().splitlines() if "stats:" in ln][-1]
    got = re.search(r"stats: (\d+) reads; page cache stores: (\d+) extents "
                    r"decoded whole, (\d+) bytes stored", line)
    assert got, line
    return int(got.group(1)), int(got.group(2)), int(got.group(3))


@pytest.mark.parametrize("kind", ["zstd-classic", "lz4-tailpacking"])
def test_random_page_reads_reach_the_server_once_an_extent(kiln, tree, images,
                                                           kind):
    """Every page of a compressed file read once in random order: with the
    stores the server sees about one read per extent, without them one
    per page (the counters SIGUSR1 logs)."""
    want = (tree / "text").read_bytes()
    pages = list(range((len(want) + PAGE - 1) // PAGE))
    random.Random(5).shuffle(pages)
    counts = {}
    for opts in ((), ("-o", "nostore")):
        with kiln_mount(kiln, images[kind], *opts) as m:
            f = m.mnt / "text"
            drop_caches(f)
            fd = os.open(f, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                for i in pages:
                    assert os.pread(fd, PAGE, i * PAGE) == \
                        want[i * PAGE:(i + 1) * PAGE], i
            finally:
                os.close(fd)
            counts[opts] = logged_reads(m)
            assert m.alive(), "SIGUSR1 ended the mount"
    reads, extents, stored = counts[()]
    assert extents and stored, counts
    assert reads * 4 < counts[("-o", "nostore")][0], counts
    assert counts[("-o", "nostore")][1:] == (0, 0), counts
