"""jitd.driver (the ctypes loader behind jitd.torch and KernelResult.launch)
against a stand-in libcuda (fake_cuda/fake_libcuda.c, built here with cc):
contexts, module loading, entry points by expression, argument packing by
the kernel's parameter sizes, launches and their errors; launching from the
handle get_kernel returns (k.launch, k[grid, block]); a PREFETCH answer
used before its cubin exists; and the arch probe that never initialises
CUDA. The real driver is exercised by test_gpu_loaders.py."""

from __future__ import annotations

import ctypes
import shutil
import struct
import subprocess
import sys
import types
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

    empty = dataclasses.replace(fill, cubin=b"", origin="none")
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


def test_driver_unavailable_is_a_jitd_error_and_a_cuda_error_that_pickles():
    import pickle

    import grpc
    error = jitd.DriverUnavailable("cuInit failed: no device", "cuInit", 100, "CUDA_ERROR_NO_DEVICE")
    assert jitd.DriverUnavailable is driver.DriverUnavailable
    assert isinstance(error, jitd.JitdError) and isinstance(error, driver.CudaError) and isinstance(error, RuntimeError)
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION and error.message == "cuInit failed: no device"
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is jitd.DriverUnavailable
    assert (back.message, back.call, back.result, back.name) == (error.message, "cuInit", 100, "CUDA_ERROR_NO_DEVICE")


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


# --- Launching from the handle get_kernel returns ---------------------------------------------


