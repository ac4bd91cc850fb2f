#!/usr/bin/env bash
# tests/gpu/check_report.sh: the CPU-side check of the GPU run's scripts, on
# any machine (no GPU, no torch, no CuPy, no build needed). What it holds:
#
#   1. every tests/gpu/*.py compiles; run.sh and this script pass `bash -n`
#      (and shellcheck, where it is installed);
#   2. kernel_bench.py, crosscheck_torch.py and first_use.py --self-test: the
#      argument lists read from kernels/kernels.toml and packed at their
#      widths, launch rules, bytes moved, the MoE references by hand, ulp
#      arithmetic, the reports, the cross-check summary line counted by kind
#      of reference, first use's p50, p90 and per-run phases;
#   3. write_report.py --gtest-ran on fake gtest XMLs: all skipped, none, a
#      disabled one, missing or unreadable -> "no test ran"; one passed or one
#      failed -> "ran";
#   4. write_report.py on a fake OUT_DIR (the self-tests' fake benchmark and
#      cross-check sections, a fake gtest XML, steps, first-use figures), and
#      on one that holds almost nothing: report.md has every section, the
#      cross-check lines by kind of reference, first use's p50 and p90 and
#      per-phase table, the note on the align kernels' eager;
#   5. run.sh end to end with a fake bundle (a jitd that waits for SIGTERM, a
#      jitctl that answers stats, a test_gpu_kernels that writes a given XML):
#      with every test skipped the run fails with the step "no GPU test ran";
#      with tests run that step is absent and "GPU tests ran" passed; both
#      times every step is listed and report.md is written; host.txt names the
#      bundled jitd's revision, and the checkout's HEAD only where the checkout
#      is a repository of its own (a copy inside another repository: not).
#   6. With JITD_CHECK_TORCH_PYTHON=/path/to/python3 (a python with torch, on
#      the CPU): both scripts' --dry-run (the kernels emulated in torch), and
#      write_report.py on their real output. With also JITD_CHECK_JITCTL and
#      JITD_CHECK_ENDPOINT (a running daemon), the dry runs fetch every cubin
#      from it and check each lowered name's arguments against kernels.toml.
#
#     tests/gpu/check_report.sh          # prints one line per check; exit 1 if any failed
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
gpu=$root/tests/gpu
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitd-check-report.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
export PYTHONDONTWRITEBYTECODE=1
passed=0
failed=0

ok() { echo "ok   $1"; passed=$((passed + 1)); }
bad() {
  echo "BAD  $1"
  [ -z "${2:-}" ] || sed 's/^/     | /' "$2" | tail -n 25
  failed=$((failed + 1))
}
# check NAME COMMAND...: passes when COMMAND exits 0.
check() {
  local name=$1 log="$tmp/log.$((passed + failed))"
  shift
  if "$@" >"$log" 2>&1; then ok "$name"; else bad "$name" "$log"; fi
}
# expect_rc NAME RC COMMAND...: passes when COMMAND exits RC.
expect_rc() {
  local name=$1 want=$2 log="$tmp/log.$((passed + failed))" rc
  shift 2
  "$@" >"$log" 2>&1
  rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$name (exit $rc)"; else bad "$name: exit $rc, want $want" "$log"; fi
}
# has NAME FILE PATTERN...: passes when FILE has every (grep -E) pattern.
has() {
  local name=$1 file=$2 p
  shift 2
  for p in "$@"; do
    if ! grep -qE -- "$p" "$file" 2>/dev/null; then
      echo "     (no line matching '$p' in $file)" >"$tmp/has.log"
      bad "$name" "$tmp/has.log"
      return
    fi
  done
  ok "$name"
}

