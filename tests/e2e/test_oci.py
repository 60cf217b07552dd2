# SPDX-License-Identifier: MIT
"""OCI images (--oci, --oci-layer): image layouts made by umoci (and
copied by skopeo), with several layers deleting files, hiding an opaque
directory and hardlinking across layers, flattened by kiln into one image
that the kernel mounts and that equals umoci's own unpacked rootfs; each
layer built alone and stacked with the kernel's overlayfs shows the same
tree; broken layouts are refused with a clear error and no image."""

import contextlib
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from helpers import (ALL_FIELDS, have, kernel_mount, snapshot,
                     diff_snapshots, assert_same, stray_files)

pytestmark = pytest.mark.sanitize

MTIME = 1700000000
REF = "app"


def need_tools():
    for tool in ("umoci", "skopeo"):
        if not have(tool):
            pytest.skip(f"needs {tool} (scripts/install-deps.sh)")
    if os.geteuid() != 0:
        pytest.skip("needs root (umoci repack of owners and devices)")


def run(*argv, cwd=None):
    r = subprocess.run([os.fsdecode(a) for a in argv], capture_output=True,
                       text=True, cwd=cwd)
    assert r.returncode == 0, f"{argv}: {r.stderr}"
    return r.stdout


# -- the layout ----------------------------------------------------------------

def blob_path(layout, digest):
    alg, hexd = digest.split(":")
    return Path(layout) / "blobs" / alg / hexd


