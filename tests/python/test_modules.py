"""Module kernels (kind = "module"): jitd.load_module against a real daemon
serving the project's module tree (examples/module_tree), without a GPU:
the shared object is written, checked and loaded with tvm_ffi, its exports
are looked up but never called.

One nvcc build for the whole file (6 to 10 s on the 2-core VM): one daemon
for the module, one instantiation (activation.silu_and_mul, bf16), loaded
once (the `silu` fixture); the other tests reuse the loaded module, or ask
again (served from the daemon's memory) with the process's memo of loaded
modules set aside.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

import jitd
import jitd.aio
from jitd import modules

from conftest import REPO, Daemon

MODULE_TREE = REPO / "examples" / "module_tree"
KERNEL = "activation.silu_and_mul"
# A module build under load (another compile on the same 2 cores) can take a while.
BUILD_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def tvm_ffi() -> Any:
    return pytest.importorskip("tvm_ffi", reason="apache-tvm-ffi is not installed (tests/python/run.sh installs it)")


@pytest.fixture(scope="module")
def runtime_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """XDG_RUNTIME_DIR for this file's tests: where the module is written."""
    runtime = tmp_path_factory.mktemp("xdg-runtime")
    runtime.chmod(0o700)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", str(runtime))
        yield runtime


@pytest.fixture(scope="module")
def module_daemon(runtime_dir: Path) -> Iterator[Daemon]:
    instance = Daemon(MODULE_TREE, args=["--arch", "sm_90a"], workers=1).start()
    yield instance
    instance.remove()


@pytest.fixture(scope="module")
def silu(module_daemon: Daemon, tvm_ffi: Any) -> Iterator[tuple[Any, jitd.KernelResult]]:
    """The one build: the module loaded through a client, and its result."""
    with module_daemon.client(timeout=BUILD_TIMEOUT_S) as client:
        module = client.load_module(KERNEL, dtype="bf16")
        yield module, client.get_kernel(KERNEL, dtype="bf16")


@pytest.fixture
def no_loaded_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's loaded modules set aside, so that a load writes again."""
    monkeypatch.setattr(modules, "_loaded", {})


def module_path(runtime_dir: Path, result: jitd.KernelResult) -> Path:
    return runtime_dir / "jitd-modules" / f"{result.key}.so"


def test_load_module_returns_a_tvm_ffi_module_with_callable_exports(silu, tvm_ffi):
    module, result = silu
    assert isinstance(module, tvm_ffi.Module)
    assert isinstance(module.silu_and_mul, tvm_ffi.Function) and callable(module.silu_and_mul)
    assert isinstance(module["silu_and_mul"], tvm_ffi.Function)
    assert result.is_module and result.origin in ("compiled", "memory")
    assert result.symbols == {"silu_and_mul": "__tvm_ffi_silu_and_mul"}
    assert result.tvm_ffi_version == "0.1.15.post2"
    assert "; tvm-ffi 0.1.15.post2; toolchain " in result.nvrtc_version


def test_a_second_load_returns_the_same_module_without_writing_or_compiling_again(silu, module_daemon, runtime_dir):
    module, result = silu
    path = module_path(runtime_dir, result)
    before = path.stat()
    with module_daemon.client() as fresh:  # another client: its own get_kernel, the process's module
        assert fresh.load_module(KERNEL, dtype="bf16") is module
        assert fresh.load_module(KERNEL, dtype="bf16") is module
        assert fresh.stats().compiles == 1
    try:
        assert jitd.load_module(KERNEL, endpoint=module_daemon.endpoint, dtype="bf16") is module
        assert jitd.load_module(KERNEL, endpoint=module_daemon.endpoint, dtype="bf16") is module
    finally:
        modules._clients.pop(module_daemon.endpoint).close()
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_launching_a_module_like_a_cubin_points_to_load_module(silu):
    _, result = silu
    with pytest.raises(jitd.InvalidArgument, match=r"load it with jitd.load_module\(\)"):
        result[1, 1]()


def test_the_asyncio_client_loads_the_same_module(silu, module_daemon):
    module, _ = silu

    async def load() -> Any:
        async with jitd.aio.Client(module_daemon.endpoint) as client:
            return await client.load_module(KERNEL, dtype="bf16")

    assert asyncio.run(load()) is module


