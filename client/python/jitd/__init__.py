"""jitd: CUDA kernels by name from the jitd daemon, ready to launch.

::

    import jitd
    client = jitd.Client()                                   # $JITD_ENDPOINT or the default socket
    k = client.get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
    k.cubin, k.symbols, k.origin, k.key                      # bytes, {expression: lowered name}, "compiled", ...
    k[grid, block](out, x, scale, shift, b, l, d)            # launch: tensors, CuPy arrays, Python numbers

:class:`jitd.aio.Client` is the same client for asyncio.

Launching and loading (``import jitd`` needs only grpcio and protobuf):

- ``k.launch(grid, block, *args)`` / ``k[grid, block](*args)``: the CUDA
  driver through ctypes (:mod:`jitd.driver`), on torch's current stream
  for torch tensors;
- :mod:`jitd.cupy`: ``jitd.cupy.load(k).function()`` is a ``cupy.RawKernel`` (needs CuPy);
- :mod:`jitd.torch`: ``jitd.torch.function(k)`` keeps a function for many launches (needs torch);
- :mod:`jitd.cuda_python`: ``jitd.cuda_python.load(k).kernel()`` (cuda.core / cuda.bindings);
- :mod:`jitd.driver`: the CUDA driver through ctypes, needing nothing else.
- ``jitd.load_module("activation.silu_and_mul", dtype="bf16")``: a module kernel (tvm-ffi shared object) as a
  loaded ``tvm_ffi.Module`` (:mod:`jitd.modules`; needs apache-tvm-ffi).
- ``jitd.jit_loader(KERNEL_PATH, tree="sglang")``: SGLang's ``load_jit``, its module specs built by the daemon
  (:mod:`jitd.jit`).

Declaring what a server needs and getting it at start-up:
:class:`jitd.KernelSet` (``ks.warm(client, progress=True)``;
``strict=True`` or ``JITD_STRICT=1`` to fail on anything not cached;
``ks.write_spec(FILE)`` for ``jitd warm --manifest FILE`` at image build).

Errors are :class:`jitd.JitdError` subclasses carrying the gRPC code and the
daemon's message (see :mod:`jitd.errors`).
"""

from __future__ import annotations

import importlib
from typing import Any

from . import _launch, jit, modules, types
from ._endpoint import default_endpoint, read_admin_token_file, resolve_endpoint
from .client import Client, KernelsLike
from .errors import (Cancelled, CompileError, DataLoss, DeadlineExceeded, DriverUnavailable, Internal, InvalidArgument,
                     JitdError, KernelsMissing, LockViolation, ModuleUnavailable, NotAModule, NotFound,
                     PermissionDenied, ResourceExhausted, TreeMismatch, TreeRefused, Unavailable, Unimplemented,
                     WarmFailed)
from .jit import JitTree, jit_loader, load_jit
from .kernel_set import KernelSet, default_client, default_kernel_set, kernel, print_progress
from .launch_rules import align_block_size_grid, align_block_size_threads, rmsnorm_threads
from .modules import load_module
from .retry import RetryPolicy
from .types import (ClientCounters, Entries, Entry, EvictResult, KernelEntry, KernelInfo, KernelParam, KernelResult,
                    KernelSpec, Manifest, Mode, ModuleSpec, MountedBundle, Stats, VerifyResult, WarmProgress, WarmResult)

# KernelResult.launch launches through jitd._launch (with jitd.driver or
# jitd.torch), handed to it here: jitd.types, the bottom floor of jitd's
# imports, imports no launcher.
types._launcher = _launch.launch

__version__ = "0.1.0"

__all__ = [
    "Client", "KernelsLike", "KernelSet", "KernelSpec", "KernelResult", "KernelEntry", "Mode", "RetryPolicy",
    "WarmProgress", "WarmResult", "Manifest", "KernelInfo", "KernelParam", "Stats", "Entry", "Entries",
    "EvictResult", "VerifyResult", "ClientCounters", "MountedBundle",
    "JitdError", "NotFound", "InvalidArgument", "CompileError", "ResourceExhausted", "PermissionDenied",
    "Unavailable", "DeadlineExceeded", "Cancelled", "DataLoss", "Internal", "Unimplemented", "KernelsMissing",
    "WarmFailed", "NotAModule", "ModuleUnavailable", "DriverUnavailable", "LockViolation", "TreeRefused",
    "TreeMismatch",
    "load_module", "load_jit", "jit_loader", "JitTree", "ModuleSpec", "default_client", "default_kernel_set", "kernel", "print_progress",
    "default_endpoint", "resolve_endpoint", "read_admin_token_file", "rmsnorm_threads",
    "align_block_size_grid",
    "align_block_size_threads",
]

# Submodules loaded on first attribute access, so that `jitd.torch.launch(...)`
# works after a plain `import jitd` and `import jitd` imports none of their
# libraries (torch, CuPy, cuda-python, grpc.aio).
_LAZY = {"cupy", "torch", "cuda_python", "driver", "aio"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        try:
            return importlib.import_module(f".{name}", __name__)
        except ImportError as error:
            # An attribute that is not there: hasattr(jitd, "torch") is False
            # without torch, and the message still says what to install.
            raise AttributeError(f"jitd.{name} is not available: {error}") from error
    raise AttributeError(f"module 'jitd' has no attribute {name!r}")
