# SPDX-License-Identifier: MIT
"""What users expect of a command line tool: -V on every command, exit
codes that tell "not an image" from "corrupt image", messages without
source locations, Ctrl-C that cleans up, a progress line that fits the
terminal, exclude globs anchored at the root, codec levels as documented,
and a FUSE mount that hides trusted.* names from ordinary users."""

import concurrent.futures
import errno
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time

import pytest

from helpers import REPO, SLOW, have

pytestmark = pytest.mark.sanitize

COMMANDS = ["build", "ls", "cat", "extract", "info", "fsck", "mount",
            "umount"]
SOURCE_LOCATION = re.compile(r"\([A-Za-z_][A-Za-z0-9_]*:[0-9]+\)")


def tiny_tree(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "f").write_bytes(b"kiln " * 200)
    return root


# -- -V / --version -----------------------------------------------------------

def test_every_command_prints_the_version_as_kiln_does(kiln):
    want = kiln.ok("--version").text
    assert re.fullmatch(r"kiln [0-9]+\.[0-9]+\.[0-9]+\n", want), want
    assert kiln.ok("-V").text == want
    for cmd in COMMANDS:
        for flag in ("-V", "--version"):
            r = kiln.ok(cmd, flag)
            assert r.text == want, r.describe()
        assert "-V, --version" in kiln.help_text(cmd)


# -- fsck exit codes ----------------------------------------------------------

@pytest.mark.parametrize("content", [b"", b"short", b"\0" * 8192,
                                     b"plain text\n" * 1000],
                         ids=["empty", "short", "zeros", "text"])
def test_fsck_of_a_file_that_is_no_erofs_image_exits_2(kiln, tmp_path,
                                                        content):
    bogus = tmp_path / "bogus.img"
    bogus.write_bytes(content)
    r = kiln.run("fsck", bogus)
    assert r.rc == 2, r.describe()
    assert str(bogus) in r.err and "not an EROFS image" in r.err, \
        r.describe()


def test_fsck_of_a_directory_exits_2(kiln, tmp_path):
    r = kiln.run("fsck", tmp_path)
    assert r.rc == 2, r.describe()
    assert str(tmp_path) in r.err


def corrupt_copy(kiln, tmp_path):
    """An image whose superblock has EROFS magic but a bad block size."""
    img = tmp_path / "good.erofs"
    kiln.build(tiny_tree(tmp_path / "src"), img)
    bad = tmp_path / "corrupt.erofs"
    data = bytearray(img.read_bytes())
    data[1024 + 0x0C] = 8		# blkszbits below 9
    bad.write_bytes(bytes(data))
    return bad


def test_fsck_of_a_corrupt_erofs_image_exits_1(kiln, tmp_path):
    r = kiln.run("fsck", corrupt_copy(kiln, tmp_path))
    assert r.rc == 1, r.describe()
    assert "corrupt" in r.err


def test_fsck_help_documents_the_exit_codes(kiln):
    text = kiln.help_text("fsck")
    assert "0 sound" in text and "1 corrupt" in text and \
        "no EROFS image" in text


def test_messages_name_no_source_location_unless_debugging(kiln, tmp_path):
    bad = corrupt_copy(kiln, tmp_path)
    for cmd in (("fsck", bad), ("info", bad), ("ls", bad)):
        r = kiln.fails(*cmd)
        assert not SOURCE_LOCATION.search(r.err), r.describe()
        assert "corrupt image" in r.err, r.describe()
    r = kiln.fails("fsck", bad, env={"KILN_DEBUG": "1"})
    assert re.search(r"found by [a-z_]+:[0-9]+", r.err), r.describe()


# -- codec levels ---------------------------------------------------------------

def readme_level_ranges():
    """{codec: (lo, hi)} from the README's -z row, e.g. `lz4hc` (1-12."""
    row = next(line for line in (REPO / "README.md").read_text().splitlines()
               if line.startswith("| `-z ALG[:LEVEL]`"))
    ranges = {}
    for name, lo, hi in re.findall(
            r"`([a-z0-9]+)` \((-?[0-9]+)(?:-|\.\.)(-?[0-9]+)", row):
        ranges[name] = (int(lo), int(hi))
    return ranges


