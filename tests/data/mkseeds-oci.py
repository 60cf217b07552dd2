#!/usr/bin/python3
"""Seeds for fuzz/fuzz-oci.c whose JSON is fuzzed too (flag bit 4).

Each seed holds five templates (index.json, a nested index, the manifest,
the config, oci-layout; empty: the harness's usual document) with the
harness's placeholders for digests and sizes, then the layers. They cover
nested indexes, platforms, ref annotations, Docker media types, wrong
types, huge and negative numbers, duplicate keys and deep nesting.
Usage: mkseeds-oci.py [fuzz/corpus/oci]
"""
import io
import json
import os
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    HERE, '..', '..', 'fuzz', 'corpus', 'oci')

MT_INDEX = 'application/vnd.oci.image.index.v1+json'
MT_MAN = 'application/vnd.oci.image.manifest.v1+json'
MT_TAR = 'application/vnd.oci.image.layer.v1.tar'
MT_CFG = 'application/vnd.oci.image.config.v1+json'


def layer(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.USTAR_FORMAT) as t:
        for name, data in files:
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 1767225600
            ti.mode = 0o644
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


LAYERS = [layer([('etc/hostname', b'kiln\n'), ('bin/sh', b'#!\n')]),
          layer([('etc/.wh.hostname', b''), ('usr/lib/x', b'x' * 100)])]


def seed(flags, docs, layers=LAYERS):
    """@docs: dict of 'index', 'nested', 'manifest', 'config', 'layout'."""
    out = bytes([flags | 16, len(layers) - 1])
    for k in ('index', 'nested', 'manifest', 'config', 'layout'):
        d = docs.get(k, '')
        if not isinstance(d, (str, bytes)):
            d = json.dumps(d, separators=(',', ':'))
        d = d.encode() if isinstance(d, str) else d
        assert len(d) < 65536
        out += len(d).to_bytes(2, 'little') + d
    for k, data in enumerate(layers):
        if k + 1 < len(layers):
            out += len(data).to_bytes(2, 'little')
        out += data
    return out


def desc(mt, d, s, **kw):
    return dict(mediaType=mt, digest=d, size=s, **kw)


# placeholders are strings in templates: sizes go in unquoted, by hand
def unq(doc):
    return json.dumps(doc, separators=(',', ':')).replace(
        '"@m"', '$m').replace('"@c"', '$c').replace('"@i"', '$i').replace(
        '"@0"', '#0').replace('"@1"', '#1')


MAN = {'schemaVersion': 2, 'mediaType': MT_MAN,
       'config': desc(MT_CFG, '$C', '@c'),
       'layers': [desc(MT_TAR, '$0', '@0'), desc(MT_TAR, '$1', '@1')],
       'annotations': {'org.opencontainers.image.created':
                       '2026-01-01T00:00:00Z'}}
INDEX = {'schemaVersion': 2,
         'manifests': [desc(MT_MAN, '$M', '@m', annotations={
             'org.opencontainers.image.ref.name': 'latest'})]}


def plat(arch, os_='linux', **kw):
    return dict(architecture=arch, os=os_, **kw)


