#!/usr/bin/env python3
"""Small units: no source file of jitd's libraries and programs (tests
aside) over MAX_FILE_LINES lines, and no function over MAX_FUNCTION_LINES,
except the few listed in ALLOWED with the reason they stay whole.

    check_sizes.py SOURCE_DIR     check the tracked sources
    check_sizes.py --self-test    prove the check finds a long function

A function is a definition that starts at column 0 (namespace scope:
free functions and out-of-line members); its length runs from its first
line to its closing brace, counted with strings, characters and comments
skipped. An ALLOWED entry that no longer matches anything fails the check
too, so the list cannot go stale.
"""
import os
import re
import subprocess
import sys
import tempfile

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80

# path or path:function -> why it stays as it is.
ALLOWED = {
    "cache/src/cache_index.cpp": "the SQLite index: schema, statements and their transactions, one per operation",
    "daemon/serving/kernel_service.cpp": "the request path's one state machine (memory, disk, remote, flight)",
    "client/jitctl/main.cpp:main": "registers every verb's flags in the order --help shows them",
    "daemon/serving/kernel_service.cpp:Begin": "the tiers in order, each a few lines; read top to bottom as tier.h says",
    "daemon/manifest/resolver.cpp:ResolveUncached": "a request becomes a job and a key in the order KERNELS.md spells",
    "cache/remote/remote_tier.cpp:Fetch": "one fetch: lease, read, verify, breaker, in the order remote.h describes",
    "daemon/rpc/local_server.cpp:Run": "the local path's epoll loop and its one dispatch",
    "daemon/compiler/nvrtc_program.cpp:CompileInProcess": "NVRTC's calls in the order its API requires",
    "cache/blob/src/blob_format.cpp:DecodeBlobView": "the blob format's fields in file order, each checked",
    "daemon/config/settings.cpp": "the settings table: one row per setting, in the order jitd --help lists them",
}

SKIP_STARTS = ("//", "#", "namespace", "}", "{", "using", "template", "class ", "struct ", "enum ", "extern",
               "static_assert", "inline constexpr", "constexpr", "TEST", "INSTANTIATE", "typedef", "union ")


def strip_code(text):
    """`text` with strings, characters and comments blanked, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + (m.group(1) if m else "") + '"', i)
            j = n if end < 0 else end + len(m.group(1) if m else "") + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, length) of every column-0 function definition."""
    code = strip_code(text)
    lines = code.split("\n")
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line and not line[0].isspace() and "(" in line and not line.startswith(SKIP_STARTS):
            # The body opens at the first '{' before any ';' (a declaration).
            offset = sum(len(l) + 1 for l in lines[:i])
            semi = code.find(";", offset)
            brace = code.find("{", offset)
            if brace >= 0 and (semi < 0 or brace < semi):
                depth, j = 0, brace
                while j < len(code):
                    if code[j] == "{":
                        depth += 1
                    elif code[j] == "}":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                last = code.count("\n", 0, j)
                m = re.search(r"([~A-Za-z_][A-Za-z0-9_]*)\s*\(", line)
                name = m.group(1) if m else "?"
                if name == "operator":
                    name = "operator"
                found.append((name, i + 1, last - i + 1))
                i = last + 1
                continue
        i += 1
    return found


def check(root, files):
    problems, used = [], set()
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        count = text.count("\n")
        if count > MAX_FILE_LINES:
            if path in ALLOWED:
                used.add(path)
            else:
                problems.append(f"{path}: {count} lines (at most {MAX_FILE_LINES}); split it, or say in ALLOWED why not")
        for name, line, length in functions(text):
            if length <= MAX_FUNCTION_LINES:
                continue
            entry = f"{path}:{name}"
            if entry in ALLOWED:
                used.add(entry)
            else:
                problems.append(f"{path}:{line}: {name} is {length} lines (at most {MAX_FUNCTION_LINES}); "
                                "split it, or say in ALLOWED why not")
    for entry in sorted(set(ALLOWED) - used):
        problems.append(f"ALLOWED names {entry}, which is no longer too long: remove it from the list")
    return problems


def tracked_sources(root):
    try:
        out = subprocess.check_output(["git", "-C", root, "ls-files", "*.cpp", "*.h", "*.cc"], text=True,
                                      stderr=subprocess.DEVNULL).split()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every source under the tree
        out = []
        for top in ("base", "cache", "client", "daemon", "kernels", "proto"):
            for d, _, names in os.walk(os.path.join(root, top)):
                out += [os.path.relpath(os.path.join(d, n), root) for n in names if n.endswith((".cpp", ".h", ".cc"))]
    return [p for p in out if not p.startswith(("tests/", "shared/"))]


def self_test():
    with tempfile.TemporaryDirectory() as d:
        long_body = "\n".join(f"  x += {i};  // a '}}' in a comment" for i in range(MAX_FUNCTION_LINES))
        src = ('const char* kText = "{ not a body";\n'
               f"int Long(int x) {{\n{long_body}\n  return x;\n}}\n"
               "int Short(int x) { return x + 1; }\n")
        with open(os.path.join(d, "long.cpp"), "w") as f:
            f.write(src)
        problems = check(d, ["long.cpp"])
        flagged = [p for p in problems if "Long is" in p]
        if len(flagged) != 1 or any("Short" in p for p in problems):
            print("self-test: expected exactly Long to be flagged, got:", problems)
            return 1
    print("self-test: a long function is found, a short one is not")
    return 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    root = argv[1]
    problems = check(root, tracked_sources(root))
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"sizes: no file over {MAX_FILE_LINES} lines and no function over {MAX_FUNCTION_LINES} "
          f"but the {len(ALLOWED)} in ALLOWED")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
