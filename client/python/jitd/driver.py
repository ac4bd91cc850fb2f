"""Loading and launching jitd's cubins with the CUDA driver itself, through
ctypes: no CuPy, no cuda-python, no torch needed, only ``libcuda.so.1``
(opened when first used, never at import; ``$JITD_LIBCUDA`` names another
file). This is the loader the PyTorch helper (:mod:`jitd.torch`) uses.

::

    k = client.get_kernel("diffusion.modulate_scale_shift", dtype="bf16")
    k.launch(grid, block, out, x, scale, shift, b, l, d)     # through this module
    fn = jitd.driver.load(k).function()          # the only entry point, kept for many launches
    fn.launch(grid, block, out, x, scale, shift, b, l, d, stream=stream)

Arguments: tensors (anything with ``data_ptr()`` such as torch tensors, or
``__cuda_array_interface__`` such as CuPy arrays) pass their device pointer;
ints and floats are packed to the size of the kernel's parameter, which the
driver reports (``cuFuncGetParamInfo``, drivers for CUDA 12.4 and newer), and
their count is checked. ctypes values (``ctypes.c_int32(n)``) and NumPy
scalars are passed as they are, for older drivers.

Contexts: a module is loaded into, and launched in, the current context of
the calling thread, or with ``device=N`` into that device's primary context
(the one the CUDA runtime, PyTorch and CuPy use), made current just for the
call. Loaded modules are memoized per context and content key and live as
long as the process.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
import threading
from typing import Any, Iterator, Optional, Sequence

from .errors import CudaError, DriverUnavailable
from .types import Dim, KernelResult

_c_uint = ctypes.c_uint
_c_void_p = ctypes.c_void_p

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NO_BINARY_FOR_GPU = 209
_ATTRIBUTE_CC_MAJOR = 75
_ATTRIBUTE_CC_MINOR = 76


def _library_name() -> str:
    return os.environ.get("JITD_LIBCUDA", "") or "libcuda.so.1"


class CudaDriver:
    """The entry points of libcuda.so.1 jitd uses. One per process: see
    :func:`get_driver`."""

    def __init__(self, path: str) -> None:
        try:
            lib = ctypes.CDLL(path)
        except OSError as error:
            raise DriverUnavailable(f"cannot open the CUDA driver: {error} (is the NVIDIA driver installed on "
                                    "this host? $JITD_LIBCUDA names another file)", "dlopen") from None
        self.path = path
        self.lib = lib
        p = ctypes.POINTER
        self._declare("cuInit", [_c_uint])
        self._declare("cuGetErrorName", [ctypes.c_int, p(ctypes.c_char_p)])
        self._declare("cuGetErrorString", [ctypes.c_int, p(ctypes.c_char_p)])
        self._declare("cuDeviceGet", [p(ctypes.c_int), ctypes.c_int])
        self._declare("cuDeviceGetAttribute", [p(ctypes.c_int), ctypes.c_int, ctypes.c_int])
        self._declare("cuDevicePrimaryCtxRetain", [p(_c_void_p), ctypes.c_int])
        self._declare("cuCtxGetCurrent", [p(_c_void_p)])
        self._declare("cuCtxGetDevice", [p(ctypes.c_int)])
        self._declare("cuCtxPushCurrent_v2", [_c_void_p])
        self._declare("cuCtxPopCurrent_v2", [p(_c_void_p)])
        self._declare("cuModuleLoadData", [p(_c_void_p), ctypes.c_char_p])
        self._declare("cuModuleGetFunction", [p(_c_void_p), _c_void_p, ctypes.c_char_p])
        self._declare("cuModuleUnload", [_c_void_p])
        self._declare("cuLaunchKernel", [_c_void_p, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint,
                                         _c_void_p, p(_c_void_p), p(_c_void_p)])
        # CUDA 12.4+; without it arguments need explicit sizes (ctypes values).
        self.has_param_info = self._declare("cuFuncGetParamInfo",
                                            [_c_void_p, ctypes.c_size_t, p(ctypes.c_size_t), p(ctypes.c_size_t)],
                                            required=False)
        result = lib.cuInit(0)
        if result != CUDA_SUCCESS:
            raise DriverUnavailable(f"cuInit failed: {self.error_name(result)} ({self.error_text(result)}): no usable "
                                    "GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)", "cuInit", result,
                                    self.error_name(result))
        self._lock = threading.Lock()
        self._primary: dict[int, int] = {}

    def _declare(self, name: str, argtypes: list[Any], required: bool = True) -> bool:
        try:
            function = getattr(self.lib, name)
        except AttributeError:
            if required:
                raise DriverUnavailable(f"{self.path} has no {name}: the CUDA driver is too old for jitd",
                                        name) from None
            return False
        function.argtypes = argtypes
        function.restype = ctypes.c_int
        return True

    def error_name(self, result: int) -> str:
        name = ctypes.c_char_p()
        if self.lib.cuGetErrorName(result, ctypes.byref(name)) == CUDA_SUCCESS and name.value:
            return name.value.decode()
        return f"CUresult {result}"

    def error_text(self, result: int) -> str:
        text = ctypes.c_char_p()
        if self.lib.cuGetErrorString(result, ctypes.byref(text)) == CUDA_SUCCESS and text.value:
            return text.value.decode()
        return "unknown error"

    def check(self, call: str, result: int, hint: str = "") -> None:
        if result != CUDA_SUCCESS:
            raise CudaError(call, result, self.error_name(result), self.error_text(result), hint)

    def current_context(self) -> int:
        context = _c_void_p()
        self.check("cuCtxGetCurrent", self.lib.cuCtxGetCurrent(ctypes.byref(context)))
        return context.value or 0

    def primary_context(self, device: int) -> int:
        """Device ``device``'s primary context, retained once for the life of
        the process (as the CUDA runtime keeps it)."""
        with self._lock:
            if device not in self._primary:
                handle = ctypes.c_int()
                self.check(f"cuDeviceGet({device})", self.lib.cuDeviceGet(ctypes.byref(handle), device))
                context = _c_void_p()
                self.check(f"cuDevicePrimaryCtxRetain({device})",
                           self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle.value))
                self._primary[device] = context.value or 0
            return self._primary[device]

    @contextlib.contextmanager
    def using(self, context: int) -> Iterator[int]:
        """Makes ``context`` current for the block (pushed and popped, so the
        thread's own context is left as it was)."""
        if self.current_context() == context:
            yield context
            return
        self.check("cuCtxPushCurrent", self.lib.cuCtxPushCurrent_v2(context))
        try:
            yield context
        finally:
            popped = _c_void_p()
            self.lib.cuCtxPopCurrent_v2(ctypes.byref(popped))

    def context_for(self, device: Optional[int]) -> int:
        """The context to use: ``device``'s primary context, or with None the
        thread's current context, else device 0's primary context."""
        if device is None:
            current = self.current_context()
            if current:
                return current
            device = 0
        return self.primary_context(device)

    def device_arch(self, context: int) -> str:
        with self.using(context):
            device = ctypes.c_int()
            self.check("cuCtxGetDevice", self.lib.cuCtxGetDevice(ctypes.byref(device)))
            return _arch_of(self.lib, device.value) or "unknown"


_driver: Optional[CudaDriver] = None
_driver_pid = 0
_driver_lock = threading.Lock()


def get_driver() -> CudaDriver:
    """The process's driver: opens libcuda.so.1 and runs cuInit once.
    :class:`DriverUnavailable` when that is impossible."""
    global _driver, _driver_pid
    with _driver_lock:
        if _driver is not None and _driver_pid != os.getpid():
            raise DriverUnavailable("this process was forked after its parent initialised CUDA, and a CUDA context "
                                    "does not survive fork(): start workers with multiprocessing's 'spawn' method, "
                                    "or use CUDA only in the children", "fork")
        if _driver is None:
            _driver = CudaDriver(_library_name())
            _driver_pid = os.getpid()
        return _driver


def _arch_of(lib: Any, device: int) -> Optional[str]:
    major, minor = ctypes.c_int(), ctypes.c_int()
    if lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTRIBUTE_CC_MAJOR, device) != CUDA_SUCCESS:
        return None
    if lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTRIBUTE_CC_MINOR, device) != CUDA_SUCCESS:
        return None
    return f"sm_{major.value}{minor.value}"


