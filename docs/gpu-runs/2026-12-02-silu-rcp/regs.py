"""num_regs / local bytes of silu_and_mul's bf16 kernel as served by a daemon."""
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../tests/gpu"))
import gpu_common as gc
import cupy as cp
jitctl, endpoint, work, label = sys.argv[1:5]
for dt in ("bf16", "fp16"):
    path, lowered, key = gc.fetch(jitctl, endpoint, work, "activation.silu_and_mul", {"dtype": dt})
    f = cp.RawModule(path=path).get_function(lowered)
    print(f"{label} {dt}: regs {f.num_regs}, local {f.local_size_bytes} B, cubin {os.path.getsize(path)} B")
