"""Helpers shared by the deploy checkers (check_*.py): the flags a binary's
--help lists, the daemon's drain deadline, findings collected and reported
together so that one run shows every problem."""

import os
import re
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def help_flags(binary, *args):
    """Every --flag that `binary [args] --help` prints (options and the
    flags its examples use)."""
    result = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise SystemExit(f"{binary} {' '.join(args)} --help exited {result.returncode}: {result.stderr}")
    return set(_FLAG.findall(result.stdout)), result.stdout


def flags_in(arguments):
    """The --flags in an argument list ("--flag value" or "--flag=value")."""
    return [a.split("=", 1)[0] for a in arguments if a.startswith("--")]


def flag_value(arguments, flag):
    """The value of the last `flag` in an argument list, or None."""
    value = None
    for i, a in enumerate(arguments):
        if a == flag and i + 1 < len(arguments):
            value = arguments[i + 1]
        elif a.startswith(flag + "="):
            value = a.split("=", 1)[1]
    return value


def drain_deadline_seconds():
    """How long the daemon drains after SIGTERM (daemon/main.cpp's
    kDrainDeadline): stop timeouts must be longer."""
    with open(os.path.join(REPO, "daemon", "main.cpp")) as f:
        match = re.search(r"kDrainDeadline\{(\d+)\}", f.read())
    if not match:
        raise SystemExit("daemon/main.cpp: kDrainDeadline{N} not found; update tests/deploy/deploy_checks.py")
    return int(match.group(1))


def documented_config_keys():
    """The keys deploy/jitd.toml documents (`key =` or `# key =`); its test
    (test_daemon_example_config) ties them to what the daemon accepts."""
    keys = set()
    with open(os.path.join(REPO, "deploy", "jitd.toml")) as f:
        for line in f:
            match = re.match(r"^(?:# )?([a-z_]+) = ", line)
            if match:
                keys.add(match.group(1))
    return keys


class Findings:
    """Problems found, printed together; exit status 1 when there are any."""

    def __init__(self, what):
        self.what = what
        self.problems = []
        self.checks = 0

    def check(self, condition, message):
        self.checks += 1
        if not condition:
            self.problems.append(message)
        return condition

    def finish(self):
        for problem in self.problems:
            print(f"{self.what}: {problem}")
        if self.problems:
            print(f"{self.what}: {len(self.problems)} of {self.checks} checks failed")
            sys.exit(1)
        print(f"{self.what}: all {self.checks} checks passed")
