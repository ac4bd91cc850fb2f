#!/usr/bin/env python3
"""Fails when a tracked file names a path outside the repository.

    check_self_contained.py REPO [--untracked]
    check_self_contained.py --self-test

A clone of jitd is all a user has: a document, script or test that points at
a sibling checkout, at a development machine's directories or at a file that
is not in the repository works only where it was written. For every file
`git ls-files` lists in REPO (binary files skipped), this reports, as
FILE:LINE: what, and the text:

- a path into a sibling checkout's shared folder ("../" + "shared");
- a path under "/" + "work/" (the development machine's tree);
- an absolute path under /root/ or /home/ (someone's home directory);
- in Markdown files, a link `[text](target)` whose target is relative and
  resolves outside REPO, is absolute, or names a file that does not exist in
  the checkout or that git ignores (http:, https:, mailto: and #anchor links
  are not checked; a trailing #anchor is dropped first). Fenced code blocks
  and `code spans` are not links.

Two kinds of files are exempt from the path rules (their Markdown links are
still checked): recorded outputs of runs on other machines (docs/gpu-runs/,
docs/performance/), which quote the paths those machines printed; and test
sources (tests/**/test_*), for /home only, where a made-up home directory
is a fixture (a HOME the test sets), not a reference.

--untracked also checks files git does not track yet but does not ignore
(before they are committed). Exit 0 with a one-line summary when nothing is
found, 1 with one line per finding, 2 for a usage error. --self-test builds a
small repository with two known problems in a temporary directory and checks
that both are found (exit 0 if so).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import PurePosixPath
from urllib.parse import unquote

# Spelled in pieces so that this file does not name what it looks for.
SHARED = "/".join(["..", "shared"])
WORK = "/" + "work" + "/"


def under(directory: str) -> re.Pattern:
    """An absolute path below `directory` (not the directory alone, not a
    relative path that ends in the same name)."""
    return re.compile(r"(?<![\w.~$/-])/" + directory + r"/[^\s'\"`)]")


# (rule, pattern): a match anywhere on a line is a finding.
HOME_RULE = "names a path under /home"
PATH_RULES = [
    ("names a sibling checkout's shared folder", re.compile(re.escape(SHARED))),
    ("names the development machine's tree", re.compile(re.escape(WORK))),
    ("names a path under /root", under("root")),
    (HOME_RULE, under("home")),
]

# Recorded outputs: they quote the machine they ran on.
RECORDED = ("docs/gpu-runs/", "docs/performance/")
MARKDOWN = (".md", ".markdown")

# [text](target) or [text](target "title"); `!` (images) included.
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^()\s<>]+)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
FENCE = re.compile(r"^\s{0,3}(```+|~~~+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
IGNORED_SCHEMES = ("http:", "https:", "mailto:")


def git(repo: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", repo, *args], input=stdin, capture_output=True, text=True, check=False)


def listed_files(repo: str, untracked: bool) -> list[str]:
    args = ["ls-files", "-z", "--cached"]
    if untracked:
        args += ["--others", "--exclude-standard"]
    result = git(repo, *args)
    if result.returncode != 0:
        raise SystemExit(f"check_self_contained: git ls-files in {repo} failed: {result.stderr.strip()}")
    return sorted(set(name for name in result.stdout.split("\0") if name))


def read_text(path: str) -> str | None:
    """The file's text, or None for binary files and what is not a file."""
    if not os.path.isfile(path) or os.path.islink(path):
        return None
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace")


def is_test_source(name: str) -> bool:
    return name.startswith("tests/") and PurePosixPath(name).name.startswith("test_")