def test_the_shared_object_lies_in_a_private_directory(silu, runtime_dir):
    _, result = silu
    path = module_path(runtime_dir, result)
    directory = path.parent
    assert modules.module_dir() == str(directory)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert directory.stat().st_uid == os.getuid()
    assert stat.S_IMODE(path.stat().st_mode) == 0o500
    assert path.read_bytes() == result.cubin
    assert os.listdir(directory) == [path.name]  # no temporary file left behind


def test_an_nvrtc_kernel_is_not_a_module(client, monkeypatch):
    k = client.get_kernel("small.fill", dtype="fp32")
    assert not k.is_module and k.tvm_ffi_version == ""
    monkeypatch.setitem(sys.modules, "tvm_ffi", None)  # decided before tvm_ffi is needed
    with pytest.raises(jitd.NotAModule) as error:
        client.load_module("small.fill", dtype="fp32")
    assert isinstance(error.value, jitd.InvalidArgument) and isinstance(error.value, ValueError)
    assert error.value.code.name == "INVALID_ARGUMENT"
    assert "small.fill{dtype=fp32}" in error.value.message
    assert "is an NVRTC kernel (the daemon answered a cubin" in error.value.message
    assert "get_kernel()" in error.value.message
    with pytest.raises(jitd.NotAModule):
        modules.load(k)


def test_without_tvm_ffi_the_error_says_what_to_install(silu, module_daemon, monkeypatch):
    monkeypatch.setitem(sys.modules, "tvm_ffi", None)  # `import tvm_ffi` fails as if it were not installed
    with module_daemon.client() as fresh:
        with pytest.raises(jitd.ModuleUnavailable) as error:
            fresh.load_module(KERNEL, dtype="bf16")
    assert isinstance(error.value, ImportError) and isinstance(error.value, jitd.JitdError)
    assert error.value.code.name == "FAILED_PRECONDITION"
    assert "cannot import tvm_ffi" in error.value.message
    assert error.value.message.endswith("pip install apache-tvm-ffi==0.1.15.post2")
    copy = pickle.loads(pickle.dumps(error.value))
    assert type(copy) is jitd.ModuleUnavailable and copy.message == error.value.message


def test_another_tvm_ffi_major_minor_is_refused_naming_both(silu, tvm_ffi, monkeypatch):
    module, result = silu
    monkeypatch.setattr(tvm_ffi, "__version__", "0.2.0")
    with pytest.raises(jitd.ModuleUnavailable) as error:
        modules.load(result)
    assert "built against tvm-ffi 0.1.15.post2 (the daemon's)" in error.value.message
    assert "this process has tvm-ffi 0.2.0" in error.value.message
    monkeypatch.setattr(tvm_ffi, "__version__", "0.1.99")  # the same major.minor: loads
    assert modules.load(result) is module


def test_a_daemon_that_does_not_know_its_tvm_ffi_is_refused(silu):
    _, result = silu
    unknown = dataclasses.replace(result, nvrtc_version="nvcc V13.0.88; tvm-ffi unknown")
    assert unknown.tvm_ffi_version == ""
    with pytest.raises(jitd.ModuleUnavailable) as error:
        modules.load(unknown)
    assert "a tvm-ffi version the daemon does not know" in error.value.message
    assert "'nvcc V13.0.88; tvm-ffi unknown'" in error.value.message


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_a_directory_others_may_write_is_refused(silu, no_loaded_modules, tmp_path, monkeypatch, mode):
    _, result = silu
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    shared = tmp_path / "jitd-modules"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(jitd.ModuleUnavailable) as error:
        modules.load(result)
    assert f"refusing to load modules from {shared}: group or others may write to it (mode {mode:04o})" \
        in error.value.message
    assert os.listdir(shared) == []


def test_a_symbolic_link_or_another_users_directory_is_refused(silu, no_loaded_modules, tmp_path, monkeypatch):
    _, result = silu
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (tmp_path / "jitd-modules").symlink_to(private)
    with pytest.raises(jitd.ModuleUnavailable, match="it is a symbolic link"):
        modules.load(result)
    (tmp_path / "jitd-modules").unlink()
    if os.getuid() != 0:
        return  # only root can give a directory away
    (tmp_path / "jitd-modules").mkdir(mode=0o700)
    os.chown(tmp_path / "jitd-modules", 65534, 65534)
    with pytest.raises(jitd.ModuleUnavailable, match="it belongs to uid 65534, not to this user"):
        modules.load(result)


