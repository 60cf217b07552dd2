# SPDX-License-Identifier: MIT
"""kiln build --verify: the image is read back and compared with the
source before it takes its name. A clean build passes; a source changed
after its data was written, or image data damaged after it was written,
fails the build and leaves no image.

The damage is done from outside kiln, by a small LD_PRELOAD library built
here: at the builder's first ftruncate() (sizing the finished image right
before it is read back) it rewrites a source file or flips image bytes.
"""

import os
import shutil
import subprocess

import pytest

from helpers import stray_files, tree_compare

pytestmark = pytest.mark.sanitize

SHIM_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int done;

static void corrupt_marker(int fd, const char *marker)
{
	static char buf[1 << 20];
	size_t mlen = strlen(marker);
	off_t off = 0;
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), off)) > (ssize_t)mlen) {
		for (ssize_t i = 0; i + (ssize_t)mlen <= n; i++)
			if (!memcmp(buf + i, marker, mlen)) {
				pwrite(fd, "#", 1, off + i);
				return;
			}
		off += n - (ssize_t)mlen;
	}
}

static void tamper(int fd)
{
	const char *src = getenv("SHIM_MUTATE_SOURCE");
	const char *marker = getenv("SHIM_CORRUPT_MARKER");

	if (src) {
		int s = open(src, O_WRONLY);

		if (s >= 0) {
			pwrite(s, "!", 1, 0);
			close(s);
		}
	}
	if (marker)
		corrupt_marker(fd, marker);
}

static int call(const char *name, int fd, off_t len)
{
	int (*real)(int, off_t) = (int (*)(int, off_t))dlsym(RTLD_NEXT, name);

	if (!done) {
		done = 1;
		tamper(fd);
	}
	return real(fd, len);
}

