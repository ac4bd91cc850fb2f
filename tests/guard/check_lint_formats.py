#!/usr/bin/env python3
"""`jitd lint` as CI consumes it, checked with the parsers CI uses.

    check_lint_formats.py formats JITD FIXTURES
        --format json, junit and github on FIXTURES/seed_misses (two planted
        misses): exit 1, the JSON through json, the JUnit XML through
        xml.etree.ElementTree, one ::error command per finding.
    check_lint_formats.py bypass JITD FIXTURES
        the trees whose text once passed the guard (FIXTURES/bypass_*, and
        module_check, which only its compiled module gives away): one
        finding each, real NVRTC compiles.
    check_lint_formats.py hostile JITD FIXTURES TMPDIR
        a kernel name, a param value, a file name and source text that try
        to write GitHub workflow commands or terminal escapes: refused at
        load, or escaped in every line of every format.
    check_lint_formats.py lock JITD FIXTURES TMPDIR
        --write-lock on FIXTURES/lint_tiny (one kernel, two instantiations,
        real NVRTC compiles), then `jitd warm --lock` into TMPDIR/cache: it
        warms exactly the lock's entries; a lint with findings writes no
        lock; a tree edited after locking fails the warm-up.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SEED = {  # file -> (line, kernel, a piece of the message)
    "diffusion/modulate_scale_shift.cu": (6, "diffusion.modulate_scale_shift", "namespace sglang_modulate_scale_shift"),
    "diffusion/residual_gate_add.cu": (3, "diffusion.residual_gate_add", "anonymous namespace"),
}


def run(args, expect):
    p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if p.returncode != expect:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}, expected {expect}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def check(cond, what, context=""):
    if not cond:
        sys.exit(f"FAILED: {what}\n{context}")


def check_json(jitd, tree):
    p = run([jitd, "lint", "--kernels", tree, "--arch", "sm_90", "--format", "json", "--jobs", "1"], 1)
    doc = json.loads(p.stdout)  # the whole of stdout is the document
    check(doc["ok"] is False and doc["namespace"] == "sglang" and doc["tree_dir"] == tree, "json header", p.stdout)
    check(doc["archs"] == ["sm_90"] and doc["nvrtc_version"], "json archs, nvrtc", p.stdout)
    check(doc["counts"]["findings"] == 2 and doc["counts"]["source_findings"] == 2, "json counts", p.stdout)
    got = {f["file"]: (f["line"], f["kernel"], f["message"]) for f in doc["findings"]}
    check(set(got) == set(SEED), f"json files {sorted(got)}", p.stdout)
    for file, (line, kernel, piece) in SEED.items():
        check(got[file][:2] == (line, kernel) and piece in got[file][2], f"json finding of {file}", p.stdout)
    check(all(f["check"] == "source" for f in doc["findings"]), "json checks", p.stdout)
    insts = {(i["kernel"], i["params"], i["arch"]): i for i in doc["instantiations"]}
    check(insts[("moe.scale", "", "sm_90")]["ok"] is True, "moe.scale compiled", p.stdout)
    check(sum(i["skipped"] for i in doc["instantiations"]) == 3, "3 skipped instantiations", p.stdout)


def check_junit(jitd, tree):
    p = run([jitd, "lint", "--kernels", tree, "--arch", "sm_90", "--format", "junit", "--workers", "1"], 1)
    root = ET.fromstring(p.stdout)
    check(root.tag == "testsuites", "junit root", p.stdout)
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    guard, compiles = suites["namespace guard"], suites["compile-all"]
    cases = {c.get("name"): c for c in guard.findall("testcase")}
    check(set(cases) == set(SEED) | {"moe/scale.cu"}, f"junit source cases {sorted(cases)}", p.stdout)
    check(guard.get("tests") == "3" and guard.get("failures") == "2", "junit guard counts", p.stdout)
    for file, (line, kernel, piece) in SEED.items():
        failures = cases[file].findall("failure")
        check(len(failures) == 1 and piece in failures[0].get("message"), f"junit failure of {file}", p.stdout)
        check(f"{file}:{line}: [{kernel}]" in failures[0].text, f"junit failure text of {file}", p.stdout)
    check(not cases["moe/scale.cu"].findall("failure"), "moe/scale.cu passes", p.stdout)
    check(compiles.get("tests") == "4" and compiles.get("failures") == "0" and compiles.get("skipped") == "3",
          "junit compile-all counts", p.stdout)
    check(len(compiles.findall("testcase")) == 4 and len(compiles.findall("testcase/skipped")) == 3,
          "junit compile-all cases", p.stdout)
    check(root.get("tests") == "7" and root.get("failures") == "2", "junit totals", p.stdout)


def check_github(jitd, tree):
    p = run([jitd, "lint", "--kernels", tree, "--source-only", "--format", "github"], 1)
    errors = [l for l in p.stdout.splitlines() if l.startswith("::error ")]
    check(len(errors) == 2, "two ::error commands", p.stdout)
    for (file, (line, kernel, piece)), command in zip(sorted(SEED.items()), errors):
        path = os.path.normpath(os.path.join(tree, file)).replace(":", "%3A").replace(",", "%2C")
        head = f"::error file={path},line={line},title=jitd lint::[{kernel}] "
        check(command.startswith(head) and piece in command, f"github command of {file}: want {head}", command)
    check(re.search(r"^jitd lint: 2 findings \(2 namespace guard, 0 compile-all\)", p.stdout, re.M), "summary",
          p.stdout)


def read_lock(path):
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f)
    except ImportError:  # Python < 3.11: the four keys of each entry are enough
        text = open(path).read()
        entries = re.findall(r'kernel = "(.*)"\nparams = "(.*)"\narch = "(.*)"\nkey = "(.*)"', text)
        return {"schema": 1, "instantiation": [dict(zip(("kernel", "params", "arch", "key"), e)) for e in entries]}


def warmed(stderr):
    # Progress writes one plain line per item when not on a terminal.
    return sorted(set(re.findall(r"(tiny\.fill\{[^}]*\}@sm_\w+)", stderr)))


def check_lock(jitd, fixtures, tmp):
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    tree, lock = os.path.join(fixtures, "lint_tiny"), os.path.join(tmp, "tiny.lock")
    bad = run([jitd, "lint", "--kernels", os.path.join(fixtures, "seed_misses"), "--source-only", "--write-lock",
               lock], 2)  # --write-lock needs the compiles
    bad = run([jitd, "lint", "--kernels", os.path.join(fixtures, "seed_misses"), "--arch", "sm_90", "--write-lock",
               lock], 1)
    check(not os.path.exists(lock) and "not written" in bad.stdout, "no lock after findings", bad.stdout)
    p = run([jitd, "lint", "--kernels", tree, "--arch", "sm_90", "--write-lock", lock], 0)
    check(f"wrote {lock}: 2 instantiations locked" in p.stdout, "lint says it wrote the lock", p.stdout)
    doc = read_lock(lock)
    check(doc["schema"] == 1 and doc.get("namespace", "sglang") == "sglang", "lock header", open(lock).read())
    entries = {(e["kernel"], e["params"], e["arch"]) for e in doc["instantiation"]}
    check(entries == {("tiny.fill", "dtype=fp32", "sm_90"), ("tiny.fill", "dtype=fp64", "sm_90")}, "lock entries",
          open(lock).read())
    check(all(re.fullmatch(r"[0-9a-f]{64}", e["key"]) for e in doc["instantiation"]), "lock keys", open(lock).read())
    run([jitd, "warm", "--cache-dir", os.path.join(tmp, "cache"), "--lock", lock, "--all"], 2)
    cache = os.path.join(tmp, "cache")
    p = run([jitd, "warm", "--cache-dir", cache, "--kernels", tree, "--lock", lock, "--workers", "1"], 0)
    want = ["tiny.fill{dtype=fp32}@sm_90", "tiny.fill{dtype=fp64}@sm_90"]
    check(warmed(p.stderr) == want, f"warmed {warmed(p.stderr)}", p.stdout + p.stderr)
    check("2 compiled, 0 already cached, 0 failed" in p.stdout, "warm counts", p.stdout)
    p = run([jitd, "warm", "--cache-dir", cache, "--kernels", tree, "--lock", lock, "--workers", "1"], 0)
    check("0 compiled, 2 already cached, 0 failed" in p.stdout, "second warm: all cached", p.stdout)
    edited = os.path.join(tmp, "edited")
    shutil.copytree(tree, edited)
    with open(os.path.join(edited, "fill.cu"), "a") as f:
        f.write("// edited after locking\n")
    p = run([jitd, "warm", "--cache-dir", cache, "--kernels", edited, "--lock", lock, "--workers", "1"], 1)
    check("2 failed" in p.stdout and "is locked with key" in p.stdout, "an edited tree fails the lock", p.stdout)


BYPASS = {  # tree -> (file, a piece of its finding)
    "bypass_if0": ("fill.cu:4: [bypass.fill]", 'in namespace sglang: extern "C" gives it a C name'),
    "bypass_cuda_extension": ("fill.cuda:1: [bypass.fill]", 'is at global scope: extern "C"'),
    "bypass_digraphs": ("fill.cu:3: [bypass.fill]", 'is at global scope: extern "C"'),
    "bypass_comment_splice": ("fill.cu:3: [bypass.fill]", 'is at global scope: extern "C"'),
    "module_check": ("fill.cu: [bypass.fill] sm_90: compiled module:",
                     "it defines kernel `leak(float*)` (_Z4leakPf) outside namespace sglang"),
}


def check_bypass(jitd, fixtures):
    """Each tree whose text once passed the guard: a finding, exit 1."""
    for name, (head, piece) in BYPASS.items():
        tree = os.path.join(fixtures, name)
        p = run([jitd, "lint", "--kernels", tree, "--arch", "sm_90", "--jobs", "1"], 1)
        found = [l for l in p.stdout.splitlines() if l.startswith(head)]
        check(len(found) == 1 and piece in found[0], f"{name}: the finding {head} ... {piece}", p.stdout)
        check(not re.search(r"\b0 source files", p.stdout), f"{name}: its source is scanned", p.stdout)


def commands(text):
    """The lines a GitHub Actions runner would read as workflow commands."""
    return [l for l in text.splitlines() if l.lstrip().startswith("::") or l.lstrip().startswith("##[")]


def check_hostile(jitd, tmp):
    """Names, files and sources that try to write workflow commands or
    terminal escapes: refused at load, or escaped in every format."""
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    # A kernel name and a param value holding a newline and a command.
    for field, name, param in (
            ("name", "x\\n::stop-commands::tok\\n", ""),
            ("value", "ok.k", '  [[kernel.params]]\n  name = "t"\n  type = "enum"\n'
                              '  values = { "a\\n::warning::x" = "int" }\n'),
            ("name_esc", "k\\u001b[31m", ""),
            ("cpp_esc", "ok.k", '  [[kernel.params]]\n  name = "t"\n  type = "enum"\n'
                                '  values = { a = "int\\u001b]0;owned\\u0007" }\n')):
        tree = os.path.join(tmp, field)
        os.makedirs(tree)
        with open(os.path.join(tree, "kernels.toml"), "w") as f:
            f.write(f'schema = 1\n\n[[kernel]]\nname = "{name}"\nsource = "k.cu"\n'
                    f'name_expressions = ["sglang::k"]\n{param}')
        with open(os.path.join(tree, "k.cu"), "w") as f:
            f.write("namespace sglang { __global__ void k() {} }\n")
        p = run([jitd, "lint", "--kernels", tree, "--format", "github", "--source-only"], 2)
        check(not commands(p.stdout + p.stderr), f"hostile {field}: no workflow command", p.stdout + p.stderr)
        shown = "\\x1b" if field.endswith("esc") else "\\x0a"
        check(re.search(r"kernels\.toml:\d+: ", p.stderr) and shown in p.stderr and "\x1b" not in p.stderr,
              f"hostile {field}: refused naming the line, the character shown as {shown}", p.stderr)
    # A file whose name and text hold a command and an escape sequence:
    # a finding, escaped in every format.
    tree = os.path.join(tmp, "file")
    os.makedirs(tree)
    with open(os.path.join(tree, "kernels.toml"), "w") as f:
        f.write('schema = 1\n\n[[kernel]]\nname = "ok.k"\nsource = "k.cu"\nname_expressions = ["sglang::k"]\n')
    with open(os.path.join(tree, "k.cu"), "w") as f:
        f.write("namespace sglang { __global__ void k() {} }\n")
    with open(os.path.join(tree, "evil\n::stop-commands::tok\n.cu"), "w") as f:
        f.write("int \x1b[31m x;\n")
    p = run([jitd, "lint", "--kernels", tree, "--format", "github", "--source-only"], 1)
    errors = [l for l in p.stdout.splitlines() if l.startswith("::error ")]
    check(len(errors) == 1 and "%0A%3A%3Astop-commands%3A%3Atok%0A.cu" in errors[0], "one escaped annotation",
          p.stdout)
    check(commands(p.stdout) == errors and not commands(p.stderr), "no other workflow command", p.stdout + p.stderr)
    check("\x1b" not in p.stdout + p.stderr and "\\x1b" in p.stdout, "ESC shown as \\x1b", p.stdout)
    p = run([jitd, "lint", "--kernels", tree, "--source-only"], 1)
    check(not commands(p.stdout + p.stderr) and "\x1b" not in p.stdout, "text: no command, no ESC", p.stdout)
    check("evil\\x0a::stop-commands::tok\\x0a.cu:1: " in p.stdout, "text: the name on one line", p.stdout)
    # A reason lint cannot run that names a file of the tree (a link out of
    # it) is escaped too.
    os.symlink("/etc/hostname", os.path.join(tree, "link\n::stop-commands::tok\n.cu"))
    p = subprocess.run([jitd, "lint", "--kernels", tree, "--source-only", "--format", "github"], capture_output=True,
                       text=True, timeout=300)
    annotations = [l for l in p.stdout.splitlines() if l.startswith("::error ")]
    check(p.returncode in (1, 2), "a link's name: refused or reported", p.stdout + p.stderr)
    check(commands(p.stdout) == annotations and not commands(p.stderr), "a link's name: no workflow command",
          p.stdout + p.stderr)


def main():
    mode, jitd, fixtures = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "formats":
        tree = os.path.join(fixtures, "seed_misses")
        check_json(jitd, tree)
        check_junit(jitd, tree)
        check_github(jitd, tree)
    elif mode == "bypass":
        check_bypass(jitd, fixtures)
    elif mode == "hostile":
        check_hostile(jitd, sys.argv[4])
    else:
        check_lock(jitd, fixtures, sys.argv[4])
    print(f"check_lint_formats {mode}: ok")


if __name__ == "__main__":
    main()
