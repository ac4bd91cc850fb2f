"""Build hook: the gRPC stubs are generated from the repository's proto/ into
jitd/_proto when the package is built (wheel, pip install, editable install),
never committed. The generator is protogen.py, beside this file; an sdist
carries a copy of the protos in proto/ so it builds outside the repository.

A wheel build (`pip install ./client/python`, `pip wheel`) writes what
setuptools would put beside this file (build/, jitd.egg-info) into a
temporary directory instead, removed when the build process exits, so the
source tree is left as it was. An sdist keeps setuptools' layout (it ships
the egg-info it writes), and an explicit --build-base or --egg-base wins."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build import build
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
_dont_write_bytecode = sys.dont_write_bytecode
sys.dont_write_bytecode = True  # no __pycache__ beside this file either
import protogen  # noqa: E402  (beside this file, not an installed module)

sys.dont_write_bytecode = _dont_write_bytecode

_scratch = None


def scratch_dir() -> str:
    """This build process's temporary directory, made on first use and
    removed at exit (the wheel itself goes to the --dist-dir pip gives)."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix="jitd-build-")
        atexit.register(shutil.rmtree, _scratch, True)
    return _scratch


def out_of_tree(distribution) -> bool:
    """Every command but sdist builds out of the source tree."""
    return "sdist" not in distribution.commands


class EggInfoOutOfTree(egg_info):
    """egg_info, into the scratch directory unless an egg base was given
    (dist_info, which pip's metadata step runs, gives its own)."""

    def finalize_options(self) -> None:
        if self.egg_base is None and out_of_tree(self.distribution):
            self.egg_base = scratch_dir()
        super().finalize_options()


class BuildOutOfTree(build):
    """build (build_py's lib/, bdist_wheel's bdist.*/), under the scratch
    directory unless --build-base was given."""

    def finalize_options(self) -> None:
        if "build_base" not in self.distribution.get_option_dict("build") and out_of_tree(self.distribution):
            self.build_base = os.path.join(scratch_dir(), "build")
        super().finalize_options()


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


setup(
    cmdclass={
        "build": BuildOutOfTree,
        "build_py": BuildPyWithStubs,
        "egg_info": EggInfoOutOfTree,
        "sdist": SdistWithProtos,
    }
)
