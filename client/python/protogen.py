"""Generates jitd's gRPC stubs for Python, at build time (setup.py runs it).

    python protogen.py OUT_DIR [PROTO_DIR]

writes OUT_DIR/jitd/v1/{compiler,cache_admin}_pb2.py and *_pb2_grpc.py (plus
the __init__.py files) from PROTO_DIR/jitd/v1/*.proto, for the package
`jitd._proto` (OUT_DIR is .../jitd/_proto).

Why not protoc's own Python output: the modules protoc writes since protobuf
5.26 (grpcio-tools 1.63) start with `ValidateProtobufRuntimeVersion`, which
refuses any protobuf runtime older than that protoc, and the *_pb2_grpc.py of
grpcio-tools 1.63+ refuse a grpcio older than themselves. The GPU host (and
many inference images) have whatever protobuf and grpcio they have, and
nothing can be installed there. So protoc (from grpcio-tools, any version) is
used only to parse the .proto files into a FileDescriptorSet, and this script
writes the modules from it, in the form every protoc since 3.20 emits minus
the version checks:

    DESCRIPTOR = descriptor_pool.Default().AddSerializedFile(<file descriptor>)
    builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, globals())
    builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, __name__, globals())

That uses only APIs present from protobuf 3.20 to today's 7.x, so the output
does not depend on which grpcio-tools built it; tests/python/compat.sh runs it
against protobuf 3.20, 4.21, 4.25, 5.29, 6.33 and 7.x. The stubs call
`channel.unary_unary` / `unary_stream` / `stream_unary` / `stream_stream`,
gRPC's channel API since 1.0. Imports point inside `jitd._proto`, so these
modules never collide with another package's `jitd.v1` or top-level *_pb2.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

# The Python package the generated modules live in; a proto file
# "jitd/v1/compiler.proto" becomes PACKAGE + ".jitd.v1.compiler_pb2".
PACKAGE = "jitd._proto"


def find_proto_dir(here: Path) -> Path:
    """The directory holding jitd/v1/*.proto: $JITD_PROTO_DIR, else the copy
    an sdist carries (here/proto), else the repository's (here/../../proto)."""
    candidates = []
    if os.environ.get("JITD_PROTO_DIR"):
        candidates.append(Path(os.environ["JITD_PROTO_DIR"]))
    candidates += [here / "proto", here.parent.parent / "proto"]
    for candidate in candidates:
        if any((candidate / "jitd" / "v1").glob("*.proto")):
            return candidate.resolve()
    raise SystemExit(
        "jitd: cannot find the .proto files (jitd/v1/*.proto) in "
        + ", ".join(str(c) for c in candidates)
        + "; build from the jitd repository (pip install ./client/python) or set JITD_PROTO_DIR"
    )


def _descriptor_set(proto_dir: Path, files: list[str]):
    """Parses `files` (relative to proto_dir) with grpc_tools' protoc."""
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    include = Path(protoc.__file__).parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        args = ["protoc", f"-I{proto_dir}", f"-I{include}", f"--descriptor_set_out={out}", "--include_imports"]
        if protoc.main(args + files) != 0:
            raise SystemExit(f"jitd: protoc failed on {files} in {proto_dir}")
        return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def _module_of(proto_file: str) -> str:
    """'jitd/v1/compiler.proto' -> 'jitd._proto.jitd.v1.compiler_pb2';
    google's well-known types -> their protobuf modules."""
    stem = proto_file[: -len(".proto")].replace("/", ".").replace("-", "_") + "_pb2"
    return stem if proto_file.startswith("google/protobuf/") else f"{PACKAGE}.{stem}"


def _alias(module: str) -> str:
    """'jitd._proto.jitd.v1.compiler_pb2' -> '_compiler_pb2'."""
    return "_" + module.rsplit(".", 1)[-1]


def _types_of(file) -> dict[str, str]:
    """Fully qualified message names ('.jitd.v1.Symbol') -> attribute paths
    inside their module ('Symbol', 'Outer.Inner')."""
    found: dict[str, str] = {}

    def walk(messages, scope: str, path: str) -> None:
        for message in messages:
            name = f"{scope}.{message.name}"
            attr = f"{path}{message.name}"
            found[name] = attr
            walk(message.nested_type, name, attr + ".")

    walk(file.message_type, "." + file.package if file.package else "", "")
    return found


def _strip_json_names(file) -> None:
    # protoc's Python generator embeds descriptors without json_name (the
    # descriptor set has them); do the same so the pool sees what it always sees.
    def walk(messages) -> None:
        for message in messages:
            for field in message.field:
                field.ClearField("json_name")
            walk(message.nested_type)

    walk(file.message_type)


def _header(proto_file: str) -> str:
    return (
        f"# Generated from {proto_file} by client/python/protogen.py when the jitd package\n"
        "# was built. Do not edit; not committed. Version-neutral: no protobuf or grpcio\n"
        "# runtime version check (see protogen.py).\n"
    )


def render_pb2(file) -> str:
    """The *_pb2 module of one FileDescriptorProto."""
    _strip_json_names(file)
    lines = [
        _header(file.name),
        "from google.protobuf import descriptor_pool as _descriptor_pool",
        "from google.protobuf.internal import builder as _builder",
    ]
    for dependency in file.dependency:  # registered in the pool first
        lines.append(f"import {_module_of(dependency)}  # noqa: F401")
    lines += [
        "",
        f"DESCRIPTOR = _descriptor_pool.Default().AddSerializedFile({file.SerializeToString()!r})",
        "",
        "_globals = globals()",
        "_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, _globals)",
        "_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, __name__, _globals)",
        "",
    ]
    return "\n".join(lines)


def render_grpc(file, types: dict[str, tuple[str, str]]) -> str:
    """The *_pb2_grpc module of one FileDescriptorProto: a client stub per
    service (the daemon is the only server, so no servicers)."""
    lines = [_header(file.name), "import grpc", ""]
    modules = sorted({types[m.input_type][0] for s in file.service for m in s.method}
                     | {types[m.output_type][0] for s in file.service for m in s.method})
    for module in modules:
        lines.append(f"import {module} as {_alias(module)}")
    for service in file.service:
        full = f"{file.package}.{service.name}" if file.package else service.name
        lines += ["", "", f"class {service.name}Stub:", f'    """Client stub of {full}."""', "",
                  "    def __init__(self, channel: grpc.Channel) -> None:"]
        for method in service.method:
            kind = ("stream" if method.client_streaming else "unary") + "_" + (
                "stream" if method.server_streaming else "unary")
            request_module, request_attr = types[method.input_type]
            response_module, response_attr = types[method.output_type]
            lines += [
                f"        self.{method.name} = channel.{kind}(",
                f"            '/{full}/{method.name}',",
                f"            request_serializer={_alias(request_module)}.{request_attr}.SerializeToString,",
                f"            response_deserializer={_alias(response_module)}.{response_attr}.FromString,",
                "        )",
            ]
    lines.append("")
    return "\n".join(lines)


def generate(out_dir: Path, proto_dir: Path) -> list[Path]:
    """Writes the modules under out_dir (the `jitd/_proto` folder); returns
    the files written."""
    files = sorted(str(p.relative_to(proto_dir)) for p in (proto_dir / "jitd" / "v1").glob("*.proto"))
    descriptor_set = _descriptor_set(proto_dir, files)
    types: dict[str, tuple[str, str]] = {}
    for file in descriptor_set.file:
        module = _module_of(file.name)
        for name, attr in _types_of(file).items():
            types[name] = (module, attr)

    written: list[Path] = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)

    write(out_dir / "__init__.py", '"""jitd\'s generated gRPC stubs (see client/python/protogen.py)."""\n')
    for file in descriptor_set.file:
        if file.name not in files:
            continue  # an import from google/protobuf: the protobuf package has it
        relative = Path(file.name[: -len(".proto")])
        package_dir = out_dir / relative.parent
        folder = package_dir
        while folder != out_dir:  # jitd/_proto/jitd/__init__.py, jitd/_proto/jitd/v1/__init__.py
            if not (folder / "__init__.py").exists():
                write(folder / "__init__.py", "")
            folder = folder.parent
        if file.service:
            write(package_dir / f"{relative.name}_pb2_grpc.py", render_grpc(file, types))
        write(package_dir / f"{relative.name}_pb2.py", render_pb2(file))
    return written


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    proto = Path(sys.argv[2]) if len(sys.argv) == 3 else find_proto_dir(Path(__file__).resolve().parent)
    for path in generate(Path(sys.argv[1]), proto):
        print(path)