@pytest.mark.nosanitize		# 150 builds; the parser's unit test covers it
def test_readme_level_ranges_are_what_build_accepts(kiln, tmp_path):
    ranges = readme_level_ranges()
    assert set(ranges) == {"lz4hc", "deflate", "zstd", "lzma"}, ranges
    src = tiny_tree(tmp_path / "src")

    def build(spec, ok):
        img = tmp_path / f"{spec}.img"
        r = kiln.run("build", "-q", "-j1", "--no-fragments", "-z", spec,
                     src, img)
        if img.exists():
            img.unlink()
        return r

    specs = [(f"{name}:{level}", lo <= level <= hi)
             for name, (lo, hi) in ranges.items()
             for level in range(lo - 1, hi + 2)]
    specs += [(f"lzma:{level}e", True) for level in range(10)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda s: (s, build(*s)), specs))
    for (spec, ok), r in results:
        if ok:
            assert r.rc == 0, r.describe()
        else:
            assert r.rc == 2 and "out of range" in r.err, r.describe()


def test_zstd_level_0_is_zstds_default_level_3(kiln, tmp_path):
    src = tiny_tree(tmp_path / "src")
    (src / "more").write_bytes(os.urandom(4096) * 8 + b"abc" * 5000)
    a, b, c = (tmp_path / n for n in ("l0.img", "l3.img", "dflt.img"))
    kiln.build(src, a, "-z", "zstd:0")
    kiln.build(src, b, "-z", "zstd:3")
    kiln.build(src, c, "-z", "zstd")
    assert a.read_bytes() == b.read_bytes() == c.read_bytes()
    for spec in ("lz4hc:0", "deflate:0"):
        r = kiln.run("build", "-z", spec, src, tmp_path / "x.img")
        assert r.rc == 2 and "out of range" in r.err, r.describe()


# -- exclude globs ------------------------------------------------------------

def paths_in(kiln, img, tmp_path):
    out = tmp_path / ("x-" + img.name)
    kiln.ok("extract", img, out)
    return sorted(os.path.relpath(os.path.join(d, n), out)
                  for d, ds, fs in os.walk(out) for n in ds + fs)


@pytest.mark.parametrize("pattern,gone", [
    ("/a/*.o", ["a/x.o"]),
    ("/a", ["a", "a/x.o", "a/sub", "a/sub/y.o"]),
    ("/a/sub/y.?", ["a/sub/y.o"]),
    ("/*.o", ["top.o"]),
    ("/b/a", ["b/a", "b/a/x.o"]),
    ("a", ["a", "a/x.o", "a/sub", "a/sub/y.o", "b/a", "b/a/x.o"]),
    ("*.o", ["a/x.o", "a/sub/y.o", "b/a/x.o", "top.o"]),
    ("a/*", ["a/x.o", "a/sub", "a/sub/y.o"]),
], ids=["anchored-glob", "anchored-dir", "anchored-qmark", "anchored-top",
        "anchored-deep", "name", "name-glob", "path-glob"])
@pytest.mark.parametrize("source", ["dir", "tar"])
def test_exclude_anchors_at_the_root_with_a_leading_slash(kiln, tmp_path,
                                                          pattern, gone,
                                                          source):
    src = tmp_path / "src"
    for p in ("a/x.o", "a/sub/y.o", "b/a/x.o", "top.o", "keep"):
        (src / p).parent.mkdir(parents=True, exist_ok=True)
        (src / p).write_bytes(p.encode())
    every = sorted(["a", "a/x.o", "a/sub", "a/sub/y.o", "b", "b/a",
                    "b/a/x.o", "top.o", "keep"])
    img = tmp_path / "img"
    if source == "dir":
        kiln.build(src, img, "-x", pattern)
    else:
        tar = tmp_path / "t.tar"
        subprocess.run(["tar", "-cf", tar, "-C", src, "."], check=True)
        kiln.ok("build", "-x", pattern, "--tar", tar, img)
    assert paths_in(kiln, img, tmp_path) == sorted(set(every) - set(gone))


