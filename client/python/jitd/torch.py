"""Launching jitd's kernels on PyTorch tensors. Importing this module
imports torch (ImportError saying what to install without it); ``import
jitd`` never does.

::

    import torch, jitd
    k = jitd.Client().get_kernel("diffusion.modulate_scale_shift", dtype=x.dtype)
    k[blocks, 256](out, x, scale, shift, b, l, d)             # KernelResult.launch comes here for tensors
    jitd.torch.launch(k, None, blocks, 256, out, x, scale, shift, b, l, d)   # the same, the entry point named

Tensors pass their device pointers (they must be on one CUDA device and
contiguous), Python ints and floats are sized by the kernel's parameters
(see :mod:`jitd.driver`), and the launch goes on the current torch stream of
the tensors' device, so it orders with the surrounding torch work and with
CUDA graph capture. The cubin is loaded with the CUDA driver through ctypes
into that device's primary context, the one torch uses: no CuPy or
cuda-python needed.
"""

from __future__ import annotations

from typing import Any, Optional

try:
    import torch
except ImportError as error:
    raise ImportError(f"jitd.torch needs PyTorch, which did not import ({error}): `pip install torch` "
                      "(a CUDA build: https://pytorch.org), or launch with KernelResult.launch or jitd.driver, "
                      "which need only the CUDA driver") from error

from . import driver
from .driver import Dim, Function
from .types import KernelResult


def _device_of(args: tuple[Any, ...]) -> int:
    devices = {arg.device for arg in args if isinstance(arg, torch.Tensor)}
    cuda = {device for device in devices if device.type == "cuda"}
    if devices - cuda:
        host = sorted(str(device) for device in devices - cuda)
        raise ValueError(f"tensors on {', '.join(host)}: jitd's kernels read device memory; move them with .cuda()")
    if len(cuda) > 1:
        raise ValueError(f"tensors on several devices ({', '.join(sorted(str(d) for d in cuda))}); "
                         "a launch runs on one")
    if cuda:
        device = next(iter(cuda))
        return device.index if device.index is not None else torch.cuda.current_device()
    return torch.cuda.current_device()


def function(result: KernelResult, expression: Optional[str] = None, *, device: Optional[int] = None) -> Function:
    """The :class:`jitd.driver.Function` of an entry point, loaded into
    ``device``'s primary context (default: torch's current device): keep it
    to launch many times with ``.launch(grid, block, *args, stream=...)``."""
    index = torch.cuda.current_device() if device is None else device
    return driver.load(result, device=index).function(expression)


def launch(result: KernelResult, expression: Optional[str], grid: Dim, block: Dim, *args: Any,
           stream: Any = None, shared_mem: int = 0) -> None:
    """Launches an entry point of ``result`` (a name expression; None for the
    only one) with ``grid`` x ``block`` threads on ``args``, on ``stream``
    (default: torch's current stream of the tensors' device).
    ``result.launch(grid, block, *args)`` (or ``result[grid, block](*args)``)
    does the same without naming the only entry point."""
    device = _device_of(args)
    if stream is None:
        stream = torch.cuda.current_stream(device)
    function(result, expression, device=device).launch(grid, block, *args, stream=stream, shared_mem=shared_mem)
