#!/usr/bin/env python3
"""Dependencies point the right way: the daemon's link line holds no client
library (what both need is in jitd_base and jitd_spec_file).

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
]


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
                problems.append(f"{target} links {lib}: the daemon must not depend on the client "
                                f"(move what it needs into jitd_base); its jitd libraries: {', '.join(sorted(libs))}")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "daemon", "CMakeFiles", "jitd.dir")
        os.makedirs(d)
        with open(os.path.join(d, "link.txt"), "w") as f:
            f.write("c++ main.cpp.o -o jitd libjitd_daemon.a ../client/libjitd_client.a ../base/libjitd_base.a\n")
        bad = check(tmp)
        assert len(bad) == 1 and "jitd links jitd_client" in bad[0], bad
        with open(os.path.join(d, "link.txt"), "w") as f:
            f.write("c++ main.cpp.o -o jitd libjitd_daemon.a ../base/libjitd_base.a\n")
        assert check(tmp) == [], check(tmp)
        os.remove(os.path.join(d, "link.txt"))
        missing = check(tmp)
        assert len(missing) == 1 and "no link line" in missing[0], missing
    with tempfile.TemporaryDirectory() as tmp:  # the Ninja form
        with open(os.path.join(tmp, "build.ninja"), "w") as f:
            f.write("build daemon/jitd: CXX_EXECUTABLE_LINKER__jitd_Release daemon/main.cpp.o\n"
                    "  LINK_LIBRARIES = daemon/libjitd_daemon.a client/libjitd_client.a\n"
                    "  TARGET_FILE = daemon/jitd\n")
        bad = check(tmp)
        assert len(bad) == 1 and "jitd links jitd_client" in bad[0], bad
    print("check_link_lines self-test: a forbidden library, a clean line and a missing line are each told apart")


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
