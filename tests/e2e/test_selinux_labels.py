# SPDX-License-Identifier: MIT
"""kiln build --file-contexts: every inode carries the security.selinux
label libselinux gives its path (below --mount-point) and file type, the
same label matchpathcon prints, for directory and tar sources; labels from
the source are replaced, "<<none>>" files stay unlabelled, and a missing or
broken file_contexts file fails the build before any image is written.

The kernel here need not run SELinux: with it off, getxattr on an EROFS
mount returns the stored security.selinux bytes as they are."""

import io
import os
import socket
import stat
import subprocess
import tarfile

import pytest

from helpers import have, read_xattrs

LABEL = "security.selinux"
HOST_LABEL = b"u:object_r:build_host_t:s0\0"

# Regexes, a "<<none>>" line, lines for one file type only (-d, --, -l,
# -p, -c, -s), an MLS range, and lines for the /vendor mount point.
FILE_CONTEXTS = r"""
# test policy
/.*                              u:object_r:default_t:s0
/                                u:object_r:root_t:s0
/etc(/.*)?                       u:object_r:etc_t:s0
/etc/init\.d          -d         u:object_r:initrc_dir_t:s0
/etc/init\.d/.*       --         u:object_r:initrc_exec_t:s0
/bin(/.*)?                       u:object_r:bin_t:s0
/bin/.*               -l         u:object_r:bin_link_t:s0
/lib/[^/]+\.so(\.[0-9]+)*  --    u:object_r:lib_t:s0
/var/run(/.*)?                   u:object_r:var_run_t:s0
/var/run/.*           -p         u:object_r:run_fifo_t:s0
/var/run/.*           -s         u:object_r:run_sock_t:s0
/dev/.*               -c         u:object_r:null_device_t:s0
/data/.*                         u:object_r:data_t:s0:c0,c1
/data/unlabelled                 <<none>>
/vendor(/.*)?                    u:object_r:vendor_file_t:s0
/vendor/bin/[^/]+     --         u:object_r:vendor_exec_t:s0
/vendor/etc/.*        -d         u:object_r:vendor_cfg_dir_t:s0
"""

MATCHPATHCON_TYPES = {
    stat.S_IFREG: "file", stat.S_IFDIR: "dir", stat.S_IFLNK: "lnk_file",
    stat.S_IFIFO: "pipe", stat.S_IFCHR: "chr_file", stat.S_IFBLK: "blk_file",
    stat.S_IFSOCK: "sock_file",
}


def need_matchpathcon():
    if not have("matchpathcon"):
        pytest.skip("needs matchpathcon (Debian selinux-utils)")


@pytest.fixture(scope="module")
def contexts(tmp_path_factory):
    p = tmp_path_factory.mktemp("fc") / "file_contexts"
    p.write_text(FILE_CONTEXTS.lstrip())
    return p


