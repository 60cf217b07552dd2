# SPDX-License-Identifier: MIT
"""bench/report.sh turns the benchmark scripts' TSV results into one HTML
page with an SVG plot (gnuplot) per table. Run on the fixture results in
bench/testdata: build times and sizes, compressed sizes per setting, and
read throughput and IOPS per workload and system."""

import os
import re
import shutil
import subprocess

import pytest

from helpers import REPO, have

TESTDATA = REPO / "bench" / "testdata"
REPORT = REPO / "bench" / "report.sh"


@pytest.fixture
def results(tmp_path):
    if not have("gnuplot"):
        pytest.skip("needs gnuplot (gnuplot-nox)")
    for f in TESTDATA.glob("*.tsv"):
        shutil.copy(f, tmp_path)
    return tmp_path


def report(out, *args):
    r = subprocess.run(["bash", REPORT, *args], capture_output=True,
                       text=True, env=dict(os.environ, OUT=str(out)),
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr, r.stderr
    return (out / "report.html").read_text()


def tables_of(tsv):
    lines = [line.split("\t") for line in tsv.read_text().splitlines()
             if line and not line.startswith("#")]
    col = lines[0].index("table")
    seen = []
    for row in lines[1:]:
        if row[col] not in seen:
            seen.append(row[col])
    return seen


def svgs(html):
    return re.findall(r"<svg\b.*?</svg>", html, re.S)


def test_report_has_one_svg_per_table_of_every_result_file(results):
    html = report(results)
    want = sum(len(tables_of(f)) for f in TESTDATA.glob("*.tsv"))
    assert want == 6
    assert len(svgs(html)) == want
    for f in TESTDATA.glob("*.tsv"):
        for t in tables_of(f):
            assert f"<h3>{t}</h3>" in html
    assert "<?xml" not in html and html.rstrip().endswith("</html>")


def test_each_plot_names_its_series_and_states_the_threads(results):
    html = report(results)
    plots = svgs(html)
    # build: one bar per tool; compress: a bar per tool in each setting
    for name in ("kiln", "mkfs.erofs", "mksquashfs"):
        assert name in plots[0]
    assert "kiln-best" in plots[2] and "lzma6" in plots[2]
    # a tool whose only run failed gets no bar and no key entry
    assert "mkfs.erofs-mbx" not in "".join(plots)
    # reads: a panel per workload (throughput, IOPS), a bar per system
    read = plots[4]
    for word in ("sequential 128K reads", "MiB/s", "IOPS", "4 jobs",
                 "kernel", "squashfuse_ll", "kiln-own"):
        assert word in read, word
    for line in ("kiln -j 2, mkfs.erofs 2, mksquashfs -processors 2",
                 "kiln mount threads=10"):
        assert line in html


def test_without_arguments_the_newest_results_of_each_script_count(results):
    old = results / "build-20250101T000000Z.tsv"
    text = (results / "build-20260101T000000Z.tsv").read_text()
    old.write_text(text.replace("/usr/share/doc", "/old/corpus"))
    html = report(results)
    assert "/old/corpus" not in html
    assert len(svgs(html)) == 6
    html = report(results, str(old))
    assert "/old/corpus" in html and len(svgs(html)) == 2


def test_a_run_of_compress_sh_is_plotted(results, kiln, tmp_path):
    """compress.sh on a tiny corpus, one run: its TSV gives one plot."""
    src = tmp_path / "corpus"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(b"kiln bench %d\n" % i * 2000)
    out = tmp_path / "out"
    out.mkdir()
    env = dict(os.environ, OUT=str(out), KILN=str(kiln.path),
               SETTINGS="lz4hc", PATH="/usr/bin:/bin")
    r = subprocess.run(["bash", REPO / "bench" / "compress.sh", "--runs",
                        "1", "--corpus", src], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    tsv = list(out.glob("compress-*.tsv"))
    assert len(tsv) == 1
    rows = [line for line in tsv[0].read_text().splitlines()
            if line and not line.startswith("#")]
    assert rows[0].split("\t")[:3] == ["table", "setting", "tool"]
    assert any("\tkiln\t2\t" in row for row in rows[1:])
    html = report(out)
    assert len(svgs(html)) == 1 and str(src) in html