_probe_lib: Any = None
try:
    _dlopen = ctypes.CDLL(None).dlopen  # glibc 2.34+ has dlopen in libc
except AttributeError:
    _dlopen = ctypes.CDLL("libdl.so.2").dlopen
_dlopen.argtypes, _dlopen.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_void_p


def current_device_arch() -> Optional[str]:
    """The arch ("sm_90") of the calling thread's current CUDA context's
    device, or of device 0 when the process has initialised CUDA but this
    thread has no context; None when this process has not initialised CUDA.

    Never loads the driver nor initialises CUDA (so it is safe before a
    fork): it only asks a libcuda.so.1 someone already loaded."""
    global _probe_lib
    lib = _probe_lib
    if lib is None:
        # dlopen itself, not ctypes.CDLL: asked before every request that
        # names no arch, and CDLL's failure (an OSError with dlerror's text)
        # costs ten times the lookup.
        handle = _dlopen(_library_name().encode(), os.RTLD_NOLOAD | os.RTLD_LAZY)
        if not handle:
            return None
        lib = ctypes.CDLL(_library_name(), handle=handle)
        for name, argtypes in (("cuCtxGetCurrent", [ctypes.POINTER(_c_void_p)]),
                               ("cuCtxGetDevice", [ctypes.POINTER(ctypes.c_int)]),
                               ("cuDeviceGet", [ctypes.POINTER(ctypes.c_int), ctypes.c_int]),
                               ("cuDeviceGetAttribute", [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int])):
            function = getattr(lib, name)
            function.argtypes, function.restype = argtypes, ctypes.c_int
        _probe_lib = lib
    context = _c_void_p()
    if lib.cuCtxGetCurrent(ctypes.byref(context)) != CUDA_SUCCESS:
        return None  # not initialised here (or a forked child of a process that was)
    device = ctypes.c_int()
    if context.value:
        if lib.cuCtxGetDevice(ctypes.byref(device)) != CUDA_SUCCESS:
            return None
    elif lib.cuDeviceGet(ctypes.byref(device), 0) != CUDA_SUCCESS:
        return None
    return _arch_of(lib, device.value)


