"""Loading jitd's cubins with NVIDIA's cuda-python (imported when a function
here is called, never by ``import jitd``): ``cuda.core`` when installed,
else the ``cuda.bindings`` driver module.

::

    from cuda.core import Device, LaunchConfig, launch
    dev = Device(0); dev.set_current(); stream = dev.create_stream()
    k = jitd.Client().get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
    kernel = jitd.cuda_python.load(k).kernel()
    launch(stream, LaunchConfig(grid=blocks, block=256), kernel, out, x, scale, shift, b, l, d)

The module is loaded into the current device/context: set it first
(``Device(n).set_current()`` with cuda.core).
"""

from __future__ import annotations

from typing import Any, Optional

from .types import KernelResult


class CudaPythonModule:
    """A loaded cubin: ``.object_code`` (a cuda.core ObjectCode) or
    ``.module`` (a cuda.bindings CUmodule), and ``kernel(expr)``."""

    def __init__(self, result: KernelResult, object_code: Any = None, module: Any = None, driver: Any = None) -> None:
        self.result = result
        self.object_code = object_code
        self.module = module
        self._driver = driver

    def kernel(self, expression: Optional[str] = None) -> Any:
        """The entry point for a name expression (with none: the only one):
        a ``cuda.core`` Kernel, or a ``cuda.bindings`` CUfunction."""
        lowered = self.result.lowered_name(expression)
        if self.object_code is not None:
            return self.object_code.get_kernel(lowered)
        error, function = self._driver.cuModuleGetFunction(self.module, lowered.encode())
        _check(error, f"cuModuleGetFunction({lowered})")
        return function

    __getitem__ = kernel


def _check(error: Any, call: str) -> None:
    if int(error) != 0:
        raise RuntimeError(f"{call} failed: {getattr(error, 'name', error)}")


def load(result: KernelResult) -> CudaPythonModule:
    """``result``'s cubin loaded with cuda.core (``ObjectCode.from_cubin``)
    or, without it, cuda.bindings (``cuModuleLoadData``). ImportError naming
    both when neither is installed."""
    result._require_cubin()
    object_code_type = None
    try:
        from cuda.core import ObjectCode as object_code_type  # type: ignore[no-redef]
    except ImportError:
        try:
            from cuda.core.experimental import ObjectCode as object_code_type  # type: ignore[no-redef]
        except ImportError:
            pass
    if object_code_type is not None:
        return CudaPythonModule(result, object_code=object_code_type.from_cubin(result.cubin))
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # type: ignore[no-redef]  # cuda-python < 12.6
        except ImportError:
            raise ImportError("jitd.cuda_python needs cuda-python: `pip install cuda-python` "
                              "(cuda.core or cuda.bindings); or use jitd.driver, which needs nothing") from None
    error, module = driver.cuModuleLoadData(result.cubin)
    _check(error, f"cuModuleLoadData({result.spec})")
    return CudaPythonModule(result, module=module, driver=driver)
