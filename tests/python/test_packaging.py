"""The package itself: `import jitd` needs only grpcio and protobuf; the
generated stubs live inside jitd._proto and carry no runtime version check;
protogen.py embeds exactly the descriptors protoc would; an sdist carries
the protos and builds outside the repository."""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import jitd
import pytest
from jitd._proto.jitd.v1 import cache_admin_pb2, compiler_pb2, compiler_pb2_grpc

REPO = Path(__file__).resolve().parents[2]
PACKAGE_SOURCE = REPO / "client" / "python"


def test_import_jitd_imports_no_gpu_library():
    code = ("import sys, jitd; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'torch', 'cuda', 'numpy', 'triton')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_loaders_are_attributes_that_import_their_library_only_when_called():
    code = ("import sys, jitd; loaders = [jitd.cuda_python.load, jitd.driver.load, jitd.aio.Client]; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'torch', 'cuda')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# sys.modules[name] = None makes `import name` fail as if it were not
# installed, whatever this environment has.
@pytest.mark.parametrize("module, library, install", [("torch", "torch", "pip install torch"),
                                                      ("cupy", "cupy", "pip install cupy-cuda12x")])
def test_a_loader_without_its_library_fails_at_import_saying_what_to_install(module, library, install):
    code = f"""
import sys
sys.modules[{library!r}] = None
import jitd
k = jitd.KernelSpec("small.fill", {{"dtype": "fp32"}})  # the rest of jitd works
print("hasattr:", hasattr(jitd, {module!r}))
try:
    jitd.{module}
except AttributeError as error:
    print("attribute:", error)
import jitd.{module}
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    assert lines[0] == "hasattr: False"
    assert lines[1].startswith(f"attribute: jitd.{module} is not available: jitd.{module} needs ")
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"ImportError: jitd.{module} needs ")
    assert f"`{install}`" in last and "KernelResult.launch or jitd.driver" in last


def test_generated_modules_live_inside_the_package_without_version_checks():
    for module in (compiler_pb2, compiler_pb2_grpc, cache_admin_pb2):
        assert module.__name__.startswith("jitd._proto.jitd.v1.")
        source = inspect.getsource(module)
        assert "_runtime_version" not in source and "GRPC_GENERATED_VERSION" not in source
        assert "from jitd.v1" not in source and "import jitd.v1" not in source
    assert compiler_pb2.GetKernelRequest.__module__ == compiler_pb2.__name__
    assert compiler_pb2.GetKernelRequest.DESCRIPTOR.full_name == "jitd.v1.GetKernelRequest"


def test_protogen_embeds_the_descriptors_protoc_produces():
    grpc_tools = pytest.importorskip("grpc_tools.protoc")
    from google.protobuf import descriptor_pb2

    sys.path.insert(0, str(PACKAGE_SOURCE))
    try:
        import protogen
    finally:
        sys.path.remove(str(PACKAGE_SOURCE))
    descriptors = protogen._descriptor_set(REPO / "proto", ["jitd/v1/compiler.proto", "jitd/v1/cache_admin.proto"])
    assert grpc_tools is not None
    for file in descriptors.file:
        ours = descriptor_pb2.FileDescriptorProto()
        module = compiler_pb2 if file.name.endswith("compiler.proto") else cache_admin_pb2
        module.DESCRIPTOR.CopyToProto(ours)
        protogen._strip_json_names(file)
        file.ClearField("source_code_info")
        assert ours == file


def test_an_sdist_carries_the_protos_and_installs_outside_the_repository(tmp_path):
    pytest.importorskip("setuptools")
    pytest.importorskip("grpc_tools")
    source = tmp_path / "pkg"  # a copy: the build writes egg-info and build/ beside setup.py
    shutil.copytree(PACKAGE_SOURCE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "_proto",
                                                                          "__pycache__"))
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(dist)], cwd=source, check=True,
                   capture_output=True, env={**os.environ, "JITD_PROTO_DIR": str(REPO / "proto")})
    [sdist] = dist.glob("jitd-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        archive.extractall(tmp_path / "src")
    assert any(name.endswith("proto/jitd/v1/compiler.proto") for name in names)
    assert not any("/_proto/" in name for name in names)  # generated at build time, never shipped
    [unpacked] = (tmp_path / "src").iterdir()
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q", "--target",
                    str(target), str(unpacked)], check=True, capture_output=True)
    code = "import jitd; from jitd._proto.jitd.v1 import compiler_pb2; print(jitd.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(target)},
                         capture_output=True, text=True, check=True).stdout
    assert out.startswith(str(target))
