"""What kernel_bench.py and crosscheck_torch.py share (standard library only).

- the kernels' argument lists, read from kernels/kernels.toml's `signature`
  (the manifest `jitd lint` holds to the compiled entry points), and `pack`,
  which turns named values into the tuple CuPy's RawKernel takes, each at its
  exact width (cp.uint64 for a pointer, cp.int64, cp.int32, cp.float32);
- `fetch`: a cubin and its one lowered name from `jitctl --json get -o FILE`
  (as crosscheck.py does), and `Cubins`, which loads each cubin once;
- the launch rules of docs/KERNELS.md (element-wise grid, which path a shape
  takes);
- pure-Python references of the two MoE alignment kernels, written from
  KERNELS.md's semantics (moe.align_block_size, moe.align_single_token);
- ulp arithmetic on raw bits (works on Python ints and on torch int64
  tensors alike), and a pure-Python "ulps from an fp64 value" as
  tests/reference/src/dtype.cpp defines it;
- markdown tables and files written whole (write, then rename);
- the two ways the scripts launch: CudaBackend (the cubins through CuPy on
  torch tensors, one stream, CUDA-event timing) and DryBackend (--dry-run:
  torch on the CPU, the kernels emulated by torch_refs.emulate, wall-clock
  timing; it tests the scripts, never the kernels).

Nothing here imports torch or CuPy at import time (the backends take torch
and import CuPy when built): the scripts' --self-test runs it on any machine. Not a program: imported from the scripts beside it.
"""
import contextlib
import json
import math
import os
import re
import statistics
import struct
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_KERNELS = os.path.join(ROOT, "kernels")

# KERNELS.md, Conventions: "A typical launch: block 256, grid min(ceil(n / 256),
# 1024)"; crosscheck.py and the C++ tests (gpu_session.cpp ElementwiseLaunch)
# use 132 * 16 (16 blocks per SM of the H200) as the cap. Any grid is correct.
ELEMENTWISE_BLOCK = 256
ELEMENTWISE_MAX_GRID = 132 * 16
ALIGN_BLOCK_SIZE_MAX_THREADS = 1024                   # kAlignThreads: a power of two from 32, >= experts
ALIGN_BLOCK_SIZE_MAX_GRID = 64                        # kAlignMaxBlocks; more traps
ALIGN_SINGLE_TOKEN_LAUNCH = ((1, 1, 1), (32, 1, 1))   # one warp
PACK_BYTES = 16                                        # the vector path's load


