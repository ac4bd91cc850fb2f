"""The types inference-server code holds, taken as they are: dtypes of torch,
NumPy and CuPy (objects and scalar types) and their common names, options as
a string or a list, archs as "sm_90", 90, (9, 0) or a device. Stand-ins
mimic the libraries' objects where those are not installed here (their
str() and __name__ are what jitd reads); the GPU loader tests use the real
ones on the H200."""

import jitd
import pytest


class _TorchDtype:
    """What str(torch.bfloat16) and friends look like."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"torch.{self.name}"


# np.float16 and cp.float16 (the same class) are scalar types named so.
float16 = type("float16", (), {"__module__": "numpy"})
bfloat16 = type("bfloat16", (), {"__module__": "ml_dtypes"})


class _NumpyDtype:
    """What str(np.dtype('float32')) looks like."""

    def __str__(self) -> str:
        return "float32"


@pytest.mark.parametrize("given, name", [
    (_TorchDtype("bfloat16"), "bf16"), (_TorchDtype("float16"), "fp16"), (_TorchDtype("half"), "fp16"),
    (_TorchDtype("float32"), "fp32"), (float16, "fp16"), (bfloat16, "bf16"), (_NumpyDtype(), "fp32"),
    ("float16", "fp16"), ("half", "fp16"), ("bfloat16", "bf16"), ("float32", "fp32"), ("float", "fp32"),
    ("Float16", "fp16"), ("bf16", "bf16"), ("fp16", "fp16"),
])
def test_a_dtype_param_takes_what_callers_hold(given, name):
    assert jitd.KernelSpec.of("moe.topk_sum", dtype=given).param_dict == {"dtype": name}


def test_only_the_dtype_param_reads_dtype_names():
    # Another param keeps its text: "half" may be one of its own values.
    assert jitd.KernelSpec.of("k", mode="half").param_dict == {"mode": "half"}


def test_options_are_a_string_or_a_list_never_characters():
    assert jitd.KernelSpec.of("k", options="-lineinfo").options == ("-lineinfo",)
    assert jitd.KernelSpec.of("k", options="-lineinfo -DX=1").options == ("-DX=1", "-lineinfo")
    assert jitd.KernelSpec("k", options="-lineinfo").options == ("-lineinfo",)
    assert jitd.KernelSpec.of("k", options=["-DX=1"]).options == ("-DX=1",)


class _CupyDevice:
    compute_capability = "90"


@pytest.mark.parametrize("given, arch", [
    ("sm_90", "sm_90"), ("sm_100a", "sm_100a"), (90, "sm_90"), ("90", "sm_90"), ((9, 0), "sm_90"),
    ([10, 0], "sm_100"), (_CupyDevice(), "sm_90"), (None, ""), ("", ""),
])
def test_an_arch_is_what_callers_hold(given, arch):
    assert jitd.KernelSpec.of("k", given).arch == arch
    assert jitd.KernelSpec("k").with_arch(given).arch == arch


def test_a_value_that_is_no_arch_is_a_type_error_naming_the_forms():
    with pytest.raises(TypeError, match=r"give 'sm_90', 90, \(9, 0\) or a device"):
        jitd.KernelSpec.of("k", 9.0)


def test_the_client_takes_the_same_forms_end_to_end(client):
    k = client.get_kernel("small.fill", (9, 0), dtype="float32", options="-DJITD_TEST=1")
    assert k.arch == "sm_90" and k.params == {"dtype": "fp32"}
    assert k.options == ("-DJITD_TEST=1",)
