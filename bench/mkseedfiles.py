#!/usr/bin/env python3
"""Make the seed benchmark's files in a directory, deterministically.

shifted_mixed.bin: 64 MiB; [0, 28 MiB) incompressible, [28, 64 MiB) compressible.
large_48bit.bin:   256 MiB of compressible data.
big.bin (--dd):    1000 MB of mixed text-like data for the dd throughput test.
"""
import os
import random
import sys

MiB = 1 << 20


def compressible(rng, n):
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
             for _ in range(4096)]
    out = bytearray()
    while len(out) < n:
        line = b" ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
        out += line + b"\n"
    return bytes(out[:n])


def write_compressible(f, rng, n):
    chunk = compressible(rng, 4 * MiB)
    done = 0
    while done < n:
        # vary the chunk a little so nothing dedupes trivially
        piece = bytearray(chunk[: min(4 * MiB, n - done)])
        piece[rng.randrange(len(piece))] = rng.randrange(256)
        f.write(piece)
        done += len(piece)


def main():
    dest = sys.argv[1]
    dd = "--dd" in sys.argv
    os.makedirs(dest, exist_ok=True)
    rng = random.Random(7)
    with open(os.path.join(dest, "shifted_mixed.bin"), "wb") as f:
        f.write(rng.randbytes(28 * MiB))
        write_compressible(f, rng, 36 * MiB)
    with open(os.path.join(dest, "large_48bit.bin"), "wb") as f:
        write_compressible(f, rng, 256 * MiB)
    if dd:
        with open(os.path.join(dest, "big.bin"), "wb") as f:
            for i in range(1000 * 1000 * 1000 // MiB):
                if i % 4 == 0:
                    f.write(rng.randbytes(MiB))
                else:
                    write_compressible(f, rng, MiB)
            f.write(compressible(rng, 1000 * 1000 * 1000 % MiB))


if __name__ == "__main__":
    main()
