#!/usr/bin/env python3
"""Runs the README's walkthrough, in order, as a new user would.

    readme_walkthrough.py SOURCE BUILD [--plan] [--keep]
    readme_walkthrough.py --self-test

The commands come from SOURCE/README.md itself, so that the README and this
test cannot drift apart:

- the indented command blocks before the first `## ` heading (the two top
  commands), split at `&&`: the first ends with `build/daemon/jitd`, the
  daemon every later command talks to;
- every fenced ```sh (or bash, shell) block of the file, one command per
  line (a trailing `\\` continues it), split at `&&`; a trailing `&` starts
  it in the background.

Each command is matched by `classify` below: it is run (and what the README
promises of it checked), started as a daemon, or skipped with the reason
printed. A command no rule knows, or shell this test does not run (pipes,
`;`, `||`, redirections, `$(...)`), fails the test: a new README line is
never silently ignored. So does an indented block after the top that holds
a command (it belongs in a ```sh block), and a daemon started on an endpoint
that an earlier daemon of the walkthrough still serves (jitd refuses a
second daemon on one socket).

The sandbox: a temporary HOME, XDG_RUNTIME_DIR, XDG_CACHE_HOME and
XDG_CONFIG_HOME (the default socket, admin token and cache directory are
the test's own), no JITD_* variables, and as working directory a temporary
directory holding `build` -> BUILD and a link to every other top-level entry
of SOURCE, so that the commands run as from a checkout's root while what
they write (k.cubin, a warmed directory) stays in the sandbox. A daemon,
whether the README runs it in the foreground (in its own terminal) or with
`&`, is started in the background and waited for by polling
`build/client/jitctl health` until it answers SERVING, and `jitctl --json
stats` then confirms that the daemon answering is that one (its uptime is
shorter than the time since it was started, its cache directory the one it
was given). At the end each daemon gets SIGTERM and must exit 0, and no
process of the sandbox may be left (workers included).

Every command is printed as it runs. On a failure: the command, its exit
status and output, and every daemon's log; exit 1. --plan prints what would
be run and skipped, and checks the extraction, without running anything.
--keep leaves the sandbox directory in place. --self-test feeds the
extractor small READMEs with known problems (an unknown command, an unknown
verb, a pipeline, a command in an indented block, a second daemon on the
default socket, the README that once did) and a good one, and checks that each
problem is found and the good one passes (exit 0 if so). No GPU is needed:
nothing here loads a cubin.
"""

from __future__ import annotations

import ctypes
import fnmatch
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

JITD = "build/daemon/jitd"
JITCTL = "build/client/jitctl"
SHELL_FENCES = ("sh", "bash", "shell")
# Fenced blocks that are not commands to paste, and why they are not run. A
# block in any other language (or none) is a problem: say here what it is.
NOT_SHELL = {
    "cmake": "CMake lines for an application's project, after `cmake --install`",
    "cpp": "C++ for an application; its client calls are the library's tests' business",
    "python": "needs a GPU and PyTorch for its launch (tests/gpu/python_run.sh runs it on the H200)",
    "toml": "a configuration file's text",
}
COMMAND_TIMEOUT_S = 600  # one command; `jitd lint` for two archs is the longest
READY_TIMEOUT_S = 90  # a daemon's start: kernels read, the guard's source check, workers
STOP_TIMEOUT_S = 45  # SIGTERM drains for up to 25 s


class Failure(Exception):
    """The walkthrough does not work as written; the message says where."""


# ---------------------------------------------------------------- extraction


@dataclass
class Step:
    line: int  # README line the command starts on
    where: str  # "top command 1", "## A session", ...
    text: str  # the command as the shell reads it, without comment or `&`
    argv: list[str]
    background: bool
    comment: str = ""


@dataclass
class Extracted:
    steps: list[Step] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_shell: list[str] = field(default_factory=list)  # "LINE: ```lang"


FENCE = re.compile(r"^(\s{0,3})(```+|~~~+)\s*([^\s`]*)")
HEADING = re.compile(r"^(#{1,6})\s+(.*)")
# Shell this test does not run: it would change what a command means.
UNSUPPORTED = re.compile(r"\|\||[|;<>`]|\$\(")
# How a line in an indented block looks when it is a command a user would paste.
COMMANDISH = re.compile(r"^\s*(\./|build/|tests/|tools/|deploy/|cmake\b|ctest\b|jitd\b|jitctl\b|pip3?\b|python3?\b|sudo\b|apt)")


