"""jitd.driver (the ctypes loader behind jitd.torch) against a stand-in
libcuda (fake_cuda/fake_libcuda.c, built here with cc): contexts, module
loading, entry points by expression, argument packing by the kernel's
parameter sizes, launches and their errors; and the arch probe that never
initialises CUDA. The real driver is exercised by test_gpu_loaders.py."""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
from pathlib import Path

import jitd
import jitd.driver as driver
import pytest

FAKE_SOURCE = Path(__file__).parent / "fake_cuda" / "fake_libcuda.c"
FILL = "sglang::small::fill_kernel<float>"


@pytest.fixture(scope="module")
def fake_path(tmp_path_factory) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the stand-in driver")
    path = tmp_path_factory.mktemp("fake_cuda") / "libcuda.so.1"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(path), str(FAKE_SOURCE)], check=True)
    return path


@pytest.fixture
def fake(fake_path, monkeypatch):
    """The stand-in loaded as jitd.driver's libcuda, the module's process
    state reset before and after."""
    monkeypatch.setenv("JITD_LIBCUDA", str(fake_path))
    lib = ctypes.CDLL(str(fake_path))
    lib.fake_last_function.restype = ctypes.c_char_p
    lib.fake_last_param.restype = ctypes.POINTER(ctypes.c_ubyte)
    lib.fake_last_stream.restype = ctypes.c_void_p
    lib.fake_current_context.restype = ctypes.c_void_p
    lib.fake_set_cc(9, 0)
    lib.fake_set_no_binary(0)

    def reset() -> None:
        driver._driver = None
        driver._probe_lib = None
        driver._modules.clear()

    reset()
    yield lib
    reset()


def set_params(lib, *sizes: int) -> None:
    lib.fake_set_params((ctypes.c_size_t * len(sizes))(*sizes), len(sizes))


def param(lib, index: int, size: int) -> bytes:
    return bytes(lib.fake_last_param(index)[:size])


class CudaArray:
    """What CuPy and Numba arrays expose: the CUDA array interface."""

    def __init__(self, pointer: int, shape=(4,), strides=None) -> None:
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": shape, "typestr": "<f4",
                                         "strides": strides, "version": 3}


class Stream:
    cuda_stream = 0x5000


@pytest.fixture(scope="module")
def fill(daemon) -> jitd.KernelResult:
    with daemon.client() as client:
        return client.get_kernel("small.fill", dtype="fp32")


def test_the_probe_answers_only_once_someone_initialised_cuda(fake):
    # The client asks for the current device's arch before each request that
    # names none; it must never be the one to initialise CUDA (fork safety).
    fake.fake_set_cc(8, 6)
    assert driver.current_device_arch() is None  # loaded, not initialised
    fake.cuInit(0)  # what torch or CuPy would have done
    assert driver.current_device_arch() == "sm_86"


def test_load_resolves_every_entry_point_and_memoizes_per_context(fake, fill):
    module = driver.load(fill)
    assert module is driver.load(fill)
    function = module.function()
    assert function is module.function(FILL) is module[fill.lowered_name()]
    assert function.lowered_name == fill.lowered_name() and function.name_expression == FILL
    with pytest.raises(KeyError, match="its entry points: sglang::small::fill_kernel<float>"):
        module.function("nope")
    # Loaded into device 0's primary context, made current only for the call.
    assert fake.fake_current_context() is None


def test_launch_packs_arguments_to_the_kernels_parameter_sizes(fake, fill):
    set_params(fake, 8, 8, 4, 8, 2, 1)  # pointer, int64, int32, double, half, bool/char
    function = driver.load(fill).function()
    assert function.param_sizes == (8, 8, 4, 8, 2, 1)
    function.launch((3, 2), 128, CudaArray(0x1000), -5, 7, 0.5, 1.5, True, stream=Stream(), shared_mem=64)
    dims = (ctypes.c_uint * 7)()
    fake.fake_last_dims(dims)
    assert list(dims) == [3, 2, 1, 128, 1, 1, 64]
    assert fake.fake_last_stream() == 0x5000
    assert fake.fake_last_function().decode() == fill.lowered_name()
    assert param(fake, 0, 8) == struct.pack("<Q", 0x1000)
    assert param(fake, 1, 8) == struct.pack("<q", -5)
    assert param(fake, 2, 4) == struct.pack("<i", 7)
    assert param(fake, 3, 8) == struct.pack("<d", 0.5)
    assert param(fake, 4, 2) == struct.pack("<e", 1.5)
    assert param(fake, 5, 1) == b"\x01"