def markdown_links(text: str):
    """(line number, target) of every link outside code."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            yield number, match.group(1)


class Checker:
    def __init__(self, repo: str):
        self.repo = os.path.realpath(repo)
        self.findings: list[str] = []
        self.links = 0

    def report(self, name: str, number: int, what: str, text: str) -> None:
        self.findings.append(f"{name}:{number}: {what}: {text.strip()[:200]}")

    def check_paths(self, name: str, text: str) -> None:
        if name.startswith(RECORDED):
            return
        test_source = is_test_source(name)
        for number, line in enumerate(text.splitlines(), 1):
            for what, pattern in PATH_RULES:
                if what == HOME_RULE and test_source:
                    continue
                if pattern.search(line):
                    self.report(name, number, what, line)

    def ignored(self, path: str) -> bool:
        rel = os.path.relpath(path, self.repo)
        return git(self.repo, "check-ignore", "-q", "--", rel).returncode == 0

    def check_link(self, name: str, number: int, target: str) -> None:
        if target.startswith("#") or target.lower().startswith(IGNORED_SCHEMES):
            return
        self.links += 1
        shown = f"[...]({target})"
        if SCHEME.match(target):
            self.report(name, number, "links to something that is not a file of the repository", shown)
            return
        path_part = unquote(target.split("#", 1)[0].split("?", 1)[0])
        if path_part.startswith("/"):
            self.report(name, number, "links to an absolute path", shown)
            return
        resolved = os.path.normpath(os.path.join(self.repo, os.path.dirname(name), path_part))
        if os.path.commonpath([self.repo, resolved]) != self.repo:
            self.report(name, number, "links outside the repository", shown)
        elif not os.path.exists(resolved):
            self.report(name, number, "links to a file that does not exist", shown)
        elif self.ignored(resolved):
            self.report(name, number, "links to a file git ignores (not in a clone)", shown)

    def run(self, untracked: bool) -> int:
        files = listed_files(self.repo, untracked)
        for name in files:
            text = read_text(os.path.join(self.repo, name))
            if text is None:
                continue
            self.check_paths(name, text)
            if name.lower().endswith(MARKDOWN):
                for number, target in markdown_links(text):
                    self.check_link(name, number, target)
        kind = "tracked and untracked" if untracked else "tracked"
        if self.findings:
            for finding in self.findings:
                print(finding)
            print(f"check_self_contained: {len(self.findings)} findings in {len(files)} {kind} files "
                  "(a clone has only what is in the repository)")
            return 1
        print(f"{len(files)} {kind} files, {self.links} Markdown links checked: all inside the repository")
        return 0


def self_test() -> int:
    """A repository with a path to a sibling checkout and a link to a missing
    file, and an innocent file beside them: exactly the two are found."""
    with tempfile.TemporaryDirectory(prefix="check-self-contained.") as tmp:
        def write(rel: str, text: str) -> None:
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)) or tmp, exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)

        write("tools/build.sh", f"#!/bin/sh\ntool={SHARED}/x\n")
        write("README.md", "# t\n\nSee [the notes](docs/missing.md) and [build](tools/build.sh#L2).\n")
        write("docs/ok.md", "[up](../README.md), [web](https://example.com), [here](#t), `[x](nowhere)`\n\n"
                            "```\n[y](nowhere)\n```\n")
        for args in (["init", "-q"], ["add", "-A"],
                     ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "t"]):
            result = git(tmp, *args)
            if result.returncode != 0:
                print(f"self-test: git {' '.join(args)} failed: {result.stderr.strip()}")
                return 1
        run = subprocess.run([sys.executable, os.path.abspath(__file__), tmp], capture_output=True, text=True)
        print(run.stdout, end="")
        lines = [line for line in run.stdout.splitlines() if not line.startswith("check_self_contained:")]
        expected = {
            "tools/build.sh:2: names a sibling checkout's shared folder",
            "README.md:3: links to a file that does not exist: [...](docs/missing.md)",
        }
        found = {line for line in lines if any(line.startswith(e) for e in expected)}
        ok = run.returncode == 1 and len(found) == 2 and len(lines) == 2
        print(f"self-test: {'passed' if ok else 'FAILED'}: exit {run.returncode} (want 1), "
              f"{len(lines)} findings (want the 2 planted ones)")
        return 0 if ok else 1


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    args = [a for a in argv[1:] if a != "--untracked"]
    if len(args) != 1 or args[0].startswith("-") or not os.path.isdir(args[0]):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return Checker(args[0]).run(untracked="--untracked" in argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
