#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Build a tree that exercises every corner of an EROFS image builder.

The same seed gives the same tree: names, contents, modes, owners, times and
xattrs are all drawn from one random generator. As root the tree carries
devices, foreign owners, trusted.* and security.* xattrs and a POSIX ACL; as
an ordinary user it is the subset that user may create.

    mktree.py [--seed N] [--many N] [--big-sparse] [--small-xattrs] DEST

Used as a module: make_tree(dest, seed=1, ...) returns a TreeInfo.
"""

import argparse
import os
import random
import socket
import stat
import struct
import sys
from dataclasses import dataclass, field

BLOCK_SIZES = (512, 1024, 2048, 4096)
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# Owners at the edges of the compact (16-bit) and extended (32-bit) inode.
OWNERS = (0, 1000, 65535, 65536, 4000000000)

# (seconds, nanoseconds) pairs at the edges of the formats' time fields.
SPECIAL_TIMES = (
    (0, 0),
    (-1, 999999999),            # one nanosecond before the Unix epoch
    (-2**31, 0),                # 1901-12-13, the 32-bit minimum
    (-86400 * 365 * 30, 123),   # 1940
    (2**31 - 1, 999999999),     # 2038-01-19
    (2**32 + 5, 1),             # past an unsigned 32-bit second count
    (2**33, 500000000),         # 2242
    (1234567890, 123456789),
)

# Names whose first byte sorts before '.', non-UTF-8 names, extremes.
ODD_NAMES = (
    b"a", b"Z", b"z", b"~", b" b", b"!a", b"-c", b"+d", b"\x01x", b"\x1fy",
    b".hidden", b"..x", b"...", b".-", b"\x80", b"\xff\xfe", b"caf\xe9",
    "caf\u00e9".encode(), b"n" * 255, "\u00e9".encode() * 127 + b"x",
    b"sp ace", b"tab\tname", b"back\\slash", b"star*", b"q?uestion",
)


@dataclass
class TreeInfo:
    """What the tree holds, for tests that look at a part of it."""
    root: str
    privileged: bool
    big_sparse: bool
    # Directories worth listing one by one (relative, str, printable names).
    listing_dirs: list = field(default_factory=list)
    # Relative paths (bytes) of regular files, 'many' excluded.
    files: list = field(default_factory=list)
    # Relative path of the directory with `many` entries.
    many_dir: str = "many"
    # Paths (relative, str) safe to exclude: no hardlinks leave them.
    excludable: list = field(default_factory=list)


class _Maker:
    def __init__(self, root, seed, privileged, many, big_sparse, big_xattrs,
                 name_max, light):
        self.root = os.fsencode(os.path.abspath(root))
        self.seed = seed
        self.rng = None
        self.privileged = privileged
        self.many = many
        self.big_sparse = big_sparse
        self.big_xattrs = big_xattrs
        self.name_max = name_max
        self.light = light
        self.times = {}         # relative path -> (sec, nsec)
        self.modes = {}         # relative path -> mode applied last
        self.info = TreeInfo(root=os.fsdecode(self.root),
                             privileged=privileged, big_sparse=big_sparse)

    # -- helpers -----------------------------------------------------------

    def p(self, rel):
        rel = os.fsencode(rel)
        return os.path.join(self.root, rel) if rel else self.root

    def data(self, size, kind="random"):
        if kind == "random":
            return self.rng.randbytes(size)
        if kind == "zeros":
            return bytes(size)
        words = [b"kiln ", b"erofs ", b"block ", b"inode ", b"\n", b"data "]
        out = bytearray()
        while len(out) < size:
            out += self.rng.choice(words)
        return bytes(out[:size])

    def file(self, rel, size=0, kind="random", content=None):
        if content is None:
            content = self.data(size, kind)
        with open(self.p(rel), "wb") as f:
            f.write(content)
        self.info.files.append(os.fsencode(rel))
        return content

    def mkdir(self, rel):
        os.mkdir(self.p(rel))

    def owner(self, rel, uid, gid):
        if self.privileged:
            os.chown(self.p(rel), uid, gid, follow_symlinks=False)

    def xattr(self, rel, name, value):
        ns = name.split(b".", 1)[0] if isinstance(name, bytes) else \
            name.split(".", 1)[0]
        ns = os.fsdecode(ns)
        if not self.privileged and ns in ("trusted", "security"):
            return
        os.setxattr(self.p(rel), name, value, follow_symlinks=False)

    def when(self, rel, sec=None, nsec=None):
        if sec is None:
            rng = random.Random(b"%d:time:%s" % (self.seed, os.fsencode(rel)))
            sec = rng.randrange(0, 2**31)
            nsec = rng.randrange(0, 10**9)
        self.times[os.fsencode(rel)] = (sec, nsec)

    # -- parts of the tree ------------------------------------------------

    def sizes(self):
        self.mkdir("sizes")
        sizes = {0, 1, 2, 3, 100, 65536}
        if not self.light:
            sizes |= {100 * KiB, MiB + 7}
        for bs in BLOCK_SIZES:
            sizes |= {bs - 1, bs, bs + 1, 2 * bs - 1, 2 * bs, 2 * bs + 1,
                      3 * bs + bs // 2,
                      bs + 60,        # short tail: fits inline
                      bs + bs - 40}   # long tail: cannot share the block
        for s in sorted(sizes):
            self.file(f"sizes/r{s}", s)
        self.file("sizes/compressible-100k", 100 * KiB, "text")
        if not self.light:
            self.file("sizes/compressible-300k", 300 * KiB + 5, "text")
        self.file("sizes/zeros-64k", 64 * KiB, "zeros")
        self.file("sizes/zeros-tail", 0, content=b"x" + bytes(4 * KiB + 9))
        self.info.listing_dirs.append("sizes")
        self.info.excludable.append("sizes")

    def dirs(self):
        self.mkdir("dirs")
        self.mkdir("dirs/empty")
        self.mkdir("dirs/one")
        self.file("dirs/one/only", 5)
        self.mkdir("dirs/deep")
        path = "dirs/deep"
        for i in range(24):
            path += f"/level{i:02d}"
            self.mkdir(path)
        self.file(path + "/bottom", 33)
        self.info.listing_dirs += ["dirs", "dirs/empty", "dirs/one"]

    def many_entries(self):
        if not self.many:
            return
        self.mkdir("many")
        letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
        for i in range(self.many):
            n = self.rng.randrange(1, 48)
            name = f"{i:05d}-" + "".join(self.rng.choice(letters) for _ in range(n))
            if i % 500 == 499:
                self.mkdir(f"many/{name}")
                self.file(f"many/{name}/inner", 7)
                continue
            size = 0 if i % 3 == 0 else self.rng.randrange(1, 300)
            with open(self.p(f"many/{name}"), "wb") as f:
                f.write(self.rng.randbytes(size))
        self.info.excludable.append("many")

    def names(self):
        self.mkdir("names")
        for n in ODD_NAMES:
            if len(n) > self.name_max:
                n = n[:self.name_max - 1] + b"x"
            with open(os.path.join(self.p("names"), n), "wb") as f:
                f.write(n)
        longdir = os.path.join(b"names", b"d" * self.name_max)
        os.mkdir(self.p(longdir))
        with open(os.path.join(self.p(longdir), b"e" * self.name_max),
                  "wb") as f:
            f.write(b"long/long")
        self.info.excludable.append("names")

    def symlinks(self):
        self.mkdir("links")
        self.file("links/target-file", 10)
        targets = {
            "short": b"target-file",
            "one": b"x",
            "long": b"d/" * 2047 + b"x",            # 4095 bytes, the limit
            "dangling": b"nonexistent/file",
            "absolute": b"/etc/passwd",
            "to-dir": b"../sizes",
            "loop1": b"loop2",
            "loop2": b"loop1",
            "self": b"self",
            "odd-bytes": b"\xff\x01 target",
            "dots": b"../../../../../..",
        }
        for name, t in targets.items():
            os.symlink(t, self.p(f"links/{name}"))
        self.info.listing_dirs.append("links")
        self.info.excludable.append("links")

    def hardlinks(self):
        self.mkdir("hard")
        self.mkdir("hard/a")
        self.mkdir("hard/b")
        self.file("hard/a/orig", 10000)
        os.link(self.p("hard/a/orig"), self.p("hard/b/link1"))
        os.link(self.p("hard/a/orig"), self.p("hard/link2"))
        self.file("hard/empty1", 0)
        os.link(self.p("hard/empty1"), self.p("hard/empty2"))
        self.file("hard/xattr1", 4097)
        os.link(self.p("hard/xattr1"), self.p("hard/b/xattr2"))
        self.xattr("hard/xattr1", "user.linked", b"both names")
        os.symlink("a/orig", self.p("hard/sym1"))
        os.link(self.p("hard/sym1"), self.p("hard/sym2"), follow_symlinks=False)
        os.mkfifo(self.p("hard/fifo1"))
        os.link(self.p("hard/fifo1"), self.p("hard/fifo2"))
        self.info.listing_dirs.append("hard")

    def specials(self):
        self.mkdir("special")
        os.mkfifo(self.p("special/fifo"), 0o640)
        cwd = os.getcwd()
        os.chdir(self.p("special"))
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind("sock")
            s.close()
        finally:
            os.chdir(cwd)
        if self.privileged:
            devs = {"chr": (stat.S_IFCHR, 1, 3), "blk": (stat.S_IFBLK, 8, 1),
                    "whiteout": (stat.S_IFCHR, 0, 0),
                    "bigdev": (stat.S_IFCHR, 4095, 1048575),
                    "bigblk": (stat.S_IFBLK, 259, 65536)}
            for name, (kind, ma, mi) in devs.items():
                os.mknod(self.p(f"special/{name}"), kind | 0o600,
                         os.makedev(ma, mi))
        self.info.listing_dirs.append("special")
        self.info.excludable.append("special")

    def owners(self):
        self.mkdir("owners")
        for i, uid in enumerate(OWNERS):
            gid = OWNERS[(i + 2) % len(OWNERS)]
            self.file(f"owners/f{uid}", i * 7)
            self.owner(f"owners/f{uid}", uid, gid)
            os.symlink("f0", self.p(f"owners/l{uid}"))
            self.owner(f"owners/l{uid}", uid, uid)
            self.mkdir(f"owners/d{uid}")
            self.owner(f"owners/d{uid}", gid, uid)
        self.info.listing_dirs.append("owners")
        self.info.excludable.append("owners")

    def mode_bits(self):
        self.mkdir("modes")
        # Modes that lock the owner out only as root (who reads anyway):
        # an ordinary user could not build an image of the tree.
        locked = (0o000, 0o070) if self.privileged else ()
        for m in (0o777, 0o4755, 0o2755, 0o6711, 0o7777, 0o1644,
                  0o400) + locked:
            self.file(f"modes/m{m:04o}", m % 97)
            self.modes[os.fsencode(f"modes/m{m:04o}")] = m
        for m in (0o555, 0o1777, 0o2775, 0o700) + locked[:1]:
            self.mkdir(f"modes/d{m:04o}")
            self.file(f"modes/d{m:04o}/inside", 3)
            self.modes[os.fsencode(f"modes/d{m:04o}")] = m
        self.info.listing_dirs.append("modes")
        self.info.excludable.append("modes")

    def times_part(self):
        self.mkdir("times")
        for i, (sec, nsec) in enumerate(SPECIAL_TIMES):
            self.file(f"times/t{i}", i)
            self.when(f"times/t{i}", sec, nsec)
        os.symlink("t0", self.p("times/link"))
        self.when("times/link", -5, 5)
        self.mkdir("times/dir")
        self.when("times/dir", 2**31 + 7, 7)
        self.info.listing_dirs.append("times")
        self.info.excludable.append("times")

    def xattrs(self):
        self.mkdir("xattrs")
        common = {"user.common": b"shared by many files",
                  "trusted.common": self.rng.randbytes(64),
                  "security.common": b"label\x00with nul"}
        for i in range(30):
            rel = f"xattrs/shared{i:02d}"
            self.file(rel, i * 13)
            for k, v in common.items():
                self.xattr(rel, k, v)
            self.xattr(rel, f"user.uniq{i}", f"value {i}".encode())
        self.file("xattrs/many", 100)
        for i in range(200 if self.big_xattrs else 40):
            self.xattr("xattrs/many", f"user.attr{i:03d}",
                       self.rng.randbytes(self.rng.randrange(0, 40)))
        self.xattr("xattrs/many", "user." + "k" * 250, b"longest name")
        self.file("xattrs/bigval", 10)
        self.xattr("xattrs/bigval", "user.big", self.rng.randbytes(3000))
        if self.big_xattrs:
            self.xattr("xattrs/bigval", "trusted.bigger",
                       self.rng.randbytes(8000))
        self.file("xattrs/empty-value", 1)
        self.xattr("xattrs/empty-value", "user.empty", b"")
        self.mkdir("xattrs/dir")
        self.xattr("xattrs/dir", "user.on-dir", b"d")
        self.xattr("xattrs/dir", "trusted.overlay.opaque", b"y")
        os.symlink("many", self.p("xattrs/link"))
        self.xattr("xattrs/link", "trusted.on-symlink", b"s")
        os.mkfifo(self.p("xattrs/fifo"))
        self.xattr("xattrs/fifo", "trusted.on-fifo", b"f")
        self.xattr("", "user.on-root", b"root")
        if self.privileged:
            self.acl("xattrs/acl-file", "xattrs/acl-dir")
        self.info.listing_dirs.append("xattrs")

    def acl(self, frel, drel):
        def blob(entries):
            return struct.pack("<I", 2) + b"".join(
                struct.pack("<HHI", tag, perm, ident)
                for tag, perm, ident in entries)
        no_id = 0xFFFFFFFF
        access = blob([(0x01, 6, no_id), (0x02, 4, 1000), (0x04, 4, no_id),
                       (0x08, 5, 65536), (0x10, 5, no_id), (0x20, 0, no_id)])
        self.file(frel, 11)
        self.mkdir(drel)
        try:
            os.setxattr(self.p(frel), "system.posix_acl_access", access)
            os.setxattr(self.p(drel), "system.posix_acl_default", access)
        except OSError:
            pass    # no ACL support where the tree lives: plain files then

    def sparse(self):
        self.mkdir("sparse")
        unit = 16 * KiB if self.light else MiB
        with open(self.p("sparse/holes"), "wb") as f:
            for off in (0, unit + 123, 8 * unit):
                f.seek(off)
                f.write(self.rng.randbytes(4096))
            f.truncate(12 * unit)
        self.info.files.append(b"sparse/holes")
        with open(self.p("sparse/all-hole"), "wb") as f:
            f.truncate(4 * unit)
        self.info.files.append(b"sparse/all-hole")
        with open(self.p("sparse/hole-first"), "wb") as f:
            f.seek(3 * unit)
            f.write(self.rng.randbytes(5000))
        self.info.files.append(b"sparse/hole-first")
        if self.big_sparse:
            with open(self.p("sparse/big-5g"), "wb") as f:
                for off in (0, 2**32 - 100, 5 * GiB - 4096):
                    f.seek(off)
                    f.write(self.rng.randbytes(4096))
                f.truncate(5 * GiB)
            self.info.files.append(b"sparse/big-5g")

    # -- the whole tree ---------------------------------------------------

    def make(self):
        os.makedirs(self.root, exist_ok=True)
        os.chmod(self.root, 0o755)
        for part in (self.sizes, self.dirs, self.names, self.symlinks,
                     self.hardlinks, self.specials, self.owners, self.mode_bits,
                     self.times_part, self.xattrs, self.sparse,
                     self.many_entries, self.finish):
            # One generator per part: an option that adds or drops a part
            # leaves every other part as it was.
            self.rng = random.Random(f"{self.seed}:{part.__name__}")
            part()
        return self.info

    def finish(self):
        """Apply times deepest first (children change dirs), then modes."""
        paths = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            for n in dirnames + filenames:
                paths.append(os.path.relpath(os.path.join(dirpath, n),
                                             self.root))
        paths.sort(key=lambda r: (-r.count(b"/"), r))
        for rel in paths + [b""]:
            if rel not in self.times:
                self.when(rel)
            sec, nsec = self.times[rel]
            os.utime(self.p(rel), ns=(0, sec * 10**9 + nsec),
                     follow_symlinks=False)
        # chmod changes no mtime; last, so a 0000 directory was walkable.
        for rel, mode in self.modes.items():
            os.chmod(self.p(rel), mode)


def make_tree(dest, seed=1, *, privileged=None, many=5000, big_sparse=False,
              big_xattrs=None, name_max=255, light=False):
    """Create the tree at @dest (created; must not hold anything yet).

    privileged: devices, foreign owners, trusted./security. xattrs, ACLs
    (default: when running as root). big_xattrs: values and xattr counts
    beyond what ext4 keeps in one inode (default: with privileged; needs
    tmpfs or a filesystem with large xattrs). big_sparse: add a 5 GiB
    sparse file (a few blocks of data across the 4 GiB boundary).
    name_max: longest name (255; less for tools that can't take 255).
    light: no file above 64 KiB of data and small sparse files, for tests
    that rebuild or re-read the image hundreds of times.
    """
    if privileged is None:
        privileged = os.geteuid() == 0
    if big_xattrs is None:
        big_xattrs = privileged
    return _Maker(dest, seed, privileged, many, big_sparse, big_xattrs,
                  name_max, light).make()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--many", type=int, default=5000,
                    help="entries of the big directory (default 5000)")
    ap.add_argument("--big-sparse", action="store_true",
                    help="add a 5 GiB sparse file")
    ap.add_argument("--small-xattrs", action="store_true",
                    help="stay within ext4's one-block xattr limit")
    ap.add_argument("--name-max", type=int, default=255,
                    help="longest name (default 255)")
    ap.add_argument("--light", action="store_true",
                    help="no file above 64 KiB, small sparse files")
    ap.add_argument("--unprivileged", action="store_true",
                    help="only what an ordinary user may create")
    a = ap.parse_args(argv)
    if os.path.exists(a.dest) and os.listdir(a.dest):
        sys.exit(f"mktree: {a.dest}: not empty")
    privileged = False if a.unprivileged else None
    make_tree(a.dest, a.seed, privileged=privileged, many=a.many,
              big_sparse=a.big_sparse,
              big_xattrs=False if a.small_xattrs else None,
              name_max=a.name_max, light=a.light)


if __name__ == "__main__":
    main()
