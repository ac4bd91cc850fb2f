"""The torch side that kernel_bench.py and crosscheck_torch.py share.

- eager PyTorch for each kernel (what the benchmark times beside the cubin);
- references from docs/KERNELS.md's formulas: topk_sum's fp32 sum in k order,
  silu_and_mul's fp64 formula, rmsnorm in fp64;
- ulp distances on tensors: between two values of one type (on raw bits) and
  from an fp64 reference (tests/reference/src/dtype.cpp's definition);
- a torch implementation of the two MoE alignment kernels' semantics (the
  "eager" figure of the benchmark for them, checked in crosscheck_torch.py);
- `emulate`: the seven kernels in torch, for the scripts' --dry-run on a
  machine without a GPU (it tests the scripts, never the kernels).

Imported by the scripts only after torch is; not a program.
"""
import struct

import torch
import torch.nn.functional as F

import gpu_common as gc

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def f32(v):
    """A Python float rounded to fp32 (what `float eps` holds), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


# ---------------------------------------------------------------- eager PyTorch

def eager_modulate(x, scale, shift):
    return x * (1 + scale[:, None]) + shift[:, None]


def eager_residual(residual, update, gate):
    return residual + update * gate


def eager_silu_and_mul(inp, dim):
    return F.silu(inp[:, :dim]) * inp[:, dim:]


def eager_topk_sum(inp):
    return inp.sum(dim=1)


def eager_rmsnorm(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


# ---------------------------------------------------------------- references (KERNELS.md)

def ref_modulate(x, scale, shift):
    """R( R( x * R(1 + scale) ) + shift ), each step fp32 then rounded to T."""
    t = x.dtype
    s1 = (1 + scale.float()).to(t)
    return ((x.float() * s1.float()[:, None]).to(t).float() + shift.float()[:, None]).to(t)


def ref_residual(residual, update, gate):
    t = residual.dtype
    return (residual.float() + (update.float() * gate.float()).to(t).float()).to(t)


def ref_topk_sum(inp):
    """fp32 sum in ascending j starting from in[:, 0, :] itself, rounded once."""
    rows, topk, dim = inp.shape
    if topk <= 0:
        return torch.zeros((rows, dim), dtype=inp.dtype, device=inp.device)
    acc = inp[:, 0, :].float().clone()
    for j in range(1, topk):
        acc = acc + inp[:, j, :].float()
    return acc.to(inp.dtype)


def ref_silu_and_mul(inp, dim):
    """R( R(s(a)) * b ), s(a) = a / (1 + exp(-a)) in fp64, rounded once to fp32."""
    a = inp[:, :dim].double()
    b = inp[:, dim:]
    s = (a / (1 + torch.exp(-a))).float()
    t = inp.dtype
    if t == torch.float32:
        return s * b
    return (s.to(t).float() * b.float()).to(t)  # the product of two T's is exact in fp32


def ref_rmsnorm_f64(x, weight, eps):
    """tests/reference/src/norm.cpp: everything in fp64, eps as the fp32 the kernel gets."""
    x64 = x.double()
    ms = (x64 * x64).sum(dim=-1, keepdim=True) / x.shape[-1]
    inv = 1.0 / torch.sqrt(ms + f32(eps))
    return x64 * inv * weight.double()


# ---------------------------------------------------------------- ulps

def unsigned_bits(t):
    """The raw bits of a bf16/fp16/fp32 tensor as non-negative int64."""
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.contiguous().view(torch.int16).to(torch.int64) & 0xffff, 16
    if t.dtype == torch.float32:
        return t.contiguous().view(torch.int32).to(torch.int64) & 0xffffffff, 32
    raise TypeError(t.dtype)


def ulps_between(a, b):
    """Per element: how many representable values of the type lie between a and b."""
    ba, width = unsigned_bits(a)
    bb, _ = unsigned_bits(b)
    return (gc.ordered_key(ba, width) - gc.ordered_key(bb, width)).abs()


def ulps_from_f64(got, want):
    """Per element, |got - want| in units of got's type's spacing at |want|
    (the binade of want, or the subnormal spacing below the smallest normal);
    +inf for a NaN, or for inf on one side only."""
    _, digits, min_exp = gc.FORMATS[DTYPE_NAMES[got.dtype]]
    g = got.double()
    w = want.double().contiguous()
    exponent = ((w.view(torch.int64) >> 52) & 0x7ff) - 1023     # floor(log2 |w|) for normal w; 0 -> -1023
    binade = torch.clamp(exponent, min=min_exp)
    spacing = ((binade - (digits - 1) + 1023) << 52).view(torch.float64)  # 2^(binade - digits + 1), exactly
    d = (g - w).abs() / spacing
    inf = torch.full_like(d, float("inf"))
    either_inf = torch.isinf(g) | torch.isinf(w)
    d = torch.where(either_inf, torch.where(g == w, torch.zeros_like(d), inf), d)
    return torch.where(torch.isnan(g) | torch.isnan(w), inf, d)


def compare_bits(got, want):
    """(max ulps between, exact fraction) of two tensors of one type."""
    n = got.numel()
    if n == 0:
        return 0, 1.0
    d = ulps_between(got, want)
    return int(d.max().item()), float((d == 0).sum().item()) / n


# ---------------------------------------------------------------- MoE alignment in torch

def torch_align_block_size(ids, num_experts, block_size):
    """KERNELS.md's moe.align_block_size with torch ops, on ids' device, no
    host sync: (sorted_token_ids[max_pad], expert_ids[slots], num_tokens_post_pad[1]) int32."""
    dev = ids.device
    numel = ids.numel()
    max_pad = gc.align_max_pad(numel, num_experts, block_size)
    slots = gc.align_expert_slots(numel, num_experts, block_size)
    if num_experts == 0:
        return (torch.full((max_pad,), numel, dtype=torch.int32, device=dev),
                torch.full((slots,), -1, dtype=torch.int32, device=dev),
                torch.zeros(1, dtype=torch.int32, device=dev))
    ids64 = ids.reshape(-1).to(torch.int64)
    valid = (ids64 >= 0) & (ids64 < num_experts)
    key = torch.where(valid, ids64, torch.full_like(ids64, num_experts))  # out of range: past every expert
    counts = torch.zeros(num_experts + 1, dtype=torch.int64, device=dev).scatter_add_(
        0, key, torch.ones_like(key))[:num_experts]
    padded = (counts + block_size - 1) // block_size * block_size
    ends = torch.cumsum(padded, 0)
    offsets = ends - padded
    sorted_key, order = torch.sort(key, stable=True)  # ascending index within an expert
    group_start = torch.cumsum(counts, 0) - counts
    e = sorted_key.clamp(max=num_experts - 1)
    pos = torch.arange(numel, device=dev) - group_start[e] + offsets[e]
    pos = torch.where(sorted_key < num_experts, pos, torch.full_like(pos, max_pad))  # a slot past the end
    sorted_ids = torch.full((max_pad + 1,), numel, dtype=torch.int32, device=dev)
    sorted_ids.scatter_(0, pos, order.to(torch.int32))
    block_ends = ends // block_size
    j = torch.arange(slots, device=dev)
    owner = torch.searchsorted(block_ends, j, right=True)
    expert_ids = torch.where(j < block_ends[-1], owner, torch.full_like(owner, -1)).to(torch.int32)
    return sorted_ids[:max_pad], expert_ids, ends[-1:].to(torch.int32)


def torch_align_single_token(ids, block_size):
    """KERNELS.md's moe.align_single_token with torch ops, no host sync."""
    dev = ids.device
    topk = ids.numel()
    ids64 = ids.reshape(-1).to(torch.int64)
    valid = ids64 >= 0
    key = torch.where(valid, ids64, torch.full_like(ids64, 2**62))  # skipped ids sort last
    sorted_key, order = torch.sort(key, stable=True)
    m = valid.sum()
    r = torch.arange(topk, device=dev)
    expert_ids = torch.where(r < m, sorted_key, torch.full_like(sorted_key, -1)).to(torch.int32)
    sorted_ids = torch.full((topk * block_size,), topk, dtype=torch.int32, device=dev)
    sorted_ids.scatter_(0, r * block_size, torch.where(r < m, order, torch.full_like(order, topk)).to(torch.int32))
    return sorted_ids, expert_ids, (m * block_size).to(torch.int32).reshape(1)


