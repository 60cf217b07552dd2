# SPDX-License-Identifier: MIT
"""Images read over s3://: s3rver (npm, scripts/s3rver.sh) stores the
objects, as a protocol double of S3 (ranges, ETags, If-Match, virtual
hosts). s3rver does not check SigV4 signatures, so a front in this file
does: it recomputes each request's signature from the secrets it knows
(the check itself is tested against AWS's published example) and refuses
a wrong one with 403 before passing the request on. Every command gives
the bytes of the local file; a wrong secret fails clearly; a credentials
profile, a session token and credentials rotated under a mount work."""

import hashlib
import hmac
import http.client
import http.server
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

import pytest

from helpers import tree_compare, wait_fuse_mount
from test_remote import free_port, wait_port

pytestmark = [pytest.mark.sanitize]

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "kiln-images"
KEY_ID, SECRET = "AKIDKILNTEST0001", "kiln/secret/one"
FAST = ["--timeout", "6", "--connect-timeout", "2", "--stall-timeout", "2",
        "--retries", "1"]


def _hmac(k, m):
    return hmac.new(k, m.encode(), hashlib.sha256).digest()


def sigv4(secret, method, path, query, headers, signed, amz_date, scope):
    """The SigV4 signature S3 expects (the payload line is the request's
    x-amz-content-sha256, as S3 takes it)."""
    canon = "\n".join([
        method, path,
        "&".join(sorted(query.split("&"))) if query else "",
        "".join(f"{h}:{headers[h].strip()}\n" for h in signed),
        ";".join(signed),
        headers.get("x-amz-content-sha256", "UNSIGNED-PAYLOAD")])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(canon.encode()).hexdigest()])
    date, region, service, _ = scope.split("/")
    k = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, service, "aws4_request"):
        k = _hmac(k, part)
    return hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()


AWS_EXAMPLE = {
    "secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "headers": {"host": "examplebucket.s3.amazonaws.com",
                "range": "bytes=0-9",
                "x-amz-content-sha256": hashlib.sha256(b"").hexdigest(),
                "x-amz-date": "20130524T000000Z"},
    "signature": "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
}


def test_the_check_of_the_front_is_aws_own_example():
    e = AWS_EXAMPLE
    assert sigv4(e["secret"], "GET", "/test.txt", "", e["headers"],
                 sorted(e["headers"]), "20130524T000000Z",
                 "20130524/us-east-1/s3/aws4_request") == e["signature"]


AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/([^,]+), ?"
                  r"SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$")


class Front(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, backend):
        super().__init__(("127.0.0.1", 0), FrontHandler)
        self.backend = backend
        self.keys = {}          # key id -> (secret, session token or None)
        self.log = []           # (key id or None, status)
        self.lock = threading.Lock()


def s3_error(h, status, code):
    body = (f"<?xml version=\"1.0\"?><Error><Code>{code}</Code>"
            f"<Message>refused by the test front</Message></Error>").encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/xml")
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


class FrontHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def refuse(self, kid, code):
        with self.server.lock:
            self.server.log.append((kid, 403))
        s3_error(self, 403, code)

    def do_GET(self):
        hdrs = {k.lower(): v for k, v in self.headers.items()}
        auth = self.headers.get("Authorization")
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        kid = None
        if "X-Amz-Signature" in q:
            # a presigned URL: the signature is in the query
            kid = "presigned " + q["X-Amz-Credential"].split("/")[0]
            with self.server.lock:
                known = self.server.keys.get(kid.split()[1])
            rest = "&".join(sorted(a for a in u.query.split("&")
                                   if not a.startswith("X-Amz-Signature=")))
            signed = q["X-Amz-SignedHeaders"].split(";")
            scope = q["X-Amz-Credential"].split("/", 1)[1]
            if auth or not known or not hmac.compare_digest(
                    sigv4(known[0], "GET", u.path, rest,
                          {**{h: hdrs.get(h, "") for h in signed},
                           "x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
                          signed, q["X-Amz-Date"], scope),
                    q["X-Amz-Signature"]):
                return self.refuse(kid, "SignatureDoesNotMatch")
        elif auth:
            m = AUTH.match(auth)
            if not m:
                return self.refuse(None, "AuthorizationHeaderMalformed")
            kid, scope, signed, sig = m.groups()
            with self.server.lock:
                known = self.server.keys.get(kid)
            if not known:
                return self.refuse(kid, "InvalidAccessKeyId")
            secret, token = known
            signed = signed.split(";")
            if "host" not in signed or "x-amz-date" not in signed or \
                    "range" not in signed:
                return self.refuse(kid, "AccessDenied")
            if token and ("x-amz-security-token" not in signed or
                          hdrs.get("x-amz-security-token") != token):
                return self.refuse(kid, "InvalidToken")
            want = sigv4(secret, "GET", u.path, u.query,
                         {h: hdrs.get(h, "") for h in signed}, signed,
                         hdrs.get("x-amz-date", ""), scope)
            if not hmac.compare_digest(want, sig):
                return self.refuse(kid, "SignatureDoesNotMatch")
        c = http.client.HTTPConnection("127.0.0.1", self.server.backend,
                                       timeout=10)
        fwd = {"Host": self.headers["Host"]}
        for h in ("Range", "If-Match", "If-Unmodified-Since"):
            if self.headers.get(h):
                fwd[h] = self.headers[h]
        c.request("GET", u.path, headers=fwd)
        r = c.getresponse()
        body = r.read()
        with self.server.lock:
            self.server.log.append((kid, r.status))
        self.send_response(r.status)
        for h in ("Content-Range", "ETag", "Last-Modified", "Content-Type"):
            if r.getheader(h):
                self.send_header(h, r.getheader(h))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        c.close()


class S3:
    def __init__(self, d):
        bin_ = subprocess.run([str(ROOT / "scripts/s3rver.sh")], check=True,
                              capture_output=True, text=True).stdout.strip()
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["node", bin_, "-d", str(d), "-a", "127.0.0.1", "-p",
             str(self.port), "--service-endpoint", "localhost",
             "--configure-bucket", BUCKET, "--silent"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc, "s3rver")
        self.front = Front(self.port)
        self.front.keys[KEY_ID] = (SECRET, None)
        threading.Thread(target=self.front.serve_forever, daemon=True).start()
        self.fport = self.front.server_address[1]

    def put(self, name, path):
        # s3rver takes its own built-in key for writes (it checks no signature)
        subprocess.run(["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3",
                        "--user", "S3RVER:S3RVER", "-H",
                        "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T",
                        str(path),
                        f"http://127.0.0.1:{self.port}/{BUCKET}/{name}"],
                       check=True, capture_output=True)

    def path_style(self):
        return ["--s3-endpoint", f"http://127.0.0.1:{self.fport}",
                "--s3-path-style"]

    def vhost(self):
        # BUCKET.s3.localhost: libcurl resolves *.localhost to loopback
        return ["--s3-endpoint", f"http://s3.localhost:{self.fport}"]

    def stop(self):
        self.front.shutdown()
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def s3(tmp_path_factory, kiln, make_tree):
    d = tmp_path_factory.mktemp("s3")
    srv = S3(d / "data")
    tree = make_tree("s3tree")
    imgs = d / "imgs"
    imgs.mkdir()
    kiln.build(tree.root, imgs / "plain.erofs")
    kiln.build(tree.root, imgs / "zstd.erofs", "-z", "zstd")
    big = d / "big"
    big.mkdir()
    # 6 MiB each: the background readahead of a read of f0 (one 4 MiB
    # window ahead) stops short of f2
    for k in range(3):
        (big / f"f{k}.bin").write_bytes(os.urandom(6 << 20))
    kiln.build(big, imgs / "big.erofs")
    for p in imgs.iterdir():
        srv.put(p.name, p)
    srv.imgs, srv.tree, srv.big = imgs, tree, big
    yield srv
    srv.stop()


def env_key(key_id=KEY_ID, secret=SECRET, token=None, **more):
    e = {"AWS_ACCESS_KEY_ID": key_id, "AWS_SECRET_ACCESS_KEY": secret,
         "AWS_SESSION_TOKEN": token or "", "AWS_PROFILE": "",
         "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
    e.update(more)
    return e


@pytest.mark.parametrize("style", ["path", "vhost"])
def test_every_command_same_bytes(kiln, s3, tmp_path, srcfs, style):
    opts = (s3.path_style() if style == "path" else s3.vhost()) + \
        ["--cache-dir", str(tmp_path / "cache")]
    env = env_key()
    for name in ("plain.erofs", "zstd.erofs"):
        local, url = str(s3.imgs / name), f"s3://{BUCKET}/{name}"
        before = len(s3.front.log)
        a = kiln.ok("ls", "-R", "-l", "-a", local)
        b = kiln.ok("ls", "-R", "-l", "-a", *opts, url, env=env)
        assert a.out == b.out
        ia = kiln.ok("info", "--json", local).text.replace(local, "IMG")
        ib = kiln.ok("info", "--json", "--walk", *opts, url,
                     env=env).text.replace(url, "IMG")
        assert ia == ib
        kiln.ok("fsck", *opts, url, env=env)
        rels = ["/" + str(p.relative_to(s3.tree.root))
                for p in sorted(Path(s3.tree.root).rglob("*"))
                if p.is_file() and not p.is_symlink()][:30]
        assert kiln.ok("cat", local, *rels).out == \
            kiln.ok("cat", *opts, url, *rels, env=env).out
        ex_a, ex_b = srcfs / f"s3-a-{style}-{name}", srcfs / f"s3-b-{style}-{name}"
        kiln.ok("extract", local, ex_a)
        kiln.ok("extract", *opts, url, ex_b, env=env)
        tree_compare(ex_a, ex_b)
        shutil.rmtree(ex_a)
        shutil.rmtree(ex_b)
        seen = s3.front.log[before:]
        assert seen and all(k == KEY_ID and s in (200, 206)
                            for k, s in seen), seen
        # the cache keys the s3:// name: --offline serves it, no request
        before = len(s3.front.log)
        assert kiln.ok("ls", "-R", "-l", "-a", "--offline", *opts, url,
                       env=env).out == a.out
        assert len(s3.front.log) == before


def test_wrong_secret_is_refused_clearly(kiln, s3, tmp_path):
    r = kiln.fails("cat", "--no-cache", *s3.path_style(), *FAST,
                   f"s3://{BUCKET}/plain.erofs", "/x",
                   env=env_key(secret="not-the-secret"))
    assert "403" in r.err and "SignatureDoesNotMatch" in r.err, r.err
    assert "not-the-secret" not in r.err


def test_unknown_key_and_missing_object(kiln, s3):
    r = kiln.fails("ls", "--no-cache", *s3.path_style(), *FAST,
                   f"s3://{BUCKET}/plain.erofs", env=env_key(key_id="AKIDNOPE"))
    assert "InvalidAccessKeyId" in r.err, r.err
    r = kiln.fails("ls", "--no-cache", *s3.path_style(), *FAST,
                   f"s3://{BUCKET}/absent.erofs", env=env_key())
    assert "404" in r.err and "NoSuchKey" in r.err, r.err


def test_bad_urls_are_refused(kiln, s3):
    for url in ("s3://ab/x", "s3://Bucket/x", f"s3://{BUCKET}/", "s3://nokey"):
        r = kiln.fails("ls", "--no-cache", *s3.path_style(), url,
                       env=env_key())
        assert "s3://" in r.err, r.err
    kiln.fails("ls", "--s3-endpoint", "ftp://x", f"s3://{BUCKET}/a")


def test_no_credentials_sends_unsigned_requests(kiln, s3):
    before = len(s3.front.log)
    env = env_key(key_id="", secret="")
    kiln.ok("ls", "--no-cache", *s3.path_style(),
            f"s3://{BUCKET}/plain.erofs", env=env)
    assert all(k is None for k, _ in s3.front.log[before:])


def test_credentials_file_profile_and_session_token(kiln, s3, tmp_path):
    s3.front.keys["AKIDPROFILE"] = ("profile/secret", "TOKEN-abc+/=")
    creds = tmp_path / "credentials"
    creds.write_text("# comment\n[default]\naws_access_key_id = AKIDNOPE\n"
                     "aws_secret_access_key = nope\n\n[ci]\n"
                     "aws_access_key_id=AKIDPROFILE\n"
                     "aws_secret_access_key = profile/secret\n"
                     "aws_session_token = TOKEN-abc+/=\n")
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
           "AWS_SESSION_TOKEN": "", "AWS_SHARED_CREDENTIALS_FILE": str(creds),
           "AWS_PROFILE": "ci"}
    local = s3.imgs / "plain.erofs"
    r = kiln.ok("ls", "-R", "--no-cache", *s3.path_style(),
                f"s3://{BUCKET}/plain.erofs", env=env)
    assert r.out == kiln.ok("ls", "-R", local).out
    # without the token the front refuses: the token is really sent
    s3.front.keys["AKIDPROFILE"] = ("profile/secret", "OTHER")
    r = kiln.fails("ls", "--no-cache", *s3.path_style(), *FAST,
                   f"s3://{BUCKET}/plain.erofs", env=env)
    assert "InvalidToken" in r.err and "TOKEN" not in r.err, r.err
    # a missing profile and a broken file name the file and the line
    r = kiln.fails("ls", "--no-cache", *s3.path_style(),
                   f"s3://{BUCKET}/plain.erofs", env={**env, "AWS_PROFILE": "gone"})
    assert str(creds) in r.err and "gone" in r.err, r.err
    creds.write_text("[ci]\naws_access_key_id = A\nthis line is junk\n")
    r = kiln.fails("ls", "--no-cache", *s3.path_style(),
                   f"s3://{BUCKET}/plain.erofs", env=env)
    assert f"{creds}:3:" in r.err, r.err
    creds.write_text("[ci]\naws_access_key_id = " + "A" * 20000 + "\n")
    r = kiln.fails("ls", "--no-cache", *s3.path_style(),
                   f"s3://{BUCKET}/plain.erofs", env=env)
    assert f"{creds}:2:" in r.err and "AAAA" not in r.err, r.err


def presign(host, path, key_id, secret):
    date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    scope = f"{date[:8]}/us-east-1/s3/aws4_request"
    enc = lambda v: urllib.parse.quote(v, safe="-_.~")  # noqa: E731
    q = "&".join(sorted(f"{k}={enc(v)}" for k, v in {
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
        "X-Amz-Credential": f"{key_id}/{scope}", "X-Amz-Date": date,
        "X-Amz-Expires": "300", "X-Amz-SignedHeaders": "host"}.items()))
    sig = sigv4(secret, "GET", path, q,
                {"host": host, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"},
                ["host"], date, scope)
    return f"http://{host}{path}?{q}&X-Amz-Signature={sig}"


def test_presigned_url_is_passed_untouched(kiln, s3):
    # X-Amz-* query parameters: a plain http(s) URL, never signed again,
    # even with credentials in the environment (the front refuses a
    # presigned request that also carries an Authorization header)
    url = presign(f"127.0.0.1:{s3.fport}", f"/{BUCKET}/plain.erofs",
                  KEY_ID, SECRET)
    for env in (env_key(), env_key(key_id="", secret="")):
        before = len(s3.front.log)
        r = kiln.ok("ls", "--no-cache", url, env=env)
        assert r.out == kiln.ok("ls", s3.imgs / "plain.erofs").out
        seen = s3.front.log[before:]
        assert seen and all(k == "presigned " + KEY_ID and st in (200, 206)
                            for k, st in seen), seen
    # a tampered one is refused: the front really checks it
    r = kiln.fails("ls", "--no-cache", *FAST, url[:-1] + "0" if url[-1] != "0"
                   else url[:-1] + "1")
    assert "403" in r.err, r.err


def test_rotated_credentials_under_a_mount(kiln, s3, tmp_path):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("no /dev/fuse")
    s3.front.keys["AKIDOLD"] = ("old/secret", None)
    creds = tmp_path / "credentials"
    creds.write_text("[default]\naws_access_key_id = AKIDOLD\n"
                     "aws_secret_access_key = old/secret\n")
    env = dict(os.environ, AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="",
               AWS_PROFILE="", AWS_SHARED_CREDENTIALS_FILE=str(creds))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen([str(kiln.path), "mount", "-f", "--no-cache",
                          *s3.path_style(), f"s3://{BUCKET}/big.erofs",
                          str(mnt)], stderr=subprocess.PIPE, env=env)
    try:
        wait_fuse_mount(p, mnt)
        assert (mnt / "f0.bin").read_bytes() == \
            (s3.big / "f0.bin").read_bytes()
        # the old key is disabled, the file now holds a new one
        s3.front.keys["AKIDNEW"] = ("new/secret", None)
        del s3.front.keys["AKIDOLD"]
        creds.write_text("[default]\naws_access_key_id = AKIDNEW\n"
                         "aws_secret_access_key = new/secret\n")
        before = len(s3.front.log)
        assert (mnt / "f2.bin").read_bytes() == \
            (s3.big / "f2.bin").read_bytes()
        seen = s3.front.log[before:]
        assert ("AKIDOLD", 403) in seen and \
            any(k == "AKIDNEW" and s == 206 for k, s in seen), seen
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        try:
            _, err = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            err = b""
    assert b"new/secret" not in err and b"old/secret" not in err
