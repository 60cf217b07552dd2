# SPDX-License-Identifier: MIT
"""Images read over http:// and https://: every command gives the bytes it
gives on the local file, through nginx (plain and TLS with a CA made here)
and through a small server in this file that misbehaves on purpose (503
with Retry-After, 404/403/416, truncated bodies, a replaced object, a
stall). A read that cannot be served fails with EIO within the time
limit, naming the cause; it never hangs and never returns wrong bytes."""

import contextlib
import hashlib
import http.server
import os
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers import force_unmount, have, tree_compare, wait_fuse_mount

pytestmark = [pytest.mark.skipif(not have("nginx"),
                                 reason="nginx not installed "
                                        "(scripts/install-deps.sh)"),
              pytest.mark.sanitize]

UNIT = 512 << 10
FAST = ["--timeout", "6", "--connect-timeout", "2", "--stall-timeout", "2",
        "--retries", "2"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            pytest.fail(f"{what} exited at start: rc {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"{what} did not listen on {port}")


def make_ca(d):
    """A CA and a server certificate for 127.0.0.1 signed by it."""
    def ssl(*a):
        subprocess.run(["openssl", *a], check=True, capture_output=True,
                       cwd=d)
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=kiln test CA", "-keyout", "ca.key", "-out", "ca.pem")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "srv.key", "-out", "srv.csr")
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    ssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey",
        "ca.key", "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf",
        "-out", "srv.pem")
    return d / "ca.pem"


class Nginx:
    """nginx on 127.0.0.1: / plain, /norange/ with byte ranges off,
    /slow/ at a limited rate; the same tree over TLS on another port."""

    def __init__(self, d, www):
        self.d, self.www = d, www
        self.port, self.tls_port = free_port(), free_port()
        self.ca = make_ca(d)
        self.log = d / "access.log"
        for sub in ("tmp", "logs"):
            (d / sub).mkdir(exist_ok=True)
        t = d / "tmp"
        (d / "nginx.conf").write_text(f"""
user root;
pid {d}/nginx.pid;
error_log {d}/error.log;
worker_processes 1;
events {{ worker_connections 64; }}
http {{
  access_log {self.log};
  client_body_temp_path {t}; proxy_temp_path {t}; fastcgi_temp_path {t};
  uwsgi_temp_path {t}; scgi_temp_path {t};
  server {{
    listen 127.0.0.1:{self.port};
    root {www};
    location /norange/ {{ alias {www}/; max_ranges 0; }}
    location /slow/ {{ alias {www}/; limit_rate 4m; }}
    location /crawl/ {{ alias {www}/; limit_rate 64k; }}
  }}
  server {{
    listen 127.0.0.1:{self.tls_port} ssl http2;
    ssl_certificate {d}/srv.pem;
    ssl_certificate_key {d}/srv.key;
    root {www};
  }}
}}
""")
        self.proc = subprocess.Popen(
            ["nginx", "-p", str(d), "-c", str(d / "nginx.conf"), "-g",
             "daemon off;"], stderr=subprocess.PIPE)
        wait_port(self.port, self.proc, "nginx")
        wait_port(self.tls_port, self.proc, "nginx")

    def url(self, name, tls=False):
        if tls:
            return f"https://127.0.0.1:{self.tls_port}/{name}"
        return f"http://127.0.0.1:{self.port}/{name}"

    def requests(self):
        """Access-log lines so far (nginx writes them unbuffered)."""
        if not self.log.exists():
            return []
        return self.log.read_text().splitlines()

    def pids(self):
        r = subprocess.run(["pgrep", "-P", str(self.proc.pid)],
                           capture_output=True, text=True)
        return [self.proc.pid] + [int(p) for p in r.stdout.split()]

    def stop(self):
        for p in self.pids():
            try:
                os.kill(p, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def images(kiln, make_tree, tmp_path_factory):
    """kiln's images (plain and zstd) and mkfs.erofs's, of one tree."""
    tree = make_tree("remote", seed=11, many=200)
    www = tmp_path_factory.mktemp("www")
    kiln.build(tree.root, www / "plain.erofs")
    kiln.build(tree.root, www / "zstd.erofs", "-z", "zstd", "-C", "65536")
    big = Path(tree.root).parent / "remote-big"
    big.mkdir(exist_ok=True)
    (big / "random.bin").write_bytes(os.urandom(5 << 20))
    (big / "text.txt").write_bytes(b"kiln remote\n" * 300000)
    kiln.build(big, www / "big.erofs", "-z", "lz4")
    if have("mkfs.erofs"):
        r = subprocess.run(["mkfs.erofs", "-zlz4hc", str(www / "mkfs.erofs"),
                            str(tree.root)], capture_output=True,
                           encoding="utf-8", errors="replace")
        assert r.returncode == 0, r.stderr
    return tree, www


@pytest.fixture(scope="module")
def nginx(images, tmp_path_factory):
    n = Nginx(tmp_path_factory.mktemp("nginx"), images[1])
    yield n
    n.stop()


def names(www):
    return sorted(p.name for p in www.glob("*.erofs"))


def cache_args(tmp_path):
    return ["--cache-dir", str(tmp_path / "cache")]


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_every_command_same_bytes(kiln, images, nginx, tmp_path, srcfs,
                                  tls):
    tree, www = images
    for name in names(www):
        local, url = str(www / name), nginx.url(name, tls)
        extra = cache_args(tmp_path) + (["--ca-file", str(nginx.ca)]
                                        if tls else [])
        a = kiln.ok("ls", "-R", "-l", "-a", local)
        b = kiln.ok("ls", "-R", "-l", "-a", *extra, url)
        assert a.out == b.out, name
        ia = kiln.ok("info", "--json", local).text.replace(local, "IMG")
        ib = kiln.ok("info", "--json", "--walk", *extra,
                     url).text.replace(url, "IMG")
        assert ia == ib, name
        kiln.ok("fsck", *extra, url)
        files = sorted(p for p in Path(tree.root).rglob("*")
                       if p.is_file() and not p.is_symlink())[:40]
        rels = ["/" + str(p.relative_to(Path(tree.root))) for p in files]
        if name == "big.erofs":
            rels = ["/random.bin", "/text.txt"]
        ca = kiln.ok("cat", local, *rels)
        cb = kiln.ok("cat", *extra, url, *rels)
        assert hashlib.sha256(ca.out).digest() == \
            hashlib.sha256(cb.out).digest(), name
        # on the tmpfs of the trees: it keeps every xattr
        ex_a = srcfs / f"remote-a-{tls}-{name}"
        ex_b = srcfs / f"remote-b-{tls}-{name}"
        kiln.ok("extract", local, ex_a)
        kiln.ok("extract", *extra, url, ex_b)
        tree_compare(ex_a, ex_b)
        shutil.rmtree(ex_a)
        shutil.rmtree(ex_b)


def test_mount_over_http(kiln, images, nginx, tmp_path, srcfs):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    tree, www = images
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen([str(kiln.path), "mount", "-f",
                          *cache_args(tmp_path), nginx.url("zstd.erofs"),
                          str(mnt)], stderr=subprocess.PIPE)
    try:
        wait_fuse_mount(p, mnt)
        ex = srcfs / "remote-mount-ex"
        kiln.ok("extract", www / "zstd.erofs", ex)
        tree_compare(ex, mnt)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.mark.parametrize("walk", [[], ["--no-walk"]],
                         ids=["default", "no-walk"])
def test_info_fetches_only_the_superblock_area(kiln, nginx, tmp_path, walk):
    """A URL is not walked unless --walk asks: that is every unit of
    metadata."""
    before = len(nginx.requests())
    r = kiln.ok("info", *walk, *cache_args(tmp_path),
                nginx.url("zstd.erofs"))
    assert "regular files:" not in r.text, r.text
    # the unit with the superblock, and the one with the root inode that
    # every open checks (kiln puts metadata after the data)
    lines = nginx.requests()[before:]
    assert 1 <= len(lines) <= 2, lines
    assert all(n <= UNIT for n in sent_bytes(lines)), lines


def meta_run(image):
    """kiln's metadata run: from meta_blkaddr to the image's end."""
    sb = image.read_bytes()[1024:1024 + 128]
    blkszbits = sb[12]
    meta_blkaddr = int.from_bytes(sb[40:44], "little")
    blocks = int.from_bytes(sb[36:40], "little")
    return meta_blkaddr << blkszbits, blocks << blkszbits


def sent_bytes(lines):
    return [int(x.split('"')[2].split()[1]) for x in lines]


@pytest.mark.parametrize("name", ["plain.erofs", "zstd.erofs"])
def test_walk_fetches_the_metadata_run_in_few_requests(kiln, images, nginx,
                                                       tmp_path, name):
    """kiln keeps inodes, directory blocks and shared xattrs in one run at
    the end of the image; a walk over HTTP fetches that run in windows of
    8 MiB: the superblock's unit, the root's, then one request per window,
    and no file data beyond the units the run's ends share."""
    tree, www = images
    lo, hi = meta_run(www / name)
    size = (www / name).stat().st_size
    assert hi == size and 0 < lo < hi, (lo, hi, size)
    # a directory of several blocks is in the run (the tree's 'many')
    many = [ln.split() for ln in
            kiln.ok("ls", "-l", str(www / name), "/").text.splitlines()
            if ln.endswith(" many")]
    assert many and int(many[0][4]) > 4096, many
    before = len(nginx.requests())
    a = kiln.ok("ls", "-R", "-l", str(www / name))
    b = kiln.ok("ls", "-R", "-l", *cache_args(tmp_path), nginx.url(name))
    assert a.out == b.out
    sent = sent_bytes(nginx.requests()[before:])
    windows = -(-(hi - (lo // UNIT * UNIT)) // (8 << 20))
    assert len(sent) <= 2 + windows, sent
    assert sum(sent) <= (hi - lo) + 3 * UNIT, (sent, lo, hi)


def test_tls_needs_the_ca(kiln, nginx, tmp_path):
    url = nginx.url("plain.erofs", tls=True)
    r = kiln.fails("ls", *cache_args(tmp_path), *FAST, url)
    assert "certificate" in r.err.lower(), r.describe()
    kiln.ok("ls", "--ca-file", str(nginx.ca), *cache_args(tmp_path), url)
    # the TLS server offers HTTP/2 (ALPN), and kiln takes it
    assert "HTTP/2.0" in nginx.requests()[-1], nginx.requests()[-1]
    kiln.ok("ls", "--insecure", *cache_args(tmp_path), url)


def test_server_without_ranges_is_refused(kiln, nginx, tmp_path):
    r = kiln.fails("ls", *cache_args(tmp_path), *FAST,
                   nginx.url("norange/zstd.erofs"))
    assert "range" in r.err, r.describe()


def test_rate_limited_server_same_bytes(kiln, images, nginx, tmp_path):
    tree, www = images
    a = kiln.ok("ls", "-R", str(www / "zstd.erofs"))
    b = kiln.ok("ls", "-R", *cache_args(tmp_path),
                nginx.url("slow/zstd.erofs"))
    assert a.out == b.out


def test_stopped_server_fails_within_the_timeout(kiln, images, nginx,
                                                 tmp_path):
    """SIGSTOP of nginx mid-read: EIO after the stall limit, no hang."""
    tree, www = images
    big = max((p for p in Path(tree.root).rglob("*") if p.is_file()
               and not p.is_symlink()), key=lambda p: p.stat().st_size)
    rel = "/" + str(big.relative_to(tree.root))
    p = subprocess.Popen([str(kiln.path), "cat", *cache_args(tmp_path),
                          "--timeout", "4", "--stall-timeout", "1",
                          "--retries", "1", nginx.url("crawl/plain.erofs"),
                          rel], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    pids = nginx.pids()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        try:
            err = p.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            p.kill()
            pytest.fail("kiln cat hung on a stopped server")
        took = time.monotonic() - t0
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    assert p.returncode != 0, err
    assert took < 12, took
    assert "I/O error" in err or "input/output" in err.lower(), err


# -- a server that misbehaves on purpose ---------------------------------------

class Faulty(http.server.BaseHTTPRequestHandler):
    """GET with single byte ranges over the files of server.www, bent by
    the first path element:
      /ok/F              plain ranges with a strong ETag
      /busy/N/F          the first N requests of each run: 503, Retry-After: 1
      /status/CODE/F     always CODE (404, 403, 416)
      /cut/F             every range body cut in half, then the connection
      /cutonce/F         the first body after the probe is cut, then fine
      /swap/F            after the first request the object is "replaced":
                         If-Match fails with 412
      /swapquiet/F       replaced, If-Match ignored: a new ETag and new bytes
      /stall/F           the probe is answered, then nothing is ever sent
      /slow/F            every answer after the probe waits 0.2 s; the
                         server counts the requests in flight at once
    """
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_range(self, data, etag, cut=False):
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if not m:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("ETag", etag)
            self.end_headers()
            self.wfile.write(data)
            return
        a, b = int(m[1]), min(int(m[2]), len(data) - 1)
        if a >= len(data):
            self.send_response(416)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = data[a:b + 1]
        with self.server.lock:
            self.server.sent += len(body)
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {a}-{b}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.end_headers()
        if cut:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def do_GET(self):
        srv = self.server
        parts = self.path.strip("/").split("/")
        mode, fname = parts[0], parts[-1]
        with srv.lock:
            n = srv.count.get(self.path, 0)
            srv.count[self.path] = n + 1
        data = (srv.www / fname).read_bytes()
        etag = '"v1"'
        if mode == "busy" and n < int(parts[1]):
            self.send_response(503)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "status":
            self.send_response(int(parts[1]))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode in ("swap", "swapquiet") and n >= 1:
            if mode == "swap" and self.headers.get("If-Match") == etag:
                self.send_response(412)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            data, etag = bytes(len(data)), '"v2"'
        if mode == "stall" and n >= 1:
            time.sleep(60)
            return
        if mode == "slow" and n >= 1:
            with srv.lock:
                srv.inflight += 1
                srv.peak = max(srv.peak, srv.inflight)
            time.sleep(0.2)
            with srv.lock:
                srv.inflight -= 1
        cut = mode == "cut" or (mode == "cutonce" and n == 1)
        self.send_range(data, etag, cut=cut and n >= 1)


class FaultyServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture(scope="module")
def faulty(images):
    srv = FaultyServer(("127.0.0.1", 0), Faulty)
    srv.www, srv.lock, srv.count = images[1], threading.Lock(), {}
    srv.inflight = srv.peak = srv.sent = 0
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    srv.url = lambda path: f"http://127.0.0.1:{srv.server_address[1]}/{path}"
    yield srv
    srv.shutdown()


def test_busy_server_is_retried_after_retry_after(kiln, images, faulty,
                                                  tmp_path):
    tree, www = images
    t0 = time.monotonic()
    a = kiln.ok("ls", "-R", str(www / "plain.erofs"))
    b = kiln.ok("ls", "-R", *cache_args(tmp_path), "--retries", "3",
                faulty.url("busy/2/plain.erofs"))
    assert a.out == b.out
    assert time.monotonic() - t0 >= 2, "Retry-After: 1 was not honoured"
    assert "HTTP 503" in b.err


@pytest.mark.parametrize("code", [404, 403, 416])
def test_refusals_fail_fast_naming_the_status(kiln, faulty, tmp_path, code):
    t0 = time.monotonic()
    r = kiln.fails("info", *cache_args(tmp_path), *FAST,
                   faulty.url(f"status/{code}/plain.erofs"))
    assert time.monotonic() - t0 < 5
    assert (f"HTTP {code}" in r.err) or (code == 416 and "empty" in r.err), \
        r.describe()


def test_truncated_body_is_retried_never_kept(kiln, images, faulty,
                                              tmp_path):
    tree, www = images
    a = kiln.ok("ls", "-R", str(www / "plain.erofs"))
    b = kiln.ok("ls", "-R", *cache_args(tmp_path),
                faulty.url("cutonce/plain.erofs"))
    assert a.out == b.out
    r = kiln.fails("fsck", *cache_args(tmp_path), *FAST,
                   faulty.url("cut/plain.erofs"))
    assert "I/O error" in r.err, r.describe()
    assert "corrupt" not in r.err, r.describe()


def test_replaced_object_is_never_mixed(kiln, faulty, tmp_path):
    for mode in ("swap", "swapquiet"):
        r = kiln.fails("fsck", *cache_args(tmp_path), *FAST,
                       faulty.url(f"{mode}/zstd.erofs"))
        assert "image changed on the server" in r.err, r.describe()
        assert "corrupt" not in r.err, r.describe()


def test_stalled_server_fails_within_the_timeout(kiln, faulty, tmp_path):
    t0 = time.monotonic()
    r = kiln.fails("fsck", *cache_args(tmp_path), "--timeout", "3",
                   "--stall-timeout", "1", "--retries", "5",
                   faulty.url("stall/zstd.erofs"), timeout=30)
    assert time.monotonic() - t0 < 8
    assert "I/O error" in r.err, r.describe()


def test_mirror_serves_when_the_first_url_fails(kiln, images, faulty,
                                                nginx, tmp_path):
    tree, www = images
    a = kiln.ok("ls", "-R", str(www / "zstd.erofs"))
    b = kiln.ok("ls", "-R", *cache_args(tmp_path), "--mirror",
                nginx.url("zstd.erofs"), *FAST,
                faulty.url("cut/zstd.erofs"))
    assert a.out == b.out


def test_killed_server_fails_cleanly(kiln, images, tmp_path_factory,
                                     tmp_path):
    """nginx killed in the middle of a body: EIO within the limit."""
    tree, www = images
    n = Nginx(tmp_path_factory.mktemp("nginx-kill"), www)
    big = max((p for p in Path(tree.root).rglob("*") if p.is_file()
               and not p.is_symlink()), key=lambda p: p.stat().st_size)
    rel = "/" + str(big.relative_to(tree.root))
    p = subprocess.Popen([str(kiln.path), "cat", *cache_args(tmp_path),
                          *FAST, n.url("crawl/plain.erofs"), rel],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(0.5)
    for pid in n.pids():
        os.kill(pid, signal.SIGKILL)
    n.proc.wait()
    try:
        err = p.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        pytest.fail("kiln cat hung on a killed server")
    assert p.returncode != 0, err
    assert "I/O error" in err or "input/output" in err.lower(), err
    shutil.rmtree(n.d, ignore_errors=True)


# -- the chunk cache -----------------------------------------------------------

def cache_stat(kiln, cache):
    r = kiln.ok("cache", "--cache-dir", str(cache), "stat")
    return {k.strip(): int(v.split()[0]) for k, v in
            (line.split(":", 1) for line in r.text.splitlines())}


def chunks(cache):
    return sorted(p for p in Path(cache).glob("v1/*/*")
                  if re.fullmatch(r"[0-9a-f]{16}", p.name))


def test_cache_serves_a_second_run_and_offline(kiln, images, nginx,
                                               tmp_path):
    tree, www = images
    cache = tmp_path / "cache"
    url = nginx.url("zstd.erofs")
    kiln.ok("fsck", "--cache-dir", str(cache), url)
    before = len(nginx.requests())
    kiln.ok("fsck", "--cache-dir", str(cache), url)
    # the probe of the first unit is the one request of a cached image
    assert len(nginx.requests()) - before == 1
    st = cache_stat(kiln, cache)
    assert st["disk hits"] > 0 and st["requests"] > 0
    # no server at all: served from the cache
    dead = f"http://127.0.0.1:{free_port()}/zstd.erofs"
    r = kiln.fails("ls", "--cache-dir", str(cache), *FAST, dead)
    a = kiln.ok("ls", "-R", str(www / "zstd.erofs"))
    b = kiln.ok("ls", "-R", "--offline", "--cache-dir", str(cache), url)
    assert a.out == b.out
    r = kiln.fails("ls", "--offline", "--cache-dir", str(tmp_path / "none"),
                   url)
    assert "offline" in r.err, r.describe()


def test_long_url_keeps_its_cache_and_offline(kiln, images, nginx,
                                              tmp_path):
    """A presigned-style URL of 3000 bytes: its identity file is read
    whole, so verify keeps its chunks and an offline open finds it."""
    tree, www = images
    cache = tmp_path / "cache"
    url = nginx.url("zstd.erofs") + "?sig=" + "q" * 3000
    kiln.ok("fsck", "--cache-dir", str(cache), url)
    r = kiln.ok("cache", "--cache-dir", str(cache), "verify")
    assert " 0 bad" in r.text, r.describe()
    assert chunks(cache), r.describe()
    a = kiln.ok("ls", "-R", str(www / "zstd.erofs"))
    b = kiln.ok("ls", "-R", "--offline", "--cache-dir", str(cache), url)
    assert a.out == b.out


def test_cache_cap_is_respected(kiln, nginx, tmp_path):
    cache = tmp_path / "cache"
    cap = 1200 << 10	# two units and their headers
    kiln.ok("fsck", "--cache-dir", str(cache), "--cache-size", str(cap),
            nginx.url("plain.erofs"))
    st = cache_stat(kiln, cache)
    assert 0 < st["bytes"] <= cap, st
    assert st["chunks evicted"] > 0, st


def test_flipped_byte_is_found_and_never_served(kiln, images, nginx,
                                                tmp_path):
    tree, www = images
    cache = tmp_path / "cache"
    url = nginx.url("zstd.erofs")
    kiln.ok("fsck", "--cache-dir", str(cache), url)
    all_chunks = chunks(cache)
    assert len(all_chunks) >= 2
    for victim in all_chunks:
        data = bytearray(victim.read_bytes())
        data[64 + len(data) // 3] ^= 0x01
        victim.write_bytes(data)
    # offline, a damaged chunk is an I/O error, never its bytes
    r = kiln.fails("fsck", "--offline", "--cache-dir", str(cache), url)
    assert "damaged" in r.err and "corrupt image" not in r.err, r.describe()
    for victim in all_chunks[1:]:
        data = bytearray(victim.read_bytes())
        data[64 + len(data) // 3] ^= 0x01
        victim.write_bytes(data)
        break
    r = kiln.run("cache", "--cache-dir", str(cache), "verify")
    assert r.rc == 1 and "bad chunk" in r.text, r.describe()
    # online, what was dropped is fetched again: the same bytes as local
    a = kiln.ok("cat", str(www / "zstd.erofs"), *rel_files(tree, 20))
    b = kiln.ok("cat", "--cache-dir", str(cache), url, *rel_files(tree, 20))
    assert a.out == b.out
    r = kiln.ok("cache", "--cache-dir", str(cache), "verify")
    assert " 0 bad" in r.text


def rel_files(tree, n):
    files = sorted(p for p in Path(tree.root).rglob("*")
                   if p.is_file() and not p.is_symlink())
    return ["/" + str(p.relative_to(Path(tree.root))) for p in files[:n]]


def test_kill_9_then_reuse(kiln, images, nginx, tmp_path):
    tree, www = images
    cache = tmp_path / "cache"
    p = subprocess.Popen([str(kiln.path), "fsck", "--cache-dir", str(cache),
                          nginx.url("crawl/plain.erofs")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    p.kill()
    p.wait()
    r = kiln.ok("cache", "--cache-dir", str(cache), "verify")
    assert " 0 bad" in r.text
    kiln.ok("fsck", "--cache-dir", str(cache), nginx.url("plain.erofs"))


def test_two_processes_share_a_cache(kiln, images, nginx, tmp_path):
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([str(kiln.path), "fsck", "--cache-dir",
                               str(cache), "--cache-size", "3M",
                               nginx.url(name)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name in ("plain.erofs", "zstd.erofs", "plain.erofs")]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    st = cache_stat(kiln, cache)
    assert st["bytes"] <= 3 << 20
    r = kiln.ok("cache", "--cache-dir", str(cache), "verify")
    assert " 0 bad" in r.text


def test_two_processes_fetch_each_unit_once(kiln, images, faulty, tmp_path):
    """Two readers of one file on one cache: the second waits for the
    units the first is fetching and loads them, instead of fetching them
    again (every answer of this server takes 0.2 s)."""
    tree, www = images
    url = faulty.url("slow/big.erofs")
    want = (Path(tree.root).parent / "remote-big" / "random.bin").read_bytes()

    def cat(cache, n):
        with faulty.lock:
            faulty.sent = 0
        procs = [subprocess.Popen([str(kiln.path), "cat", "--cache-dir",
                                   str(cache), url, "/random.bin"],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for _ in range(n)]
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
            assert out == want
        return faulty.sent

    alone = cat(tmp_path / "c1", 1)
    both = cat(tmp_path / "c2", 2)
    assert alone >= 5 << 20
    assert both < alone * 1.25, (alone, both)


def test_tiny_tmpfs_cache_evicts_instead_of_failing(kiln, images, nginx,
                                                    tmp_path):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    cache = tmp_path / "tiny"
    cache.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1536k",
                        "kiln-e2e-tiny", str(cache)], capture_output=True)
    assert r.returncode == 0, r.stderr
    try:
        tree, www = images
        url = nginx.url("plain.erofs")
        kiln.ok("fsck", "--cache-dir", str(cache), "--cache-size", "1G", url)
        a = kiln.ok("cat", str(www / "plain.erofs"), *rel_files(tree, 30))
        b = kiln.ok("cat", "--cache-dir", str(cache), "--cache-size", "1G",
                    url, *rel_files(tree, 30))
        assert a.out == b.out
        st = cache_stat(kiln, cache)
        assert st["chunks"] > 0
    finally:
        subprocess.run(["umount", str(cache)], capture_output=True)


def prefetch_mount(kiln, url, cache, mnt):
    """`kiln mount -f --prefetch=all` of @url at 4M a second (batches of
    four 512 KiB runs) on cache @cache."""
    return subprocess.Popen([str(kiln.path), "mount", "-f", "--prefetch=all",
                             "--prefetch-rate", "4M", "--cache-dir",
                             str(cache), url, str(mnt)],
                            stderr=subprocess.PIPE)


def wait_prefetched(p, cache, mnt, size, seconds):
    """Until the mount of @p stands and its cache holds @size bytes."""
    for _ in range(seconds * 10):
        got = sum(c.stat().st_size - 64 for c in chunks(cache))
        if os.path.ismount(mnt) and got >= size:
            return
        if p.poll() is not None:
            pytest.fail(f"kiln mount exited: {p.stderr.read()}")
        time.sleep(0.1)
    pytest.fail("the prefetch did not bring the whole image")


def test_prefetch_all_survives_the_server_going_away(kiln, images, srcfs,
                                                     tmp_path_factory,
                                                     tmp_path):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    tree, www = images
    n = Nginx(tmp_path_factory.mktemp("nginx-prefetch"), www)
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()
    size = (www / "zstd.erofs").stat().st_size
    p = prefetch_mount(kiln, n.url("zstd.erofs"), cache, mnt)
    try:
        wait_prefetched(p, cache, mnt, size, 20)
        n.stop()
        ex = srcfs / "remote-prefetch-ex"
        kiln.ok("extract", www / "zstd.erofs", ex)
        tree_compare(ex, mnt)
        shutil.rmtree(ex)
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        n.stop()


def test_prefetch_all_keeps_several_requests_in_flight(kiln, images, faulty,
                                                      srcfs, tmp_path):
    """--prefetch=all fetches runs side by side (libcurl's multi
    interface), and the mount reads the same bytes."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    tree, www = images
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()
    size = (www / "big.erofs").stat().st_size
    with faulty.lock:
        faulty.peak = 0
    p = prefetch_mount(kiln, faulty.url("slow/big.erofs"), cache, mnt)
    try:
        wait_prefetched(p, cache, mnt, size, 30)
        assert faulty.peak >= 2, faulty.peak
        ex = srcfs / "remote-multi-ex"
        kiln.ok("extract", www / "big.erofs", ex)
        tree_compare(ex, mnt)
        shutil.rmtree(ex)
    finally:
        stop_mount(p, mnt)


@contextlib.contextmanager
def mount_then_stop_the_server(kiln, www, nginx_dir, mnt, *limits):
    """`kiln mount -f --no-cache` of big.erofs from a private nginx, with
    the time limits @limits; once it is mounted, nginx is stopped
    (SIGSTOP: connections open, nothing answered). Yields the mount's
    process and a dict that holds its log ("err") after the block."""
    n = Nginx(nginx_dir, www)
    mnt.mkdir()
    p = subprocess.Popen([str(kiln.path), "mount", "-f", "--no-cache",
                          *limits, n.url("big.erofs"), str(mnt)],
                         stderr=subprocess.PIPE, text=True)
    pids, after = [], {}
    try:
        wait_fuse_mount(p, mnt)
        assert sorted(os.listdir(mnt)) == ["random.bin", "text.txt"]
        pids = n.pids()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield p, after
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        after["err"] = stop_mount(p, mnt)
        n.stop()


def test_mount_read_fails_within_the_timeout_when_the_server_stops(
        kiln, images, tmp_path_factory, tmp_path):
    """A FUSE reader gets EIO within --timeout, and the log names why."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    mnt = tmp_path / "mnt"
    with mount_then_stop_the_server(kiln, images[1],
                                    tmp_path_factory.mktemp("nginx-stop"),
                                    mnt, "--timeout", "3",
                                    "--stall-timeout", "1",
                                    "--retries", "2") as (p, after):
        t0 = time.monotonic()
        r = subprocess.run(["dd", f"if={mnt}/random.bin", "of=/dev/null",
                            "bs=1M"], capture_output=True, text=True,
                           timeout=60)
        took = time.monotonic() - t0
        assert r.returncode != 0, r.stderr
        assert "Input/output error" in r.stderr, r.stderr
        assert took < 20, took
    err = after["err"]
    assert "no answer within" in err or "giving up" in err, err


def test_replaced_file_on_nginx_is_never_mixed_with_the_cache(
        kiln, images, nginx, tmp_path):
    """The object behind a URL replaced between two runs on one cache:
    the second run reads the new one, nothing of the old."""
    tree, www = images
    cache = tmp_path / "cache"
    target = www / "swapped.erofs"
    shutil.copyfile(www / "zstd.erofs", target)
    try:
        url = nginx.url("swapped.erofs")
        kiln.ok("fsck", "--cache-dir", str(cache), url)
        time.sleep(1.1)		# a new mtime: nginx's ETag changes
        shutil.copyfile(www / "big.erofs", target)
        a = kiln.ok("ls", "-R", "-l", str(www / "big.erofs"))
        b = kiln.ok("ls", "-R", "-l", "--cache-dir", str(cache), url)
        assert a.out == b.out
        kiln.ok("fsck", "--cache-dir", str(cache), url)
        r = kiln.ok("cache", "--cache-dir", str(cache), "verify")
        assert " 0 bad" in r.text
    finally:
        target.unlink()


def stop_mount(p, mnt):
    force_unmount(str(mnt))
    try:
        return p.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()[1]


def test_an_ignored_sigint_leaves_the_remote_mount_reading(kiln, images,
                                                          nginx, tmp_path):
    """A mount started with SIGINT ignored (nohup, a shell's background
    job) keeps it ignored: a SIGINT neither stops it nor cancels the
    image's requests, so files not read before still read right."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    tree, www = images
    big = Path(tree.root).parent / "remote-big"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen(
        [str(kiln.path), "mount", "-f", "--cache-dir", str(tmp_path / "c"),
         nginx.url("big.erofs"), str(mnt)],
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        wait_fuse_mount(p, mnt)
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert p.poll() is None
        # bytes no request has fetched yet
        for name in ("random.bin", "text.txt"):
            assert (mnt / name).read_bytes() == (big / name).read_bytes()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=20) == 0
    finally:
        err = stop_mount(p, mnt)
    assert p.returncode == 0, err


def test_sigterm_unmounts_while_requests_are_stuck(kiln, images,
                                                   tmp_path_factory,
                                                   tmp_path):
    """SIGTERM to a mount whose reader waits on a server that stopped
    answering (long time limits, so the request is still stuck): the
    mount goes away at once, and the reader gets an error, not a hang."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    mnt = tmp_path / "mnt"
    with mount_then_stop_the_server(kiln, images[1],
                                    tmp_path_factory.mktemp("nginx-term"),
                                    mnt, "--timeout", "120",
                                    "--stall-timeout", "60") as (p, _):
        reader = subprocess.Popen(["dd", f"if={mnt}/random.bin",
                                   "of=/dev/null", "bs=1M"],
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)
            assert reader.poll() is None, \
                "the read did not wait on the server"
            t0 = time.monotonic()
            p.send_signal(signal.SIGTERM)
            try:
                rc = p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pytest.fail("kiln mount ignored SIGTERM while a request "
                            "was stuck")
            assert time.monotonic() - t0 < 15
            assert rc == 0, p.stderr.read()
            assert not os.path.ismount(mnt)
            try:
                reader.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pytest.fail("the reader hung after the unmount")
            assert reader.returncode != 0
        finally:
            if reader.poll() is None:
                reader.kill()
                reader.wait()


def test_kill_9_of_a_mount_then_a_new_mount_on_the_cache(kiln, images,
                                                         nginx, tmp_path):
    """A mount killed (-9) in the middle of fetching leaves no torn chunk:
    the cache verifies clean, and a new mount on it serves every byte."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    tree, www = images
    cache, mnt = tmp_path / "cache", tmp_path / "mnt"
    mnt.mkdir()
    url = nginx.url("slow/big.erofs")
    argv = [str(kiln.path), "mount", "-f", "--cache-dir", str(cache), url,
            str(mnt)]
    p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    reader = None
    try:
        wait_fuse_mount(p, mnt)
        reader = subprocess.Popen(["cat", f"{mnt}/random.bin"],
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        time.sleep(0.6)
        assert p.poll() is None and reader.poll() is None, \
            "the read was over before the kill"
        p.kill()
        p.wait()
        reader.wait(timeout=20)
    finally:
        if reader and reader.poll() is None:
            reader.kill()
            reader.wait()
        stop_mount(p, mnt)
    r = kiln.ok("cache", "--cache-dir", str(cache), "verify")
    assert " 0 bad" in r.text, r.text
    assert cache_stat(kiln, cache)["chunks"] >= 1
    p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        wait_fuse_mount(p, mnt)
        ex = tmp_path / "ex"
        kiln.ok("extract", www / "big.erofs", ex)
        tree_compare(ex, mnt)
    finally:
        err = stop_mount(p, mnt)
    assert p.returncode == 0, err


def test_two_mounts_share_a_cache(kiln, images, nginx, srcfs, tmp_path):
    """Two mounts of one URL on one cache, read at the same time: both
    serve the right bytes, and the cache they filled verifies clean."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    tree, www = images
    cache = tmp_path / "cache"
    ex = srcfs / "remote-two-mounts-ex"	# holds the tree's xattrs
    shutil.rmtree(ex, ignore_errors=True)
    kiln.ok("extract", www / "zstd.erofs", ex)
    mnts = [tmp_path / "m1", tmp_path / "m2"]
    procs = []
    try:
        for m in mnts:
            m.mkdir()
            procs.append(subprocess.Popen(
                [str(kiln.path), "mount", "-f", "--cache-dir", str(cache),
                 nginx.url("slow/zstd.erofs"), str(m)],
                stderr=subprocess.PIPE, text=True))
        for p, m in zip(procs, mnts):
            wait_fuse_mount(p, m)
        errors = []

        def compare(m):
            try:
                tree_compare(ex, m)
            except BaseException as e:	# reported below, in this thread
                errors.append(e)
        threads = [threading.Thread(target=compare, args=(m,))
                   for m in mnts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
    finally:
        errs = [stop_mount(p, m) for p, m in zip(procs, mnts)]
    assert all(p.returncode == 0 for p in procs), errs
    r = kiln.ok("cache", "--cache-dir", str(cache), "verify")
    assert " 0 bad" in r.text, r.text
    st = cache_stat(kiln, cache)
    assert st["bytes"] <= (www / "zstd.erofs").stat().st_size + UNIT, st


def test_fsck_reads_forward_through_the_image(kiln, tmp_path_factory,
                                              tmp_path):
    """fsck walks subdirectories in name order, the order the data lies
    in, so its reads go forward and the readahead serves them: a few
    requests, where a walk backwards took about two per directory."""
    src = tmp_path / "src"
    for k in range(8):
        (src / f"d{k}").mkdir(parents=True)
        (src / f"d{k}" / "f").write_bytes(os.urandom(1 << 20))
    www = tmp_path_factory.mktemp("www-order")
    kiln.build(src, www / "order.erofs")
    n = Nginx(tmp_path_factory.mktemp("nginx-order"), www)
    try:
        kiln.ok("fsck", *cache_args(tmp_path), n.url("order.erofs"))
        sent = sent_bytes(n.requests())
    finally:
        n.stop()
    assert sum(sent) <= (www / "order.erofs").stat().st_size, sent
    # the superblock's unit, the metadata's, then the data in order
    assert len(sent) <= 6, sent