SEEDS = {
    'json-usual': seed(0, {}),
    'json-annotated': seed(0, {'index': unq(INDEX), 'manifest': unq(MAN)}),
    'json-nested-index': seed(0, {
        'index': unq({'schemaVersion': 2, 'manifests': [
            desc(MT_INDEX, '$I', '@i')]}),
        'nested': unq({'schemaVersion': 2, 'mediaType': MT_INDEX,
                       'manifests': [
                           desc(MT_MAN, '$M', '@m', platform=plat('arm64')),
                           desc(MT_MAN, '$M', '@m', platform=plat(
                               'amd64', variant='v2')),
                           desc(MT_MAN, '$M', '@m', platform=plat(
                               'amd64', 'windows'))]}),
        'manifest': unq(MAN)}),
    'json-nested-no-amd64': seed(0, {
        'index': unq({'schemaVersion': 2, 'manifests': [
            desc(MT_INDEX, '$I', '@i')]}),
        'nested': unq({'schemaVersion': 2, 'manifests': [
            desc(MT_MAN, '$M', '@m', platform=plat('arm64')),
            desc(MT_MAN, '$M', '@m', platform={'os': 7,
                                                'architecture': None})]})}),
    'json-nested-empty': seed(0, {
        'index': unq({'manifests': [desc(MT_INDEX, '$I', '@i')]}),
        'nested': '{"manifests":[]}'}),
    'json-nested-no-digest': seed(0, {
        'index': unq({'manifests': [desc(MT_INDEX, '$I', '@i')]}),
        'nested': unq({'manifests': [desc(MT_INDEX, '$I', '@i')]})}),
    'json-refs-ambiguous': seed(0, {'index': unq({'manifests': [
        desc(MT_MAN, '$M', '@m', annotations={
            'org.opencontainers.image.ref.name': 'v%d' % k})
        for k in range(40)]})}),
    'json-docker': seed(0, {
        'index': unq({'manifests': [desc(
            'application/vnd.docker.distribution.manifest.v2+json', '$M',
            '@m')]}),
        'manifest': unq({'schemaVersion': 2, 'config': desc(
            'application/vnd.docker.container.image.v1+json', '$C', '@c'),
            'layers': [desc('application/vnd.docker.image.rootfs.diff.tar.'
                            'gzip', '$0', '@0'), desc(MT_TAR, '$1', '@1')]})}),
    'json-foreign-layer': seed(0, {'manifest': unq(dict(MAN, layers=[desc(
        'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip', '$0',
        '@0', urls=['http://example.invalid/l'])]))}),
    'json-wrong-types': seed(0, {
        'index': '{"schemaVersion":"2","manifests":[{"mediaType":1,'
                 '"digest":"$M","size":$m}]}'}),
    'json-manifests-object': seed(0, {
        'index': '{"manifests":{"0":{"digest":"$M","size":$m}}}'}),
    'json-layers-object': seed(0, {
        'manifest': '{"config":{"digest":"$C","size":$c},"layers":'
                    '{"mediaType":"' + MT_TAR + '","digest":"$0","size":#0}}'}),
    'json-digest-number': seed(0, {
        'manifest': '{"config":{"digest":12345,"size":$c},"layers":[]}'}),
    'json-size-string': seed(0, {
        'index': '{"manifests":[{"mediaType":"' + MT_MAN + '","digest":'
                 '"$M","size":"$m"}]}'}),
    'json-size-huge': seed(0, {'manifest': unq(dict(MAN, layers=[
        desc(MT_TAR, '$0', 9223372036854775807)]))}),
    'json-size-overflow': seed(0, {
        'index': '{"manifests":[{"mediaType":"' + MT_MAN + '","digest":'
                 '"$M","size":18446744073709551616}]}'}),
    'json-size-negative': seed(0, {'manifest': unq(dict(MAN, layers=[
        desc(MT_TAR, '$0', -1)]))}),
    'json-size-float': seed(0, {
        'index': '{"manifests":[{"mediaType":"' + MT_MAN + '","digest":'
                 '"$M","size":1e400}]}'}),
    'json-size-short': seed(0, {'manifest': unq(dict(MAN, layers=[
        desc(MT_TAR, '$0', 10), desc(MT_TAR, '$1', '@1')]))}),
    'json-size-zero-config': seed(0, {'manifest': unq(dict(
        MAN, config=desc(MT_CFG, '$C', 0)))}),
    'json-digest-sha512': seed(0, {'manifest': unq(dict(MAN, layers=[
        desc(MT_TAR, 'sha512:' + 'ab' * 64, '@0')]))}),
    'json-digest-bad': seed(0, {'manifest': unq(dict(MAN, layers=[
        desc(MT_TAR, 'sha256:../../../../etc/passwd', '@0'),
        desc(MT_TAR, 'md5:00', '@1')]))}),
    'json-duplicate-keys': seed(0, {
        'index': '{"manifests":[],"manifests":[{"digest":"$M","size":$m}]}'}),
    'json-deep': seed(0, {'config': '{"a":' + '[' * 3000 + ']' * 3000 + '}'}),
    'json-not-object': seed(0, {'index': '[]', 'config': '"x"'}),
    'json-nul': seed(0, {'manifest': '{"config":{"digest":"$C\\u0000",'
                         '"size":$c},"layers":[]}'}),
    'json-truncated': seed(0, {'manifest': unq(MAN)[:100]}),
    'json-layout-version': seed(0, {'layout': '{"imageLayoutVersion":"2.0"}'}),
    'json-layout-missing': seed(0, {'layout': '{}'}),
    'json-layers-many': seed(0, {'manifest': '{"config":{"digest":"$C",'
                                 '"size":$c},"layers":[' +
                                 ','.join(['{}'] * 4097) + ']}'}),
    'json-layers-none': seed(0, {'manifest': unq(dict(MAN, layers=[]))}),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, name), 'wb') as f:
        f.write(data)
