#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write kiln's man pages and shell completions from its --help text.

The --help text of `kiln` and of each command is the one source: this
script runs the built binary, parses what it prints, and writes roff
(kiln.1, kiln-COMMAND.1), a bash completion (kiln) and a zsh one (_kiln).
Meson runs it at build time, so the pages cannot drift from the help.

    kiln-docs.py man KILN OUTDIR
    kiln-docs.py bash KILN OUTFILE
    kiln-docs.py zsh KILN OUTFILE
    kiln-docs.py parse KILN [COMMAND]    (the parsed help, as JSON)
"""

import json
import re
import subprocess
import sys
from dataclasses import asdict, dataclass, field

HELP_COLUMN = 29	# where cli_usage() starts an option's help text


@dataclass
class Entry:
    left: str		# "-x, --exclude=PATTERN", "ro", "KILN_DEBUG=1"
    help: str
    short: str = ""	# "-x"
    long: str = ""	# "--exclude"
    arg: str = ""	# "PATTERN"


@dataclass
class Section:
    title: str		# "options", "mount options (-o)"
    entries: list = field(default_factory=list)
    text: list = field(default_factory=list)	# paragraphs after them


@dataclass
class Help:
    command: str	# "" for kiln itself
    synopsis: list
    description: list	# paragraphs
    sections: list


def run_help(kiln, command):
    argv = [kiln] + ([command] if command else []) + ["--help"]
    return subprocess.run(argv, check=True, capture_output=True,
                          text=True).stdout


ENTRY = re.compile(r"^  (?P<left>\S(?:.*?\S)?) {2,}(?P<help>\S.*)$")
DASH_ENTRY = re.compile(r"^  (?P<left> {4}--\S+|-\S(?:, --\S+)?|--\S+)"
                        r"(?: +(?P<help>\S.*))?$")


def split_option(e):
    m = re.fullmatch(r"(?:(-[^-\s])(?:, )?)?(?:(--[^=\s]+)(?:=(\S+))?)?",
                     e.left.strip())
    if m:
        e.short, e.long, e.arg = m.group(1) or "", m.group(2) or "", \
            m.group(3) or ""
    return e


def parse(text, command):
    lines = text.rstrip("\n").split("\n")
    if not lines[0].startswith("usage: "):
        raise SystemExit(f"kiln {command} --help: no usage line")
    synopsis = [lines[0][len("usage: "):]]
    i = 1
    while i < len(lines) and lines[i].startswith("       kiln"):
        synopsis.append(lines[i].strip())
        i += 1
    blocks, cur = [], []
    for line in lines[i:]:
        if line.strip():
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    description, sections = [], []
    for block in blocks:
        head = block[0]
        if not (head.endswith(":") and not head.startswith(" ")):
            description.append(" ".join(s.strip() for s in block))
            continue
        sec = Section(head[:-1])
        sections.append(sec)
        for line in block[1:]:
            dm = DASH_ENTRY.match(line)
            m = dm or ENTRY.match(line)
            if line.startswith(" " * HELP_COLUMN) and sec.entries and \
                    not sec.text:
                sec.entries[-1].help += " " + line.strip()
            elif m:
                sec.entries.append(split_option(
                    Entry(m.group("left").strip(), m.group("help") or "")))
            elif sec.text and line.startswith("  "):
                sec.text[-1] += " " + line.strip()
            else:
                sec.text.append(line.strip())
    return Help(command, synopsis, description, sections)


def parse_all(kiln):
    top = parse(run_help(kiln, ""), "")
    cmds = next(s for s in top.sections if s.title == "commands")
    return top, {e.left: parse(run_help(kiln, e.left), e.left)
                 for e in cmds.entries}, {e.left: e.help
                                          for e in cmds.entries}


# -- roff ---------------------------------------------------------------------

def roff(s):
    s = s.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", s)


def man_page(h, summary, version, commands):
    name = f"kiln-{h.command}" if h.command else "kiln"
    out = [f'.TH {name.upper()} 1 "" "kiln {version}" "kiln manual"',
           ".SH NAME", f"{roff(name)} \\- {roff(summary)}", ".SH SYNOPSIS"]
    for i, syn in enumerate(h.synopsis):
        if i:
            out.append(".br")
        words = syn.split(" ")
        lead = 2 if h.command and len(words) > 1 else 1
        out.append(f'.B {roff(" ".join(words[:lead]))}')
        if words[lead:]:
            out.append(roff(" ".join(words[lead:])))
    out.append(".SH DESCRIPTION")
    for i, para in enumerate(h.description):
        if i:
            out.append(".PP")
        out.append(roff(para))
    for sec in h.sections:
        title = re.sub(r"^[^(]*", lambda m: m.group(0).upper(), sec.title)
        out.append(f'.SH "{roff(title)}"')
        for e in sec.entries:
            out += [".TP", f".B {roff(e.left)}" if e.left.startswith("-")
                    or sec.title == "commands" else roff(e.left),
                    roff(e.help)]
        for para in sec.text:
            out += [".PP", roff(para)]
    out.append(".SH SEE ALSO")
    if h.command:
        out.append("\\fBkiln\\fR(1)")
    else:
        out.append(",\n".join(f"\\fBkiln\\-{roff(c)}\\fR(1)"
                              for c in commands))
    return "\n".join(out) + "\n"


def write_man(kiln, outdir):
    top, cmds, summaries = parse_all(kiln)
    version = subprocess.run([kiln, "--version"], check=True,
                             capture_output=True, text=True).stdout.split()[-1]
    with open(f"{outdir}/kiln.1", "w") as f:
        f.write(man_page(top, "build and read EROFS images", version,
                         list(cmds)))
    for c, h in cmds.items():
        with open(f"{outdir}/kiln-{c}.1", "w") as f:
            f.write(man_page(h, summaries[c], version, []))


# -- completions ----------------------------------------------------------------

def option_words(h):
    words = []
    for sec in h.sections:
        for e in sec.entries:
            if e.short:
                words.append(e.short)
            if e.long:
                words.append(e.long + ("=" if e.arg else ""))
    return words


BASH = """\
# bash completion for kiln: commands and each command's options
# (generated from kiln's --help by scripts/kiln-docs.py)