def _strip_comment(line: str) -> tuple[str, str]:
    """(code, comment) of one shell line: `#` starts a comment at the start of
    a word outside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _split_and(code: str) -> list[str]:
    """Split at `&&` outside quotes."""
    parts, quote, start, i = [], None, 0, 0
    while i < len(code):
        ch = code[i]
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif code.startswith("&&", i):
            parts.append(code[start:i].strip())
            start = i + 2
            i += 1
        i += 1
    parts.append(code[start:].strip())
    return parts


def _unquoted(code: str) -> str:
    """The code with quoted text blanked, for spotting shell operators."""
    out, quote = [], None
    for ch in code:
        if quote:
            out.append(" " if ch != quote else ch)
            if ch == quote:
                quote = None
        else:
            if ch in "'\"":
                quote = ch
            out.append(ch)
    return "".join(out)


def _commands(lines: list[tuple[int, str]], where: str, ex: Extracted) -> None:
    """Turn a block's (line number, text) pairs into steps."""
    logical: list[tuple[int, str, str]] = []  # (line, code, comment)
    pending: tuple[int, str, str] | None = None
    for number, raw in lines:
        code, comment = _strip_comment(raw)
        if pending is not None:
            number, code, comment = pending[0], pending[1] + " " + code.strip(), " ".join(filter(None, (pending[2], comment)))
        if code.endswith("\\"):
            pending = (number, code[:-1].rstrip(), comment)
            continue
        pending = None
        if code.strip():
            logical.append((number, code.strip(), comment))
    if pending is not None:
        ex.problems.append(f"README.md:{pending[0]}: a command ends in `\\` with nothing after it")
    for number, code, comment in logical:
        for part in _split_and(code):
            background = False
            bare = _unquoted(part)
            if re.search(r"(?<!&)&\s*$", bare):
                background = True
                part = part.rstrip()[:-1].rstrip()
                bare = _unquoted(part)
            if not part:
                ex.problems.append(f"README.md:{number}: an empty command around `&&` ({where})")
                continue
            if UNSUPPORTED.search(bare) or "&" in bare:
                ex.problems.append(
                    f"README.md:{number}: `{part}` ({where}): uses shell this test does not run "
                    "(pipes, `;`, `||`, `&` inside, redirections, `$(...)`); teach readme_walkthrough.py or simplify the line"
                )
                continue
            try:
                argv = shlex.split(part)
            except ValueError as e:
                ex.problems.append(f"README.md:{number}: `{part}`: {e}")
                continue
            ex.steps.append(Step(number, where, part, argv, background, comment))


def extract(readme: str) -> Extracted:
    ex = Extracted()
    lines = readme.splitlines()
    section = "top"
    top_blocks = 0
    fence: tuple[str, str, int] | None = None  # (marker, lang, start line)
    fence_lines: list[tuple[int, str]] = []
    indented: list[tuple[int, str]] = []
    previous_blank = True

    def flush_indented() -> None:
        nonlocal top_blocks, indented
        if not indented:
            return
        if section == "top":
            top_blocks += 1
            _commands(indented, f"top command {top_blocks}", ex)
        else:
            for number, text in indented:
                if COMMANDISH.match(text):
                    ex.problems.append(
                        f"README.md:{number}: `{text.strip()}` ({section}) looks like a command in an indented block; "
                        "put it in a ```sh block so that this test runs it, or make it not look like one"
                    )
        indented = []

    for number, line in enumerate(lines, start=1):
        if fence is not None:
            m = FENCE.match(line)
            if m and m.group(2).startswith(fence[0][0]) and len(m.group(2)) >= len(fence[0]) and not m.group(3):
                if fence[1] in SHELL_FENCES:
                    _commands(fence_lines, section, ex)
                elif fence[1] in NOT_SHELL:
                    ex.not_shell.append(f"README.md:{fence[2]}: ```{fence[1]} ({section}): {NOT_SHELL[fence[1]]}")
                else:
                    ex.problems.append(
                        f"README.md:{fence[2]}: a fenced block of language {fence[1] or '(none)'!r} ({section}): "
                        "readme_walkthrough.py runs ```sh blocks; add the language to NOT_SHELL with the reason it is not run"
                    )
                fence, fence_lines = None, []
            else:
                fence_lines.append((number, line))
            continue
        m = FENCE.match(line)
        if m:
            flush_indented()
            fence = (m.group(2), m.group(3).lower(), number)
            continue
        if (line.startswith("    ") or line.startswith("\t")) and (indented or previous_blank):
            if line.strip():
                indented.append((number, line.strip()))
            continue
        if indented and not line.strip():
            continue  # a blank line inside an indented block
        flush_indented()
        h = HEADING.match(line)
        if h and len(h.group(1)) == 2:
            section = "## " + h.group(2).strip()
        elif h and len(h.group(1)) > 2 and section != "top":
            section = section.split(" / ")[0] + " / " + h.group(2).strip()
        previous_blank = not line.strip()
    flush_indented()
    if fence is not None:
        ex.problems.append(f"README.md:{fence[2]}: a fenced block that never closes")
    if top_blocks == 0:
        ex.problems.append("README.md: no indented command block before the first `## ` heading (the top commands)")
    return ex


# ---------------------------------------------------------------- the rules

Check = Callable[["Run", Step, subprocess.CompletedProcess], None]


@dataclass
class Action:
    kind: str  # "run", "daemon", "skip"
    reason: str = ""  # for "skip": why; for the others: what is checked
    check: Check | None = None
    expect_rc: int = 0
    endpoint: str = ""  # for "daemon": where it serves ("" = the default socket)
    cache_dir: str = ""  # for "daemon": the --cache-dir it was given ("" = the default)


