"""How :meth:`jitd.KernelResult.launch` launches: with :func:`jitd.torch.launch`
when a torch tensor is among the arguments (on torch's current stream), else
with :func:`jitd.driver.launch`.

Imports go one way, none of these modules importing another that imports it:
jitd.types (the bottom floor) <- jitd.driver <- jitd.torch <- jitd._launch.
jitd.types imports no launcher: ``import jitd`` hands it :func:`launch`
(``jitd.types._launcher``). jitd.driver and jitd.torch are imported on the
first launch, jitd.torch only for torch tensors (torch is optional), so
``import jitd`` imports neither.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from .types import Dim, KernelResult


def launch(result: KernelResult, entry: Optional[str], grid: Dim, block: Dim, *args: Any, stream: Any = None,
           shared_mem: int = 0) -> None:
    """``result.launch(grid, block, *args, entry=entry, ...)`` once it has
    checked ``entry``: see :meth:`jitd.KernelResult.launch`."""
    if result.is_module:
        from .errors import InvalidArgument
        raise InvalidArgument(f"{result.spec} is a module kernel (a tvm-ffi shared object, not a cubin): load it "
                              "with jitd.load_module() and call its exports; launch() is for NVRTC kernels")
    torch = sys.modules.get("torch")  # a torch tensor among args means torch is imported
    if torch is not None and any(isinstance(arg, torch.Tensor) for arg in args):
        from . import torch as jitd_torch
        jitd_torch.launch(result, entry, grid, block, *args, stream=stream, shared_mem=shared_mem)
        return
    from . import driver
    driver.launch(result, entry, grid, block, *args, stream=stream, shared_mem=shared_mem)