def arch_fits(cubin_arch: str, device_arch: str) -> bool:
    """Whether a cubin for ``cubin_arch`` runs on a ``device_arch`` device:
    same major version and a minor no higher (sm_80 runs on sm_86);
    arch-specific variants (sm_90a, sm_100f) only on their exact arch."""
    def split(arch: str) -> tuple[int, int, str]:
        digits = arch[3:] if arch.startswith("sm_") else arch
        suffix = digits.lstrip("0123456789")
        number = digits[: len(digits) - len(suffix)]
        if len(number) < 2:
            return (-1, -1, suffix)
        return (int(number[:-1]), int(number[-1]), suffix)

    if "+" in cubin_arch or cubin_arch.startswith("compute_"):
        return True  # a fatbin or PTX: the driver picks the SASS or JIT-compiles
    cubin, device = split(cubin_arch), split(device_arch)
    if cubin[0] < 0 or device[0] < 0:
        return True  # unknown: let the driver decide
    if cubin[2]:
        return cubin[:2] == device[:2]
    return cubin[0] == device[0] and cubin[1] <= device[1]


# ---------------------------------------------------------------------------
# Modules and functions


class Function:
    """One entry point of a loaded :class:`Module`, ready to launch.

    Attributes:
        handle: the CUfunction, as an int.
        name_expression, lowered_name: which entry point.
        param_sizes: the size in bytes of each kernel parameter, when the
            driver reports them (CUDA 12.4+), else None.
    """

    def __init__(self, module: Module, name_expression: str, lowered_name: str, handle: int) -> None:
        self.module = module
        self.name_expression = name_expression
        self.lowered_name = lowered_name
        self.handle = handle
        self.param_sizes = self._param_sizes()

    def _param_sizes(self) -> Optional[tuple[int, ...]]:
        driver = self.module.driver
        if not driver.has_param_info:
            return None
        sizes = []
        offset, size = ctypes.c_size_t(), ctypes.c_size_t()
        for index in range(4096):  # CUDA's own bound on kernel parameters is far lower
            result = driver.lib.cuFuncGetParamInfo(self.handle, index, ctypes.byref(offset), ctypes.byref(size))
            if result == CUDA_ERROR_INVALID_VALUE:
                break
            if result != CUDA_SUCCESS:
                return None
            sizes.append(size.value)
        return tuple(sizes)

    def launch(self, grid: Dim, block: Dim, *args: Any, stream: Any = None, shared_mem: int = 0) -> None:
        """Launches the kernel: ``grid`` and ``block`` are ints or up to three
        ints; ``stream`` a CUstream handle (int), anything with
        ``cuda_stream`` (torch) or ``ptr`` (CuPy), or None for the default
        stream. Asynchronous, like every CUDA launch."""
        gx, gy, gz = _dim3(grid, "grid")
        bx, by, bz = _dim3(block, "block")
        sizes = self.param_sizes
        if sizes is not None and len(args) != len(sizes):
            raise TypeError(f"{self.name_expression} takes {len(sizes)} arguments "
                            f"({', '.join(f'{s} bytes' for s in sizes)}), got {len(args)}")
        values = [_pack(arg, sizes[i] if sizes is not None else None, i, self.name_expression)
                  for i, arg in enumerate(args)]
        pointers = (_c_void_p * max(len(values), 1))(*[ctypes.cast(ctypes.pointer(v), _c_void_p) for v in values])
        driver = self.module.driver
        with driver.using(self.module.context):
            driver.check(f"cuLaunchKernel({self.name_expression})",
                         driver.lib.cuLaunchKernel(self.handle, gx, gy, gz, bx, by, bz, shared_mem,
                                                   _stream_handle(stream), pointers, None))

    __call__ = launch

    def __repr__(self) -> str:
        return f"jitd.driver.Function({self.name_expression!r}, {self.lowered_name!r})"