# ---------------------------------------------------------------- emulation (--dry-run only)

def emulate(kernel, params, v):
    """Does what the kernel would, into its output tensors, from the named
    arguments `v` (the signature's names). For the scripts' --dry-run."""
    sizes = [int(v[n]) for n in ("batch", "seq", "rows", "dim") if n in v]
    if kernel != "moe.align_block_size" and any(n <= 0 for n in sizes):
        return  # KERNELS.md, Sizes: a size <= 0 returns without writing
    if kernel == "diffusion.modulate_scale_shift":
        b, l, d = int(v["batch"]), int(v["seq"]), int(v["dim"])
        v["out"].view(b, l, d).copy_(ref_modulate(v["x"].view(b, l, d), v["scale"].view(b, d),
                                                  v["shift"].view(b, d)))
    elif kernel == "diffusion.residual_gate_add":
        r, d = int(v["rows"]), int(v["dim"])
        gate = v["gate"].view(d) if params["gate"] == "broadcast" else v["gate"].view(r, d)
        v["out"].view(r, d).copy_(ref_residual(v["residual"].view(r, d), v["update"].view(r, d), gate))
    elif kernel == "moe.topk_sum":
        r, k, d = int(v["rows"]), int(v["topk"]), int(v["dim"])
        v["out"].view(r, d).copy_(ref_topk_sum(v["in"].view(r, max(k, 0), d)))
    elif kernel == "activation.silu_and_mul":
        r, d = int(v["rows"]), int(v["dim"])
        v["out"].view(r, d).copy_(ref_silu_and_mul(v["in"].view(r, 2 * d), d))
    elif kernel == "norm.rmsnorm":
        r, d = int(v["rows"]), int(v["dim"])
        v["out"].view(r, d).copy_(ref_rmsnorm_f64(v["x"].view(r, d), v["weight"], float(v["eps"])).to(v["x"].dtype))
    elif kernel == "moe.align_block_size":
        n = int(v["numel"])
        s, e, t = torch_align_block_size(v["topk_ids"][:n], int(v["num_experts"]), int(v["block_size"]))
        v["sorted_token_ids"][:s.numel()].copy_(s)
        v["expert_ids"][:e.numel()].copy_(e)
        v["num_tokens_post_pad"][:1].copy_(t)
    elif kernel == "moe.align_single_token":
        k = max(int(v["topk"]), 0)
        s, e, t = torch_align_single_token(v["topk_ids"][:k], int(v["block_size"]))
        v["sorted_token_ids"][:s.numel()].copy_(s)
        v["expert_ids"][:e.numel()].copy_(e)
        v["num_tokens_post_pad"][:1].copy_(t)
    else:
        raise ValueError(f"no emulation for {kernel}")
