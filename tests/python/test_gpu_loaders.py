"""The loaders on a GPU: diffusion.modulate_scale_shift fetched from a real
daemon serving kernels/, loaded with CuPy, with the CUDA driver through
ctypes (jitd.driver), with cuda-python, and launched on torch tensors
(jitd.torch), each checked bit for bit against a CPU reference written from
docs/KERNELS.md's formula (and against eager PyTorch, which it equals); and the
examples of client/python/README.md, run as written.

Skipped without a CUDA driver and device. On the GPU host
tests/gpu/python_run.sh runs this file against the daemon it started
($JITD_TEST_ENDPOINT); elsewhere a daemon is started from $JITD_BINARY."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jitd
import jitd.driver
import pytest
from conftest import SHIPPED_KERNELS, Daemon

np = None  # numpy, imported by the gpu fixture (CI's environment has no GPU and no numpy)

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parents[2]
README = REPO / "client" / "python" / "README.md"
KERNEL = "diffusion.modulate_scale_shift"
EXPRESSION = "sglang::modulate_scale_shift::modulate_scale_shift_kernel<{}>"
TYPES = {"bf16": "__nv_bfloat16", "fp16": "__half"}
SHAPES = [(1, 17, 64), (2, 1024, 3072), (1, 4608, 3072)]
BLOCK = 256


# --- The CPU reference (docs/KERNELS.md) --------------------------------------------------
# out[b,l,d] = R( R( x[b,l,d] * R(1 + scale[b,d]) ) + shift[b,d] ), fp32 arithmetic,
# R = round to the dtype, nearest even. Values travel as their 16-bit patterns.


def to_f32(bits, dtype: str):
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def to_bits(values, dtype: str):
    if dtype == "bf16":
        u = values.astype(np.float32).view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # nearest even (no NaN here)
    return values.astype(np.float16).view(np.uint16)


def rounded(values, dtype: str):
    return to_f32(to_bits(values, dtype), dtype)


def reference(x, scale, shift, dtype: str):
    """Bits of the expected output from the inputs' bits; x [b,l,d], scale/shift [b,d]."""
    xf, sf, hf = (to_f32(a, dtype) for a in (x, scale, shift))
    one_plus = rounded(np.float32(1) + sf, dtype)[:, None, :]
    scaled = rounded(xf * one_plus, dtype)
    return to_bits(scaled + hf[:, None, :], dtype)


def inputs(shape, dtype: str, seed: int):
    b, _, d = shape
    rng = np.random.default_rng(seed)
    draw = lambda s: to_bits((rng.standard_normal(s) * 2).astype(np.float32), dtype)  # noqa: E731
    x, scale, shift = draw(shape), draw((b, d)), draw((b, d))
    x.reshape(-1)[:4] = to_bits(np.array([0.0, -0.0, 1e-6, -3e4], dtype=np.float32), dtype)  # signed zeros, tiny, big
    return x, scale, shift