def _launch_rules():
    """The Python client's launch rules (client/python/jitd/launch_rules.py),
    loaded by path: the rule lives in one place, and these scripts need
    neither the jitd package nor gRPC."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "jitd_launch_rules", os.path.join(ROOT, "client", "python", "jitd", "launch_rules.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


LAUNCH_RULES = _launch_rules()


def align_block_size_launch(numel, num_experts, grid=None, threads=None):
    """(grid, block) for moe.align_block_size over numel entries of
    num_experts experts: the grid jitd.align_block_size_grid picks and the
    block jitd.align_block_size_threads picks, or the ones given (grid 1 to
    64; block a power of two from 32 to 1024, at least num_experts)."""
    g = LAUNCH_RULES.align_block_size_grid(numel) if grid is None else int(grid)
    if not 1 <= g <= ALIGN_BLOCK_SIZE_MAX_GRID:
        raise ValueError(f"align_block_size grid {g} is outside 1..{ALIGN_BLOCK_SIZE_MAX_GRID}")
    t = LAUNCH_RULES.align_block_size_threads(num_experts, numel) if threads is None else int(threads)
    if not align_block_ok(t, num_experts):
        raise ValueError(f"align_block_size block {t} is not a power of two from 32 to "
                         f"{ALIGN_BLOCK_SIZE_MAX_THREADS} holding {num_experts} experts")
    return (g, 1, 1), (t, 1, 1)


def align_block_ok(threads, num_experts):
    """Whether moe.align_block_size takes a block of `threads` for
    num_experts experts (any other block traps)."""
    return 32 <= threads <= ALIGN_BLOCK_SIZE_MAX_THREADS and threads & (threads - 1) == 0 and num_experts <= threads


def elementwise_launch(n):
    """(grid, block) for an element-wise kernel over n outputs."""
    grid = max(1, min((n + ELEMENTWISE_BLOCK - 1) // ELEMENTWISE_BLOCK, ELEMENTWISE_MAX_GRID))
    return (grid, 1, 1), (ELEMENTWISE_BLOCK, 1, 1)


def vector_path(elem_bytes, dim, addresses):
    """KERNELS.md, Alignment: the 16-byte path when dim is a multiple of the
    pack (8 bf16/fp16, 4 fp32) and every pointer is 16-byte aligned."""
    per_pack = PACK_BYTES // elem_bytes
    if dim % per_pack == 0 and all(a % PACK_BYTES == 0 for a in addresses):
        return "vector"
    return "scalar"


# ---------------------------------------------------------------- signatures

_C_TYPES = {"int64_t": "i64", "int32_t": "i32", "float": "f32"}


def parse_signature(text):
    """'(T* out, const T* x, int64_t n, float eps)' -> [('ptr','out'), ('ptr','x'), ('i64','n'), ('f32','eps')]."""
    inner = text.strip()
    if not (inner.startswith("(") and inner.endswith(")")):
        raise ValueError(f"not a parenthesised argument list: {text!r}")
    params = []
    for part in inner[1:-1].split(","):
        words = part.replace("*", " * ").split()
        if len(words) < 2:
            raise ValueError(f"cannot read argument {part!r} of {text!r}")
        name = words[-1]
        if "*" in words:
            kind = "ptr"
        else:
            ctype = [w for w in words[:-1] if w != "const"]
            if len(ctype) != 1 or ctype[0] not in _C_TYPES:
                raise ValueError(f"unknown argument type in {part!r}")
            kind = _C_TYPES[ctype[0]]
        params.append((kind, name))
    return params


def load_signatures(kernels_dir=DEFAULT_KERNELS):
    """{kernel name: parsed signature} from kernels.toml."""
    path = os.path.join(kernels_dir, "kernels.toml")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        import tomllib  # Python 3.11+
        doc = tomllib.loads(raw.decode("utf-8"))
        pairs = [(k["name"], k["signature"]) for k in doc.get("kernel", []) if "signature" in k]
    except ImportError:  # pragma: no cover - older Python: the two lines we need
        pairs, name = [], None
        for line in raw.decode("utf-8").splitlines():
            line = line.strip()
            if line == "[[kernel]]":
                name = ""
            m = re.match(r'(name|signature)\s*=\s*"(.*)"\s*$', line)
            if m and m.group(1) == "name" and name == "":
                name = m.group(2)
            elif m and m.group(1) == "signature" and name:
                pairs.append((name, m.group(2)))
    return {name: parse_signature(sig) for name, sig in pairs}


def pack(signature, values, cp):
    """The argument tuple for RawKernel: values by name, each at its width.
    A pointer value is anything with data_ptr() (a torch tensor) or an int."""
    names = [n for _, n in signature]
    missing = [n for n in names if n not in values]
    extra = [n for n in values if n not in names]
    if missing or extra:
        raise ValueError(f"arguments: missing {missing}, unexpected {extra} (signature {names})")
    args = []
    for kind, name in signature:
        v = values[name]
        if kind == "ptr":
            args.append(cp.uint64(v.data_ptr() if hasattr(v, "data_ptr") else int(v)))
        elif kind == "i64":
            args.append(cp.int64(int(v)))
        elif kind == "i32":
            iv = int(v)
            if not -2**31 <= iv < 2**31:
                raise ValueError(f"{name}={iv} does not fit int32_t")
            args.append(cp.int32(iv))
        elif kind == "f32":
            args.append(cp.float32(float(v)))
        else:  # pragma: no cover
            raise ValueError(kind)
    return tuple(args)


# ---------------------------------------------------------------- cubins

def fetch(jitctl, endpoint, work, kernel, params):
    """Cubin path, its single lowered name and key, from `jitctl --json get`."""
    os.makedirs(work, exist_ok=True)
    name = kernel + "".join(f"_{k}-{v}" for k, v in sorted(params.items()))
    path = os.path.join(work, name + ".cubin")
    cmd = [jitctl, "--endpoint", endpoint, "--json", "get", kernel, "-o", path]
    for k, v in sorted(params.items()):
        cmd += ["-p", f"{k}={v}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-400:]}")
    doc = json.loads(proc.stdout)
    symbols = doc.get("symbols", [])
    lowered = [s.get("loweredName") or s.get("lowered_name") for s in symbols]
    if len(lowered) != 1 or not lowered[0]:
        raise RuntimeError(f"{kernel}: expected one lowered name, got {symbols}")
    if not os.path.exists(path):
        raise RuntimeError(f"{kernel}: jitctl wrote no cubin at {path} (origin {doc.get('origin')})")
    return path, lowered[0], doc.get("key", "")


_DEMANGLED_KINDS = {"long long": "i64", "int": "i32", "float": "f32"}


def demangled_kinds(lowered):
    """The argument kinds of a lowered name, through c++filt: ['ptr', 'i64', ...],
    or None when c++filt is missing or the text is not understood (no check)."""
    try:
        text = subprocess.run(["c++filt", lowered], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not text.endswith(")") or "(" not in text:
        return None
    kinds = []
    for part in text[text.rindex("(") + 1:-1].split(","):
        part = part.strip()
        if part.endswith("*"):
            kinds.append("ptr")
        elif part in _DEMANGLED_KINDS:
            kinds.append(_DEMANGLED_KINDS[part])
        else:
            return None
    return kinds


class Cubins:
    """(kernel, params) -> a CuPy function; every cubin fetched and loaded once.
    With `signatures`, each lowered name's argument kinds (demangled) must be
    the manifest's: a mismatch is an error, before anything is launched."""

    def __init__(self, jitctl, endpoint, work, cp, signatures=None):
        self.jitctl, self.endpoint, self.work, self.cp = jitctl, endpoint, work, cp
        self.signatures = signatures or {}
        self.functions = {}
        self.modules = {}
        self.info = {}
        os.makedirs(work, exist_ok=True)

    def get(self, kernel, params):
        key = (kernel, tuple(sorted(params.items())))
        if key not in self.functions:
            path, lowered, cache_key = fetch(self.jitctl, self.endpoint, self.work, kernel, params)
            want = [k for k, _ in self.signatures.get(kernel, [])]
            got = demangled_kinds(lowered) if want else None
            if got is not None and got != want:
                raise RuntimeError(f"{kernel}: {lowered} takes {got}, kernels.toml's signature says {want}")
            if path not in self.modules:
                self.modules[path] = self.cp.RawModule(path=path)
            self.functions[key] = self.modules[path].get_function(lowered)
            self.info[key] = {"cubin": path, "lowered": lowered, "key": cache_key}
        return self.functions[key]

    def describe(self, kernel, params):
        return self.info.get((kernel, tuple(sorted(params.items()))), {})


