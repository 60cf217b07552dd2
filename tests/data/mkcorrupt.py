#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Derive broken images from a good (uncompressed) EROFS image.

Each variant changes one thing: a truncation, a superblock field, an inode
field, a directory entry, an xattr header, a chunk index, or a random bit.
Variants are labelled:

  must-fail  a reader's check must catch it (kiln fsck exits non-zero)
  may-pass   the image may still be sound (a flipped data bit, a field the
             format does not constrain); readers must not crash on it

When the image has a superblock checksum, structural variants are
"resealed" (the checksum recomputed) so that the change itself must be
caught, while raw bit flips keep the stale checksum. The same image and
seed give the same variants.

    mkcorrupt.py [--seed N] [--random N] [--list] IMAGE [OUTDIR]

OUTDIR receives <name>.img per variant and manifest.json.
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import random
import struct
import sys
from dataclasses import dataclass

SB_OFF = 1024
SB_SIZE = 128
MAGIC = 0xE0F5E1E2
COMPAT_SB_CHKSUM = 0x1

FLAT_PLAIN, COMPRESSED_FULL, FLAT_INLINE, COMPRESSED_COMPACT, CHUNK_BASED = \
    range(5)

S_IFMT = 0o170000
S_IFDIR, S_IFREG, S_IFLNK = 0o040000, 0o100000, 0o120000
S_IFCHR, S_IFBLK = 0o020000, 0o060000

MUST, MAY = "must-fail", "may-pass"


def _crc32c_fn():
    name = ctypes.util.find_library("isal")
    if not name:
        return None
    fn = ctypes.CDLL(name).crc32_iscsi
    fn.restype = ctypes.c_uint32
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint32]
    return fn


_CRC32C = _crc32c_fn()


@dataclass
class Inode:
    nid: int
    off: int            # byte offset of the core
    extended: bool
    fmt: int
    layout: int
    mode: int
    size: int
    xattr_icount: int
    u: int              # i_u (startblk / rdev / chunk format)
    path: str
    nlink: int = 1

    @property
    def core(self):
        return 64 if self.extended else 32

    @property
    def xattr_size(self):
        return 0 if self.xattr_icount == 0 else 12 + 4 * (self.xattr_icount - 1)

    @property
    def xattr_off(self):
        return self.off + self.core

    @property
    def tail_off(self):
        return self.off + self.core + self.xattr_size

    @property
    def kind(self):
        return self.mode & S_IFMT