_kiln()
{{
	local cur=${{COMP_WORDS[COMP_CWORD]}} opts
	if [[ $COMP_CWORD -eq 1 ]]; then
		mapfile -t COMPREPLY < <(compgen -W "{commands} {top}" -- "$cur")
		return
	fi
	case ${{COMP_WORDS[1]}} in
{cases}
	*) opts="" ;;
	esac
	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
		if [[ ${{#COMPREPLY[@]}} -eq 1 && ${{COMPREPLY[0]}} == *= ]]; then
			compopt -o nospace 2>/dev/null || :
		fi
		return
	fi
	mapfile -t COMPREPLY < <(compgen -f -- "$cur")
}}
complete -o filenames -o bashdefault -F _kiln kiln
"""


def write_bash(kiln, path):
    top, cmds, _ = parse_all(kiln)
    cases = "\n".join(f'\t{c}) opts="{" ".join(option_words(h))}" ;;'
                      for c, h in cmds.items())
    with open(path, "w") as f:
        f.write(BASH.format(commands=" ".join(cmds),
                            top=" ".join(option_words(top)), cases=cases))


def zsh_text(s, special="[]"):
    """@s inside a single-quoted zsh word, @special escaped."""
    s = s.replace("'", "'\\''")
    for ch in special:
        s = s.replace(ch, "\\" + ch)
    return s


def zsh_specs(h):
    specs = []
    for sec in h.sections:
        if sec.title != "options":
            continue
        for e in sec.entries:
            text = zsh_text(e.help)
            action = "_files" if e.arg in ("FILE", "PATH", "DIR") else " "
            argspec = f":{zsh_text(e.arg.lower(), '[]:')}:{action}" if e.arg else ""
            if e.short and e.long:
                s, lo = (e.short + "+", e.long + "=") if e.arg else \
                    (e.short, e.long)
                specs.append(f"'({e.short} {e.long})'{{{s},{lo}}}"
                             f"'[{text}]{argspec}'")
            elif e.long:
                lo = e.long + ("=" if e.arg else "")
                specs.append(f"'{lo}[{text}]{argspec}'")
            elif e.short:
                s = e.short + ("+" if e.arg else "")
                specs.append(f"'{s}[{text}]{argspec}'")
    return specs + ["'*:file:_files'"]


ZSH = """\
#compdef kiln
# zsh completion for kiln: commands and each command's options
# (generated from kiln's --help by scripts/kiln-docs.py)

_kiln() {{
	local -a commands
	commands=(
{commands}
	)
	if (( CURRENT == 2 )); then
		_describe -t commands 'kiln command' commands
		return
	fi
	local cmd=$words[2]
	shift words
	(( CURRENT-- ))
	case $cmd in
{cases}
	*) _files ;;
	esac
}}

_kiln "$@"
"""


def write_zsh(kiln, path):
    _, cmds, summaries = parse_all(kiln)
    commands = "\n".join(f"\t\t'{c}:{zsh_text(summaries[c])}'" for c in cmds)
    cases = "\n".join(f"\t{c}) _arguments -s \\\n\t\t" +
                      " \\\n\t\t".join(zsh_specs(h)) + " ;;"
                      for c, h in cmds.items())
    with open(path, "w") as f:
        f.write(ZSH.format(commands=commands, cases=cases))


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    what, kiln = argv[1], argv[2]
    if what == "man" and len(argv) == 4:
        write_man(kiln, argv[3])
    elif what == "bash" and len(argv) == 4:
        write_bash(kiln, argv[3])
    elif what == "zsh" and len(argv) == 4:
        write_zsh(kiln, argv[3])
    elif what == "parse":
        h = parse(run_help(kiln, argv[3] if len(argv) > 3 else ""),
                  argv[3] if len(argv) > 3 else "")
        json.dump(asdict(h), sys.stdout, indent=1)
        print()
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