def _option(argv: list[str], name: str) -> str | None:
    """The value of `--name VALUE` or `--name=VALUE` (the last one), else None."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def _options(argv: list[str], name: str) -> list[str]:
    out = []
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            out.append(argv[i + 1])
        elif arg.startswith(name + "="):
            out.append(arg[len(name) + 1 :])
    return out


# jitctl's global options that take a value (jitctl --help).
JITCTL_VALUED = {"--endpoint", "--admin-token-file", "--tls-ca", "--tls-cert", "--tls-key", "--fallback-cache-dir", "--timeout"}
# jitd's options that take a value (jitd --help); flags take none.
JITD_FLAGS = {"--help", "-h", "--version", "--log-hits", "--insecure-tcp", "--allow-guard-findings", "--all", "--source-only"}


def _jitctl_verb(argv: list[str]) -> str | None:
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg in JITCTL_VALUED:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return arg
    return None


def _jitd_verb(argv: list[str]) -> str:
    if "--help" in argv[1:] or "-h" in argv[1:]:
        return "--help"
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("-"):
            i += 1 if (arg in JITD_FLAGS or "=" in arg) else 2
            continue
        return arg
    return "serve"


def _endpoint_of(argv: list[str]) -> str:
    """Where a daemon command serves: its first unix: --listen, else the
    default socket ("")."""
    for value in _options(argv, "--listen"):
        if value.startswith("unix:"):
            return value
    return ""


def classify(step: Step) -> Action:
    a = step.argv
    if a[0] == "./deploy/install-deps.sh":
        return Action("skip", "installs Debian packages as root; the host running this test has them")
    if a[:3] == ["cmake", "-S", "."]:
        return Action("skip", "configures build/; this test runs against the build it is given")
    if a[:2] == ["cmake", "--build"]:
        return Action("skip", "builds build/; the build under test is built already")
    if a[:2] == ["cmake", "--install"]:
        return Action("skip", "installs into a prefix; not part of the walkthrough's sandbox")
    if a[0] == "ctest":
        return Action("skip", "the test suite, of which this test is one")
    if a[0] == "tests/sanitize.sh":
        return Action("skip", "CI's sanitizer run: builds build-sanitize/ under ASan/LSan/UBSan and runs the suite there")
    if a[0] == "tests/fuzz/run.sh":
        return Action("skip", "CI's fuzzers: builds build-fuzz/ with clang and runs each target for 30 s")
    if a[0] == JITD:
        verb = _jitd_verb(a)
        if verb == "serve":
            if _option(a, "--remote") is not None:
                return Action("skip", "a fleet node's daemon: needs the Redis server and the signing key file it names")
            if any(not v.startswith("unix:") for v in _options(a, "--listen")):
                return Action("skip", "serves on TCP: needs TLS files or a trusted network")
            return Action(
                "daemon",
                "serves until stopped (a terminal of its own); ready when jitctl health says SERVING",
                endpoint=_endpoint_of(a),
                cache_dir=_option(a, "--cache-dir") or "",
            )
        if verb == "--help":
            return Action("run", "prints its flags, --config among them", _check_jitd_help)
        if verb == "lint":
            return Action("run", "0 findings, every --arch compiled", _check_lint)
        if verb == "warm" and _option(a, "--cache-dir"):
            return Action("run", "0 failed, the directory holds a cache index", _check_jitd_warm)
        return Action("unknown")
    if a[0] == JITCTL:
        verb = _jitctl_verb(a)
        checks: dict[str, tuple[str, Check]] = {
            "warm": ("progress lines, a summary with 0 failed", _check_jitctl_warm),
            "get": ("a 64-hex key, where it came from, symbols; with -o a non-empty ELF file", _check_get),
            "stats": (
                "one JSON document with entries, bytes, hits, compiles, workers"
                if "--json" in a
                else "entries, size, hits, compiles, workers",
                _check_stats,
            ),
            "evict": (
                "lists exactly the matching entries, removes none"
                if "--dry-run" in a
                else "the count evicted is the cache's; the cache is within the target",
                _check_evict,
            ),
            "kernels": ("names every kernel of kernels/kernels.toml", _check_kernels),
            "ls": ("every entry, most recently used first", _check_ls),
            "verify": ("every entry checked ok, none corrupt", _check_verify),
            "health": ("prints SERVING", _check_health),
        }
        if verb in checks:
            what, check = checks[verb]
            return Action("run", what, check)
        return Action("unknown")
    return Action("unknown")


def plan(ex: Extracted) -> tuple[list[tuple[Step, Action]], list[str]]:
    """Each step with its action, and the problems: those of the extraction,
    commands no rule knows, a daemon on an endpoint a daemon of the walkthrough
    already serves, and a top command 1 that does not end with the daemon."""
    problems = list(ex.problems)
    planned: list[tuple[Step, Action]] = []
    serving: dict[str, Step] = {}
    for step in ex.steps:
        action = classify(step)
        if action.kind == "unknown":
            problems.append(
                f"README.md:{step.line}: `{step.text}` ({step.where}): no rule in readme_walkthrough.py says how to run "
                "or check it; add one (or a skip with its reason)"
            )
            continue
        if step.background and action.kind == "run":
            problems.append(
                f"README.md:{step.line}: `{step.text} &` ({step.where}): only a daemon is started in the background; "
                "teach readme_walkthrough.py how to wait for this one"
            )
            continue
        if action.kind == "daemon":
            earlier = serving.get(action.endpoint)
            if earlier is not None:
                name = action.endpoint or "the default socket"
                problems.append(
                    f"README.md:{step.line}: `{step.text}` ({step.where}) starts a daemon on {name}, which the daemon of "
                    f"README.md:{earlier.line} (`{earlier.text}`, {earlier.where}) still serves: jitd refuses a second one"
                )
            serving[action.endpoint] = step
        planned.append((step, action))
    firsts = [s for s in ex.steps if s.where == "top command 1"]
    if not firsts or classify(firsts[-1]).kind != "daemon":
        problems.append("README.md: the first top command does not end by starting the daemon (`build/daemon/jitd`)")
    return planned, problems


# ---------------------------------------------------------------- running


def _set_pdeathsig() -> None:
    """In the child: SIGTERM when this test dies, so that a killed test
    (a ctest timeout) leaves no daemon behind."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _tracked_top_level(source: Path) -> list[str]:
    """The top-level names of the checkout's tracked files (without git: every
    entry but build trees and dot files). Untracked files such as a k.cubin
    left by a hand run are not linked, so nothing writes through into SOURCE."""
    r = subprocess.run(["git", "-C", str(source), "ls-files", "-z"], capture_output=True, check=False)
    if r.returncode == 0 and r.stdout:
        return sorted({p.split(b"/", 1)[0].decode() for p in r.stdout.split(b"\0") if p})
    return sorted(e.name for e in source.iterdir() if not e.name.startswith((".", "build")))