# ---------------------------------------------------------------- backends

class FakeCp:
    """Stands in for CuPy's scalar types in --dry-run and --self-test: records widths."""

    @staticmethod
    def uint64(v):
        if not 0 <= v < 2**64:
            raise ValueError(f"{v} does not fit uint64")
        return ("u64", v)

    @staticmethod
    def int64(v):
        if not -2**63 <= v < 2**63:
            raise ValueError(f"{v} does not fit int64")
        return ("i64", v)

    @staticmethod
    def int32(v):
        if not -2**31 <= v < 2**31:
            raise ValueError(f"{v} does not fit int32")
        return ("i32", v)

    @staticmethod
    def float32(v):
        return ("f32", v)

    class RawModule:
        """Reads the cubin; get_function names it."""

        def __init__(self, path):
            with open(path, "rb") as f:
                self.size = len(f.read())

        def get_function(self, name):
            return ("function", name)


class CudaBackend:
    """The cubins through CuPy on torch tensors, all on one torch stream that
    CuPy also launches on; CUDA events on that stream time them."""
    name = "cuda"

    def __init__(self, a, torch):
        import cupy as cp
        self.torch, self.cp = torch, cp
        self.device = "cuda"
        torch.cuda.init()
        self.stream = torch.cuda.Stream()
        self.cp_stream = cp.cuda.ExternalStream(self.stream.cuda_stream)
        self.signatures = load_signatures(a.kernels)
        self.cubins = Cubins(a.jitctl, a.endpoint, a.work, cp, self.signatures)

    @contextlib.contextmanager
    def scope(self):
        with self.torch.cuda.stream(self.stream), self.cp_stream:
            yield

    def launcher(self, kernel, params, grid, block, values):
        fn = self.cubins.get(kernel, params)
        args = pack(self.signatures[kernel], values, self.cp)
        return lambda: fn(grid, block, args)

    def sync(self):
        self.stream.synchronize()

    def sync_all(self):
        self.torch.cuda.synchronize()

    def time_us(self, fn, reps, inner):
        torch = self.torch
        with self.scope():
            for _ in range(inner):  # warm-up: one batch
                fn()
            self.stream.synchronize()
            runs = self._event_runs(lambda: [fn() for _ in range(inner)], reps, inner)
        return statistics.median(runs), runs

    def _event_runs(self, batch, reps, inner):
        """reps timings of batch() (inner launches) between CUDA events on
        the stream, each per launch in µs."""
        torch = self.torch
        runs = []
        for _ in range(reps):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record(self.stream)
            batch()
            end.record(self.stream)
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1000.0 / inner)
        return runs

    def graph_time_us(self, fn, reps, inner):
        """fn's inner launches captured once in a CUDA graph, the graph
        replayed reps times between CUDA events: per launch, the GPU's time
        without the host's launch rate."""
        torch = self.torch
        with self.scope():
            fn()  # anything lazy happens before the capture
            self.stream.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=self.stream, capture_error_mode="thread_local"):
                for _ in range(inner):
                    fn()
            graph.replay()
            self.stream.synchronize()
            runs = self._event_runs(graph.replay, reps, inner)
            del graph
        return statistics.median(runs), runs

    def describe(self):
        torch, cp = self.torch, self.cp
        p = torch.cuda.get_device_properties(0)
        return {"gpu": p.name, "sm_count": p.multi_processor_count, "capability": f"{p.major}.{p.minor}",
                "memory_gib": round(p.total_memory / 2**30, 1), "torch": torch.__version__,
                "torch_cuda": torch.version.cuda, "cupy": cp.__version__}