def put_blob(layout, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blob_path(layout, digest).write_bytes(data)
    return digest


def manifest_of(layout, ref=REF):
    index = json.loads((Path(layout) / "index.json").read_text())
    for i, d in enumerate(index["manifests"]):
        if d.get("annotations", {}).get(
                "org.opencontainers.image.ref.name") == ref:
            return index, i, json.loads(blob_path(layout, d["digest"])
                                        .read_bytes())
    raise AssertionError(f"no {ref} in {layout}")


def set_manifest(layout, index, i, manifest):
    data = json.dumps(manifest).encode()
    index["manifests"][i]["digest"] = put_blob(layout, data)
    index["manifests"][i]["size"] = len(data)
    (Path(layout) / "index.json").write_text(json.dumps(index))


def tar_bytes(entries):
    """A layer tar from (name, kind, attrs) rows, in this order."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, kind, kw in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime = kw.get("mtime", MTIME)
            ti.uid, ti.gid = kw.get("uid", 0), kw.get("gid", 0)
            ti.mode = kw.get("mode", 0o755 if kind == "dir" else 0o644)
            data = kw.get("data", b"")
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "hard":
                ti.type = tarfile.LNKTYPE
                ti.linkname = data
                data = b""
            elif kind == "sym":
                ti.type = tarfile.SYMTYPE
                ti.linkname = data
                data = b""
            else:
                ti.size = len(data)
            if "xattrs" in kw:
                ti.pax_headers = {f"SCHILY.xattr.{k}": v
                                  for k, v in kw["xattrs"].items()}
            tf.addfile(ti, io.BytesIO(data) if data else None)
    return out.getvalue()


def fill_layer1(r):
    (r / "etc").mkdir()
    (r / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (r / "etc/shadow").write_text("root:*::0:::::\n")
    os.chown(r / "etc/shadow", 0, 42)
    os.chmod(r / "etc/shadow", 0o640)
    (r / "usr/bin").mkdir(parents=True)
    (r / "usr/bin/tool").write_bytes(os.urandom(20000) + b"tool" * 5000)
    os.chmod(r / "usr/bin/tool", 0o4755)
    os.link(r / "usr/bin/tool", r / "usr/bin/tool-alias")
    os.symlink("tool", r / "usr/bin/tool-link")
    (r / "usr/share/doc").mkdir(parents=True)
    for i in range(40):
        (r / f"usr/share/doc/f{i:02}.txt").write_text(f"doc {i}\n" * i)
    (r / "opq/sub").mkdir(parents=True)
    (r / "opq/old").write_text("old")
    (r / "opq/sub/deep").write_text("deep")
    (r / "gone").mkdir()
    (r / "gone/inside").write_text("x")
    (r / "home/user").mkdir(parents=True)
    os.chown(r / "home/user", 1000, 1000)
    (r / "home/user/.profile").write_text("PS1=$\n")
    os.chown(r / "home/user/.profile", 1000, 1000)
    os.setxattr(r / "home/user/.profile", "user.kind", b"profile")
    os.setxattr(r / "usr/bin", "user.dir", b"bin")
    (r / "dev").mkdir()
    os.mknod(r / "dev/null", 0o20666, os.makedev(1, 3))
    os.mknod(r / "dev/sda", 0o60660, os.makedev(8, 0))
    os.mkfifo(r / "dev/fifo")
    (r / "big.bin").write_bytes(os.urandom(3 << 20))


def fill_layer2(r):
    os.unlink(r / "etc/shadow")                    # a whiteout
    shutil.rmtree(r / "gone")                      # a directory's
    (r / "etc/passwd").write_text("root:x:0:0::/root:/bin/bash\n")
    os.chmod(r / "etc/passwd", 0o600)
    os.link(r / "usr/bin/tool", r / "usr/bin/tool-third")
    os.setxattr(r / "usr/share/doc/f01.txt", "user.note", b"changed")
    os.chown(r / "usr/share/doc/f02.txt", 7, 8)
    (r / "usr/share/doc/f03.txt").unlink()
    (r / "usr/share/doc/f03.txt").symlink_to("f04.txt")
    (r / "gone").write_text("now a file")          # replaces the dir


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """An umoci layout: two layers made by umoci repack, a third written
    here (an opaque directory, hardlinks to files of the layers below, a
    whiteout) and added with umoci raw add-layer; layer 2 recompressed
    with zstd, layer 3 stored as plain tar. Returns (layout, rootfs):
    the rootfs is umoci unpack's."""
    need_tools()
    d = tmp_path_factory.mktemp("oci")
    lay = d / "layout"
    run("umoci", "init", "--layout", lay)
    run("umoci", "new", "--image", f"{lay}:{REF}")
    bundle = d / "bundle"
    run("umoci", "unpack", "--image", f"{lay}:{REF}", bundle)
    r = bundle / "rootfs"
    fill_layer1(r)
    run("umoci", "repack", "--refresh-bundle", "--image", f"{lay}:{REF}",
        bundle)
    fill_layer2(r)
    run("umoci", "repack", "--refresh-bundle", "--image", f"{lay}:{REF}",
        bundle)
    layer3 = d / "layer3.tar"
    layer3.write_bytes(tar_bytes([
        # what this layer puts in the directory stays, before the marker
        # or after it: the marker hides the layers below only
        ("opq/early", "file", {"data": b"early"}),
        ("opq/.wh..wh..opq", "file", {}),
        ("opq/new", "file", {"data": b"new", "mode": 0o600}),
        ("opq/sub", "dir", {"mode": 0o700}),
        # hardlinks to files of the layers below
        ("usr/bin/tool-fourth", "hard", {"data": "usr/bin/tool"}),
        ("etc/passwd-link", "hard", {"data": "etc/passwd"}),
        ("usr/share/doc/.wh.f05.txt", "file", {}),
        ("usr/share/doc/f06.txt", "file", {"data": b"six",
                                           "xattrs": {"user.l3": "yes"}}),
        ("new/dir/file", "file", {"data": b"implicit parents"}),
        ("home/user/.wh..profile", "file", {}),
    ]))
    run("umoci", "raw", "add-layer", "--image", f"{lay}:{REF}", layer3)
    # umoci 0.4 unpacks gzip layers only: its rootfs first
    ref = d / "ref"
    run("umoci", "unpack", "--image", f"{lay}:{REF}", ref)
    # then layer 2 as zstd, layer 3 as plain tar: every media type kiln reads
    index, i, man = manifest_of(lay)
    assert len(man["layers"]) == 3, man
    l2, l3 = man["layers"][1], man["layers"][2]
    raw2 = gzip.decompress(blob_path(lay, l2["digest"]).read_bytes())
    z2 = subprocess.run(["zstd", "-q", "-c"], input=raw2,
                        capture_output=True, check=True).stdout
    l2.update(mediaType="application/vnd.oci.image.layer.v1.tar+zstd",
              digest=put_blob(lay, z2), size=len(z2))
    raw3 = gzip.decompress(blob_path(lay, l3["digest"]).read_bytes())
    l3.update(mediaType="application/vnd.oci.image.layer.v1.tar",
              digest=put_blob(lay, raw3), size=len(raw3))
    set_manifest(lay, index, i, man)
    rootfs = ref / "rootfs"
    # what the layers did, seen by umoci: the test is only as good as this
    assert not (rootfs / "etc/shadow").exists()
    assert (rootfs / "gone").is_file()
    assert sorted(os.listdir(rootfs / "opq")) == ["early", "new", "sub"]
    assert os.listdir(rootfs / "opq/sub") == []
    assert os.stat(rootfs / "usr/bin/tool").st_nlink == 4
    assert not (rootfs / "home/user/.profile").exists()
    return lay, rootfs


# Directories only implied by layer 3's member names: umoci makes them at
# unpack time, kiln at the build time (the newest mtime); both are root's
IMPLICIT = (b"new", b"new/dir")


def compare(expected_root, actual_root, what, fields=ALL_FIELDS):
    exp = snapshot(expected_root)
    act = snapshot(actual_root)
    for rel in IMPLICIT:
        if rel in exp and rel in act:
            exp[rel].mtime = act[rel].mtime
    # the root directory is umoci's own, not the image's
    assert_same(diff_snapshots(exp, act, fields, root_attrs=False), what)


def build(kiln, src, img, *opts):
    kiln.ok("build", "--verify", *opts, "--oci", src, img)
    kiln.ok("fsck", img)
    return img


def test_flattened_image_equals_umoci_unpack(kiln, layout, tmp_path):
    lay, rootfs = layout
    img = build(kiln, f"{lay}:{REF}", tmp_path / "flat.erofs")
    with kernel_mount(img) as m:
        compare(rootfs, m, "kiln --oci (kernel mount)")
        for dirpath, dirs, files in os.walk(m):
            for name in dirs + files:
                assert not name.startswith(".wh."), (dirpath, name)
                p = os.path.join(dirpath, name)
                assert not any(x.startswith("trusted.overlay.") for x in
                               os.listxattr(p, follow_symlinks=False)), p
        # hardlinks within and across layers are one inode
        ino = {os.stat(m / p).st_ino for p in (
            "usr/bin/tool", "usr/bin/tool-alias", "usr/bin/tool-third",
            "usr/bin/tool-fourth")}
        assert len(ino) == 1
        assert os.stat(m / "etc/passwd").st_ino == \
            os.stat(m / "etc/passwd-link").st_ino


def test_flattened_image_is_compressed_alike(kiln, layout, tmp_path):
    lay, rootfs = layout
    img = build(kiln, str(lay) + ":" + REF, tmp_path / "z.erofs",
                "-z", "lz4hc")
    with kernel_mount(img) as m:
        compare(rootfs, m, "kiln --oci -z lz4hc (kernel mount)")


def test_excluded_paths_are_left_out(kiln, layout, tmp_path):
    lay, rootfs = layout
    img = tmp_path / "x.erofs"
    kiln.ok("build", "-x", "usr/share/doc", "-x", "*.profile", "--oci",
            f"{lay}:{REF}", img)
    with kernel_mount(img) as m:
        assert not (m / "usr/share/doc").exists()
        assert sorted(os.listdir(m / "usr/share")) == []
        assert (m / "usr/bin/tool").is_file()
        assert (m / "etc/passwd").read_text() == \
            (rootfs / "etc/passwd").read_text()


def test_same_bytes_at_any_thread_count(kiln, layout, tmp_path):
    lay, _ = layout
    a = tmp_path / "j1.erofs"
    b = tmp_path / "j4.erofs"
    kiln.ok("build", "-j1", "-z", "zstd", "--memory-limit", "1M", "--oci",
            f"{lay}:{REF}", a)
    kiln.ok("build", "-j4", "-z", "zstd", "--oci", f"{lay}:{REF}", b)
    assert a.read_bytes() == b.read_bytes()


@contextlib.contextmanager
def overlay(lowers):
    """lowerdir=top:...:bottom of mounted layers, read-only."""
    mnt = tempfile.mkdtemp(prefix="kiln-ovl-")
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        "lowerdir=" + ":".join(str(x) for x in lowers), mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(mnt)
        if "unknown filesystem type" in r.stderr:
            pytest.skip("needs overlayfs in the kernel")
        pytest.fail(f"overlayfs refused the layers: {r.stderr.strip()}")
    try:
        yield Path(mnt)
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        os.rmdir(mnt)


def test_layers_stacked_with_overlayfs_equal_umoci_unpack(kiln, layout,
                                                          tmp_path):
    lay, rootfs = layout
    imgs = [build(kiln, f"{lay}:{REF}", tmp_path / f"l{n}.erofs",
                  "--oci-layer", str(n)) for n in (1, 2, 3)]
    with contextlib.ExitStack() as st:
        mnts = [st.enter_context(kernel_mount(i)) for i in imgs]
        with kernel_mount(imgs[2]) as top:
            assert os.getxattr(top / "opq", "trusted.overlay.opaque") == b"y"
        with overlay(reversed(mnts)) as merged:
            # overlayfs counts a file's links in its own layer: hardlink
            # identity is the flattened image's test, the rest is here
            compare(rootfs, merged, "kiln --oci-layer 1..3 under overlayfs",
                    [f for f in ALL_FIELDS if f not in ("nlink", "links")])


def test_skopeo_copy_with_zstd_layers(kiln, layout, tmp_path):
    """skopeo copies the layout through a dir: image into a new layout
    with every layer recompressed as zstd; kiln reads that one alike."""
    lay, rootfs = layout
    run("skopeo", "copy", f"oci:{lay}:{REF}", f"dir:{tmp_path / 'dirimg'}")
    out = tmp_path / "sk"
    run("skopeo", "copy", "--dest-compress-format", "zstd",
        f"dir:{tmp_path / 'dirimg'}", f"oci:{out}:copy")
    _, _, man = manifest_of(out, "copy")
    assert {x["mediaType"] for x in man["layers"]} == \
        {"application/vnd.oci.image.layer.v1.tar+zstd"}
    img = build(kiln, str(out), tmp_path / "sk.erofs")   # its only image
    with kernel_mount(img) as m:
        compare(rootfs, m, "kiln --oci of skopeo's copy")


# -- refusals ------------------------------------------------------------------

@pytest.fixture
def broken(layout, tmp_path):
    """A copy of the layout to break."""
    lay, _ = layout
    dst = tmp_path / "broken"
    shutil.copytree(lay, dst)
    return dst


def refused(kiln, src, tmp_path, *opts, rc=1):
    img = tmp_path / "out" / "img.erofs"
    img.parent.mkdir(exist_ok=True)
    r = kiln.fails("build", *opts, "--oci", src, img)
    assert r.rc == rc, r.describe()
    assert not img.exists()
    assert stray_files(img.parent) == []
    assert "kiln: " in r.err
    return r.err


def test_tampered_layer_blob_is_refused(kiln, broken, tmp_path):
    _, _, man = manifest_of(broken)
    for layer in (1, 3):
        dst = tmp_path / f"t{layer}"
        shutil.copytree(broken, dst)
        d = man["layers"][layer - 1]["digest"]
        p = blob_path(dst, d)
        data = bytearray(p.read_bytes())
        data[len(data) // 2] ^= 0x40
        p.write_bytes(bytes(data))
        for opts in ((), ("--oci-layer", str(layer))):
            err = refused(kiln, f"{dst}:{REF}", tmp_path, *opts)
            assert d.split(":")[1] in err and "digest mismatch" in err, err


def test_blob_of_wrong_size_is_refused(kiln, broken, tmp_path):
    _, _, man = manifest_of(broken)
    d = man["layers"][1]["digest"]
    with open(blob_path(broken, d), "ab") as f:
        f.write(b"\0")
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert d.split(":")[1] in err and "descriptor says" in err, err


def test_missing_blob_is_refused(kiln, broken, tmp_path):
    _, _, man = manifest_of(broken)
    d = man["layers"][2]["digest"]
    blob_path(broken, d).unlink()
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert d in err and "No such file" in err, err
    blob_path(broken, man["config"]["digest"]).unlink()
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert man["config"]["digest"] in err, err


def test_truncated_index_is_refused(kiln, broken, tmp_path):
    p = broken / "index.json"
    p.write_bytes(p.read_bytes()[:40])
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert "index.json: not JSON" in err, err


def test_truncated_manifest_is_refused(kiln, broken, tmp_path):
    index, i, man = manifest_of(broken)
    d = index["manifests"][i]["digest"]
    p = blob_path(broken, d)
    p.write_bytes(p.read_bytes()[:50])
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert d.split(":")[1] in err and "descriptor says" in err, err
    # cut short and named by its new digest: the JSON itself is refused
    data = p.read_bytes()
    index["manifests"][i]["digest"] = put_blob(broken, data)
    index["manifests"][i]["size"] = len(data)
    (broken / "index.json").write_text(json.dumps(index))
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert "manifest sha256:" in err and "not JSON" in err, err


def test_unknown_layer_media_type_is_refused(kiln, broken, tmp_path):
    index, i, man = manifest_of(broken)
    man["layers"][1]["mediaType"] = \
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
    set_manifest(broken, index, i, man)
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert "layer 2" in err and "nondistributable" in err and \
        "not supported" in err, err


def test_layer_not_compressed_as_its_media_type_says(kiln, broken,
                                                     tmp_path):
    index, i, man = manifest_of(broken)
    man["layers"][2]["mediaType"] = \
        "application/vnd.oci.image.layer.v1.tar+gzip"   # it is plain tar
    set_manifest(broken, index, i, man)
    err = refused(kiln, f"{broken}:{REF}", tmp_path)
    assert "layer 3" in err and "is not gzip" in err, err


def test_bad_ref_and_bad_layer_number(kiln, layout, tmp_path):
    lay, _ = layout
    err = refused(kiln, f"{lay}:nope", tmp_path)
    assert "no image named 'nope'" in err and f"'{REF}'" in err, err
    err = refused(kiln, f"{lay}:{REF}", tmp_path, "--oci-layer", "4",
                  rc=2)
    assert "the image has 3 layers" in err, err
    err = refused(kiln, tmp_path / "nothing", tmp_path)
    assert "not an OCI image layout" in err, err
    err = refused(kiln, f"{lay}:{REF}", tmp_path, "--whiteouts=keep", rc=2)
    assert "--oci-layer" in err, err
    img = tmp_path / "x.erofs"
    r = kiln.fails("build", "--oci-layer", "1", "--tar", tmp_path / "x.tar",
                   img)
    assert r.rc == 2 and "needs an OCI image source" in r.err, r.describe()
    assert not img.exists()


def test_two_images_need_a_ref(kiln, broken, tmp_path):
    index, i, _ = manifest_of(broken)
    second = dict(index["manifests"][i])
    second["annotations"] = {"org.opencontainers.image.ref.name": "other"}
    index["manifests"].append(second)
    (broken / "index.json").write_text(json.dumps(index))
    err = refused(kiln, str(broken), tmp_path)
    assert "2 images" in err and "'other'" in err, err
    img = tmp_path / "other.erofs"
    kiln.ok("build", "--oci", f"{broken}:other", img)


def test_nested_index_resolves_to_linux_amd64(kiln, layout, broken,
                                              tmp_path):
    lay, rootfs = layout
    index, i, _ = manifest_of(broken)
    desc = dict(index["manifests"][i])
    desc.pop("annotations", None)
    # arm64's manifest is not in the layout: picking it would fail
    other = dict(desc, digest="sha256:" + "0" * 64,
                 platform={"os": "linux", "architecture": "arm64"})
    amd = dict(desc, platform={"os": "linux", "architecture": "amd64"})
    nested = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [other, amd]}).encode()
    index["manifests"] = [{
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "digest": put_blob(broken, nested), "size": len(nested),
        "annotations": {"org.opencontainers.image.ref.name": "multi"}}]
    (broken / "index.json").write_text(json.dumps(index))
    img = build(kiln, f"{broken}:multi", tmp_path / "multi.erofs")
    with kernel_mount(img) as m:
        compare(rootfs, m, "kiln --oci through an image index")