def make_labelled_tree(root):
    """Files, directories, symlinks, a FIFO, a socket and a device, some
    carrying a label (and a user xattr) of their own."""
    for d in ("etc/init.d", "bin", "lib", "var/run", "var/log", "dev",
              "data", "empty"):
        (root / d).mkdir(parents=True, exist_ok=True)
    files = {"etc/passwd": b"root:x:0:0\n", "etc/init.d/rc": b"#!/bin/sh\n",
             "bin/sh": b"\x7fELF sh", "bin/ls": b"\x7fELF ls",
             "lib/libc.so.6": b"libc" * 100, "lib/README": b"docs\n",
             "var/log/messages": b"", "data/secret": b"s" * 5000,
             "data/unlabelled": b"u" * 3000, "etc/bin": b"not in /bin\n"}
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    os.chmod(root / "etc/init.d/rc", 0o755)
    os.symlink("sh", root / "bin/bash")
    os.symlink("libc.so.6", root / "lib/libc.so")
    os.symlink("../bin", root / "etc/bin.link")
    os.mkfifo(root / "var/run/initctl")
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.fsdecode(root / "var/run/sock"))
    s.close()
    os.mknod(root / "dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    for rel in ("data/secret", "data/unlabelled", "etc/passwd", ""):
        os.setxattr(root / rel, LABEL, HOST_LABEL)
    os.setxattr(root / "data/secret", "user.note", b"kept")
    return root


@pytest.fixture(scope="module")
def tree(srcfs, need_root_module):
    root = srcfs / "selinux-tree"
    if not root.exists():
        make_labelled_tree(root)
    return root


@pytest.fixture(scope="module")
def need_root_module():
    if os.geteuid() != 0:
        pytest.skip("needs root (mknod, security.* xattrs on the source)")


def walk(root):
    """{relative path: file type bits} for every file under @root."""
    out = {"": stat.S_IFDIR}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out[os.path.relpath(p, root)] = stat.S_IFMT(os.lstat(p).st_mode)
    return out


def expected_labels(contexts, files, mount_point="/"):
    """What matchpathcon says for each file: bytes with the NUL, or None."""
    need_matchpathcon()
    prefix = mount_point.rstrip("/")
    want = {}
    by_type = {}
    for rel, ftype in files.items():
        path = prefix + "/" + rel if rel else (prefix or "/")
        by_type.setdefault(ftype, []).append((rel, path))
    for ftype, items in by_type.items():
        r = subprocess.run(["matchpathcon", "-m", MATCHPATHCON_TYPES[ftype],
                            "-f", str(contexts)] + [p for _, p in items],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert len(lines) == len(items), r.stdout
        for (rel, path), line in zip(items, lines):
            shown, ctx = line.split("\t")
            assert shown == path, line
            want[rel] = None if ctx == "<<none>>" else ctx.encode() + b"\0"
    return want


def image_labels(mnt, files):
    out = {}
    for rel in files:
        x = read_xattrs(os.path.join(mnt, rel) if rel else mnt)
        out[rel] = x.get(LABEL)
    return out


def assert_labels(got, want):
    bad = [f"  {r or '/'}: image {got[r]!r}, matchpathcon {want[r]!r}"
           for r in sorted(want) if got.get(r) != want[r]]
    assert not bad, "labels differ:\n" + "\n".join(bad)


def build_and_read(kiln, kernel_mount, src, img, *opts, files=None):
    kiln.build(src, img, *opts)
    with kernel_mount(img) as mnt:
        files = files if files is not None else walk(mnt)
        return files, image_labels(mnt, files), \
            {r: read_xattrs(os.path.join(mnt, r) if r else mnt)
             for r in files}


def test_directory_labels_match_matchpathcon(kiln, tree, contexts, tmp_path,
                                             kernel_mount):
    files, got, xattrs = build_and_read(
        kiln, kernel_mount, tree, tmp_path / "a.erofs",
        "--file-contexts", contexts)
    assert files == walk(tree)
    want = expected_labels(contexts, files)
    assert_labels(got, want)
    # the policy's own distinctions, so the comparison above means something
    assert want[""] == b"u:object_r:root_t:s0\0"
    assert want["etc/init.d"] == b"u:object_r:initrc_dir_t:s0\0"
    assert want["etc/init.d/rc"] == b"u:object_r:initrc_exec_t:s0\0"
    assert want["bin/bash"] == b"u:object_r:bin_link_t:s0\0"
    assert want["var/run/initctl"] == b"u:object_r:run_fifo_t:s0\0"
    assert want["var/run/sock"] == b"u:object_r:run_sock_t:s0\0"
    assert want["dev/null"] == b"u:object_r:null_device_t:s0\0"
    assert want["lib/libc.so.6"] == b"u:object_r:lib_t:s0\0"
    assert want["lib/README"] == b"u:object_r:default_t:s0\0"
    assert want["data/secret"] == b"u:object_r:data_t:s0:c0,c1\0"
    # the source's labels are replaced; "<<none>>" drops it
    assert want["data/unlabelled"] is None
    assert LABEL not in xattrs["data/unlabelled"]
    assert xattrs["data/secret"] == {"user.note": b"kept",
                                     LABEL: want["data/secret"]}


def test_kiln_reads_the_labels_back(kiln, tree, contexts, tmp_path, scratch):
    """The library's reader (kiln extract onto tmpfs) sees the labels the
    kernel does."""
    img = tmp_path / "e.erofs"
    kiln.build(tree, img, "--file-contexts", contexts)
    kiln.ok("extract", "-q", img, scratch)
    # kiln extract leaves DEST's own attributes alone
    files = {r: f for r, f in walk(tree).items()
             if r and f != stat.S_IFSOCK}
    assert_labels(image_labels(scratch, files),
                  expected_labels(contexts, files))


def test_getfattr_shows_the_label(kiln, tree, contexts, tmp_path,
                                  kernel_mount):
    if not have("getfattr"):
        pytest.skip("needs getfattr (Debian attr)")
    img = tmp_path / "g.erofs"
    kiln.build(tree, img, "--file-contexts", contexts)
    with kernel_mount(img) as mnt:
        r = subprocess.run(["getfattr", "-h", "--absolute-names", "-n",
                            LABEL, str(mnt / "etc/passwd")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert f'{LABEL}="u:object_r:etc_t:s0"' in r.stdout
        r = subprocess.run(["getfattr", "-h", "--absolute-names", "-e", "hex",
                            "-n", LABEL, str(mnt / "etc/passwd")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        # the value ends in the string's NUL, as setfiles stores it
        assert "=0x" + b"u:object_r:etc_t:s0\0".hex() in r.stdout


def test_mount_point_prefixes_every_path(kiln, tree, contexts, tmp_path,
                                         kernel_mount):
    files, got, _ = build_and_read(
        kiln, kernel_mount, tree, tmp_path / "v.erofs",
        "--file-contexts", contexts, "--mount-point", "/vendor")
    want = expected_labels(contexts, files, "/vendor")
    assert_labels(got, want)
    assert want[""] == b"u:object_r:vendor_file_t:s0\0"
    assert want["bin/sh"] == b"u:object_r:vendor_exec_t:s0\0"
    assert want["bin/bash"] == b"u:object_r:vendor_file_t:s0\0"
    assert want["etc/init.d"] == b"u:object_r:vendor_cfg_dir_t:s0\0"
    # "vendor/" means the same
    kiln.build(tree, tmp_path / "v2.erofs", "--file-contexts", contexts,
               "--mount-point", "vendor/")
    assert (tmp_path / "v.erofs").read_bytes() == \
        (tmp_path / "v2.erofs").read_bytes()


def gnu_tar(src, dest):
    """The tree as GNU tar archives it (the socket is left out)."""
    subprocess.run(["tar", "--warning=no-file-ignored", "--numeric-owner", "--xattrs",
                    "--xattrs-include=*", "--format=pax", "-cf", str(dest),
                    "-C", str(src), "."], check=True)
    return dest


def test_tar_labels_match_directory(kiln, tree, contexts, tmp_path,
                                    kernel_mount):
    t = gnu_tar(tree, tmp_path / "t.tar")
    # tar cannot carry the socket
    files = {r: f for r, f in walk(tree).items() if f != stat.S_IFSOCK}
    want = expected_labels(contexts, files, "/vendor")
    for j in ("-j1", "-j2"):
        _, got, xattrs = build_and_read(
            kiln, kernel_mount, t, tmp_path / f"t{j}.erofs", j,
            "--file-contexts", contexts, "--mount-point", "/vendor", "--tar",
            files=files)
        assert_labels(got, want)
        assert xattrs["data/secret"]["user.note"] == b"kept"
    assert (tmp_path / "t-j1.erofs").read_bytes() == \
        (tmp_path / "t-j2.erofs").read_bytes()


def test_tar_parents_without_entries_are_labelled(kiln, contexts, tmp_path,
                                                  kernel_mount):
    """Directories only named as parents, the root among them, and files
    streamed with a label of their own (inline tails must still fit)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, size in (("etc/init.d/rc", 4000), ("bin/sh", 4090),
                           ("data/unlabelled", 100), ("lib/libc.so.6", 9000)):
            ti = tarfile.TarInfo(name)
            ti.size = size
            ti.mode = 0o755
            ti.pax_headers = {"SCHILY.xattr." + LABEL:
                              HOST_LABEL.decode()}
            tf.addfile(ti, io.BytesIO(bytes(range(256)) * (size // 256) +
                                      b"t" * (size % 256)))
    t = tmp_path / "implicit.tar"
    t.write_bytes(buf.getvalue())
    files = {"": stat.S_IFDIR, "etc": stat.S_IFDIR,
             "etc/init.d": stat.S_IFDIR, "bin": stat.S_IFDIR,
             "data": stat.S_IFDIR, "lib": stat.S_IFDIR,
             "etc/init.d/rc": stat.S_IFREG, "bin/sh": stat.S_IFREG,
             "data/unlabelled": stat.S_IFREG, "lib/libc.so.6": stat.S_IFREG}
    for mp in ("/", "/vendor"):
        img = tmp_path / f"i{len(mp)}.erofs"
        kiln.build(t, img, "--file-contexts", contexts,
                   "--mount-point", mp, "--verify", "--tar")
        with kernel_mount(img) as mnt:
            assert walk(mnt) == files
            got = image_labels(mnt, files)
            assert_labels(got, expected_labels(contexts, files, mp))
            for rel, n in (("etc/init.d/rc", 4000), ("bin/sh", 4090)):
                assert (mnt / rel).read_bytes()[:256] == bytes(range(256))
                assert os.path.getsize(mnt / rel) == n


def test_no_xattrs_keeps_labels_only(kiln, tree, contexts, tmp_path,
                                     kernel_mount):
    files, got, xattrs = build_and_read(
        kiln, kernel_mount, tree, tmp_path / "n.erofs", "--no-xattrs",
        "--file-contexts", contexts)
    assert_labels(got, expected_labels(contexts, files))
    assert xattrs["data/secret"] == {LABEL: b"u:object_r:data_t:s0:c0,c1\0"}


def test_without_file_contexts_source_labels_stay(kiln, tree, tmp_path,
                                                  kernel_mount):
    _, got, _ = build_and_read(kiln, kernel_mount, tree, tmp_path / "s.erofs",
                               files={"": 0, "data/secret": 0, "bin/sh": 0})
    assert got == {"": HOST_LABEL, "data/secret": HOST_LABEL, "bin/sh": None}


def test_hardlinks_take_the_first_name_in_image_order(kiln, srcfs, contexts,
                                                     tmp_path, kernel_mount):
    root = srcfs / "selinux-links"
    if not root.exists():
        (root / "etc").mkdir(parents=True)
        (root / "bin").mkdir()
        (root / "etc/tool").write_bytes(b"one inode, two names\n")
        os.link(root / "etc/tool", root / "bin/tool")
    img = tmp_path / "l.erofs"
    kiln.build(root, img, "--file-contexts", contexts)
    with kernel_mount(img) as mnt:
        # "bin" sorts before "etc": bin/tool is the name the label is for
        assert os.stat(mnt / "etc/tool").st_nlink == 2
        assert image_labels(mnt, ["bin/tool", "etc/tool"]) == {
            "bin/tool": b"u:object_r:bin_t:s0\0",
            "etc/tool": b"u:object_r:bin_t:s0\0"}


def mkfs_erofs_with_file_contexts():
    for d in ("/usr/sbin", "/usr/bin", "/sbin"):
        p = os.path.join(d, "mkfs.erofs")
        if os.access(p, os.X_OK):
            r = subprocess.run([p, "--help"], capture_output=True, text=True)
            if "--file-contexts" in r.stdout + r.stderr:
                return p
    return None


def test_labels_equal_mkfs_erofs_but_for_the_nul(kiln, tree, contexts,
                                                 tmp_path, kernel_mount):
    """mkfs.erofs looks labels up the same way; it stores the context
    without the NUL that setfiles and kiln keep."""
    mkfs = mkfs_erofs_with_file_contexts()
    if not mkfs:
        pytest.skip("needs a mkfs.erofs built with libselinux")
    theirs = tmp_path / "m.erofs"
    r = subprocess.run([mkfs, f"--file-contexts={contexts}", str(theirs),
                        str(tree)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    files, ours, _ = build_and_read(kiln, kernel_mount, tree,
                                    tmp_path / "k.erofs", "--file-contexts",
                                    contexts)
    with kernel_mount(theirs) as mnt:
        got = image_labels(mnt, files)
    assert {r: v and v + b"\0" for r, v in got.items()} == ours


def test_reproducible_for_any_thread_count(kiln, tree, contexts, tmp_path):
    imgs = []
    for i, opts in enumerate((("-j1",), ("-j2",), ("-j2",),
                              ("-j2", "-z", "lz4hc"), ("-j1", "-z", "lz4hc"))):
        img = tmp_path / f"r{i}.erofs"
        kiln.build(tree, img, "--file-contexts", contexts, *opts)
        imgs.append(img.read_bytes())
    assert imgs[0] == imgs[1] == imgs[2]
    assert imgs[3] == imgs[4]


def test_verify_checks_labels(kiln, tree, contexts, tmp_path):
    kiln.build(tree, tmp_path / "v.erofs", "--file-contexts", contexts,
               "--verify", "-z", "lz4")


@pytest.mark.parametrize("name,content,reason", [
    ("regex", "/etc(/.*   u:object_r:etc_t:s0\n", "invalid regex"),
    ("type", "/etc  -q  u:object_r:etc_t:s0\n", "invalid file type"),
    ("fields", "/etc\n", "missing fields"),
    ("context", "/etc  not_a_context\n", "invalid context"),
    ("empty-type", "/etc  u:object_r::s0\n", "invalid context"),
])
def test_broken_file_contexts_fail_cleanly(kiln, tree, tmp_path, name,
                                           content, reason):
    fc = tmp_path / f"fc-{name}"
    fc.write_text("/.*  u:object_r:default_t:s0\n" + content)
    img = tmp_path / "x.erofs"
    r = kiln.fails("build", "--file-contexts", fc, tree, img)
    assert str(fc) in r.err and reason in r.err, r.describe()
    assert not img.exists()
    assert os.listdir(tmp_path) == [fc.name]


def test_missing_file_contexts_fails_and_keeps_old_image(kiln, tree, tmp_path):
    img = tmp_path / "old.erofs"
    img.write_bytes(b"previous image")
    for fc, reason in ((tmp_path / "nope", "No such file or directory"),
                       (tmp_path, "not a regular file")):
        r = kiln.fails("build", "--file-contexts", fc, tree, img)
        assert f"{fc}: cannot read file contexts: {reason}" in r.err, \
            r.describe()
        assert img.read_bytes() == b"previous image"
        r = kiln.fails("build", "--file-contexts", fc, "--tar", "-", img,
                       input=b"")
        assert str(fc) in r.err, r.describe()
    assert sorted(os.listdir(tmp_path)) == ["old.erofs"]


def test_help_lists_the_options(kiln):
    h = kiln.help_text("build")
    assert "--file-contexts" in h and "--mount-point" in h
