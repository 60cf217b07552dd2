#!/usr/bin/python3
"""Seed corpora for fuzz/fuzz-http.c and fuzz/fuzz-cache.c.

fuzz/corpus/http/: server replies to a remote image as nginx, S3-like
stores and proxies send them (probe, then range reads), and the ways
they go wrong: redirects, 100 Continue, Retry-After, 412/416, weak or
changed ETags, bad Content-Range, short and long bodies.
fuzz/corpus/cache/: chunk files of the on-disk cache, whole and damaged,
identity and stats files. The input layouts are described at the top of
each target. Usage: mkseeds-remote.py [fuzz/corpus]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, '..', '..',
                                                          'fuzz', 'corpus')

WANT = {1: 0, 64: 1, 4096: 2, 65536: 3}


def flags(want=4096, piece=4, whole=False):
    return bytes([WANT[want] | piece << 2 | (32 if whole else 0)])


def reply(status, headers, body=b'', reason='OK', version='HTTP/1.1'):
    lines = ['%s %d %s' % (version, status, reason)] + headers
    return ''.join(h + '\r\n' for h in lines).encode() + b'\r\n' + body


def nginx(status, headers, body=b'', reason='Partial Content'):
    base = ['Server: nginx/1.22.1', 'Date: Thu, 03 Dec 2026 07:00:00 GMT',
            'Content-Type: application/octet-stream',
            'Content-Length: %d' % len(body),
            'Last-Modified: Wed, 02 Dec 2026 10:00:00 GMT',
            'Connection: keep-alive', 'ETag: "692ec1a0-100000"']
    return reply(status, base + headers, body, reason)


def read(pick_off, pick_len, obj):
    """The range fuzz-http.c derives from its two selector bytes."""
    off = pick_off * 512 % obj
    return off, min(obj - off, pick_len * 97 + 1, 65536)


def ranged(pick_off, pick_len, obj, extra=(), cr=None, body=None,
           maker=nginx):
    off, n = read(pick_off, pick_len, obj)
    cr = cr or 'bytes %d-%d/%d' % (off, off + n - 1, obj)
    body = b'\xe2' * n if body is None else body
    return bytes([pick_off, pick_len]) + maker(
        206, ['Content-Range: ' + cr] + list(extra), body)


def probe(obj=1 << 20, want=4096, extra=(), maker=nginx):
    n = min(want, obj)
    return maker(206, ['Content-Range: bytes 0-%d/%d' % (n - 1, obj)] +
                 list(extra), b'\xe2' * n)


def http_seeds():
    obj = 1 << 20
    s3 = lambda st, h, b=b'', reason='Partial Content': reply(  # noqa: E731
        st, ['x-amz-request-id: 4442587FB7D0A2F9', 'Accept-Ranges: bytes',
             'ETag: "d41d8cd98f00b204e9800998ecf8427e"',
             'Last-Modified: Wed, 02 Dec 2026 10:00:00 GMT',
             'Content-Length: %d' % len(b), 'Server: AmazonS3'] + h, b,
        reason)
    seeds = {
        'nginx-probe-reads': flags() + b'\0'.join([
            probe(obj), ranged(3, 20, obj), ranged(255, 255, obj),
            ranged(0, 0, obj)]),
        's3-probe-reads': flags() + b'\0'.join([
            probe(obj, maker=s3), ranged(7, 40, obj, maker=s3)]),
        'small-object-200': flags() + nginx(200, [], b'\xe2' * 100, 'OK'),
        'small-object-206': flags(4096) + probe(100),
        'probe-one-byte': flags(1) + probe(obj, 1),
        'http2-status': flags(64, 6) + reply(
            206, ['content-range: bytes 0-63/4096', 'etag: "a1"'],
            b'\0' * 64, '', 'HTTP/2') + b'\0' + bytes([1, 0]) + reply(
            206, ['content-range: bytes 512-512/4096', 'etag: "a1"'],
            b'\1', '', 'HTTP/2'),
        'redirect-then-206': flags() + reply(
            302, ['Location: http://mirror.example/image.erofs',
                  'Content-Length: 0'], b'', 'Found') + probe(obj),
        'continue-then-206': flags() + reply(100, [], b'', 'Continue') +
        probe(obj),
        'retry-after-seconds': flags() + probe(obj) + b'\0' + bytes(
            [1, 1]) + reply(503, ['Retry-After: 7', 'Content-Length: 0'],
                            b'', 'Service Unavailable'),
        'retry-after-date': flags() + probe(obj) + b'\0' + bytes(
            [1, 1]) + reply(429, ['Retry-After: Fri, 31 Dec 2099 23:59:59 GMT'],
                            b'', 'Too Many Requests'),
        'retry-after-junk': flags() + reply(
            503, ['Retry-After: -99999999999999999999999', 'Retry-After:',
                  'Retry-After: 12abc'], b'', 'Service Unavailable'),
        'precondition-failed': flags() + probe(obj) + b'\0' + bytes(
            [2, 2]) + reply(412, [], b'', 'Precondition Failed'),
        'range-not-satisfiable': flags() + reply(
            416, ['Content-Range: bytes */0'], b'',
            'Range Not Satisfiable'),
        'weak-etag': flags() + probe(obj, extra=['ETag: W/"abc"']) + b'\0' +
        ranged(4, 4, obj, ['ETag: W/"def"']),
        'etag-changed': flags() + probe(obj) + b'\0' +
        ranged(4, 4, obj, ['ETag: "00000000-100000"']),
        'last-modified-only': flags() + reply(
            206, ['Content-Range: bytes 0-4095/8192',
                  'Last-Modified: Tue, 01 Dec 2026 00:00:00 GMT'],
            b'\xe2' * 4096, 'Partial Content') + b'\0' + bytes([1, 3]) +
        reply(206, ['Content-Range: bytes 512-803/8192',
                    'Last-Modified: Wed, 02 Dec 2026 00:00:00 GMT'],
              b'\xe2' * 292, 'Partial Content'),
        'size-changed': flags() + probe(obj) + b'\0' +
        ranged(1, 1, obj, cr='bytes 512-609/2097152'),
        'wrong-range': flags() + probe(obj) + b'\0' +
        ranged(1, 1, obj, cr='bytes 0-97/1048576'),
        'short-body': flags() + probe(obj) + b'\0' +
        ranged(1, 9, obj, body=b'\xe2' * 10),
        'long-body': flags() + probe(obj) + b'\0' +
        ranged(1, 0, obj, body=b'\xe2' * 10),
        'whole-200-read': flags(4096, 4, True) + probe(5000) + b'\0' +
        bytes([0, 255]) + nginx(200, [], b'\xe2' * 5000, 'OK'),
        'content-range-variants': flags() + b'\0'.join(
            reply(206, ['Content-Range: ' + cr], b'\xe2' * 4096,
                  'Partial Content') for cr in [
                'bytes 0-4095/*', 'bytes 0-4095/4095', 'bytes 4095-0/8192',
                'bytes  +0-4095/8192', 'bytes 0-4095/8192 ', 'bytes=0-4095/8192',
                'bytes 0-4095/18446744073709551615',
                'bytes 0-4095/99999999999999999999999',
                'bytes -1-4095/8192', 'items 0-4095/8192', '']),
        'header-noise': flags(64, 0) + reply(
            206, ['Content-Range:bytes 0-63/64', 'ETAG:"x"',
                  'etag:    "padded"   ', 'Last-Modified: ' + 'x' * 200,
                  'ETag: "' + 'e' * 300 + '"', 'NoColon', ':', 'Content-Range',
                  'HTTP/'], b'\0' * 64, 'Partial Content'),
        'status-odd': flags() + b'\0'.join(
            (l + '\r\n\r\n').encode() for l in [
                'HTTP/1.1', 'HTTP/1.1 ', 'HTTP/1.1 -206 X',
                'HTTP/1.1 99999999999999999999 X', 'HTTP/1.0 206',
                'HTTP/1.1 0206 Partial']),
        # regressions: a status line read past its end, an empty object
        # taken for an image, a negative total taken for 2^64 - 1 bytes
        'status-unterminated': flags() + b'HTTP/1.1 206',
        'empty-200': flags() + nginx(200, [], b'', 'OK'),
        'total-negative': flags() + reply(
            206, ['Content-Range: bytes 0-4095/-1'], b'\xe2' * 4096,
            'Partial Content'),
    }
    return seeds


def chunk(unit, data, magic=b'KILNCHK1', length=None, ident=0, csum=0):
    le = lambda v: (v % (1 << 64)).to_bytes(8, 'little')  # noqa: E731
    h = magic + le(unit) + le(len(data) if length is None else length) + \
        le(ident) + le(csum) + bytes(24)
    return h + data


def cache_seed(fl, unit, data, ident_text=b''):
    return bytes([fl, unit]) + len(ident_text).to_bytes(2, 'little') + \
        ident_text + data


def cache_seeds():
    url = b'http://fuzz.invalid/image.erofs'
    ident = url + b'\n1048576 "5f3e-1a"\n4096\n'
    body = bytes(range(256)) * 2
    fix = 1 | 2 | 4 | 8
    return {
        'chunk-good': cache_seed(fix, 0, chunk(0, body)),
        'chunk-good-store': cache_seed(fix | 128, 3, chunk(3, body)),
        'chunk-good-identity-file': cache_seed(fix | 32, 1, chunk(1, body),
                                               ident),
        'chunk-empty': cache_seed(fix, 0, chunk(0, b'')),
        'chunk-torn': cache_seed(0, 0, chunk(0, body)[:40]),
        'chunk-no-magic': cache_seed(2 | 4 | 8, 0, chunk(0, body, b'KILNCHK0')),
        'chunk-other-unit': cache_seed(2 | 4 | 8, 5, chunk(4, body)),
        'chunk-other-image': cache_seed(1 | 2 | 8, 0, chunk(0, body, ident=7)),
        'chunk-checksum': cache_seed(1 | 2 | 4, 0, chunk(0, body, csum=1)),
        'chunk-length-lie': cache_seed(1 | 4 | 8, 0,
                                       chunk(0, body, length=1 << 40)),
        'chunk-length-max': cache_seed(1 | 4 | 8, 0,
                                       chunk(0, body, length=(1 << 64) - 1)),
        'chunk-load-longer': cache_seed(fix | 16, 0, chunk(0, body)),
        'chunk-stats': cache_seed(fix | 64, 0, chunk(0, body)),
        'identity-no-newline': cache_seed(fix | 32, 0, chunk(0, body),
                                          b'http://x 1048576'),
        'identity-huge-size': cache_seed(
            fix | 32, 0, chunk(0, body),
            url + b'\n99999999999999999999999 "e"\n4096\n'),
        'identity-zero-size': cache_seed(fix | 32, 0, chunk(0, body),
                                         url + b'\n0\n4096\n'),
        'identity-long-url': cache_seed(
            fix | 32, 0, chunk(0, body),
            b'http://fuzz.invalid/' + b'a' * 1300 + b'\n1048576 "e"\n4096\n'),
        'identity-nul': cache_seed(fix | 32, 0, chunk(0, body),
                                   url + b'\n10\0 "e"\n4096\n'),
    }


def write(sub, seeds):
    d = os.path.join(OUT, sub)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)


write('http', http_seeds())
write('cache', cache_seeds())