# --- 1. Syntax ----------------------------------------------------------------------
for py in "$gpu"/*.py; do
  check "py_compile $(basename "$py")" env PYTHONPYCACHEPREFIX="$tmp/pycache" python3 -m py_compile "$py"
done
check "bash -n run.sh" bash -n "$gpu/run.sh"
check "bash -n check_report.sh" bash -n "$gpu/check_report.sh"
if command -v shellcheck >/dev/null; then
  check "shellcheck run.sh check_report.sh" shellcheck "$gpu/run.sh" "$gpu/check_report.sh"
fi

# --- 2. Self-tests --------------------------------------------------------------------
mkdir -p "$tmp/fake"
check "kernel_bench.py --self-test" python3 "$gpu/kernel_bench.py" --self-test --self-test-out "$tmp/fake"
check "crosscheck_torch.py --self-test" python3 "$gpu/crosscheck_torch.py" --self-test --self-test-out "$tmp/fake"
check "first_use.py --self-test" python3 "$gpu/first_use.py" --self-test
check "kernel_bench.py --list" python3 "$gpu/kernel_bench.py" --list
# align_stages.py's stop points are in the kernel; each candidate patch
# still applies to it and has its own stop points; a patch whose context the
# kernel no longer has is refused; the reference skips ids outside the
# expert range (align_check.py uses it).
check "align_stages.py stop points, candidates and reference" python3 -c "
import glob, sys; sys.path.insert(0, '$gpu'); import align_stages as a
kernel = open(a.DEFAULT_SOURCE).read()
v = a.variants(kernel, strict=True)
assert v['full'][2] is a.RULE and v['full at 1024 threads'] == (v['full'][0], (), 1024)
assert v['full built for 512 threads'][2] == 512 and 'kAlignThreads = 512;' in v['full built for 512 threads'][0]
for c in glob.glob('$gpu/candidates/*.patch'):
    v = a.variants(a.load_source(c), strict=False)
    assert all(name in v for name in a.CANDIDATE_STAGES), c
    try:
        a.apply_patch(kernel.replace('num_experts', 'num_expertz'), open(c).read(), c)
        raise AssertionError(c + ' applied to a changed kernel')
    except SystemExit:
        pass
assert a.reference([0, -1, 2, 1, 5, 0], 3, 2) == ([0, 5, 3, 6, 2, 6], [0, 1, 2, -1, -1], 6)
"
expect_rc "kernel_bench.py without --jitctl is a usage error" 2 python3 "$gpu/kernel_bench.py"
expect_rc "crosscheck_torch.py without --jitctl is a usage error" 2 python3 "$gpu/crosscheck_torch.py"

# --- 3. Did a GPU test run? (run.sh's check, on fake gtest XML) -------------------------
xml() {  # xml FILE CASE...: a gtest XML with one testcase per CASE (passed, failed, skipped, disabled)
  local file=$1 c
  shift
  {
    echo '<?xml version="1.0" encoding="UTF-8"?>'
    echo "<testsuites tests=\"$#\" name=\"AllTests\">"
    echo '  <testsuite name="MoeTopkSum" tests="1">'
    for c in "$@"; do
      case $c in
        passed) echo '    <testcase name="A/x" status="run" result="completed" time="0.1" classname="S/MoeTopkSum" />' ;;
        failed) echo '    <testcase name="B/y" status="run" result="completed" time="0.1" classname="S/MoeTopkSum"><failure message="x differs" type=""/></testcase>' ;;
        skipped) echo '    <testcase name="C/z" status="run" result="skipped" time="0" classname="S/MoeTopkSum"><skipped message="gpu_session.cpp:52&#x0A;no CUDA driver on this host: dlopen failed"/></testcase>' ;;
        disabled) echo '    <testcase name="DISABLED_D" status="notrun" result="suppressed" time="0" classname="MoeTopkSum" />' ;;
      esac
    done
    echo '  </testsuite>'
    echo '</testsuites>'
  } >"$file"
}
xml "$tmp/all_skipped.xml" skipped skipped skipped
xml "$tmp/one_passed.xml" skipped passed skipped
xml "$tmp/one_failed.xml" failed skipped
xml "$tmp/disabled_only.xml" disabled skipped
xml "$tmp/empty.xml"
printf '<testsuites><testsuite' >"$tmp/garbage.xml"
ran() { python3 "$gpu/write_report.py" --gtest-ran "$1"; }
expect_rc "--gtest-ran: every test skipped -> none ran" 1 ran "$tmp/all_skipped.xml"
expect_rc "--gtest-ran: one passed -> ran" 0 ran "$tmp/one_passed.xml"
expect_rc "--gtest-ran: one failed -> ran" 0 ran "$tmp/one_failed.xml"
expect_rc "--gtest-ran: disabled and skipped -> none ran" 1 ran "$tmp/disabled_only.xml"
expect_rc "--gtest-ran: no test at all -> none ran" 1 ran "$tmp/empty.xml"
expect_rc "--gtest-ran: unreadable XML" 2 ran "$tmp/garbage.xml"
expect_rc "--gtest-ran: no XML" 2 ran "$tmp/missing.xml"
ran "$tmp/all_skipped.xml" >"$tmp/ran.txt"
has "--gtest-ran says the counts and the first reason" "$tmp/ran.txt" \
  '^3 tests, 0 ran, 3 skipped; first reason: no CUDA driver on this host'

# --- 4. write_report.py on fake OUT_DIRs ---------------------------------------------------
out=$tmp/fake
printf 'step\tstatus\tseconds\tlog\nstart jitd (ready)\tpassed\t1\tjitd.log\ntest_gpu_kernels\tpassed\t60\ttest_gpu_kernels.txt\nno GPU test ran\tfailed (3 tests, 0 ran, 3 skipped)\t0\ttest_gpu_kernels.xml\nkernel_bench.py (µs, GB/s, vs copy and eager)\tpassed\t40\tkernel_bench.txt\n' >"$out/steps.tsv"
echo "## nvidia-smi -L" >"$out/host.txt"
cp "$tmp/one_failed.xml" "$out/test_gpu_kernels.xml"
printf '%s\n' 'ok  modulate_scale_shift bf16 (1, 17, 64) vs eager' \
  "crosscheck: 36 of 36 cross-checks passed: 30 against eager PyTorch ops, 6 against the C++ client's output and eager PyTorch ops" \
  >"$out/crosscheck.txt"
printf '%s\n' 'ok  topk_sum ...' \
  "crosscheck_torch: 3 of 5 cross-checks passed, 2 failed: 1 against eager PyTorch ops, 3 against jitd's formulas evaluated in torch (2 passed), 1 against a Python reference of the MoE semantics (0 passed)" \
  >"$out/crosscheck_torch.txt"
printf 'ok  modulate ...\nkernel_bench: 44 passed, 2 failed (44 of 45 cases measured)\n' >"$out/kernel_bench.txt"
# first_use.json as first_use.py writes it: (a)'s runs whole (first_use's JSON
# lines), (d) times only; p50/p90 recomputed from the runs by write_report.py.
python3 - "$out/first_use.json" <<'EOF'
import json, sys
runs = [{"ms": 2.0 + i / 10, "phases_ms": {"connect": 0.5 + i / 100, "get_binary": 1.0, "module_load": 0.4,
                                         "get_function": 0.001}} for i in range(7)]
json.dump({"diffusion.modulate_scale_shift": {
    "(a) jitd, cached": {"median_ms": 2.3, "runs_ms": [r["ms"] for r in runs], "runs": runs,
                         "jitd_share_runs_ms": [r["ms"] - 0.401 for r in runs]},
    "(d) nvcc -cubin": {"median_ms": 600.0, "runs_ms": [600.0, 500.0, 700.0]}}}, open(sys.argv[1], "w"))
EOF
check "write_report.py on a fake OUT_DIR" python3 "$gpu/write_report.py" "$out" "tests/gpu/run.sh OUT"
has "report.md: every section" "$out/report.md" \
  '^## Steps' '^## Every kernel through daemon' '^## Cross-check: CuPy RawModule' \
  "^## Cross-check of all seven kernels: eager PyTorch ops, jitd's formulas in torch, the MoE semantics" \
  '^## First-use latency' '^## Kernel benchmark'
has "report.md: overall failed, the no-GPU-test step bold" "$out/report.md" \
  'SOME STEPS FAILED' '\| no GPU test ran \| \*\*failed \(3 tests, 0 ran, 3 skipped\)\*\*'
has "report.md: the benchmark tables (anchors, every case, notes)" "$out/report.md" \
  '^### The reference shapes of issue 17' '^### Every case' \
  '^\| kernel \| shape \| params \| path \| MB \| µs \| GB/s \| % of copy \| % of peak \| copy GB/s \| copy µs \| eager µs \| ×eager \| graph µs \| check \|$' \
  '^\| silu_and_mul ⚓ \| 8192x14336 \(in 8192x28672\) ' 'kernel_bench: 44 passed, 2 failed' \
  'of this run.s copy'
has "report.md: the cross-check summary table, with what each case is held against" "$out/report.md" \
  '^\| kernel \| dtype \| held to \| against \| cases \| passed \| errors \| max ulp \| min exact % \| eager max ulp \| eager min exact % \|$' \
  "^\\| topk_sum \\| bf16 \\| r \\| jitd's formula in torch \\| 2 \\| \\*\\*1\\*\\* \\|" \
  '^\| modulate_scale_shift \| bf16 \| r \| eager PyTorch op \| 1 \| 1 \|' '^### Failed cases'
# The counts by kind, in the scripts' summary lines (the self-test's fake rows
# for crosscheck_torch.md; the fake logs above for the lines report.md quotes).
has "report.md: the cross-check lines count the checks by kind of reference" "$out/report.md" \
  "^\\*\\*crosscheck: 36 of 36 cross-checks passed: 30 against eager PyTorch ops, 6 against the C\\+\\+ client's output" \
  "^\\*\\*crosscheck_torch: 3 of 5 cross-checks passed, 2 failed: 1 against eager PyTorch ops, 3 against jitd's formulas evaluated in torch \\(2 passed\\), 1 against a Python reference of the MoE semantics \\(0 passed\\)\\*\\*" \
  "^\`crosscheck_torch: 3 of 5 cross-checks passed, 2 failed: "
has "report.md: first use's p50 and p90, and each phase's over the runs" "$out/report.md" \
  '^\| path \| p50 ms \| p90 ms \| p50 x \(a\) \| runs \(ms\) \|$' '^\| \(a\) jitd, cached \| 2\.30 \| 2\.60 \| 1\.0 \|' \
  '^\| \(d\) nvcc -cubin \| 600\.00 \| 700\.00 \| 260\.9 \|' '^\| path \| phase \| p50 ms \| p90 ms \|$' \
  '^\| \(a\) jitd, cached \| connect \| 0\.530 \| 0\.560 \|$' "^\\| \\(a\\) jitd, cached \\| jitd's share .* \\| 1\\.899 \\| 2\\.199 \\|$"
has "report.md: the align kernels' eager is this project's torch code, not a peer kernel" "$out/report.md" \
  '^> \*\*align_block_size.*torch reimplementation of the semantics written in this project \(tests/gpu/torch_refs.py'

has "report.md: the gtest counts" "$out/report.md" '2 tests: 0 passed, 1 failed, 1 skipped'
mkdir -p "$tmp/empty_out"
printf 'step\tstatus\tseconds\tlog\nkernel_bench.py\ttimed out\t120\tkernel_bench.txt\n' >"$tmp/empty_out/steps.tsv"
printf 'ok  modulate ...\n' >"$tmp/empty_out/kernel_bench.txt"
check "write_report.py on an OUT_DIR that holds almost nothing" \
  python3 "$gpu/write_report.py" "$tmp/empty_out" "tests/gpu/run.sh OUT"
has "report.md: what is missing says so (the align note stands without kernel_bench.json)" \
  "$tmp/empty_out/report.md" '^> \*\*align_block_size\.\*\* Its "eager" is not a PyTorch op' \
  'kernel_bench.md missing: kernel_bench.py did not write its section; the end of .kernel_bench.txt. follows' \
  'crosscheck_torch.md missing' 'test_gpu_kernels.xml missing'

# --- 5. run.sh end to end, with a fake bundle ------------------------------------------------
bundle=$tmp/bundle
mkdir -p "$bundle/bin" "$bundle/lib"
cat >"$bundle/bin/jitd" <<'EOF'
#!/usr/bin/env bash
# fake jitd: --version names $FAKE_JITD_REVISION; else waits for SIGTERM,
# then exits 0 (a drained daemon)
if [ "${1:-}" = --version ]; then
  echo "jitd 0.1.0 (git ${FAKE_JITD_REVISION:-unknown})"
  exit 0
fi
trap 'echo "fake jitd: SIGTERM"; exit 0' TERM
echo "fake jitd $*"
while :; do sleep 0.1; done
EOF
cat >"$bundle/bin/jitctl" <<'EOF'
#!/usr/bin/env bash
# fake jitctl: answers stats; get has no daemon to ask
for arg in "$@"; do
  case $arg in
    stats) echo '{}'; exit 0 ;;
    get) echo "jitctl: get: UNAVAILABLE: fake bundle" >&2; exit 1 ;;
  esac
done
exit 1
EOF
cat >"$bundle/bin/test_gpu_kernels" <<'EOF'
#!/usr/bin/env bash
# fake test_gpu_kernels: copies $FAKE_GTEST_XML to --gtest_output=xml:PATH
for arg in "$@"; do
  case $arg in --gtest_output=xml:*) cp "$FAKE_GTEST_XML" "${arg#--gtest_output=xml:}" ;; esac
done
echo "[  SKIPPED ] (fake)"
EOF
printf '#!/bin/sh\necho "fake first_use: no GPU" >&2\nexit 1\n' >"$bundle/bin/first_use"
chmod +x "$bundle/bin/"*
mkdir -p "$tmp/tmpdir"
run_fake() {  # run_fake XML OUT [REVISION [RUN_SH]]: run.sh with the fake bundle; its exit status
  env JITD_GPU_BUNDLE="$bundle" FAKE_GTEST_XML="$1" FAKE_JITD_REVISION="${3:-}" JITD_GPU_DEADLINE_S=200 \
    JITD_FIRST_USE_RUNS=1 TMPDIR="$tmp/tmpdir" bash "${4:-$gpu/run.sh}" "$2"
}
# Whether this checkout is a git repository of its own (not an archive
# unpacked inside another one): host.txt names its HEAD only then.
own_repo=0
top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null) &&
  [ "$(cd "$top" && pwd -P)" = "$(cd "$root" && pwd -P)" ] && own_repo=1
head12=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null)
expect_rc "run.sh, fake bundle, every GPU test skipped: fails" 1 run_fake "$tmp/all_skipped.xml" "$tmp/run1" \
  0123456789ab
has "run.sh (all skipped): a failed step 'no GPU test ran'" "$tmp/run1/steps.tsv" \
  $'^no GPU test ran\tfailed \\(3 tests, 0 ran, 3 skipped; first reason: no CUDA driver'
has "run.sh (all skipped): every step recorded" "$tmp/run1/steps.tsv" \
  $'^start jitd \\(ready\\)\tpassed' $'^test_gpu_kernels\tpassed' $'^crosscheck.py' $'^crosscheck_torch.py' \
  $'^first_use.py' $'^kernel_bench.py' $'^jitctl stats\tpassed' $'^stop daemon \\(SIGTERM\\)\tpassed'
has "run.sh (all skipped): report.md written, with the new sections" "$tmp/run1/report.md" \
  'SOME STEPS FAILED' '^## Cross-check of all seven kernels' '^## Kernel benchmark' 'no GPU test ran'
if [ "$own_repo" = 1 ]; then
  # shellcheck disable=SC2016 # the backquotes are host.txt's, matched literally
  has "run.sh: host.txt names the binary's revision, the checkout's HEAD, and that they differ" "$tmp/run1/host.txt" \
    '^## the tree that ran$' '^jitd revision: 0123456789ab \(`jitd --version`: jitd 0\.1\.0 \(git 0123456789ab\)\)$' \
    '^checkout HEAD: [0-9a-f]{40} ' '^checkout: (dirty|clean)' \
    '^jitd revision vs checkout HEAD: DIFFER: the binary was built from 0123456789ab \(not a commit of this checkout\)'
else
  has "run.sh: host.txt names the binary's revision; the checkout is no repository of its own" "$tmp/run1/host.txt" \
    '^jitd revision: 0123456789ab ' '^checkout: not a git repository of its own'
fi
# shellcheck disable=SC2016 # the backquotes are markdown, matched literally
has "run.sh (all skipped): the bench and cross-check fail soft (summary lines, sections say why)" \
  "$tmp/run1/report.md" '^`kernel_bench: 0 passed, [0-9]+ failed' '^`crosscheck_torch: no cross-check ran: setup failed`' \
  '^\*\*kernel_bench: no case ran: setup failed: ' '^\*\*crosscheck_torch: no case ran: setup failed: '
if [ -s "$tmp/run1/kernel_bench.json" ] && [ -s "$tmp/run1/crosscheck_torch.json" ]; then
  ok "run.sh (all skipped): kernel_bench.json and crosscheck_torch.json written"
else
  bad "run.sh (all skipped): kernel_bench.json or crosscheck_torch.json missing"
fi
printf 'revision fedcba987654\nkernels %s\n' "$(bash "$gpu/kernels_digest.sh" "$root/kernels")" >"$bundle/SOURCE"
expect_rc "run.sh, fake bundle, tests ran (others fail here: no CuPy)" 1 run_fake "$tmp/one_passed.xml" "$tmp/run2" \
  "$head12"
has "run.sh (tests ran): 'GPU tests ran' passed" "$tmp/run2/steps.tsv" \
  $'^GPU tests ran \\(3 tests, 1 ran, 2 skipped[^\t]*\\)\tpassed'
if grep -q '^no GPU test ran' "$tmp/run2/steps.tsv"; then
  bad "run.sh (tests ran): recorded 'no GPU test ran'" "$tmp/run2/steps.tsv"
else
  ok "run.sh (tests ran): no 'no GPU test ran' step"
fi
if [ "$own_repo" = 1 ]; then
  has "run.sh: host.txt, the binary built from the checkout's HEAD: the same commit" "$tmp/run2/host.txt" \
    "^jitd revision: $head12 " '^jitd revision vs checkout HEAD: the same commit'
fi
# The kernels that ran, by digest, against the bundle's SOURCE (bundle.sh):
# none in the first run's bundle, this tree's in the second's.
has "run.sh: host.txt, a bundle without SOURCE: the kernels' digest, and cannot tell" "$tmp/run1/host.txt" \
  '^kernels/ that ran: digest [0-9a-f]{16}$' '^kernels/ vs the bundle.s build tree: cannot tell'
has "run.sh: host.txt, a bundle built from these kernels: the same kernels" "$tmp/run2/host.txt" \
  '^kernels/ vs the bundle.s build tree \(fedcba987654\): the same kernels$'
printf 'revision fedcba987654\nkernels 0000000000000000\n' >"$bundle/SOURCE"
# An archive of the tree unpacked inside another repository: that
# repository's commit is not this tree's, and host.txt must not name it.
mkdir -p "$tmp/outer/tree/tests"
git init -q "$tmp/outer"
cp -r "$gpu" "$tmp/outer/tree/tests/gpu"
run_fake "$tmp/one_passed.xml" "$tmp/run3" 0123456789ab "$tmp/outer/tree/tests/gpu/run.sh" >"$tmp/run3.log" 2>&1
has "run.sh inside another repository: host.txt says the checkout is no repository of its own" "$tmp/run3/host.txt" \
  '^jitd revision: 0123456789ab ' "^checkout: not a git repository of its own \\(it lies inside .*/outer, "