class DryBackend:
    """--dry-run: torch on the CPU, the kernels emulated (torch_refs.emulate),
    wall-clock timing. The arguments still go through pack (with FakeCp)."""
    name = "dry-run (CPU, emulated kernels)"

    def __init__(self, a, torch):
        import torch_refs
        self.torch, self.emulate = torch, torch_refs.emulate
        self.device = "cpu"
        self.signatures = load_signatures(a.kernels)
        self.cubins = None
        if getattr(a, "jitctl", None) and getattr(a, "endpoint", None) and getattr(a, "work", None):
            # A daemon given: fetch each cubin and check its lowered name as the
            # real run does; only the module load and the launch are stand-ins.
            self.name += ", cubins fetched from the daemon"
            self.cubins = Cubins(a.jitctl, a.endpoint, a.work, FakeCp, self.signatures)

    @contextlib.contextmanager
    def scope(self):
        yield

    def launcher(self, kernel, params, grid, block, values):
        if self.cubins is not None:
            self.cubins.get(kernel, params)
        pack(self.signatures[kernel], values, FakeCp)  # names and widths as the real launch
        if kernel == "moe.align_block_size":
            assert align_block_ok(block[0], values["num_experts"]) and block[1:] == (1, 1) and grid[1:] == (1, 1)
            assert 1 <= grid[0] <= ALIGN_BLOCK_SIZE_MAX_GRID
        if kernel == "moe.align_single_token":
            assert (grid, block) == ALIGN_SINGLE_TOKEN_LAUNCH
        if kernel == "norm.rmsnorm":
            assert block == (int(params["threads"]), 1, 1)
        return lambda: self.emulate(kernel, params, values)

    def sync(self):
        pass

    def sync_all(self):
        pass

    def time_us(self, fn, reps, inner):
        fn()
        runs = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            runs.append((time.perf_counter() - t0) * 1e6 / inner)
        return statistics.median(runs), runs

    def graph_time_us(self, fn, reps, inner):
        return self.time_us(fn, reps, inner)  # no graphs on the CPU: the same wall-clock timing

    def describe(self):
        return {"gpu": "none (dry run)", "torch": self.torch.__version__}


# ---------------------------------------------------------------- MoE references (KERNELS.md)

def align_max_pad(numel, num_experts, block_size):
    """max_pad = numel + num_experts * (block_size - 1)."""
    return numel + num_experts * (block_size - 1)