class Image:
    """A just-good-enough parser of trusted images: enough to find the
    bytes each variant aims at. Compressed inodes are listed but their
    data is not located."""

    def __init__(self, data):
        self.data = bytes(data)
        d = self.data
        if len(d) < SB_OFF + SB_SIZE or \
                struct.unpack_from("<I", d, SB_OFF)[0] != MAGIC:
            raise ValueError("not an EROFS image")
        (self.magic, self.checksum, self.compat, self.blkszbits,
         self.extslots, self.root_nid) = struct.unpack_from(
            "<IIIBBH", d, SB_OFF)
        self.bs = 1 << self.blkszbits
        self.meta_blkaddr, self.xattr_blkaddr = struct.unpack_from(
            "<II", d, SB_OFF + 0x28)
        self.incompat = struct.unpack_from("<I", d, SB_OFF + 0x50)[0]
        self.inodes = {}
        self.dirs = {}          # nid -> [(name bytes, nid, ftype)]
        self._walk()

    # -- structure -------------------------------------------------------

    def iloc(self, nid):
        return self.meta_blkaddr * self.bs + nid * 32

    def inode(self, nid, path):
        off = self.iloc(nid)
        fmt, icount, mode = struct.unpack_from("<HHH", self.data, off)
        ext = bool(fmt & 1)
        if ext:
            size, u = struct.unpack_from("<QI", self.data, off + 8)
            nlink = struct.unpack_from("<I", self.data, off + 44)[0]
        else:
            nb, size, _mt, u = struct.unpack_from("<HIII", self.data, off + 6)
            nlink = nb if not (fmt & 0x10) or (mode & S_IFMT) == S_IFDIR else 1
        return Inode(nid, off, ext, fmt, (fmt >> 1) & 7, mode, size, icount,
                     u, path, nlink)

    def flat_ranges(self, ino):
        """Image byte ranges of a flat inode's data (blocks, then tail)."""
        if ino.layout not in (FLAT_PLAIN, FLAT_INLINE) or ino.size == 0:
            return []
        if ino.layout == FLAT_INLINE:
            full = ino.size // self.bs
            tail = ino.size % self.bs
        else:
            full, tail = -(-ino.size // self.bs), 0
        out = []
        if full and ino.u != 0xFFFFFFFF:
            start = ino.u * self.bs
            out.append((start, min(full * self.bs, ino.size)))
        if tail:
            out.append((ino.tail_off, tail))
        return out

    def chunk_table(self, ino):
        """(offset, entry size, count, chunk size) of a chunk index."""
        fmt = ino.u & 0xFFFF
        unit = 8 if fmt & 0x20 else 4
        chunk = self.bs << (fmt & 0x1F)
        count = -(-ino.size // chunk)
        off = -(-ino.tail_off // unit) * unit
        return off, unit, count, chunk

    def dir_blocks(self, ino):
        """[(image offset, length)] of each directory block."""
        ranges = self.flat_ranges(ino)
        out = []
        for start, length in ranges:
            pos = 0
            while pos < length:
                out.append((start + pos, min(self.bs, length - pos)))
                pos += self.bs
        return out

    def parse_dirblock(self, off, length):
        d = self.data
        n = struct.unpack_from("<H", d, off + 8)[0] // 12
        ents = []
        for i in range(n):
            nid, nameoff, ftype = struct.unpack_from("<QHB", d, off + 12 * i)
            if i + 1 < n:
                end = struct.unpack_from("<H", d, off + 12 * (i + 1) + 8)[0]
            else:
                end = length
                z = d.find(b"\0", off + nameoff, off + length)
                if z >= 0:
                    end = z - off
            ents.append((d[off + nameoff:off + end], nid, ftype, i, nameoff))
        return ents

    def _walk(self):
        todo = [(self.root_nid, "/")]
        seen = set()
        while todo:
            nid, path = todo.pop(0)
            if nid in seen:
                continue
            seen.add(nid)
            ino = self.inode(nid, path)
            self.inodes[nid] = ino
            if ino.kind != S_IFDIR:
                continue
            ents = []
            for off, length in self.dir_blocks(ino):
                ents += [(name, cnid, ft, off, i, no) for name, cnid, ft, i, no
                         in self.parse_dirblock(off, length)]
            self.dirs[nid] = ents
            for name, cnid, ft, _off, _i, _no in ents:
                if name not in (b".", b".."):
                    todo.append((cnid, path.rstrip("/") + "/" +
                                 name.decode("utf-8", "backslashreplace")))

    # -- choosing targets ----------------------------------------------------

    def pick(self, pred, n=1):
        out = [i for i in sorted(self.inodes.values(), key=lambda i: i.nid)
               if pred(i)]
        if len(out) <= n:
            return out
        step = len(out) / n
        return [out[int(k * step)] for k in range(n)]


def reseal(buf):
    """Recompute the superblock checksum of @buf in place (if it has one)."""
    compat = struct.unpack_from("<I", buf, SB_OFF + 8)[0]
    if not compat & COMPAT_SB_CHKSUM or _CRC32C is None:
        return
    blkszbits = buf[SB_OFF + 12]
    bs = 1 << blkszbits if 9 <= blkszbits <= 16 else 4096
    length = bs - SB_OFF if bs > SB_OFF else bs
    end = min(len(buf), SB_OFF + length)
    region = bytearray(buf[SB_OFF:end])
    region[4:8] = b"\0\0\0\0"
    struct.pack_into("<I", buf, SB_OFF + 4,
                     _CRC32C(bytes(region), len(region), 0xFFFFFFFF))


@dataclass
class Variant:
    name: str
    kind: str
    what: str
    edits: list = None      # [(offset, bytes)]
    truncate: int = None
    seal: bool = True

    def apply(self, good):
        if self.truncate is not None:
            return bytes(good[:self.truncate])
        buf = bytearray(good)
        for off, b in self.edits:
            buf[off:off + len(b)] = b
        if self.seal:
            reseal(buf)
        return bytes(buf)


def _u(fmt, v):
    return struct.pack("<" + fmt, v)


def variants(good, seed=0, random_flips=24):
    """All variants of the image bytes @good, in a stable order."""
    img = Image(good)
    rng = random.Random(seed)
    size = len(good)
    bs = img.bs
    crc = bool(img.compat & COMPAT_SB_CHKSUM)
    # With a checksum, any change inside the checksummed block must fail.
    crc_end = SB_OFF + (bs - SB_OFF if bs > SB_OFF else bs) if crc else 0
    out = []

    def add(name, kind, what, edits=None, truncate=None, seal=True):
        out.append(Variant(name, kind, what, edits, truncate, seal))

    def flip_kind(off):
        return MUST if SB_OFF <= off < crc_end or off < SB_OFF + 4 \
            and off >= SB_OFF else MAY

    # 1. truncations
    points = {0, 1, 1023, SB_OFF, SB_OFF + 64, SB_OFF + SB_SIZE - 1,
              bs - 1, bs, bs + 1, size // 2, size - bs, size - 1}
    for p in sorted(x for x in points if 0 <= x < size):
        add(f"trunc-{p}", MUST, f"image cut to {p} of {size} bytes",
            truncate=p)

    # 2. superblock fields
    sb = SB_OFF
    add("sb-magic", MUST, "magic byte flipped",
        [(sb, bytes([good[sb] ^ 1]))])
    for v in (0, 8, 13, 255):
        add(f"sb-blkszbits-{v}", MUST, f"blkszbits {v}", [(sb + 12, bytes([v]))])
    add("sb-dirblkbits", MUST, "dirblkbits 1", [(sb + 0x5A, b"\x01")])
    add("sb-unknown-incompat", MUST, "unknown incompat bit 0x80000000",
        [(sb + 0x50, _u("I", img.incompat | 0x80000000))])
    add("sb-extslots-max", MUST, "sb_extslots 255", [(sb + 13, b"\xff")])
    add("sb-meta-blkaddr-out", MUST, "meta_blkaddr far past the end",
        [(sb + 0x28, _u("I", 0xFFFFFF00))])
    files = img.pick(lambda i: i.kind == S_IFREG)
    if files:
        add("sb-root-is-file", MUST, f"root nid -> {files[0].path}",
            [(sb + 14, _u("H", files[0].nid))])
    far = 0xFFFF
    add("sb-root-far", MUST if img.iloc(far) + 64 > size else MAY,
        "root nid 65535", [(sb + 14, _u("H", far))])
    add("sb-blocks-max", MUST, "block count larger than the image",
        [(sb + 0x24, _u("I", 0xFFFFFFFF))])
    add("sb-blocks-zero", MAY, "block count 0", [(sb + 0x24, _u("I", 0))])
    add("sb-inos-max", MAY, "inode count 2^64-1",
        [(sb + 0x10, _u("Q", 2**64 - 1))])
    add("sb-epoch-max", MAY, "epoch 2^63-1",
        [(sb + 0x18, _u("Q", 2**63 - 1))])
    add("sb-fixed-nsec-max", MAY, "fixed_nsec 2^32-1",
        [(sb + 0x20, _u("I", 0xFFFFFFFF))])
    add("sb-label-full", MAY, "16-byte label without NUL",
        [(sb + 0x40, b"L" * 16)])
    add("sb-xattr-prefixes", MUST if img.incompat & 0x40 == 0 else MAY,
        "long xattr prefix count 200 without the feature's table",
        [(sb + 0x5B, b"\xc8"), (sb + 0x50, _u("I", img.incompat | 0x40)),
         (sb + 0x5C, _u("I", 0x3FFFFFFF))])
    if crc:
        add("sb-checksum", MUST, "checksum field flipped",
            [(sb + 4, _u("I", img.checksum ^ 0x10))], seal=False)
    for k in range(6):
        off = sb + rng.randrange(4, SB_SIZE)
        bit = rng.randrange(8)
        add(f"sb-flip-{off}.{bit}", MUST if crc else MAY,
            f"bit {bit} of byte {off} (checksum kept stale)",
            [(off, bytes([good[off] ^ (1 << bit)]))], seal=False)

    # 3. inodes
    targets = {
        "file": lambda i: i.kind == S_IFREG and i.layout == FLAT_PLAIN
        and i.size > 2 * bs,
        "inline": lambda i: i.kind == S_IFREG and i.layout == FLAT_INLINE
        and i.size % bs,
        "dir": lambda i: i.kind == S_IFDIR and i.path != "/",
        "symlink": lambda i: i.kind == S_IFLNK,
        "chunked": lambda i: i.kind == S_IFREG and i.layout == CHUNK_BASED
        and i.size > 0,
        "device": lambda i: i.kind in (S_IFCHR, S_IFBLK),
        "xattrs": lambda i: i.xattr_icount > 1,
        "extended": lambda i: i.extended and i.kind == S_IFREG,
    }
    for label, pred in targets.items():
        for ino in img.pick(pred, 2 if label in ("file", "dir") else 1):
            t = f"{label} {ino.path} (nid {ino.nid})"
            o = ino.off
            add(f"ino-{ino.nid}-format-reserved", MUST,
                f"{t}: i_format bit 15", [(o, _u("H", ino.fmt | 0x8000))])
            add(f"ino-{ino.nid}-layout-7", MUST, f"{t}: data layout 7",
                [(o, _u("H", (ino.fmt & ~0xE) | (7 << 1)))])
            add(f"ino-{ino.nid}-mode-no-type", MUST, f"{t}: file type 0",
                [(o + 4, _u("H", ino.mode & 0o7777))])
            add(f"ino-{ino.nid}-mode-type-15", MUST, f"{t}: file type 0o17",
                [(o + 4, _u("H", (ino.mode & 0o7777) | 0o170000))])
            hole = ino.layout == FLAT_PLAIN and ino.u == 0xFFFFFFFF
            if ino.kind in (S_IFREG, S_IFDIR, S_IFLNK) and not hole and \
                    ino.layout in (FLAT_PLAIN, FLAT_INLINE):
                if ino.extended:
                    add(f"ino-{ino.nid}-size-2^63", MUST,
                        f"{t}: i_size 2^63", [(o + 8, _u("Q", 2**63))])
                    add(f"ino-{ino.nid}-size-huge", MUST,
                        f"{t}: i_size 2^62", [(o + 8, _u("Q", 2**62))])
                else:
                    add(f"ino-{ino.nid}-size-huge", MUST,
                        f"{t}: i_size 2^32-16",
                        [(o + 8, _u("I", 0xFFFFFFF0))])
                if ino.size >= bs:
                    add(f"ino-{ino.nid}-startblk-out", MUST,
                        f"{t}: start block past the end",
                        [(o + 16, _u("I", 0xFFFFFF00))])
                    add(f"ino-{ino.nid}-startblk-sb", MAY,
                        f"{t}: start block 0 (the superblock's)",
                        [(o + 16, _u("I", 0))])
            if ino.kind == S_IFLNK:
                add(f"ino-{ino.nid}-symlink-size-0", MUST,
                    f"{t}: empty symlink target",
                    [(o + 8, _u("Q" if ino.extended else "I", 0))])
                add(f"ino-{ino.nid}-symlink-size-4096", MUST,
                    f"{t}: target of 4096 bytes (PATH_MAX)",
                    [(o + 8, _u("Q" if ino.extended else "I", 4096))])
            if ino.kind == S_IFDIR:
                add(f"ino-{ino.nid}-dir-size-0", MUST, f"{t}: i_size 0",
                    [(o + 8, _u("Q" if ino.extended else "I", 0))])
            add(f"ino-{ino.nid}-xattr-icount-max", MAY,
                f"{t}: xattr icount 65535", [(o + 2, _u("H", 0xFFFF))])
            add(f"ino-{ino.nid}-xattr-icount-1", MAY,
                f"{t}: xattr area of exactly 12 bytes",
                [(o + 2, _u("H", 1))])
            if ino.extended:
                add(f"ino-{ino.nid}-nlink-0", MAY, f"{t}: nlink 0",
                    [(o + 44, _u("I", 0))])
                add(f"ino-{ino.nid}-nsec-max", MAY, f"{t}: mtime nsec 2^32-1",
                    [(o + 40, _u("I", 0xFFFFFFFF))])
                add(f"ino-{ino.nid}-uid-max", MAY, f"{t}: uid 2^32-1",
                    [(o + 24, _u("I", 0xFFFFFFFF))])
                add(f"ino-{ino.nid}-mtime-min", MAY, f"{t}: mtime -2^63",
                    [(o + 32, _u("Q", 2**63))])
            else:
                add(f"ino-{ino.nid}-mtime-max", MAY, f"{t}: mtime 2^32-1",
                    [(o + 12, _u("I", 0xFFFFFFFF))])
            for k in range(3):
                off = o + rng.randrange(ino.core)
                bit = rng.randrange(8)
                add(f"ino-{ino.nid}-flip-{off}.{bit}", MAY,
                    f"{t}: bit {bit} of byte {off}",
                    [(off, bytes([good[off] ^ (1 << bit)]))])
            if ino.layout == CHUNK_BASED:
                toff, unit, count, _chunk = img.chunk_table(ino)
                add(f"ino-{ino.nid}-chunk-format", MUST,
                    f"{t}: chunk format bit 0x80",
                    [(o + 16, _u("H", (ino.u & 0xFFFF) | 0x80))])
                ent = toff + (unit - 4 if unit == 8 else 0)
                add(f"ino-{ino.nid}-chunk-out", MUST,
                    f"{t}: first chunk past the end",
                    [(ent, _u("I", 0xFFFFFF00))])
                if count:
                    off = toff + rng.randrange(count * unit)
                    bit = rng.randrange(8)
                    add(f"ino-{ino.nid}-chunk-flip-{off}.{bit}", MAY,
                        f"{t}: bit {bit} of chunk index byte {off}",
                        [(off, bytes([good[off] ^ (1 << bit)]))])

    # 4. directory blocks
    for dino in img.pick(lambda i: i.kind == S_IFDIR and
                         len(img.dirs.get(i.nid, ())) >= 4, 3):
        ents = img.dirs[dino.nid]
        t = f"dir {dino.path} (nid {dino.nid})"
        boff = ents[0][3]
        nameoff0 = ents[0][5]
        add(f"dir-{dino.nid}-nameoff0-zero", MUST, f"{t}: first nameoff 0",
            [(boff + 8, _u("H", 0))])
        add(f"dir-{dino.nid}-nameoff0-odd", MUST,
            f"{t}: first nameoff not a multiple of 12",
            [(boff + 8, _u("H", nameoff0 + 1))])
        add(f"dir-{dino.nid}-nameoff0-bs", MUST, f"{t}: first nameoff = bs",
            [(boff + 8, _u("H", bs))])
        inblock = [e for e in ents if e[3] == boff]
        real = [e for e in inblock if e[0] not in (b".", b"..")]
        if real:
            e = real[0]
            add(f"dir-{dino.nid}-nid-out", MUST,
                f"{t}: entry {e[0]!r} -> nid 2^40",
                [(boff + 12 * e[4], _u("Q", 1 << 40))])
            add(f"dir-{dino.nid}-ftype-wrong", MAY,
                f"{t}: entry {e[0]!r} file type 7",
                [(boff + 12 * e[4] + 10, b"\x07")])
            add(f"dir-{dino.nid}-ftype-bogus", MAY,
                f"{t}: entry {e[0]!r} file type 200",
                [(boff + 12 * e[4] + 10, bytes([200]))])
        # two neighbours inside one block: break the order, empty a name
        for a, b in zip(inblock, inblock[1:]):
            if a[0] in (b".", b"..") or b[0] in (b".", b".."):
                continue
            if b[0][0] != 0xFF:
                add(f"dir-{dino.nid}-unsorted", MUST,
                    f"{t}: {a[0]!r} renamed to sort after {b[0]!r}",
                    [(boff + a[5], b"\xff")])
            add(f"dir-{dino.nid}-name-empty", MUST,
                f"{t}: name of {a[0]!r} made empty",
                [(boff + 12 * b[4] + 8, _u("H", a[5]))])
            add(f"dir-{dino.nid}-nameoff-backwards", MUST,
                f"{t}: nameoff of {b[0]!r} before {a[0]!r}'s",
                [(boff + 12 * b[4] + 8, _u("H", max(a[5] - 1, 0)))])
            break
        last = inblock[-1]
        add(f"dir-{dino.nid}-nameoff-past-block", MUST,
            f"{t}: last nameoff past the block",
            [(boff + 12 * last[4] + 8, _u("H", bs + 5))])
        for k in range(3):
            off = boff + rng.randrange(min(bs, size - boff))
            bit = rng.randrange(8)
            add(f"dir-{dino.nid}-flip-{off}.{bit}", MAY,
                f"{t}: bit {bit} of directory byte {off}",
                [(off, bytes([good[off] ^ (1 << bit)]))])

    # 5. xattrs
    for ino in img.pick(lambda i: i.xattr_icount > 1, 3):
        t = f"xattrs of {ino.path} (nid {ino.nid})"
        xo = ino.xattr_off
        nshared = good[xo + 4]
        area_end = xo + ino.xattr_size
        # Each of these is certain to overrun the area only when the area
        # is small enough; past that the garbage may parse.
        add(f"xattr-{ino.nid}-shared-count-max",
            MUST if 12 + 4 * 255 > ino.xattr_size else MAY,
            f"{t}: h_shared_count 255", [(xo + 4, b"\xff")])
        first = xo + 12 + 4 * nshared
        if first + 4 <= area_end:
            nlen, _idx, vsize = struct.unpack_from("<BBH", good, first)
            add(f"xattr-{ino.nid}-value-size-max",
                MUST if first + 4 + nlen + 0xFFFF > area_end else MAY,
                f"{t}: first entry's value size 65535",
                [(first + 2, _u("H", 0xFFFF))])
            add(f"xattr-{ino.nid}-name-len-max",
                MUST if first + 4 + 255 + vsize > area_end else MAY,
                f"{t}: first entry's name length 255",
                [(first, b"\xff")])
            add(f"xattr-{ino.nid}-index-unknown", MAY,
                f"{t}: first entry's name index 0x7f",
                [(first + 1, b"\x7f")])
            add(f"xattr-{ino.nid}-long-prefix-missing", MAY,
                f"{t}: first entry uses long prefix 0x7f",
                [(first + 1, b"\xff")])
        if nshared:
            add(f"xattr-{ino.nid}-shared-id-out", MUST,
                f"{t}: shared xattr id past the end",
                [(xo + 12, _u("I", 0x3FFFFFFF))])
            sid = struct.unpack_from("<I", good, xo + 12)[0]
            soff = img.xattr_blkaddr * bs + 4 * sid
            if soff + 4 <= size:
                snlen = good[soff]
                add(f"xattr-{ino.nid}-shared-value-size-max",
                    MUST if soff + 4 + snlen + 0xFFFF > size else MAY,
                    f"{t}: shared entry {sid}: value size 65535",
                    [(soff + 2, _u("H", 0xFFFF))])
                off = soff + rng.randrange(min(4 + snlen, size - soff))
                bit = rng.randrange(8)
                add(f"xattr-{ino.nid}-shared-flip-{off}.{bit}", MAY,
                    f"{t}: shared entry {sid}: bit {bit} of byte {off}",
                    [(off, bytes([good[off] ^ (1 << bit)]))])
        for k in range(3):
            off = xo + rng.randrange(ino.xattr_size)
            bit = rng.randrange(8)
            add(f"xattr-{ino.nid}-flip-{off}.{bit}", MAY,
                f"{t}: bit {bit} of xattr byte {off}",
                [(off, bytes([good[off] ^ (1 << bit)]))])

    # 6. file data (nothing checks it: must read back without harm)
    for ino in img.pick(lambda i: i.kind == S_IFREG and
                        img.flat_ranges(i), 4):
        for start, length in img.flat_ranges(ino):
            off = start + rng.randrange(length)
            add(f"data-{ino.nid}-flip-{off}", flip_kind(off),
                f"bit 0 of data byte {off} of {ino.path}",
                [(off, bytes([good[off] ^ 1]))], seal=False)

    # 7. anywhere
    for k in range(random_flips):
        off = rng.randrange(size)
        bit = rng.randrange(8)
        add(f"rand-{off}.{bit}", flip_kind(off),
            f"bit {bit} of byte {off}",
            [(off, bytes([good[off] ^ (1 << bit)]))], seal=False)
    for k in range(max(2, random_flips // 4)):
        off = rng.randrange(max(1, size - 64))
        n = rng.choice((4, 16, 32, 64))
        add(f"rand-zero-{off}+{n}", flip_kind(off), f"{n} bytes zeroed at {off}",
            [(off, bytes(n))], seal=False)
        add(f"rand-ones-{off}+{n}", flip_kind(off),
            f"{n} bytes set to 0xff at {off}", [(off, b"\xff" * n)],
            seal=False)

    # a change that is a no-op is no corruption: drop it
    seen = set()
    final = []
    for v in out:
        if v.name in seen:
            continue
        seen.add(v.name)
        if v.truncate is None and all(good[o:o + len(b)] == b
                                      for o, b in v.edits):
            continue
        final.append(v)
    return final


def write_variants(image, outdir, seed=0, random_flips=24):
    good = open(image, "rb").read()
    os.makedirs(outdir, exist_ok=True)
    manifest = []
    for v in variants(good, seed, random_flips):
        path = os.path.join(outdir, v.name + ".img")
        with open(path, "wb") as f:
            f.write(v.apply(good))
        manifest.append({"name": v.name, "kind": v.kind, "what": v.what,
                         "file": os.path.basename(path)})
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("image")
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random", type=int, default=24,
                    help="random bit flips (default 24)")
    ap.add_argument("--list", action="store_true",
                    help="print the variants, write nothing")
    a = ap.parse_args(argv)
    if a.list or not a.outdir:
        good = open(a.image, "rb").read()
        for v in variants(good, a.seed, a.random):
            print(f"{v.kind:9} {v.name:40} {v.what}")
        return
    m = write_variants(a.image, a.outdir, a.seed, a.random)
    print(f"{len(m)} variants in {a.outdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