has "run.sh: host.txt, other kernels than the bundle's build tree: DIFFER" "$tmp/run3/host.txt" \
  '^kernels/ vs the bundle.s build tree \(fedcba987654\): DIFFER \(built with 0000000000000000\)$'
if grep -q '^checkout HEAD' "$tmp/run3/host.txt"; then
  bad "run.sh inside another repository: host.txt names the enclosing repository's HEAD" "$tmp/run3/host.txt"
else
  ok "run.sh inside another repository: no 'checkout HEAD' line"
fi

# --- 6. Dry runs with torch (optional) ------------------------------------------------------------
if [ -n "${JITD_CHECK_TORCH_PYTHON:-}" ]; then
  tpy=$JITD_CHECK_TORCH_PYTHON
  daemon=()
  if [ -n "${JITD_CHECK_JITCTL:-}" ] && [ -n "${JITD_CHECK_ENDPOINT:-}" ]; then
    daemon=(--jitctl "$JITD_CHECK_JITCTL" --endpoint "$JITD_CHECK_ENDPOINT" --work "$tmp/cubins")
  fi
  dry=$tmp/dry
  mkdir -p "$dry"
  check "crosscheck_torch.py --self-test with torch" "$tpy" "$gpu/crosscheck_torch.py" --self-test
  check "kernel_bench.py --dry-run ${daemon[*]:+(cubins from the daemon)}" \
    "$tpy" "$gpu/kernel_bench.py" --dry-run "${daemon[@]}" --report "$dry/kernel_bench.md" \
    --json "$dry/kernel_bench.json"
  check "crosscheck_torch.py --dry-run ${daemon[*]:+(cubins from the daemon)}" \
    "$tpy" "$gpu/crosscheck_torch.py" --dry-run "${daemon[@]}" --report "$dry/crosscheck_torch.md" \
    --json "$dry/crosscheck_torch.json"
  printf 'step\tstatus\tseconds\tlog\n' >"$dry/steps.tsv"
  check "write_report.py on the dry runs' output" python3 "$gpu/write_report.py" "$dry" "dry run"
  has "report.md (dry runs): both sections from the scripts" "$dry/report.md" \
    '^\*\*crosscheck_torch: ([0-9]+) of \1 cross-checks passed: ' '^\*\*[0-9]+ of [0-9]+ cases measured, 0 failed their check'
else
  echo "--   dry runs with torch: skipped (set JITD_CHECK_TORCH_PYTHON to a python3 with torch)"
fi

echo "check_report: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