def test_unsigned_values_ctypes_values_and_float_parameters(fake, fill):
    set_params(fake, 4, 4, 8)
    function = driver.load(fill).function()
    function.launch(1, 32, 0xFFFFFFFF, 2.0, ctypes.c_uint64(9))
    assert param(fake, 0, 4) == struct.pack("<I", 0xFFFFFFFF)
    assert param(fake, 1, 4) == struct.pack("<f", 2.0)
    assert param(fake, 2, 8) == struct.pack("<Q", 9)


def test_argument_errors_say_what_to_pass(fake, fill):
    set_params(fake, 8, 4)
    function = driver.load(fill).function()
    launches = fake.fake_launches()
    with pytest.raises(TypeError, match=r"takes 2 arguments \(8 bytes, 4 bytes\), got 1"):
        function.launch(1, 32, 0)
    with pytest.raises(OverflowError, match="does not fit the kernel's 4-byte parameter"):
        function.launch(1, 32, 0, 1 << 40)
    with pytest.raises(TypeError, match="is 8 bytes; the kernel's parameter is 4 bytes"):
        function.launch(1, 32, 0, ctypes.c_int64(1))
    with pytest.raises(ValueError, match="non-contiguous array"):
        function.launch(1, 32, CudaArray(0x1000, shape=(4, 4), strides=(4, 32)), 1)
    with pytest.raises(TypeError, match="cannot pass str"):
        function.launch(1, 32, "x", 1)
    with pytest.raises(ValueError, match="grid is one to three positive ints"):
        function.launch((0,), 32, 0, 1)
    assert fake.fake_launches() == launches  # nothing was launched


def test_a_cubin_for_another_gpu_names_the_arch_to_ask_for(fake, fill):
    fake.fake_set_cc(10, 0)
    fake.fake_set_no_binary(1)
    with pytest.raises(driver.CudaError, match="CUDA_ERROR_NO_BINARY_FOR_GPU.*is for sm_90 and this device is sm_100: "
                                                 "ask for arch='sm_100'"):
        driver.load(fill)


def test_a_prefetch_miss_cannot_be_loaded(fake, fill):
    import dataclasses

    empty = dataclasses.replace(fill, cubin=b"", source="none")
    with pytest.raises(ValueError, match="has no cubin"):
        driver.load(empty)


def test_no_driver_is_driver_unavailable_naming_the_library(monkeypatch, tmp_path):
    monkeypatch.setenv("JITD_LIBCUDA", str(tmp_path / "libcuda.so.1"))
    driver._driver = None
    try:
        with pytest.raises(driver.DriverUnavailable, match="cannot open the CUDA driver: .*is the NVIDIA driver installed"):
            driver.get_driver()
    finally:
        driver._driver = None


def test_arch_fits_follows_cubin_compatibility():
    assert driver.arch_fits("sm_80", "sm_86") and driver.arch_fits("sm_90", "sm_90")
    assert not driver.arch_fits("sm_90", "sm_100") and not driver.arch_fits("sm_86", "sm_80")
    assert driver.arch_fits("sm_90a", "sm_90") and not driver.arch_fits("sm_90a", "sm_100")


class TensorLike:
    """The parts of a torch.Tensor the driver reads."""

    def __init__(self, pointer: int, cuda: bool = True, contiguous: bool = True) -> None:
        self.pointer, self.is_cuda, self.contiguous = pointer, cuda, contiguous
        self.device = "cuda:0" if cuda else "cpu"

    def data_ptr(self) -> int:
        return self.pointer

    def is_contiguous(self) -> bool:
        return self.contiguous


class CupyStream:
    ptr = 0x7000


def test_tensors_pass_their_device_pointers_and_streams_their_handles(fake, fill):
    set_params(fake, 8, 8)
    function = driver.load(fill).function()
    function.launch(1, 32, TensorLike(0xA000), None, stream=CupyStream())
    assert param(fake, 0, 8) == struct.pack("<Q", 0xA000) and param(fake, 1, 8) == bytes(8)
    assert fake.fake_last_stream() == 0x7000
    function.launch(1, 32, TensorLike(0xB000), TensorLike(0xC000), stream=0x9000)
    assert fake.fake_last_stream() == 0x9000
    with pytest.raises(ValueError, match=r"is a tensor on cpu; the kernel reads device memory: move it with \.cuda\(\)"):
        function.launch(1, 32, TensorLike(0xA000, cuda=False), None)
    with pytest.raises(ValueError, match="non-contiguous tensor"):
        function.launch(1, 32, TensorLike(0xA000, contiguous=False), None)
    with pytest.raises(TypeError, match="is not a CUstream handle"):
        function.launch(1, 32, None, None, stream="default")