def align_expert_slots(numel, num_experts, block_size):
    """expert_ids has room for ceil(max_pad / block_size) entries."""
    return -(-align_max_pad(numel, num_experts, block_size) // block_size)


def ref_align_block_size(ids, num_experts, block_size):
    """moe.align_block_size by its semantics: (sorted_token_ids[max_pad],
    expert_ids[ceil(max_pad/block_size)], num_tokens_post_pad)."""
    numel = len(ids)
    max_pad = align_max_pad(numel, num_experts, block_size)
    count = [0] * num_experts
    for e in ids:
        if 0 <= e < num_experts:
            count[e] += 1
    offset, total = [], 0
    for c in count:
        offset.append(total)
        total += -(-c // block_size) * block_size
    sorted_ids = [numel] * max_pad
    placed = [0] * num_experts
    for i, e in enumerate(ids):  # ascending i within each expert
        if 0 <= e < num_experts:
            sorted_ids[offset[e] + placed[e]] = i
            placed[e] += 1
    expert_ids = [-1] * align_expert_slots(numel, num_experts, block_size)
    for e, c in enumerate(count):
        for pos in range(offset[e], offset[e] + -(-c // block_size) * block_size, block_size):
            expert_ids[pos // block_size] = e
    return sorted_ids, expert_ids, total


def ref_align_single_token(ids, block_size):
    """moe.align_single_token: (sorted_token_ids[topk*block_size], expert_ids[topk], num_tokens_post_pad).
    Negative ids are skipped; rank(k) counts the kept ids below ids[k] (as
    tests/reference/src/moe.cpp: the kept (id, k) pairs in ascending order)."""
    topk = len(ids)
    ranked = sorted((e, k) for k, e in enumerate(ids) if e >= 0)
    sorted_ids = [topk] * (topk * block_size)
    expert_ids = [-1] * topk
    for rank, (e, k) in enumerate(ranked):
        sorted_ids[rank * block_size] = k
        expert_ids[rank] = e
    return sorted_ids, expert_ids, len(ranked) * block_size


# ---------------------------------------------------------------- ulps

FORMATS = {  # name: (bits, significand digits incl. the implicit one, min normal exponent)
    "bf16": (16, 8, -126),
    "fp16": (16, 11, -14),
    "fp32": (32, 24, -126),
}


def ordered_key(bits, width):
    """Raw sign-magnitude bits (unsigned, `width` wide) -> an integer whose
    differences count representable values (+0 and -0 both 0). Only & >> * -
    on the argument: the same code runs on Python ints and torch int64 tensors."""
    mag = bits & ((1 << (width - 1)) - 1)
    neg = (bits >> (width - 1)) & 1
    return mag - 2 * neg * mag


def ulps_from_f64(got, want, digits, min_exp):
    """|got - want| in units of the format's spacing at |want|
    (tests/reference/src/dtype.cpp ulp_distance_to)."""
    if math.isnan(got) or math.isnan(want):
        return math.inf
    if math.isinf(got) or math.isinf(want):
        return 0.0 if got == want else math.inf
    _, exp = math.frexp(want)
    binade = min_exp if want == 0.0 else max(exp - 1, min_exp)
    return abs(got - want) / math.ldexp(1.0, binade - (digits - 1))


def f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def bf16_bits_from_f32(v):
    """__float2bfloat16_rn on a Python float (first rounded to fp32)."""
    f = f32_bits(v)
    if (f & 0x7fffffff) > 0x7f800000:
        return 0x7fff
    return ((f + 0x7fff + ((f >> 16) & 1)) >> 16) & 0xffff


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", (bits & 0xffff) << 16))[0]


# ---------------------------------------------------------------- reports

def md_table(headers, rows, right=()):
    """A markdown table; columns whose index is in `right` are right-aligned."""
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(headers))) + "|"]
    for r in rows:
        cells = [str(c).replace("|", "\\|").replace("\n", " ") for c in r]
        cells += [""] * (len(headers) - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_whole(path, text):
    """Writes text to path through a temporary file and a rename: a reader
    (or a kill mid-write) never sees half a file."""
    if not path:
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def fmt(v, digits=1, none="-"):
    """A number for a table cell; '-' for None or NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return none
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)