def test_without_xdg_runtime_dir_the_directory_is_per_user_under_tmp(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for runtime in (None, str(tmp_path / "missing"), "relative/dir"):
        if runtime is None:
            monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        else:
            monkeypatch.setenv("XDG_RUNTIME_DIR", runtime)
        directory = Path(modules.module_dir())
        assert directory == tmp_path / f"jitd-modules-{os.getuid()}"
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_file_an_earlier_process_left_is_loaded_as_it_is_only_when_it_holds_the_bytes(
        silu, no_loaded_modules, tmp_path, monkeypatch):
    _, result = silu
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    modules.load(result)
    path = module_path(tmp_path, result)
    written = path.stat()
    renamed = []
    replace = os.replace
    monkeypatch.setattr(os, "replace", lambda source, target: (renamed.append(target), replace(source, target)))

    # A fresh process (nothing loaded) finds the file holding the bytes: no write.
    monkeypatch.setattr(modules, "_loaded", {})
    modules.load(result)
    assert renamed == [] and path.stat().st_ino == written.st_ino

    # Not the bytes received (damaged, or an older build under the key): written again.
    path.chmod(0o700)
    with open(path, "r+b") as file:
        file.seek(64)
        file.write(b"\xff")
    path.chmod(0o500)
    monkeypatch.setattr(modules, "_loaded", {})
    modules.load(result)
    assert renamed == [str(path)] and path.read_bytes() == result.cubin

    # Writable by others, or a link to a file holding the bytes: not trusted, written again.
    for make in ("group-writable", "link"):
        renamed.clear()
        if make == "group-writable":
            path.chmod(0o520)
        else:
            target = tmp_path / "elsewhere.so"
            target.write_bytes(result.cubin)
            path.unlink()
            path.symlink_to(target)
        monkeypatch.setattr(modules, "_loaded", {})
        modules.load(result)
        assert renamed == [str(path)], make
        assert not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o500


def test_a_file_that_does_not_read_back_as_received_is_data_loss(silu, no_loaded_modules, tmp_path, monkeypatch):
    _, result = silu
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    replace = os.replace

    def corrupting_replace(source: str, target: str) -> None:
        os.chmod(source, 0o700)
        with open(source, "r+b") as file:
            file.seek(64)
            file.write(b"\xff")
        replace(source, target)

    monkeypatch.setattr(os, "replace", corrupting_replace)
    with pytest.raises(jitd.DataLoss, match="does not hold the bytes received from the daemon"):
        modules.load(result)
    assert modules._loaded == {}


def test_a_missing_cuda_runtime_names_the_library_and_the_fix(silu, tvm_ffi, no_loaded_modules, tmp_path,
                                                              monkeypatch):
    _, result = silu
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))

    def load_module(path: str) -> Any:  # the loader's words (tvm_ffi 0.1.15) when a NEEDED library is missing
        raise RuntimeError(f"Check failed: (lib_handle_ != nullptr) is false: Failed to load dynamic shared library "
                           f"{path} libcudart.so.13: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(tvm_ffi, "load_module", load_module)
    with pytest.raises(jitd.ModuleUnavailable) as error:
        modules.load(result)
    assert "libcudart.so.13: cannot open shared object file" in error.value.message
    assert error.value.message.endswith(modules.CUDART_HINT)
    assert modules._loaded == {}


def test_import_jitd_does_not_import_tvm_ffi():
    code = "import sys, jitd; jitd.load_module; print('tvm_ffi' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --- Ad-hoc modules (load_jit's form) -------------------------------------------------------------------

SILU_SPEC = dict(cuda_files=["activation/silu_and_mul.cuh"],
                 cuda_wrappers=[("silu_and_mul", "activation::silu_and_mul<bf16_t>")],
                 extra_cuda_cflags=["-std=c++20", "-O3", "--expt-relaxed-constexpr"])


def jit_tree(root: Path = MODULE_TREE) -> jitd.JitTree:
    return jitd.JitTree(str(root), files_dir="csrc", include_dirs=("csrc",))


def test_load_jit_of_the_declared_unit_is_the_declared_module_without_a_build(silu, module_daemon):
    module, declared = silu
    load_jit = jitd.jit_loader(str(MODULE_TREE), files_dir="csrc", include_dirs=["csrc"],
                               endpoint=module_daemon.endpoint)
    try:
        assert load_jit("silu_and_mul", "bf16", build_directory="/ignored", **SILU_SPEC) is module
    finally:
        modules._clients.pop(module_daemon.endpoint).close()
    with module_daemon.client() as client:
        spec = jitd.jit.module_spec("silu_and_mul", "bf16", tree=jit_tree(), **SILU_SPEC)
        assert spec.kernel == "jit.silu_and_mul_bf16"
        assert spec.module.sources == ("csrc/activation/silu_and_mul.cuh",)
        result = client.get(spec)
        assert result.key == declared.key and result.origin == "memory"
        assert client.stats().compiles == 1  # the declared load's build only


def test_a_client_copy_that_differs_from_the_daemons_is_refused(silu, module_daemon, tmp_path):
    import shutil
    copy = tmp_path / "tree"
    shutil.copytree(MODULE_TREE, copy)
    (copy / "csrc" / "common" / "dtype.cuh").write_text((copy / "csrc/common/dtype.cuh").read_text() + "// mine\n")
    with module_daemon.client() as client:
        spec = jitd.jit.module_spec("silu", tree=jit_tree(copy), **SILU_SPEC)
        with pytest.raises(jitd.TreeMismatch, match="the client's copy of kernel tree .* differs from the daemon's") as error:
            client.get(spec)
        assert error.value.reason == "TREE_MISMATCH" and not isinstance(error.value, jitd.CompileError)


def test_the_tree_fingerprint_covers_the_sources_only(tmp_path):
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "a.cuh").write_text("a")
    base = jitd.jit.tree_fingerprint(str(tmp_path))
    (tmp_path / "kernels.toml").write_text("schema = 1\n")
    (tmp_path / "ops.py").write_text("x = 1\n")
    assert jitd.jit.tree_fingerprint(str(tmp_path), fresh=True) == base
    (tmp_path / "csrc" / "b.inl").write_text("")
    assert jitd.jit.tree_fingerprint(str(tmp_path), fresh=True) != base
    assert jitd.jit.tree_fingerprint(str(tmp_path)) != base  # the fresh value is remembered


