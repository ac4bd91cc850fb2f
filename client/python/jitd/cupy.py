"""Loading jitd's cubins with CuPy. Importing this module imports CuPy
(ImportError saying what to install without it); ``import jitd`` never does.

::

    import cupy as cp, jitd, jitd.cupy
    k = jitd.Client().get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
    fn = jitd.cupy.load(k).function()            # a cupy.RawKernel
    fn((blocks,), (256,), (out, x, scale, shift, cp.int64(b), cp.int64(l), cp.int64(d)))
    k[blocks, 256](out, x, scale, shift, b, l, d)  # or without RawKernel: ints sized by the driver (jitd.driver)

``cupy.RawModule`` loads cubins from a file (its ``code=`` is CUDA source),
so the cubin is written once per process to a private temporary directory,
named by its content key, and removed when the process exits.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from typing import Any, Optional

try:
    import cupy
except ImportError as error:
    raise ImportError(f"jitd.cupy needs CuPy, which did not import ({error}): `pip install cupy-cuda12x` "
                      "(the wheel of your CUDA major version: https://docs.cupy.dev/en/stable/install.html), or launch "
                      "with KernelResult.launch or jitd.driver, which need only the CUDA driver") from error

from .driver import arch_fits
from .types import KernelResult

_dir: Optional[str] = None
_dir_pid = 0
_lock = threading.Lock()
_modules: dict[tuple[int, str], "CupyModule"] = {}


def _cubin_dir() -> str:
    # One directory per process: a forked child must not share (or delete)
    # its parent's files.
    global _dir, _dir_pid
    if _dir is None or _dir_pid != os.getpid():
        _dir = tempfile.mkdtemp(prefix="jitd-cupy-")
        _dir_pid = os.getpid()
        pid, path = _dir_pid, _dir
        atexit.register(lambda: os.getpid() == pid and shutil.rmtree(path, ignore_errors=True))
    return _dir


def _cubin_path(result: KernelResult) -> str:
    path = os.path.join(_cubin_dir(), f"{result.key}.cubin")
    if not os.path.exists(path):
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as file:
            file.write(result.cubin)
        os.replace(temp, path)
    return path


class CupyModule:
    """A result loaded with ``cupy.RawModule`` (``.raw``); ``function(expr)``
    gives the ``cupy.RawKernel`` of an entry point by its name expression."""

    def __init__(self, result: KernelResult, raw: Any) -> None:
        self.result = result
        self.raw = raw

    def function(self, expression: Optional[str] = None) -> Any:
        """The RawKernel for a name expression (with none: the only entry
        point), found by the lowered name the daemon returned."""
        return self.raw.get_function(self.result.lowered_name(expression))

    __getitem__ = function


def load(result: KernelResult) -> CupyModule:
    """``result``'s cubin as a CupyModule for the current CuPy device (the
    same object for the same device and key). ValueError when the cubin's
    arch cannot run on that device, naming the arch to ask for, and for a
    PREFETCH miss (no cubin yet)."""
    result._require_cubin()
    device = cupy.cuda.Device()
    device_arch = f"sm_{device.compute_capability}"
    if not arch_fits(result.arch, device_arch):
        raise ValueError(f"{result.spec}: the cubin is for {result.arch} and CuPy's device {device.id} is "
                         f"{device_arch}: ask for arch='{device_arch}'")
    key = (device.id, result.key)
    with _lock:
        module = _modules.get(key)
        if module is None:
            module = _modules[key] = CupyModule(result, cupy.RawModule(path=_cubin_path(result)))
        return module
