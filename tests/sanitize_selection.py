#!/usr/bin/env python3
"""The ctest -R regex of what tests/sanitize.sh runs under the sanitizers.

    sanitize_selection.py BUILD --targets PROGRAM... [--exclude SUITE...]
    sanitize_selection.py --self-test

Reads `ctest --show-only=json-v1` of BUILD, keeps every test whose command
runs one of the PROGRAMs (test executables, by file name), drops the tests
of the excluded gtest suites (the part of a name before its first '.', such
as "Soak" or "Damage/CorruptBlob"), and prints `^(SUITE|SUITE...)\\.`
naming the suites left: a regex over suites, not test names, stays far
below the size ctest's regular expressions allow.

Fails (exit 1, saying which) when a PROGRAM has no test in BUILD, when an
excluded suite matches no test, or when the regex would also select tests
of programs outside the list (a suite name shared with another program):
the list of what is sanitized cannot silently go stale. Programs without
tests (jitd, jitctl: the daemon and CLI the tests run) may be listed; they
are skipped when no test's command names them and no test was expected.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

# Programs built for the tests to run, not test programs themselves.
NOT_TEST_PROGRAMS = {"jitd", "jitctl"}


def suite_of(name: str) -> str:
    return name.split(".", 1)[0]


def select(tests: list[dict], targets: list[str], excluded: list[str]) -> tuple[str, list[str], int]:
    """(regex, problems, selected count) for ctest's test list."""
    problems: list[str] = []
    by_program: dict[str, list[str]] = {}
    for test in tests:
        command = test.get("command") or []
        program = os.path.basename(command[0]) if command else ""
        by_program.setdefault(program, []).append(test["name"])
    for target in targets:
        if target not in NOT_TEST_PROGRAMS and not by_program.get(target):
            problems.append(f"{target}: no test of this program is in the build's test list")
    chosen = [name for target in targets for name in by_program.get(target, [])]
    excluded_set = set(excluded)
    for suite in excluded:
        if not any(suite_of(name) == suite for name in chosen):
            problems.append(f"excluded suite {suite!r} matches no test of the sanitized programs")
    kept = [name for name in chosen if suite_of(name) not in excluded_set]
    suites = sorted({suite_of(name) for name in kept})
    outside = [name for program, names in by_program.items() if program not in targets
               for name in names if suite_of(name) in suites]
    for name in outside[:10]:
        problems.append(f"suite {suite_of(name)!r} is also in a program that is not sanitized ({name})")
    for suite in suites:
        if not re.fullmatch(r"[A-Za-z0-9_/]+", suite):
            problems.append(f"suite {suite!r} has characters the regex would have to escape")
    regex = "^(" + "|".join(suites) + ")\\."
    return regex, problems, len(kept)


def self_test() -> int:
    def t(name: str, program: str) -> dict:
        return {"name": name, "command": [f"/b/tests/{program}", "--gtest_filter=x"]}

    tests = [t("Cache.A", "test_cache_cache"), t('Damage/CorruptBlob.B/"flip"', "test_cache_cache"),
             t("Seeded.C", "test_cache_eviction"), t("SeededServeTest.D", "test_daemon_serve"),
             t("Soak.E", "test_system_soak"), t("Other.F", "test_other")]
    regex, problems, n = select(tests, ["jitd", "test_cache_cache", "test_cache_eviction", "test_daemon_serve",
                                        "test_system_soak"], ["Soak"])
    checks = [
        (regex == "^(Cache|Damage/CorruptBlob|Seeded|SeededServeTest)\\.", f"regex {regex}"),
        (problems == [] and n == 4, f"problems {problems}, {n} selected"),
    ]
    _, problems, _ = select(tests, ["test_cache_cache", "test_gone"], ["Soak"])
    checks.append((any("test_gone: no test" in p for p in problems), f"a program without tests: {problems}"))
    checks.append((any("'Soak' matches no test" in p for p in problems), f"a stale exclusion: {problems}"))
    _, problems, _ = select(tests + [t("Cache.Z", "test_other")], ["test_cache_cache"], [])
    checks.append((any("also in a program that is not sanitized" in p for p in problems), f"shared: {problems}"))
    failed = [why for ok, why in checks if not ok]
    for why in failed:
        print(f"sanitize_selection --self-test: FAILED: {why}", file=sys.stderr)
    print("sanitize_selection --self-test: " + ("ok" if not failed else f"{len(failed)} failed"), file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) < 4 or argv[2] != "--targets":
        print(__doc__, file=sys.stderr)
        return 2
    build = argv[1]
    rest = argv[3:]
    excluded: list[str] = []
    if "--exclude" in rest:
        at = rest.index("--exclude")
        rest, excluded = rest[:at], rest[at + 1:]
    listing = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True)
    if listing.returncode != 0:
        print(f"sanitize_selection: ctest --show-only failed in {build}: {listing.stderr.strip()}", file=sys.stderr)
        return 1
    regex, problems, n = select(json.loads(listing.stdout)["tests"], rest, excluded)
    if problems:
        for problem in problems:
            print(f"sanitize_selection: {problem}", file=sys.stderr)
        return 1
    print(f"sanitize_selection: {n} tests of {len(rest)} programs under the sanitizers", file=sys.stderr)
    print(regex)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