# -- progress line and Ctrl-C ---------------------------------------------------

def slow_tree(root, mib):
    """Text that lzma compresses slowly: @mib MiB in 1 MiB files."""
    root.mkdir(parents=True)
    words = [os.urandom(6).hex() for _ in range(4000)]
    rnd = __import__("random").Random(7)
    for i in range(mib):
        text = " ".join(rnd.choice(words) for _ in range(90000)).encode()
        (root / f"f{i:03d}").write_bytes(text[:1 << 20])
    return root


def run_on_pty(argv, cols, until, timeout):
    """Run @argv with stderr on a pseudo terminal @cols wide; once @until
    (the output so far) is true, send SIGINT. Returns (rc, output)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols,
                                                       0, 0))
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out, sent = b"", False
    end = time.monotonic() + timeout * SLOW
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.05)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError as e:
                    if e.errno != errno.EIO:
                        raise
                    chunk = b""
                if not chunk and p.poll() is not None:
                    break
                out += chunk
            elif p.poll() is not None:
                break
            if not sent and until(out.decode("utf-8", "replace")):
                p.send_signal(signal.SIGINT)
                sent = True
        else:
            p.kill()
            pytest.fail(f"{argv[1]} did not end in {timeout}s:\n{out!r}")
    finally:
        os.close(master)
    return p.wait(), out.decode("utf-8", "replace"), sent


def progress_lines(out):
    """The progress texts drawn, one per redraw."""
    return [s for s in re.split(r"[\r\n]", out) if "files," in s]


@pytest.fixture(scope="module")
def slow_src(tmp_path_factory):
    return slow_tree(tmp_path_factory.mktemp("slow") / "src", 24)


def test_ctrl_c_during_build_ends_the_line_and_leaves_the_old_image(
        kiln, tmp_path, slow_src):
    dest = tmp_path / "out"
    dest.mkdir()
    img = dest / "image.erofs"
    img.write_bytes(b"the previous image")
    cols = 60

    def out_grew(out):
        # the image's bytes count as they are written, before the end
        outs = re.findall(r"([0-9.]+) (B|KiB|MiB) out", out)
        return any(float(v) > 0 and u != "B" for v, u in outs)

    rc, out, sent = run_on_pty([str(kiln.path), "build", "-j1", "-z",
                                "lzma:9", "--no-dedupe", slow_src, img],
                               cols, out_grew, timeout=120)
    assert sent, f"no progress line counted output bytes:\n{out!r}"
    assert rc == 130, out
    lines = progress_lines(out)
    assert lines, out
    assert all(len(s) <= cols - 1 for s in lines), lines
    assert re.search(r"files, [^\r\n]*\r?\n(\r)?kiln build: interrupted; "
                     r"[^\n]*image\.erofs left as it was", out), repr(out)
    assert img.read_bytes() == b"the previous image"
    assert os.listdir(dest) == ["image.erofs"]


def test_progress_line_fits_columns_when_no_terminal_size(kiln, tmp_path,
                                                          slow_src):
    """$COLUMNS counts when the terminal does not say its width (0)."""
    img = tmp_path / "img"
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
    env = dict(os.environ, COLUMNS="40")
    p = subprocess.Popen([str(kiln.path), "build", "-j1", "-z",
                          "lz4hc:12", slow_src, img], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=120 * SLOW) == 0, out
    text = out.decode("utf-8", "replace")
    drawn = progress_lines(text.split("\n")[0] if "\n" in text else text)
    assert drawn, text
    assert all(len(s) <= 39 for s in drawn), drawn


def wait_for(pred, timeout):
    end = time.monotonic() + timeout * SLOW
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.002)
    return False


@pytest.fixture(scope="module")
def big_image(kiln, slow_src, tmp_path_factory):
    """8 MiB in lzma: about half a second to extract or check."""
    d = tmp_path_factory.mktemp("bigimg")
    src = d / "src"
    src.mkdir()
    for f in sorted(os.listdir(slow_src))[:8]:
        os.link(slow_src / f, src / f)
    img = d / "big.erofs"
    kiln.build(src, img, "-z", "lzma:0", "-j2")
    return img


def interrupt_when(argv, ready, timeout=60):
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert wait_for(lambda: ready(p) or p.poll() is not None, timeout)
    time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60 * SLOW)[1].decode("utf-8", "replace")
    return p.returncode, err


def test_ctrl_c_during_extract_says_the_output_is_partial(kiln, big_image,
                                                          tmp_path):
    dest = tmp_path / "dest"
    rc, err = interrupt_when(
        [str(kiln.path), "extract", big_image, dest],
        lambda p: dest.exists() and len(os.listdir(dest)) > 0)
    assert rc == 130, err
    assert "kiln extract: interrupted;" in err and \
        f"{dest} holds a partial extraction" in err, err
    assert len(os.listdir(dest)) < 8


def test_ctrl_c_during_fsck_exits_130(kiln, big_image):
    def reading(p):
        try:
            with open(f"/proc/{p.pid}/maps") as f:
                return big_image.name in f.read()
        except OSError:
            return False

    rc, err = interrupt_when([str(kiln.path), "fsck", big_image], reading)
    assert rc == 130, err
    assert "kiln fsck: interrupted" in err, err


# -- FUSE and trusted.* -----------------------------------------------------------

def test_fuse_hides_trusted_xattrs_from_an_unprivileged_caller(kiln,
                                                               tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (to set trusted.* xattrs and drop to nobody)")
    if not os.path.exists("/dev/fuse") or not have("fusermount3"):
        pytest.skip("needs /dev/fuse and fusermount3")
    if not have("setpriv"):
        pytest.skip("needs setpriv")
    srcroot = tempfile.mkdtemp(prefix="kiln-trusted-", dir="/dev/shm")
    mnt = tempfile.mkdtemp(prefix="kiln-trusted-mnt-", dir="/tmp")
    os.chmod(mnt, 0o755)
    try:
        src = os.path.join(srcroot, "src")
        os.mkdir(src)
        f = os.path.join(src, "f")
        with open(f, "wb") as fh:
            fh.write(b"data")
        os.chmod(f, 0o644)
        os.setxattr(f, "trusted.secret", b"s")
        os.setxattr(f, "user.plain", b"p")
        img = tmp_path / "x.erofs"
        kiln.build(src, img)
        kiln.ok("mount", "-o", "allow_other", img, mnt)
        try:
            mf = os.path.join(mnt, "f")
            assert sorted(os.listxattr(mf)) == ["trusted.secret",
                                                "user.plain"]
            assert os.getxattr(mf, "trusted.secret") == b"s"
            nobody = ["setpriv", "--reuid=65534", "--regid=65534",
                      "--clear-groups", "--inh-caps=-all",
                      "/usr/bin/python3", "-c"]
            probe = ("import os,sys\n"
                     "f=sys.argv[1]\n"
                     "print(sorted(os.listxattr(f)))\n"
                     "print(os.getxattr(f,'user.plain'))\n"
                     "try:\n"
                     "    os.getxattr(f,'trusted.secret'); print('seen')\n"
                     "except OSError as e:\n"
                     "    print(e.errno)\n")
            r = subprocess.run(nobody + [probe, mf], capture_output=True,
                               text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            assert r.stdout.split("\n")[:3] == [
                "['user.plain']", "b'p'", str(errno.ENODATA)], r.stdout
        finally:
            kiln.ok("umount", mnt)
    finally:
        shutil.rmtree(srcroot, ignore_errors=True)
        os.rmdir(mnt)
