"""Build hook: the gRPC stubs are generated from the repository's proto/ into
jitd/_proto when the package is built (wheel, pip install, editable install),
never committed. The generator is protogen.py, beside this file; an sdist
carries a copy of the protos in proto/ so it builds outside the repository."""

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import protogen  # noqa: E402  (beside this file, not an installed module)


class BuildPyWithStubs(build_py):
    """build_py, then protogen into <build>/jitd/_proto (the source tree's
    jitd/_proto for an editable install, where git ignores it)."""

    def run(self) -> None:
        super().run()
        root = HERE if getattr(self, "editable_mode", False) else Path(self.build_lib)
        out = root / "jitd" / "_proto"
        shutil.rmtree(out, ignore_errors=True)
        protogen.generate(out, protogen.find_proto_dir(HERE))


class SdistWithProtos(sdist):
    """sdist, with proto/jitd/v1/*.proto copied in (found by find_proto_dir)."""

    def make_release_tree(self, base_dir: str, files: list) -> None:
        super().make_release_tree(base_dir, files)
        source = protogen.find_proto_dir(HERE)
        for proto in (source / "jitd" / "v1").glob("*.proto"):
            target = Path(base_dir) / "proto" / "jitd" / "v1" / proto.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(proto, target)


setup(cmdclass={"build_py": BuildPyWithStubs, "sdist": SdistWithProtos})
