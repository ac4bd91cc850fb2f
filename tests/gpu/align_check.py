#!/usr/bin/env python3
"""moe.align_block_size's outputs against KERNELS.md's semantics, on a GPU,
for a source that has not been served yet (a candidate) as much as for the
committed one: block sizes that are and are not multiples of 4, 8 to 1024
experts, ids outside the expert range, sorted_token_ids 0 to 3 elements off
16-byte alignment, grids of 1, 3 and 8 blocks, blocks of 1024, 512, 256
and 32 threads (those that hold the experts). Every position below the padded
total and every expert_ids entry is compared, and the positions of
sorted_token_ids at and past the padded total must be left as they were.

    python3 tests/gpu/align_check.py [--source FILE.cu|FILE.patch] [--threads 1024,512]

Compiles with CuPy (NVRTC), as align_stages.py does; prints one line per
failing case and the count; exits 1 when any case fails.
"""
import argparse
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import align_stages  # noqa: E402

UNTOUCHED = -7


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=align_stages.DEFAULT_SOURCE)
    ap.add_argument("--threads", default="1024,512,256,32",
                    help="comma-separated blocks to launch (each where it holds the experts; a kernel "
                         "from before blocks other than 1024 takes only 1024)")
    a = ap.parse_args()
    blocks = [int(t) for t in a.threads.split(",")]
    import cupy as cp
    import torch
    arch = "sm_%d%d" % torch.cuda.get_device_capability()
    include = os.path.join(align_stages.ROOT, "kernels")
    module = cp.RawModule(code=align_stages.load_source(a.source),
                          options=("-std=c++17", f"-I{include}", f"--gpu-architecture={arch}"),
                          name_expressions=["sglang::moe::align_block_size_kernel"])
    kernel = module.get_function("sglang::moe::align_block_size_kernel")
    rng = random.Random(5)
    cases = failed = 0
    for block_size in (1, 3, 5, 16, 64, 128):
        for tokens in (1, 7, 64, 257, 512, 1024):
            for experts in (8, 256, 1024):
                numel = tokens * 8
                ids = [rng.randrange(experts) for _ in range(numel)]
                if tokens == 257:  # KERNELS.md: entries outside [0, num_experts) are skipped
                    ids = [rng.choice((-1, experts)) if rng.random() < 0.1 else e for e in ids]
                want_sorted, want_experts, want_total = align_stages.reference(ids, experts, block_size)
                dev_ids = torch.tensor(ids, dtype=torch.int32, device="cuda")
                max_pad = numel + experts * (block_size - 1)
                for offset in range(4):
                    for grid, threads in ((g, t) for g in (1, 3, 8) for t in blocks if t >= experts):
                        buffer = torch.full((max_pad + 8,), UNTOUCHED, dtype=torch.int32, device="cuda")
                        expert_ids = torch.full(((max_pad + block_size - 1) // block_size,), UNTOUCHED,
                                                dtype=torch.int32, device="cuda")
                        count = torch.zeros(1, dtype=torch.int32, device="cuda")
                        sorted_ids = buffer[offset:offset + max_pad]
                        kernel((grid,), (threads,), (
                            cp.uint64(dev_ids.data_ptr()), cp.int64(numel), cp.int32(experts), cp.int32(block_size),
                            cp.uint64(sorted_ids.data_ptr()), cp.uint64(expert_ids.data_ptr()),
                            cp.uint64(count.data_ptr())))
                        torch.cuda.synchronize()
                        total = int(count.item())
                        got = buffer.tolist()
                        ok = (total == want_total and got[offset:offset + total] == want_sorted
                              and expert_ids.tolist() == want_experts
                              and all(v == UNTOUCHED for v in got[:offset] + got[offset + total:]))
                        cases += 1
                        if not ok:
                            failed += 1
                            print(f"FAILED block {block_size}, {tokens} tokens x 8, {experts} experts, "
                                  f"offset {offset}, grid {grid}, {threads} threads: total {total}, "
                                  f"want {want_total}", flush=True)
    print(f"align_check: {cases - failed} of {cases} cases equal to the semantics ({a.source})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