def grid_for(shape) -> int:
    total = shape[0] * shape[1] * shape[2]
    return max(1, min((total + BLOCK - 1) // BLOCK, 132 * 16))


# --- Fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu():
    global np
    try:
        driver = jitd.driver.get_driver()
    except jitd.driver.CudaError as error:
        pytest.skip(f"no usable CUDA GPU: {error}")
    np = pytest.importorskip("numpy")
    return driver


@pytest.fixture(scope="module")
def endpoint(gpu):
    given = os.environ.get("JITD_TEST_ENDPOINT")
    if given:
        yield given
        return
    daemon = Daemon(SHIPPED_KERNELS).start()
    yield daemon.endpoint
    daemon.remove()


@pytest.fixture(scope="module")
def client(endpoint):
    with jitd.Client(endpoint) as shared:
        yield shared


@pytest.fixture(scope="module")
def torch(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture(scope="module")
def cupy(gpu):
    return pytest.importorskip("cupy")


def device_arch(torch) -> str:
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}"


# --- Loaders -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_cupy_rawmodule_launch_equals_the_cpu_reference(client, cupy, dtype, shape):
    cp = cupy
    k = client.get_kernel(KERNEL, f"sm_{cp.cuda.Device().compute_capability}", dtype=dtype)
    x, scale, shift = inputs(shape, dtype, seed=1)
    dx, dscale, dshift = (cp.asarray(a) for a in (x, scale, shift))
    out = cp.empty_like(dx)
    fn = jitd.cupy.load(k).function(EXPRESSION.format(TYPES[dtype]))
    b, l, d = shape
    fn((grid_for(shape),), (BLOCK,), (out, dx, dscale, dshift, cp.int64(b), cp.int64(l), cp.int64(d)))
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), reference(x, scale, shift, dtype))
    assert jitd.cupy.load(k) is jitd.cupy.load(k)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_ctypes_driver_launch_equals_the_cpu_reference(client, torch, dtype, shape):
    k = client.get_kernel(KERNEL, device_arch(torch), dtype=dtype)
    x, scale, shift = inputs(shape, dtype, seed=2)
    dx, dscale, dshift = (torch.from_numpy(a.view(np.int16)).cuda() for a in (x, scale, shift))
    out = torch.empty_like(dx)
    function = jitd.driver.load(k, device=torch.cuda.current_device()).function()
    assert function.param_sizes == (8, 8, 8, 8, 8, 8, 8)  # four pointers, three int64_t
    torch.cuda.synchronize()
    function.launch(grid_for(shape), BLOCK, out, dx, dscale, dshift, *shape)  # default stream
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy().view(np.uint16), reference(x, scale, shift, dtype))


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_torch_launch_equals_eager_and_the_cpu_reference(client, torch, dtype, shape):
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    x, scale, shift = inputs(shape, dtype, seed=3)
    tx, tscale, tshift = (torch.from_numpy(a.view(np.int16)).cuda().view(torch_dtype) for a in (x, scale, shift))
    k = client.get_kernel(KERNEL, dtype=tx.dtype)  # arch: the current device's (torch initialised CUDA)
    assert k.arch == device_arch(torch) and k.params == {"dtype": dtype}
    out = torch.empty_like(tx)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the launch goes on torch's current stream
        jitd.torch.launch(k, EXPRESSION.format(TYPES[dtype]), grid_for(shape), BLOCK, out, tx, tscale, tshift, *shape)
    stream.synchronize()
    bits = out.view(torch.int16).cpu().numpy().view(np.uint16)
    np.testing.assert_array_equal(bits, reference(x, scale, shift, dtype))
    assert torch.equal(out.view(torch.int16), (tx * (1 + tscale[:, None]) + tshift[:, None]).view(torch.int16))


def test_torch_launch_is_captured_and_replayed_by_a_cuda_graph(client, torch):
    shape = (2, 1024, 3072)
    x, scale, shift = (torch.randn(s, device="cuda", dtype=torch.bfloat16) for s in (shape, shape[::2], shape[::2]))
    k = client.get_kernel(KERNEL, dtype=x.dtype)
    out = torch.empty_like(x)
    jitd.torch.launch(k, None, 1024, BLOCK, out, x, scale, shift, *shape)  # loads the module before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        jitd.torch.launch(k, None, 1024, BLOCK, out, x, scale, shift, *shape)
    x.copy_(torch.randn_like(x))
    out.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, x * (1 + scale[:, None]) + shift[:, None])


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_a_result_launches_itself_on_torch_tensors_on_torchs_current_stream(client, torch, dtype):
    shape = SHAPES[1]
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    x, scale, shift = inputs(shape, dtype, seed=5)
    tx, tscale, tshift = (torch.from_numpy(a.view(np.int16)).cuda().view(torch_dtype) for a in (x, scale, shift))
    k = client.get_kernel(KERNEL, dtype=tx.dtype)
    out = torch.empty_like(tx)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        k[grid_for(shape), BLOCK](out, tx, tscale, tshift, *shape)  # no expression, Python ints as int64_t
    stream.synchronize()
    bits = out.view(torch.int16).cpu().numpy().view(np.uint16)
    np.testing.assert_array_equal(bits, reference(x, scale, shift, dtype))