class Module:
    """A cubin loaded into one CUDA context, every entry point resolved.
    Made by :func:`load`."""

    def __init__(self, driver: CudaDriver, result: KernelResult, context: int) -> None:
        result._require_cubin()
        self.driver = driver
        self.result = result
        self.context = context
        handle = _c_void_p()
        with driver.using(context):
            status = driver.lib.cuModuleLoadData(ctypes.byref(handle), result.cubin)
            if status == CUDA_ERROR_NO_BINARY_FOR_GPU:
                device_arch = driver.device_arch(context)
                driver.check(f"cuModuleLoadData({result.spec})", status,
                             f"the cubin is for {result.arch} and this device is {device_arch}: "
                             f"ask for arch='{device_arch}'")
            driver.check(f"cuModuleLoadData({result.spec})", status)
            self.handle = handle.value or 0
            self.functions: dict[str, Function] = {}
            for expression, lowered in result.symbols.items():
                function = _c_void_p()
                driver.check(f"cuModuleGetFunction({lowered})",
                             driver.lib.cuModuleGetFunction(ctypes.byref(function), self.handle, lowered.encode()),
                             f"the cubin of {result.spec} lacks the entry point the daemon named for {expression}")
                self.functions[expression] = Function(self, expression, lowered, function.value or 0)

    def function(self, expression: Optional[str] = None) -> Function:
        """The entry point for a name expression (or its lowered name); with
        none, the only one. KeyError naming the entry points otherwise."""
        if expression is not None and expression in self.functions:
            return self.functions[expression]
        lowered = self.result.lowered_name() if expression is None else expression
        for function in self.functions.values():
            if function.lowered_name == lowered:
                return function
        raise KeyError(f"{self.result.spec} has no entry point {expression!r}; its entry points: "
                       + ", ".join(self.functions))

    __getitem__ = function

    def __repr__(self) -> str:
        return f"jitd.driver.Module({self.result.spec}, {list(self.functions)})"


_modules: dict[tuple[int, str], Module] = {}
_modules_lock = threading.Lock()


def load(result: KernelResult, *, device: Optional[int] = None) -> Module:
    """``result``'s cubin loaded into the current context (or ``device``'s
    primary context); the same Module for the same context and key.
    ValueError for a PREFETCH miss (no cubin yet)."""
    result._require_cubin()
    driver = get_driver()
    context = driver.context_for(device)
    key = (context, result.key)
    with _modules_lock:
        module = _modules.get(key)
        if module is None:
            module = _modules[key] = Module(driver, result, context)
        return module


def launch(result: KernelResult, expression: Optional[str], grid: Dim, block: Dim, *args: Any,
           stream: Any = None, shared_mem: int = 0, device: Optional[int] = None) -> None:
    """``load(result, device=device).function(expression).launch(...)``;
    ``result.launch(grid, block, *args, entry=...)`` says the same without
    the expression placeholder."""
    load(result, device=device).function(expression).launch(grid, block, *args, stream=stream, shared_mem=shared_mem)


# ---------------------------------------------------------------------------
# Arguments


def _dim3(value: Dim, what: str) -> tuple[int, int, int]:
    # One int, or a sequence of them; NumPy integers count as ints.
    dims = [int(value)] if hasattr(value, "__index__") else [int(v) for v in value]
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"{what} is one to three positive ints, got {value!r}")
    return (dims + [1, 1])[0], (dims + [1, 1])[1], (dims + [1, 1])[2]