@dataclass
class Daemon:
    step: Step
    action: Action
    proc: subprocess.Popen
    log: Path
    started: float


class Run:
    def __init__(self, source: Path, build: Path, root: Path):
        self.source, self.build, self.root = source, build, root
        self.cwd = root / "checkout"
        self.home = root / "home"
        self.runtime = root / "run"
        self.cache_home = root / "cache"
        for d in (self.cwd, self.home, self.runtime, self.cache_home, root / "config", root / "logs"):
            d.mkdir(mode=0o700)
        (self.cwd / "build").symlink_to(build)
        for name in _tracked_top_level(source):
            if name != "build" and not (self.cwd / name).exists():
                (self.cwd / name).symlink_to(source / name)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JITD_")}
        env.update(
            HOME=str(self.home),
            XDG_RUNTIME_DIR=str(self.runtime),
            XDG_CACHE_HOME=str(self.cache_home),
            XDG_CONFIG_HOME=str(root / "config"),
        )
        self.env = env
        self.daemons: list[Daemon] = []
        self.before_evict: dict = {}

    # A command of the test's own (a readiness probe, a before/after count),
    # not of the README: not printed unless it fails.
    def jitctl(self, *args: str, endpoint: str = "", timeout: float = 30) -> subprocess.CompletedProcess:
        argv = [str(self.cwd / JITCTL)] + (["--endpoint", endpoint] if endpoint else []) + list(args)
        return subprocess.run(argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def json(self, *args: str) -> object:
        r = self.jitctl("--json", *args)
        if r.returncode != 0:
            raise Failure(f"the test's own `jitctl --json {' '.join(args)}` exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return json.loads(r.stdout)

    def start_daemon(self, step: Step, action: Action) -> None:
        log = self.root / "logs" / f"daemon-line{step.line}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                ["sh", "-c", "exec " + step.text],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_set_pdeathsig,
            )
        daemon = Daemon(step, action, proc, log, time.monotonic())
        self.daemons.append(daemon)
        self.wait_ready(daemon)

    def wait_ready(self, d: Daemon) -> None:
        deadline = d.started + READY_TIMEOUT_S
        pause = 0.02
        last = ""
        while True:
            rc = d.proc.poll()
            if rc is not None:
                raise Failure(f"the daemon exited with status {rc} before it was ready")
            r = self.jitctl("health", endpoint=d.action.endpoint, timeout=10)
            last = (r.stdout + r.stderr).strip()
            if r.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise Failure(f"the daemon was not SERVING after {READY_TIMEOUT_S} s; jitctl health said: {last}")
            time.sleep(pause)  # a poll's interval, growing: readiness is what ends the wait
            pause = min(pause * 2, 0.5)
        # SERVING, but from this daemon? Another one on the same socket would answer too.
        stats = self.jitctl("--json", "stats", endpoint=d.action.endpoint)
        # Read the clock once the uptime is in hand: measured before the call, the
        # stats round trip itself would make this daemon look older than it is.
        elapsed = time.monotonic() - d.started
        if stats.returncode != 0:
            raise Failure(f"jitctl --json stats exited {stats.returncode} once the daemon was ready:\n{stats.stdout}{stats.stderr}")
        doc = json.loads(stats.stdout)
        # Its uptime counts from after it was spawned; an older daemon's does not.
        if d.proc.poll() is not None or float(doc["uptime_s"]) > elapsed:
            try:
                rc = d.proc.wait(timeout=10)  # a refused daemon exits, and its log says why
                fate = f"this one exited with status {rc}"
            except subprocess.TimeoutExpired:
                fate = "this one is still starting"
            raise Failure(
                f"a daemon answers SERVING, but not this one: the one answering has been up {float(doc['uptime_s']):.1f} s, "
                f"this one was started {elapsed:.1f} s ago; {fate}"
            )
        want = Path(d.action.cache_dir) if d.action.cache_dir else self.cache_home / "jitd"
        if not want.is_absolute():
            want = self.cwd / want
        if os.path.realpath(doc["cache_dir"]) != os.path.realpath(want):
            raise Failure(f"the daemon serves cache {doc['cache_dir']}, not {want}")
        print(f"  ready: SERVING after {elapsed:.1f} s (pid {d.proc.pid}, cache {doc['cache_dir']})", flush=True)

    def run_step(self, step: Step, action: Action) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            ["sh", "-c", step.text],
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=_set_pdeathsig,
        )
        try:
            out, err = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise Failure(f"did not finish in {COMMAND_TIMEOUT_S} s\n--- stdout\n{out}--- stderr\n{err}") from None
        except BaseException:  # interrupted: the command goes too, or a daemon would drain it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        r = subprocess.CompletedProcess(step.argv, proc.returncode, out, err)
        if r.returncode != action.expect_rc:
            raise Failure(f"exited {r.returncode}, not {action.expect_rc}\n--- stdout\n{out}--- stderr\n{err}")
        if action.check is not None:
            try:
                action.check(self, step, r)
            except Failure as e:
                raise Failure(f"{e}\n--- stdout\n{out}--- stderr\n{err}") from None
        shown = [ln for ln in (out.strip() or err.strip()).splitlines() if re.search(r"\w", ln)]
        last = shown[-1].strip() if shown else ""
        print(f"  ok: exit {r.returncode} in {time.monotonic() - t0:.1f} s: {action.reason}" + (f"\n  | {last[:160]}" if last else ""), flush=True)
        return r

    def stop_daemons(self) -> list[str]:
        problems = []
        for d in reversed(self.daemons):
            rc = d.proc.poll()
            if rc is not None:
                problems.append(f"the daemon of README.md:{d.step.line} had exited with status {rc} before it was stopped")
                continue
            d.proc.send_signal(signal.SIGTERM)
            try:
                rc = d.proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(d.proc.pid, signal.SIGKILL)
                rc = d.proc.wait()
                problems.append(f"the daemon of README.md:{d.step.line} did not stop {STOP_TIMEOUT_S} s after SIGTERM (killed)")
                continue
            if rc != 0:
                problems.append(f"the daemon of README.md:{d.step.line} exited {rc} after SIGTERM, not 0")
            else:
                print(f"stopped the daemon of README.md:{d.step.line} (SIGTERM, exit 0)", flush=True)
        return problems

    def leftovers(self) -> list[tuple[int, str]]:
        """Live processes carrying this sandbox's XDG_RUNTIME_DIR: started by the
        walkthrough, whatever their process group (workers have their own)."""
        marker = f"XDG_RUNTIME_DIR={self.runtime}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    state = f.read().rsplit(b")", 1)[1].split()[0]
                if state in (b"Z", b"X"):
                    continue
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if marker not in f.read().split(b"\0"):
                        continue
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found.append((int(entry), f.read().replace(b"\0", b" ").decode(errors="replace").strip()))
            except (OSError, IndexError):
                continue
        return found

    def reap_leftovers(self) -> list[str]:
        deadline = time.monotonic() + 10
        pause = 0.02
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(pause)  # poll: a worker may take a moment to see its daemon gone
            pause = min(pause * 2, 0.5)
        if not left:
            return []
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return [f"left running after the daemons stopped (killed now): pid {pid}: {cmd}" for pid, cmd in left]

    def daemon_logs(self) -> str:
        parts = []
        for d in self.daemons:
            text = d.log.read_text(errors="replace") if d.log.exists() else "(no log)"
            parts.append(f"--- log of the daemon of README.md:{d.step.line} (`{d.step.text}`)\n{text}")
        return "\n".join(parts)


