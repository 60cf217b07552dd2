# SPDX-License-Identifier: MIT
"""The man pages and shell completions that meson writes from kiln's
--help text: one page per command, saying what --help says, rendered by
man; completions that load and complete commands and options; all of
them installed where man, bash and zsh look."""

import json
import os
import re
import subprocess

import pytest

from helpers import have, kiln_path


@pytest.fixture(scope="module")
def docs():
    d = kiln_path().parent / "docs"
    if not (d / "kiln.1").exists():
        pytest.fail(f"no generated man pages in {d}: build with ninja first")
    return d


def commands(kiln):
    text = kiln.ok("--help").text
    block = text.split("\ncommands:\n")[1].split("\n\n")[0]
    return [line.split()[0] for line in block.splitlines()]


def help_entries(text):
    """(left, help) of every option line of a --help text, continuation
    lines joined."""
    out, last = [], None
    for line in text.splitlines():
        if line.startswith(" " * 29) and last:
            last[1] += " " + line.strip()
            continue
        m = re.match(r"^  ( {4}--\S+|-\S(?:, --\S+)?|--\S+) +(\S.*)$", line)
        last = [m.group(1).strip(), m.group(2)] if m else None
        if last:
            out.append(last)
    return out


def roff_text(page):
    """The words of a roff page, escapes undone, whitespace squeezed."""
    t = page.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
    t = re.sub(r"\\f[BRI]", "", t)
    t = "\n".join(line for line in t.splitlines()
                  if not line.startswith(".") or line.startswith(".B "))
    t = t.replace(".B ", "")
    return " ".join(t.split())


def test_every_command_has_a_page_that_says_what_help_says(kiln, docs):
    cmds = commands(kiln)
    assert "build" in cmds and "fsck" in cmds and "mount" in cmds
    for cmd in [None] + cmds:
        page = docs / (f"kiln-{cmd}.1" if cmd else "kiln.1")
        assert page.exists(), f"no man page {page}"
        words = roff_text(page.read_text())
        help_text = kiln.ok(*([cmd] if cmd else []), "--help").text
        entries = help_entries(help_text)
        assert any(e[0] == "-V, --version" for e in entries), help_text
        for left, text in entries:
            assert left in words, f"{page.name}: {left} missing"
            assert " ".join(text.split()) in words, \
                f"{page.name}: help of {left} differs:\n{text}"
        # the description too, word for word
        desc = help_text.split("\n\n")[0].split("\n")
        body = " ".join(line for line in desc
                        if not line.startswith(("usage:", "       kiln")))
        assert " ".join(body.split()) in words, page.name


def test_man_renders_every_page_without_warnings(kiln, docs):
    if not have("man") or not have("groff"):
        pytest.skip("needs man and groff (man-db)")
    for page in sorted(docs.glob("*.1")):
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page],
                           capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr, (page, r.stderr)
        r = subprocess.run(["man", "-l", page], capture_output=True,
                           text=True, env=dict(os.environ, MANPAGER="cat",
                                               MANWIDTH="100"))
        assert r.returncode == 0, (page, r.stderr)
        name = page.stem
        assert "NAME" in r.stdout and name in r.stdout and \
            "SYNOPSIS" in r.stdout and "OPTIONS" in r.stdout, r.stdout[:500]
    r = subprocess.run(["man", "-l", docs / "kiln-fsck.1"],
                       capture_output=True, text=True,
                       env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"))
    assert "no EROFS image" in " ".join(r.stdout.split())


def bash_complete(docs, *words):
    """COMPREPLY for the words typed so far (the last one being
    completed), from the generated bash completion."""
    script = (f'set -e; source "{docs / "kiln"}"; complete -p kiln; '
              f'COMP_WORDS=({" ".join(repr(w) for w in words)}); '
              f'COMP_CWORD={len(words) - 1}; _kiln; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["bash", "--norc", "-c", script], capture_output=True,
                       text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("complete ") and "-F _kiln kiln" in lines[0]
    return lines[1:]


def test_bash_completion_completes_commands_and_options(kiln, docs, tmp_path):
    assert bash_complete(docs, "kiln", "bu") == ["build"]
    assert sorted(bash_complete(docs, "kiln", "")) == sorted(
        commands(kiln) + ["-h", "--help", "-V", "--version"])
    assert bash_complete(docs, "kiln", "build", "--ker") == ["--kernel="]
    assert bash_complete(docs, "kiln", "fsck", "--no-d") == ["--no-data"]
    assert "--long" in bash_complete(docs, "kiln", "ls", "--")
    assert bash_complete(docs, "kiln", "mount", "-V") == ["-V"]
    # every option of every command's --help, nothing else
    for cmd in commands(kiln):
        want = set()
        for left, _ in help_entries(kiln.ok(cmd, "--help").text):
            m = re.fullmatch(r"(?:(-[^-\s])(?:, )?)?(?:(--[^=\s]+)(=\S+)?)?",
                             left)
            assert m, left
            if m.group(1):
                want.add(m.group(1))
            if m.group(2):
                want.add(m.group(2) + ("=" if m.group(3) else ""))
        got = set(bash_complete(docs, "kiln", cmd, "-"))
        assert got == want, (cmd, got ^ want)
    # file names otherwise
    (tmp_path / "image.erofs").write_bytes(b"")
    assert bash_complete(docs, "kiln", "fsck", str(tmp_path / "ima")) == \
        [str(tmp_path / "image.erofs")]


def test_zsh_completion_parses_and_describes_every_option(kiln, docs):
    if not have("zsh"):
        pytest.skip("needs zsh")
    # stand-ins for zsh's completion helpers print what they are given
    script = ('_describe() { print -rl -- "${(@P)4}" }; '
              '_arguments() { print -rl -- "$@" }; _files() { print FILES }; '
              f'source "{docs / "_kiln"}"; '
              'words=(kiln bu); CURRENT=2; _kiln; print SPLIT; '
              'words=(kiln build --ker); CURRENT=3; _kiln; print SPLIT; '
              'words=(kiln fsck x); CURRENT=3; _kiln')
    r = subprocess.run(["zsh", "-f", "-c", script], capture_output=True,
                       text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
    parts = r.stdout.split("\nSPLIT\n")
    top, build, fsck = parts[-3], parts[-2], parts[-1]
    assert "build:build an image from a directory or tar stream" in top
    assert len(top.splitlines()) >= len(commands(kiln))
    assert any(s.startswith("--kernel=[") for s in build.splitlines())
    assert any(s.startswith("(-z --compress)-z+[") for s in
               build.splitlines())
    assert "--no-data[check metadata only, do not read file data]" in fsck
    assert "*:file:_files" in fsck


def test_meson_installs_pages_and_completions_where_tools_look(docs):
    build_dir = docs.parents[2]
    r = subprocess.run(["meson", "introspect", "--installed", build_dir],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    installed = {os.path.relpath(k, build_dir): v
                 for k, v in json.loads(r.stdout).items()}
    d = "tools/kiln/docs"
    assert installed[f"{d}/kiln.1"].endswith("/man/man1/kiln.1")
    assert installed[f"{d}/kiln-build.1"].endswith("/man/man1/kiln-build.1")
    assert installed[f"{d}/kiln"].endswith(
        "/share/bash-completion/completions/kiln")
    assert installed[f"{d}/_kiln"].endswith(
        "/share/zsh/site-functions/_kiln")