def test_load_jit_arguments_jitd_cannot_honour_are_refused_before_a_request(module_daemon):
    tree = jit_tree()
    with pytest.raises(ValueError, match="extra_ldflags"):
        jitd.jit.module_spec("x", tree=tree, extra_ldflags=["-lcuda"], **SILU_SPEC)
    with pytest.raises(ValueError, match="outside the kernel tree"):
        jitd.jit.module_spec("x", tree=tree, cuda_files=["../../kernels/x.cuh"])
    with pytest.raises(ValueError, match="no cuda_files or cpp_files"):
        jitd.jit.module_spec("x", tree=tree)
    with pytest.raises(ValueError, match="JITD_JIT_ROOT"), pytest.MonkeyPatch.context() as patch:
        patch.delenv("JITD_JIT_ROOT", raising=False)
        jitd.load_jit("x", **SILU_SPEC)
    bad = dict(SILU_SPEC, cuda_wrappers=[("f", 'activation::silu_and_mul<bf16_t>)); asm(".incbin \\"/etc/passwd\\"')])
    with module_daemon.client() as client:
        with pytest.raises(jitd.InvalidArgument, match="holds '\\)'"):
            client.get(jitd.jit.module_spec("x", tree=tree, **bad))
        assert client.stats().compiles == 1


def test_a_tree_that_does_not_allow_ad_hoc_modules_refuses_them(client):
    spec = jitd.jit.module_spec("silu", tree=jit_tree(), **SILU_SPEC)
    with pytest.raises(jitd.JitdError, match="must say `adhoc_modules = true`") as error:
        client.get(spec)
    assert error.value.reason == "ADHOC_NOT_ALLOWED" and not isinstance(error.value, jitd.CompileError)