class Index:
    """An integer that is not an int, as NumPy's are."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def launched(lib) -> tuple[list[int], int, str]:
    """The last launch: grid, block and shared memory; its stream; its function."""
    dims = (ctypes.c_uint * 7)()
    lib.fake_last_dims(dims)
    return list(dims), lib.fake_last_stream() or 0, lib.fake_last_function().decode()


def test_a_result_launches_itself_with_plain_numbers_as_the_kernel_declares_them(fake, fill):
    set_params(fake, 8, 8, 4, 4, 8)  # pointer, int64, int32, float, double
    fill.launch((2, 3), 64, CudaArray(0x1000), 12, -7, 2.5, 0.25, stream=CupyStream(), shared_mem=16)
    assert launched(fake) == ([2, 3, 1, 64, 1, 1, 16], 0x7000, fill.lowered_name())
    assert [param(fake, i, size) for i, size in enumerate((8, 8, 4, 4, 8))] == [
        struct.pack("<Q", 0x1000), struct.pack("<q", 12), struct.pack("<i", -7), struct.pack("<f", 2.5),
        struct.pack("<d", 0.25)]
    # CuPy's and Numba's spelling: [grid, block(, stream(, shared_mem))](*args); the default stream by default.
    fill[4, 32](CudaArray(0x2000), 1, 2, 3.0, 4.0)
    assert launched(fake) == ([4, 1, 1, 32, 1, 1, 0], 0, fill.lowered_name())
    assert param(fake, 0, 8) == struct.pack("<Q", 0x2000) and param(fake, 3, 4) == struct.pack("<f", 3.0)
    fill[(1, 2, 3), (8, 4), Stream()](CudaArray(0x3000), 1, 2, 3.0, 4.0)
    assert launched(fake) == ([1, 2, 3, 8, 4, 1, 0], 0x5000, fill.lowered_name())
    fill[1, 32, 0x9000, 128](CudaArray(0x3000), 1, 2, 3.0, 4.0)
    assert launched(fake) == ([1, 1, 1, 32, 1, 1, 128], 0x9000, fill.lowered_name())
    # cupy.RawKernel's call, and sizes as NumPy integers (anything with __index__).
    fill((Index(3),), (Index(16), 2), (CudaArray(0x4000), 1, 2, 3.0, 4.0), shared_mem=32, stream=CupyStream())
    assert launched(fake) == ([3, 1, 1, 16, 2, 1, 32], 0x7000, fill.lowered_name())
    fill[Index(5), 32](CudaArray(0x4000), 1, 2, 3.0, 4.0)
    assert launched(fake)[0][:4] == [5, 1, 1, 32]
    launches = fake.fake_launches()
    with pytest.raises(TypeError, match=r"takes the kernel's arguments as one tuple, as cupy.RawKernel does, got "
                                        r"CudaArray; or launch with k\[grid, block\]\(\*args\)"):
        fill(1, 32, CudaArray(0x4000))
    with pytest.raises(TypeError, match=r"takes 5 arguments \(8 bytes, 8 bytes, 4 bytes, 4 bytes, 8 bytes\), got 1"):
        fill[1, 32](CudaArray(0x3000))
    with pytest.raises(TypeError, match=r"small.fill\{dtype=fp32\}@sm_90\[...\] takes grid, block and optionally "
                                        r"stream and shared_mem \(k\[grid, block\]\(\*args\)\), got \[1\]"):
        fill[1]
    assert fake.fake_launches() == launches


def test_a_result_with_several_entry_points_needs_one_named(fake, fill):
    import dataclasses

    lowered = fill.lowered_name()
    # Another key: modules are memoized by content key.
    two = dataclasses.replace(fill, key="f" * 64, symbols={FILL: lowered, "other<int>": lowered})
    set_params(fake, 8)
    launches = fake.fake_launches()
    with pytest.raises(TypeError) as error:
        two[1, 32](CudaArray(0x1000))
    assert str(error.value) == ("small.fill{dtype=fp32}@sm_90 has 2 entry points: name one, k.launch(grid, block, "
                                "*args, entry=EXPR) or k.entry(EXPR)[grid, block](*args), EXPR one of: "
                                f"{FILL}, other<int>")
    with pytest.raises(TypeError, match="has 2 entry points: name one"):
        two.launch(1, 32, CudaArray(0x1000))
    assert fake.fake_launches() == launches
    two.launch(1, 32, CudaArray(0x1000), entry=FILL)
    two.entry("other<int>")[2, 32](CudaArray(0x1000))
    assert launched(fake)[0][:4] == [2, 1, 1, 32]
    two.entry(lowered).launch(3, 32, CudaArray(0x1000))  # a lowered name names one too
    two.entry(FILL)((4,), (32,), (CudaArray(0x1000),))
    assert launched(fake)[0][:4] == [4, 1, 1, 32]
    assert fake.fake_launches() == launches + 4
    with pytest.raises(KeyError, match="has no entry point 'nope'; its entry points: "):
        two.entry("nope")
    assert repr(two.entry(FILL)) == f"KernelEntry(small.fill{{dtype=fp32}}@sm_90, {FILL!r})"


class _TorchDevice:
    def __init__(self, index: int) -> None:
        self.type, self.index = "cuda", index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _TorchDevice) and other.index == self.index

    def __hash__(self) -> int:
        return self.index


@pytest.fixture
def fake_torch(monkeypatch):
    """A stand-in `torch` (its Tensor class and torch.cuda's current device
    and stream) in sys.modules, and jitd.torch imported against it;
    both gone after the test."""
    torch = types.ModuleType("torch")

    class Tensor(TensorLike):
        def __init__(self, pointer: int) -> None:
            super().__init__(pointer)
            self.device = _TorchDevice(0)

    torch.Tensor = Tensor
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0,
                                       current_stream=lambda device: types.SimpleNamespace(cuda_stream=0x6000 + device))
    monkeypatch.setitem(sys.modules, "torch", torch)
    yield torch
    sys.modules.pop("jitd.torch", None)
    if "torch" in vars(jitd):
        delattr(jitd, "torch")


def test_torch_tensors_launch_on_torchs_current_stream_of_their_device(fake, fill, fake_torch):
    set_params(fake, 8, 8, 4, 4, 8)
    fill[2, 64](fake_torch.Tensor(0xA000), 5, 6, 1.0, 2.0)
    assert launched(fake) == ([2, 1, 1, 64, 1, 1, 0], 0x6000, fill.lowered_name())
    assert param(fake, 0, 8) == struct.pack("<Q", 0xA000)
    fill.launch(1, 32, fake_torch.Tensor(0xA000), 5, 6, 1.0, 2.0, stream=0x9000)  # a stream given wins
    assert launched(fake)[1] == 0x9000
    fill.launch(1, 32, CudaArray(0x1000), 5, 6, 1.0, 2.0)  # no torch tensor: the default stream
    assert launched(fake)[1] == 0


def test_a_prefetch_answer_says_the_compile_is_queued_wherever_it_is_used(fake, make_daemon, tmp_path):
    client = make_daemon().client()
    early = client.get_kernel("small.block_sum", threads=256, mode="prefetch")  # about a second to compile
    assert early.origin == "none" and not early.ready and early.cubin == b""
    message = (r"^small.block_sum\{threads=256\}@sm_90 has no cubin yet: this is the answer to a PREFETCH request "
               r"\(mode='prefetch'\), and the daemon has only queued the compile; call client.get_kernel\(...\) "
               r"again without mode= \(mode 'compile', the default\) to wait for the cubin$")
    uses = [early.lowered_name, lambda: early.launch(1, 32, 0), lambda: early[1, 32](0),
            lambda: driver.load(early), lambda: driver.launch(early, None, 1, 32, 0),
            lambda: jitd.cuda_python.load(early), lambda: early.write(tmp_path / "k.cubin")]
    for use in uses:
        with pytest.raises(ValueError, match=message):
            use()
    assert not (tmp_path / "k.cubin").exists()
    ready = client.get_kernel("small.block_sum", threads=256)  # waits for the compile
    assert ready.origin in ("compiled", "memory") and ready.ready
    set_params(fake, 8, 8)
    ready[1, 256](CudaArray(0x1000), 256)
    assert launched(fake)[2] == ready.lowered_name()