def test_a_result_launches_itself_on_cupy_arrays_with_plain_ints(client, cupy):
    cp = cupy
    shape, dtype = SHAPES[1], "fp16"
    k = client.get_kernel(KERNEL, f"sm_{cp.cuda.Device().compute_capability}", dtype=dtype)
    x, scale, shift = inputs(shape, dtype, seed=6)
    dx, dscale, dshift = (cp.asarray(a) for a in (x, scale, shift))
    out = cp.empty_like(dx)
    k.launch(grid_for(shape), BLOCK, out, dx, dscale, dshift, *shape)  # no cp.int64(...) needed
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), reference(x, scale, shift, dtype))


def test_torch_launch_refuses_host_tensors_and_views(client, torch):
    k = client.get_kernel(KERNEL, dtype="bf16")
    x = torch.zeros(4, 8, 64, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="move them with .cuda"):
        jitd.torch.launch(k, None, 1, BLOCK, x, x, x, x, 4, 8, 64)
    gx = x.cuda()
    with pytest.raises(ValueError, match="non-contiguous"):
        jitd.torch.launch(k, None, 1, BLOCK, gx.transpose(1, 2), gx, gx, gx, 4, 8, 64)


def test_cuda_python_loader_launch_equals_the_cpu_reference(client, torch):
    try:
        from cuda.core import Device, LaunchConfig, launch
    except ImportError:
        try:
            from cuda.core.experimental import Device, LaunchConfig, launch
        except ImportError:
            pytest.skip("cuda-python (cuda.core) is not installed")
    shape, dtype = (1, 17, 64), "bf16"
    k = client.get_kernel(KERNEL, device_arch(torch), dtype=dtype)
    device = Device(torch.cuda.current_device())
    device.set_current()
    x, scale, shift = inputs(shape, dtype, seed=4)
    dx, dscale, dshift = (torch.from_numpy(a.view(np.int16)).cuda() for a in (x, scale, shift))
    out = torch.empty_like(dx)
    kernel = jitd.cuda_python.load(k).kernel()
    stream = device.create_stream()
    pointers = [np.intp(t.data_ptr()) for t in (out, dx, dscale, dshift)]
    launch(stream, LaunchConfig(grid=grid_for(shape), block=BLOCK), kernel, *pointers, *map(np.int64, shape))
    stream.sync()
    np.testing.assert_array_equal(out.cpu().numpy().view(np.uint16), reference(x, scale, shift, dtype))


def test_the_arch_default_follows_the_current_device(client, torch):
    torch.cuda.init()
    assert jitd.driver.current_device_arch() == device_arch(torch)
    assert jitd.Client(client.endpoint).get_kernel(KERNEL, dtype="fp16").arch == device_arch(torch)


# --- README -----------------------------------------------------------------------------


def readme_examples() -> list[str]:
    """The ```python blocks of client/python/README.md that follow a
    `<!-- gpu-example -->` marker."""
    text = README.read_text()
    return re.findall(r"<!-- gpu-example -->\s*```python\n(.*?)```", text, re.S)


def test_the_readme_has_its_examples():
    examples = readme_examples()
    assert len(examples) >= 1
    assert len(examples[0].strip().splitlines()) == 5  # the five-line example


@pytest.mark.parametrize("index", range(len(readme_examples())))
def test_the_readme_example_runs_as_written(endpoint, index):
    # In a fresh interpreter, as a reader would run it, with the endpoint in
    # the environment (the example says jitd.Client()).
    code = readme_examples()[index]
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "JITD_ENDPOINT": endpoint},
                          capture_output=True, text=True, timeout=300)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