# ---------------------------------------------------------------- checks


def _fail_unless(ok: bool, what: str) -> None:
    if not ok:
        raise Failure(what)


def _check_jitd_help(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    _fail_unless("Usage: jitd" in r.stdout and "--config" in r.stdout, "no usage line, or no --config, in the help")


def _check_lint(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    text = r.stdout + r.stderr
    archs = _options(step.argv, "--arch") or ["sm_90"]
    _fail_unless(re.search(r"\b0 findings", text) is not None, "lint does not report 0 findings")
    for arch in archs:
        _fail_unless(re.search(rf"\bok\b.*\b{re.escape(arch)}\b", text) is not None, f"lint compiled nothing for {arch}")
    m = re.search(r"(\d+) instantiations compiled for (\d+) arch", text)
    _fail_unless(m is not None and int(m.group(2)) == len(set(archs)), f"lint's summary does not name {len(set(archs))} arch(s)")


def _warm_summary(text: str) -> None:
    m = re.search(r"(\d+) instantiations in [\d.]+ m?s: (\d+) compiled, (\d+) already cached, (\d+) failed", text)
    _fail_unless(m is not None, "no warm summary (N instantiations in T: C compiled, K already cached, F failed)")
    total, compiled, cached, failed = (int(m.group(i)) for i in range(1, 5))
    _fail_unless(total > 0 and failed == 0 and compiled + cached == total, f"warm summary: {m.group(0)}")


def _check_jitd_warm(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    _warm_summary(r.stdout + r.stderr)
    d = run.cwd / _option(step.argv, "--cache-dir")
    _fail_unless((d / "index.sqlite").is_file() and (d / "blobs").is_dir(), f"{d} holds no cache index and blobs")


def _check_jitctl_warm(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    text = r.stdout + r.stderr
    _fail_unless(re.search(r"^\[\s*\d+/\d+\] ", text, re.M) is not None, "no progress lines ([i/N] ...)")
    _warm_summary(text)


def _check_get(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    _fail_unless(re.search(r"^key\s+[0-9a-f]{64}$", r.stdout, re.M) is not None, "no 64-hex key line")
    _fail_unless(re.search(r"^(source|origin)\s+\S+", r.stdout, re.M) is not None, "no line saying where it came from")
    _fail_unless("sglang::" in r.stdout, "no symbols (name expressions in namespace sglang)")
    out = _option(step.argv, "-o") or _option(step.argv, "--output")
    if out:
        path = run.cwd / out
        _fail_unless(path.is_file() and path.stat().st_size > 0, f"{out} was not written, or is empty")
        _fail_unless(path.read_bytes()[:4] == b"\x7fELF", f"{out} is not an ELF file (a cubin)")


def _check_stats(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    if "--json" in step.argv:
        try:
            doc = json.loads(r.stdout)
        except json.JSONDecodeError as e:
            raise Failure(f"--json stats is not one JSON document: {e}") from None
        _fail_unless(isinstance(doc, dict), "--json stats is not a JSON object")
        for key in ("entries", "bytes", "hits", "compiles", "workers"):
            _fail_unless(key in doc, f"--json stats has no {key!r}")
        return
    for label in ("entries", "size", "hits", "compiles", "workers"):
        _fail_unless(re.search(rf"^{label}\b", r.stdout, re.M) is not None, f"stats shows no {label!r} line")


def _check_evict(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    after = run.json("stats")
    before = run.before_evict
    glob = _option(step.argv, "--kernel")
    if "--dry-run" in step.argv:
        m = re.search(r"would evict (\d+) entr", r.stdout)
        _fail_unless(m is not None, "no `would evict N entries` line")
        _fail_unless(after["entries"] == before["entries"], f"a dry run removed entries ({before['entries']} -> {after['entries']})")
        rows = [ln for ln in r.stdout.splitlines() if re.match(r"^[0-9a-f]{16}\s", ln)]
        _fail_unless(len(rows) == int(m.group(1)), f"lists {len(rows)} entries but says it would evict {m.group(1)}")
        if glob:
            _fail_unless(all(fnmatch.fnmatchcase(row.split()[1], glob) for row in rows), f"lists entries outside {glob}")
            matching = [e for e in before["ls"] if fnmatch.fnmatchcase(e["kernel"], glob)]
            if "--include-pinned" not in step.argv:
                matching = [e for e in matching if not e["pinned"]]
            _fail_unless(len(rows) == len(matching), f"lists {len(rows)} entries; {len(matching)} match {glob}")
            _fail_unless(len(rows) > 0, f"the walkthrough's cache has nothing for {glob}: the example shows nothing")
        return
    m = re.search(r"evicted (\d+) entr", r.stdout)
    _fail_unless(m is not None, "no `evicted N entries` line")
    _fail_unless(after["entries"] == before["entries"] - int(m.group(1)), "the count evicted does not match the cache's")
    target = _option(step.argv, "--max-bytes")
    if target:
        units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
        t = re.fullmatch(r"(\d+)([KMGT]?)", target)
        _fail_unless(t is not None, f"cannot read --max-bytes {target}")
        limit = int(t.group(1)) * units[t.group(2)]
        unpinned_fit = after["bytes"] <= limit or after["bytes"] == after["pinned_bytes"]
        _fail_unless(unpinned_fit, f"the cache holds {after['bytes']} bytes after evict --max-bytes {target}")


def _check_kernels(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    text = (run.source / "kernels" / "kernels.toml").read_text()
    if tomllib is not None:
        names = [k["name"] for k in tomllib.loads(text).get("kernel", [])]
    else:
        names = re.findall(r'^\[\[kernel\]\]\s*\nname\s*=\s*"([^"]+)"', text, re.M)
    _fail_unless(len(names) > 0, "kernels/kernels.toml names no kernel")
    listed = {ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()}
    missing = [n for n in names if n not in listed]
    _fail_unless(not missing, f"kernels does not list {', '.join(missing)}")


def _check_ls(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    entries = run.json("ls", "--limit", "0")["entries"]
    total = run.json("stats")["entries"]
    rows = [ln for ln in r.stdout.splitlines() if re.match(r"^[0-9a-f]{16}\s", ln)]
    _fail_unless(len(entries) > 0, "the walkthrough's cache is empty: the example shows nothing")
    _fail_unless(len(entries) == total, f"--json ls --limit 0 has {len(entries)} entries; stats says {total}")
    used = [e["last_used_unix_ms"] for e in entries]
    _fail_unless(used == sorted(used, reverse=True), "entries are not most recently used first")
    # A default --limit may show fewer rows: then the most recent ones, in order.
    _fail_unless(0 < len(rows) <= total, f"ls shows {len(rows)} rows of {total} entries")
    _fail_unless([row.split()[0] for row in rows] == [e["key"][:16] for e in entries[: len(rows)]], "the table's order is not most recent first")


def _check_verify(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    def field_(name: str) -> int:
        m = re.search(rf"^{name}\s+(\d+)$", r.stdout, re.M)
        _fail_unless(m is not None, f"no {name!r} line")
        return int(m.group(1))

    checked, ok = field_("checked"), field_("ok")
    _fail_unless(checked > 0 and ok == checked, f"{ok} of {checked} entries ok")
    _fail_unless(field_("corrupt") == 0, "corrupt entries")


def _check_health(run: Run, step: Step, r: subprocess.CompletedProcess) -> None:
    _fail_unless(r.stdout.strip() == "SERVING", f"health printed {r.stdout.strip()!r}, not SERVING")


# ---------------------------------------------------------------- main


def print_plan(planned: list[tuple[Step, Action]], ex: Extracted) -> None:
    for step, action in planned:
        how = {"run": "run", "daemon": "daemon", "skip": "skip"}[action.kind]
        bg = " &" if step.background else ""
        print(f"  {how:6} README.md:{step.line} ({step.where}) {step.text}{bg}" + (f"  -- {action.reason}" if action.kind == "skip" else ""))
    for entry in ex.not_shell:
        print(f"  not sh {entry}")


def walk(source: Path, build: Path, keep: bool, plan_only: bool) -> int:
    readme = (source / "README.md").read_text()
    ex = extract(readme)
    planned, problems = plan(ex)
    if problems:
        print("readme_walkthrough: the README's commands cannot be run as written:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"readme_walkthrough: {len(planned)} commands from {source / 'README.md'}, in order")
    if plan_only:
        print_plan(planned, ex)
        return 0
    for entry in ex.not_shell:
        print(f"- not run: {entry}")
    for tool in (JITD, JITCTL):
        if not os.access(build / tool.removeprefix("build/"), os.X_OK):
            print(f"readme_walkthrough: {build / tool.removeprefix('build/')} is not built", file=sys.stderr)
            return 1

    root = Path(tempfile.mkdtemp(prefix="jitd-readme-"))
    run = Run(source, build.resolve(), root)
    t_start = time.monotonic()
    current: Step | None = None
    failed: str | None = None

    def on_signal(signum, frame):
        raise Failure(f"interrupted by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"sandbox {root}: HOME, XDG_RUNTIME_DIR, XDG_CACHE_HOME, XDG_CONFIG_HOME inside; build -> {run.build}")
    try:
        for step, action in planned:
            current = step
            where = f"README.md:{step.line} ({step.where})"
            if action.kind == "skip":
                print(f"- skip {where}: {step.text}\n  -> {action.reason}", flush=True)
                continue
            said = f": {step.comment}" if step.comment else ""
            print(f"$ {step.text}{' &' if step.background else ''}    # {where}{said}", flush=True)
            if action.kind == "daemon":
                run.start_daemon(step, action)
                continue
            if step.argv[0] == JITCTL and _jitctl_verb(step.argv) == "evict":
                run.before_evict = dict(run.json("stats"))
                run.before_evict["ls"] = run.json("ls", "--limit", "0")["entries"]
            run.run_step(step, action)
        current = None
    except Failure as e:
        failed = f"FAILED: `{current.text}` (README.md:{current.line}, {current.where}): {e}" if current else f"FAILED: {e}"
    except Exception as e:  # a bug of the test itself, or an unreadable answer
        failed = f"FAILED: `{current.text if current else ''}`: {type(e).__name__}: {e}"
    finally:
        if failed:
            print(failed, file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        stop_problems = run.stop_daemons()
        stop_problems += run.reap_leftovers()
        logs = run.daemon_logs()
        if not keep:
            subprocess.run(["rm", "-rf", str(root)], check=False)
    if failed or stop_problems:
        for p in stop_problems:
            print("FAILED: " + p, file=sys.stderr)
        print(logs, file=sys.stderr)
        return 1
    ran = sum(1 for _, a in planned if a.kind != "skip")
    skipped = len(planned) - ran
    print(
        f"readme_walkthrough: ok: {ran} commands ran in order ({skipped} skipped), every daemon stopped with exit 0, "
        f"nothing left running; {time.monotonic() - t_start:.1f} s" + (f"; sandbox kept at {root}" if keep else "")
    )
    return 0


# ---------------------------------------------------------------- self-test

GOOD = """# x

Build and serve:

    ./deploy/install-deps.sh && cmake -S . -B build && cmake --build build -j2 && build/daemon/jitd

Test:

    ctest --test-dir build -j2 && tests/sanitize.sh

## A session

```sh
build/client/jitctl warm --all          # comment with a 'quote
build/client/jitctl evict --kernel 'moe.*' --include-pinned --dry-run
build/daemon/jitd warm --cache-dir image-cache --all
build/daemon/jitd --listen unix:/tmp/other.sock --cache-dir other &
```

```cpp
int main() {}
```

### The cache

    DIR/index.sqlite            index
"""

CASES = [
    # (name, README, a fragment every expected problem contains, how many)
    ("good", GOOD, None, 0),
    ("unknown command", GOOD.replace("```cpp", "```sh\nrm -rf image-cache\n```\n\n```cpp"), "no rule", 1),
    ("unknown jitctl verb", GOOD.replace("--all          #", "--all\nbuild/client/jitctl frobnicate   #"), "no rule", 1),
    ("unknown jitd verb", GOOD.replace("build/daemon/jitd warm", "build/daemon/jitd bake"), "no rule", 1),
    ("a pipeline", GOOD.replace("warm --all          #", "stats | head -3   #"), "shell this test does not run", 1),
    ("a redirection", GOOD.replace("warm --all          #", "stats > s.txt   #"), "shell this test does not run", 1),
    ("a command in an indented block", GOOD.replace("DIR/index.sqlite", "build/client/jitctl ls"), "indented block", 1),
    ("a second daemon on the default socket", GOOD.replace("--listen unix:/tmp/other.sock ", ""), "refuses a second", 1),
    ("a command in another sh block", GOOD + "\n## Python\n\n```bash\npip install ./client/python\n```\n", "no rule", 1),
    ("no daemon at the end of the first command", GOOD.replace(" && build/daemon/jitd\n", "\n"), "does not end by starting", 1),
    ("a fenced block of an unknown language", GOOD.replace("```cpp", "```console"), "language 'console'", 1),
    ("a fence that never closes", GOOD + "\n```sh\nbuild/client/jitctl ls\n", "never closes", 1),
]

# The README as it once was: the first command serves on the default socket, and
# "A session" starts a second daemon there.
OLD_README = """# jitd

    ./deploy/install-deps.sh && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 && build/daemon/jitd

## A session

```sh
build/daemon/jitd --cache-dir /tmp/jitd-cache &                           # serve on the default socket
build/client/jitctl warm --all                                              # compile every instantiation, with progress
```
"""


def self_test() -> int:
    failures = []
    for name, text, fragment, count in CASES + [("the README as it once was", OLD_README, "refuses a second", 1)]:
        _, problems = plan(extract(text))
        hits = [p for p in problems if fragment and fragment in p]
        if len(problems) != count or len(hits) != count:
            failures.append(f"{name}: expected {count} problem(s) with {fragment!r}, got: {problems}")
        else:
            print(f"ok: {name}: " + (problems[0] if problems else "no problems"))
    # The good README's plan, step by step.
    planned, _ = plan(extract(GOOD))
    kinds = [(s.line, s.argv[0].rsplit("/", 1)[-1], a.kind, s.background) for s, a in planned]
    want = [
        (5, "install-deps.sh", "skip", False),
        (5, "cmake", "skip", False),
        (5, "cmake", "skip", False),
        (5, "jitd", "daemon", False),
        (9, "ctest", "skip", False),
        (9, "sanitize.sh", "skip", False),
        (14, "jitctl", "run", False),
        (15, "jitctl", "run", False),
        (16, "jitd", "run", False),
        (17, "jitd", "daemon", True),
    ]
    if kinds != want:
        failures.append(f"good README: planned {kinds}, expected {want}")
    else:
        print("ok: good README: the first command's daemon, skips, runs and a `&` daemon, in order")
    ex = extract(GOOD)
    if [s.comment for s in ex.steps if s.line == 14] != ["comment with a 'quote"] or [n.split(":")[1] for n in ex.not_shell] != ["20"]:
        failures.append(f"good README: comments {[s.comment for s in ex.steps]}, not shell {ex.not_shell}")
    if [s.argv for s in ex.steps if s.line == 15] != [[JITCTL, "evict", "--kernel", "moe.*", "--include-pinned", "--dry-run"]]:
        failures.append("good README: the quoted glob was not kept as one word")
    for f in failures:
        print("FAILED: " + f, file=sys.stderr)
    if failures:
        return 1
    print(f"readme_walkthrough --self-test: ok ({len(CASES) + 1} READMEs, each problem found)")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test()
    flags = {a for a in argv if a.startswith("--")}
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 2 or flags - {"--plan", "--keep"}:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return walk(Path(args[0]).resolve(), Path(args[1]), "--keep" in flags, "--plan" in flags)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