int ftruncate(int fd, off_t len) { return call("ftruncate", fd, len); }
int ftruncate64(int fd, off_t len) { return call("ftruncate64", fd, len); }
"""

MARKER = b"KILN-VERIFY-MARKER-"


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler for the LD_PRELOAD library")
    d = tmp_path_factory.mktemp("shim")
    (d / "shim.c").write_text(SHIM_C)
    so = d / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so),
                    str(d / "shim.c"), "-ldl"], check=True)
    return so


def shim_env(so, **kw):
    env = {"LD_PRELOAD": str(so),
           # a gcc-sanitized kiln would refuse a preload ahead of libasan
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") +
           ":verify_asan_link_order=0"}
    env.update(kw)
    return env


@pytest.fixture
def victim_tree(srcfs, request):
    """A small tree with a file whose bytes are easy to find in an image."""
    root = srcfs / ("verify-" + request.node.name[:60])
    shutil.rmtree(root, ignore_errors=True)
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "victim").write_bytes(
        MARKER + os.urandom(20000) + MARKER)
    (root / "other").write_bytes(os.urandom(9000))
    (root / "small").write_bytes(b"tiny")
    os.symlink("sub/victim", root / "link")
    os.setxattr(root / "other", "user.x", b"y")
    yield root
    shutil.rmtree(root, ignore_errors=True)


def make_tar(src, dest):
    subprocess.run(["tar", "--numeric-owner", "--format=pax", "--xattrs",
                    "--xattrs-include=*", "--sparse", "-C", str(src), "-cf",
                    str(dest), "."], check=True, capture_output=True)
    return dest


@pytest.mark.parametrize("opts", [(), ("-z", "lz4hc"),
                                  ("-z", "zstd", "--layout", "extents",
                                   "--ztailpacking", "--dedupe"),
                                  ("-b", "1024", "-z", "lzma"),
                                  ("-z", "lz4hc", "--fragments", "-j", "2")])
def test_verify_passes_on_a_clean_directory_build(kiln, small_tree, tmp_path,
                                                  opts):
    img = tmp_path / "v.erofs"
    r = kiln.build(small_tree.root, img, "--verify", *opts)
    assert "verify" not in r.err


def test_verify_passes_on_the_rich_tree(kiln, rich_tree, tmp_path):
    img = tmp_path / "rich.erofs"
    kiln.build(rich_tree.root, img, "--verify", "--all-root")


@pytest.mark.parametrize("opts", [(), ("-z", "lz4"),
                                  ("-z", "deflate", "--ztailpacking")])
def test_verify_passes_on_a_tar_build(kiln, small_tree, tmp_path, opts):
    t = tmp_path / "s.tar"
    r = subprocess.run(["tar", "--numeric-owner", "--format=pax",
                        "--xattrs", "--xattrs-include=*", "--sparse", "-C",
                        small_tree.root, "-cf", str(t), "."],
                       capture_output=True)
    assert r.returncode in (0, 1), r.stderr
    img = tmp_path / "t.erofs"
    kiln.ok("build", "--verify", *opts, "--tar", t, img)


def test_shim_really_tampers(kiln, shim, victim_tree, tmp_path,
                             kernel_mount):
    """Without --verify the damage goes unnoticed: proof that the tests
    below fail for the reason they claim."""
    img = tmp_path / "out" / "x.erofs"
    img.parent.mkdir()
    kiln.build(victim_tree, img,
               env=shim_env(shim, SHIM_CORRUPT_MARKER=MARKER.decode()))
    with kernel_mount(img) as mnt:
        got = (mnt / "sub" / "victim").read_bytes()
    assert got != (victim_tree / "sub" / "victim").read_bytes()
    assert got.startswith(b"#")


def test_source_changed_before_verify_fails(kiln, shim, victim_tree,
                                            tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    victim = victim_tree / "sub" / "victim"
    r = kiln.fails("build", "--verify", victim_tree, out / "x.erofs",
                   env=shim_env(shim, SHIM_MUTATE_SOURCE=str(victim)))
    assert "sub/victim" in r.err and "verify" in r.err, r.err
    assert "differs" in r.err and "byte 0" in r.err, r.err
    assert stray_files(out) == [], "image or temporary file left behind"


@pytest.mark.parametrize("opts", [(), ("-b", "2048")])
def test_damaged_image_data_fails_directory_build(kiln, shim, victim_tree,
                                                  tmp_path, opts):
    out = tmp_path / "out"
    out.mkdir()
    old = out / "x.erofs"
    old.write_bytes(b"previous image")
    r = kiln.fails("build", "--verify", *opts, victim_tree, old,
                   env=shim_env(shim, SHIM_CORRUPT_MARKER=MARKER.decode()))
    assert "sub/victim" in r.err and "differs" in r.err, r.err
    # the previous image is untouched, nothing else is left
    assert old.read_bytes() == b"previous image"
    assert stray_files(out, keep=["x.erofs"]) == []


def test_damaged_image_data_fails_tar_build(kiln, shim, victim_tree,
                                            tmp_path):
    t = make_tar(victim_tree, tmp_path / "v.tar")
    out = tmp_path / "out"
    out.mkdir()
    with open(t, "rb") as f:
        r = kiln.fails("build", "--verify", "--tar", "-", out / "x.erofs",
                       input=f.read(),
                       env=shim_env(shim,
                                    SHIM_CORRUPT_MARKER=MARKER.decode()))
    assert "sub/victim" in r.err and "archive" in r.err, r.err
    assert stray_files(out) == []


def test_verify_then_mount_matches(kiln, victim_tree, tmp_path,
                                   kernel_mount):
    img = tmp_path / "ok.erofs"
    kiln.build(victim_tree, img, "--verify", "-z", "lz4hc")
    with kernel_mount(img) as mnt:
        tree_compare(victim_tree, mnt)


def test_verify_is_documented(kiln):
    assert "--verify" in kiln.help_text("build")
    assert "--tar" in kiln.help_text("build")


@pytest.mark.parametrize("where,message", [
    ("xattr", "xattr user.m: value differs"),
    ("symlink", "symlink target differs"),
])
def test_damaged_image_metadata_fails(kiln, shim, srcfs, tmp_path, where,
                                      message):
    root = srcfs / f"verify-meta-{where}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    (root / "plain").write_bytes(b"nothing to see")
    if where == "xattr":
        os.setxattr(root / "plain", "user.m", MARKER + b"value")
    else:
        os.symlink(MARKER.decode() + "target", root / "plain-link")
    out = tmp_path / "out"
    out.mkdir()
    r = kiln.fails("build", "--verify", root, out / "x.erofs",
                   env=shim_env(shim, SHIM_CORRUPT_MARKER=MARKER.decode()))
    assert message in r.err and "verify" in r.err, r.err
    assert stray_files(out) == []
    shutil.rmtree(root)
