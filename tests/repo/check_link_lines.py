#!/usr/bin/env python3
"""Dependencies point the right way: the daemon's link line holds no client
library (what both need is in jitd_base and jitd_spec_file); a program
linking jitd_client alone holds no cache library (blobs are decoded by
jitd_blob; the fallback, which reads a directory through the cache's
read-only level, is the optional jitd_client_fallback); and jitctl, which
links that fallback, holds no remote tier.

    check_link_lines.py BUILD_DIR     check this build tree
    check_link_lines.py --self-test   prove the check fails on a bad tree

A link line is read from the build tree CMake wrote: CMakeFiles/T.dir/link.txt
(Makefile generators) or build.ninja's LINK_LIBRARIES (Ninja). A target whose
link line cannot be found fails the check: a rule that silently checks
nothing is not a rule.
"""
import os
import re
import sys
import tempfile

# (program, its directory in the build tree, libraries it must not link)
RULES = [
    ("jitd", "daemon", ["jitd_client", "jitd_jitctl"]),
    ("jitctl", "client", ["jitd_remote", "jitd_serving"]),
    # tests/repo/client_link_probe.cpp: a program that links jitd_client and
    # nothing else, so that its link line is the client's own closure.
    ("client_link_probe", "tests/repo", ["jitd_cache", "jitd_client_fallback", "jitd_remote"]),
]

WHY = {
    "jitd_client": "the daemon must not depend on the client (move what it needs into jitd_base)",
    "jitd_jitctl": "the daemon must not depend on the client (move what it needs into jitd_base)",
    "jitd_cache": "the client must not depend on the cache (decode blobs with jitd_blob)",
    "jitd_client_fallback": "the fallback is an optional component, not a part of jitd_client",
    "jitd_remote": "the client must not depend on the remote tier",
    "jitd_serving": "the client must not depend on the daemon's engine",
}


def link_line(build, subdir, target):
    link_txt = os.path.join(build, subdir, "CMakeFiles", f"{target}.dir", "link.txt")
    if os.path.exists(link_txt):
        with open(link_txt) as f:
            return f.read()
    ninja = os.path.join(build, "build.ninja")
    if os.path.exists(ninja):
        with open(ninja) as f:
            text = f.read()
        out = re.escape(os.path.join(subdir, target))
        m = re.search(rf"^build {out}: .*?\n((?:  .*\n)*)", text, re.M)
        if m:
            return m.group(0)
    return None


def check(build):
    problems = []
    for target, subdir, forbidden in RULES:
        line = link_line(build, subdir, target)
        if line is None:
            problems.append(f"{target}: no link line in {build} (looked for {subdir}/CMakeFiles/{target}.dir/link.txt "
                            "and build.ninja); build it first")
            continue
        libs = set(re.findall(r"lib(jitd_[A-Za-z0-9_]+)\.a", line))
        for lib in forbidden:
            if lib in libs:
                problems.append(f"{target} links {lib}: {WHY[lib]}; its jitd libraries: {', '.join(sorted(libs))}")
    return problems


def self_test():
    clean = {
        "jitd": "c++ main.cpp.o -o jitd libjitd_daemon.a ../base/libjitd_base.a\n",
        "jitctl": "c++ main.cpp.o -o jitctl libjitd_jitctl.a libjitd_client.a libjitd_client_fallback.a "
                  "../cache/blob/libjitd_blob.a\n",
        "client_link_probe": "c++ probe.o -o client_link_probe ../../client/libjitd_client.a "
                             "../../cache/blob/libjitd_blob.a\n",
    }
    bad_lines = {
        "jitd": ("../client/libjitd_client.a", "jitd links jitd_client"),
        "jitctl": ("../cache/remote/libjitd_remote.a", "jitctl links jitd_remote"),
        "client_link_probe": ("../../client/libjitd_client_fallback.a", "client_link_probe links jitd_client_fallback"),
    }

    def write(tmp, target, text):
        subdir = next(r[1] for r in RULES if r[0] == target)
        d = os.path.join(tmp, subdir, "CMakeFiles", f"{target}.dir")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "link.txt"), "w") as f:
            f.write(text)
        return os.path.join(d, "link.txt")

    with tempfile.TemporaryDirectory() as tmp:
        paths = {t: write(tmp, t, line) for t, line in clean.items()}
        assert check(tmp) == [], check(tmp)
        for target, (lib, said) in bad_lines.items():
            write(tmp, target, clean[target].rstrip("\n") + " " + lib + "\n")
            bad = check(tmp)
            assert len(bad) == 1 and said in bad[0], bad
            write(tmp, target, clean[target])
        os.remove(paths["jitctl"])
        missing = check(tmp)
        assert len(missing) == 1 and "jitctl: no link line" in missing[0], missing
    with tempfile.TemporaryDirectory() as tmp:  # the Ninja form
        with open(os.path.join(tmp, "build.ninja"), "w") as f:
            f.write("build daemon/jitd: CXX_EXECUTABLE_LINKER__jitd_Release daemon/main.cpp.o\n"
                    "  LINK_LIBRARIES = daemon/libjitd_daemon.a client/libjitd_client.a\n"
                    "  TARGET_FILE = daemon/jitd\n"
                    "build client/jitctl: CXX_EXECUTABLE_LINKER__jitctl_Release client/main.cpp.o\n"
                    "  LINK_LIBRARIES = client/libjitd_client.a cache/remote/libjitd_remote.a\n"
                    "build tests/repo/client_link_probe: CXX_EXECUTABLE_LINKER__client_link_probe_Release p.o\n"
                    "  LINK_LIBRARIES = client/libjitd_client.a\n")
        bad = check(tmp)
        assert len(bad) == 2 and "jitd links jitd_client" in bad[0] and "jitctl links jitd_remote" in bad[1], bad
    print("check_link_lines self-test: each rule's forbidden library, clean lines and a missing line are told apart")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = check(sys.argv[1])
    for p in problems:
        print(p, file=sys.stderr)
    if not problems:
        print(f"link lines: {', '.join(r[0] for r in RULES)} link none of the libraries they must not")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