def _stream_handle(stream: Any) -> Optional[int]:
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream or None
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        if isinstance(value, int):
            return value or None
    if hasattr(stream, "__cuda_stream__"):  # the CUDA stream protocol: (version, handle)
        return int(stream.__cuda_stream__()[1]) or None
    raise TypeError(f"stream {stream!r} is not a CUstream handle, a torch or CuPy stream")


def device_pointer(value: Any, what: str = "argument") -> Optional[int]:
    """The device address of a tensor-like value (torch tensor, anything with
    ``__cuda_array_interface__``), or None when it is not one. Raises
    ValueError for host tensors and non-contiguous views (jitd's kernels
    read dense arrays)."""
    if hasattr(value, "data_ptr") and callable(value.data_ptr) and hasattr(value, "is_cuda"):
        if not value.is_cuda:
            raise ValueError(f"{what} is a tensor on {getattr(value, 'device', 'the host')}; "
                             "the kernel reads device memory: move it with .cuda()")
        if not value.is_contiguous():
            raise ValueError(f"{what} is a non-contiguous tensor (a view); the kernel reads a dense array: "
                             "pass .contiguous()")
        return int(value.data_ptr())
    interface = getattr(value, "__cuda_array_interface__", None)
    if interface is not None:
        strides = interface.get("strides")
        if strides is not None and not _c_contiguous(interface["shape"], strides, interface["typestr"]):
            raise ValueError(f"{what} is a non-contiguous array; the kernel reads a dense array: "
                             "pass a contiguous copy")
        return int(interface["data"][0])
    return None


def _c_contiguous(shape: Sequence[int], strides: Sequence[int], typestr: str) -> bool:
    expected = int(typestr[2:])
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


_INTS = {1: (ctypes.c_int8, ctypes.c_uint8), 2: (ctypes.c_int16, ctypes.c_uint16),
         4: (ctypes.c_int32, ctypes.c_uint32), 8: (ctypes.c_int64, ctypes.c_uint64)}


def _pack(arg: Any, size: Optional[int], index: int, kernel: str) -> Any:
    what = f"argument {index} of {kernel}"

    def fits(actual: int) -> Any:
        if size is not None and actual != size:
            raise TypeError(f"{what} is {actual} bytes; the kernel's parameter is {size} bytes")

    if isinstance(arg, (ctypes._SimpleCData, ctypes.Structure, ctypes.Array)):
        fits(ctypes.sizeof(arg))
        return arg
    pointer = device_pointer(arg, what)
    if pointer is not None or arg is None:
        fits(8)
        return _c_void_p(pointer or 0)
    if hasattr(arg, "dtype") and hasattr(arg, "tobytes") and getattr(arg, "shape", None) == ():
        data = arg.tobytes()  # a NumPy scalar: its own size and bits
        fits(len(data))
        return (ctypes.c_char * len(data)).from_buffer_copy(data)
    if isinstance(arg, bool):
        fits(size or 1)
        return ctypes.c_uint8(int(arg))
    if isinstance(arg, int):
        if size is None:
            raise TypeError(f"{what}: this driver does not report parameter sizes (cuFuncGetParamInfo, CUDA 12.4+); "
                            f"pass ctypes.c_int64({arg}) or ctypes.c_int32({arg}) as the kernel declares it")
        if size not in _INTS:
            raise TypeError(f"{what}: an int for a {size}-byte parameter")
        signed, unsigned = _INTS[size]
        bits = 8 * size
        if -(1 << (bits - 1)) <= arg < (1 << (bits - 1)):
            return signed(arg)
        if 0 <= arg < (1 << bits):
            return unsigned(arg)
        raise OverflowError(f"{what}: {arg} does not fit the kernel's {size}-byte parameter")
    if isinstance(arg, float):
        if size == 4:
            return ctypes.c_float(arg)
        if size == 8:
            return ctypes.c_double(arg)
        if size == 2:
            return (ctypes.c_char * 2).from_buffer_copy(struct.pack("<e", arg))
        raise TypeError(f"{what}: pass ctypes.c_float({arg}) or ctypes.c_double({arg}) as the kernel declares it"
                        if size is None else f"{what}: a float for a {size}-byte parameter")
    raise TypeError(f"{what}: cannot pass {type(arg).__name__}; pass a tensor, an int, a float or a ctypes value")
