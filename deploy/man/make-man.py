#!/usr/bin/env python3
"""Writes chainwatch.1 and chainwatch-bench.1 (man(7) macros) from the commands' own help
(`--experimental-dump-help`: every option with its default, as `--help` shows it) and the hand-written sections in
this folder (FILES, SIGNALS, EXAMPLES, SEE ALSO ...: `<page>.sections`). Replaces swift-argument-parser's
generate-manual plugin, whose pages dropped every default and drew mdoc warnings from `man --warnings`.

usage: make-man.py BINDIR OUTDIR [NAME...]   (both pages by default)"""
import datetime
import json
import os
import pathlib
import re
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
# Defaults that are the build machine's, not the program's: the help text says what they are.
MACHINE_DEFAULTS = {"threads"}


def roff(text):
    """Plain text as roff: backslashes, hyphens, quotes and leading dots escaped; `code` in bold."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def paragraphs(text):
    """Help text with blank lines as paragraph breaks; indented lines (examples, tables) kept as they are."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = block.split("\n")
        if any(l.startswith("  ") for l in lines):
            out += [".PP", ".nf", roff(block), ".fi"]
        else:
            out += [".PP", roff(" ".join(l.strip() for l in lines))]
    return out


def option_head(argument):
    names = sorted(argument.get("names", []), key=lambda n: n["kind"] != "short")
    spelled = ", ".join(("\\-" if n["kind"] == "short" else "\\-\\-") + n["name"].replace("-", "\\-") for n in names)
    if argument["kind"] == "positional":
        return "\\fI" + argument["valueName"].upper().replace("-", "\\-") + "\\fR" + (" ..." if argument.get("isRepeating") else "")
    head = "\\fB" + spelled + "\\fR"
    if argument["kind"] == "option":
        head += " \\fI" + argument["valueName"].upper().replace("-", "\\-") + "\\fR"
    return head


def options(arguments):
    out = []
    for a in arguments:
        if not a.get("shouldDisplay", True) or a.get("valueName") in ("help", "version"):
            continue
        text = a.get("abstract", "")
        if a.get("discussion"):
            text += " " + a["discussion"]
        default = a.get("defaultValue")
        if default not in (None, "", "false") and a.get("valueName") not in MACHINE_DEFAULTS and "default:" not in text.lower():
            text += f" (default: {default})"
        out += [".TP", option_head(a), roff(text.strip())]
    return out


def command(c, path, level):
    out = [".SS " + roff(" ".join(path))] if level else []
    if level:
        out += [roff(c.get("abstract", ""))]
        if c.get("discussion"):
            out += paragraphs(c["discussion"])
    out += options(c.get("arguments", []))
    for sub in c.get("subcommands", []):
        if sub["commandName"] == "help":
            continue
        out += command(sub, path + [sub["commandName"]], level + 1)
    return out


def page(binary, name, version):
    info = json.loads(subprocess.run([binary, "--experimental-dump-help"], capture_output=True, text=True, check=True).stdout)
    c = info["command"]
    date = datetime.date.fromtimestamp(int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or pathlib.Path(binary).stat().st_mtime)
    dashed = name.replace("-", "\\-")
    out = [f'.TH {dashed.upper()} 1 "{date.isoformat()}" "chainwatch {version}" "User Commands"',
           ".nh", ".SH NAME", f"{dashed} \\- {roff(c.get('abstract', ''))}",
           ".SH SYNOPSIS", f"\\fB{dashed}\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]"]
    if c.get("discussion"):
        out += [".SH DESCRIPTION"] + paragraphs(c["discussion"])
    top = options(c.get("arguments", []))
    if top:
        out += [".SH OPTIONS"] + top
    subs = [s for s in c.get("subcommands", []) if s["commandName"] != "help"]
    if subs:
        out += [".SH COMMANDS", "Each command's options, with the default each takes when not given."]
        for sub in subs:
            out += command(sub, [name, sub["commandName"]], 1)
    sections = HERE / f"{name}.sections"
    if sections.exists():
        out += [sections.read_text().rstrip("\n")]
    return "\n".join(out) + "\n"


def main():
    bindir, outdir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([bindir / "chainwatch", "--version"], capture_output=True, text=True, check=True).stdout.split()[0]
    for name in sys.argv[3:] or ("chainwatch", "chainwatch-bench"):
        (outdir / f"{name}.1").write_text(page(str(bindir / name), name, version))


if __name__ == "__main__":
    main()
