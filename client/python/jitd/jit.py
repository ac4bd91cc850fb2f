"""Ad-hoc modules: SGLang's ``load_jit`` served by jitd. A server that builds
its module specs at run time (template arguments from Python) swaps one
import::

    # before: from sglang.jit_kernel.utils import load_jit
    load_jit = jitd.jit_loader(KERNEL_PATH, tree="sglang")   # or jitd.load_jit, set by $JITD_JIT_ROOT
    module = load_jit("moe_align", 64, cuda_files=["moe/align.cuh"],
                      cuda_wrappers=[("run", "AlignKernel<64, true>::run")])
    module.run(topk_ids, sorted_ids, expert_ids, num_tokens_post_pad)

The spec itself travels (tree paths of the files, the exports, the nvcc
flags), not a manifest name; the daemon builds it over *its* copy of the
tree, which must allow it (``adhoc_modules = true`` in its kernels.toml, and
no lock), keyed and cached exactly as a declared module kernel of the same
unit. The request carries the fingerprint of this process's copy of the
tree (:func:`tree_fingerprint`); a daemon whose copy differs refuses it
(:class:`jitd.TreeMismatch`, FAILED_PRECONDITION, naming both
fingerprints), since the module would not be built from the code this
server ships. The module comes back as any module kernel does
(:func:`jitd.modules.load`: checked, written privately, loaded with
``tvm_ffi``).

Arguments as ``load_jit``'s: ``*args`` name the module (``jit.<args joined
by _>``); ``cuda_files`` and ``cpp_files`` are relative to the tree's
``files_dir`` (``csrc``), all included in one unit, cpp first;
``cuda_wrappers`` and ``cpp_wrappers`` are ``(export, C++ expression)``
pairs, where an expression is a name with template arguments;
``extra_cuda_cflags`` and ``extra_cflags`` are nvcc options from the module
allow-list (``-O3``, ``-std=c++20``, ``-DNAME=VALUE``, ...);
``extra_include_paths`` must be inside the tree; ``extra_ldflags`` must be
empty (modules link tvm-ffi and cudart only); ``build_directory`` is
ignored (the daemon's cache takes its place).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple

from .types import KernelSpec, ModuleSpec

__all__ = ["JitTree", "jit_loader", "load_jit", "module_spec", "tree_fingerprint", "SOURCE_SUFFIXES"]

#: The files a tree fingerprint covers, by name ending (the daemon's
#: IsAdhocTreeFile): every C, C++ and CUDA source and header.
SOURCE_SUFFIXES = (".cu", ".cuda", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".c", ".cc", ".cpp", ".cxx", ".inc", ".inl",
                   ".ipp")

_fingerprints: dict[str, str] = {}
_fingerprints_lock = threading.Lock()
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def tree_fingerprint(root: str, *, fresh: bool = False) -> str:
    """SHA-256 over the source files of the tree at ``root``
    (:data:`SOURCE_SUFFIXES`), in path order, as the daemon computes it over
    its copy: for each file, ``b"path"``, the path's length (8 bytes, little
    endian), the path relative to ``root`` with ``/``, ``b"content"``, the
    content's length, the content. Links to files are read, links to
    directories not followed. Computed once per root and process (``fresh``
    computes it again)."""
    root = os.path.realpath(root)
    if not fresh:
        with _fingerprints_lock:
            known = _fingerprints.get(root)
        if known is not None:
            return known
    if not os.path.isdir(root):
        raise FileNotFoundError(f"jitd: the kernel tree {root} is not a directory")
    files: list[tuple[str, str]] = []
    for directory, _dirs, names in os.walk(root, followlinks=False):
        for name in names:
            if name.endswith(SOURCE_SUFFIXES):
                path = os.path.join(directory, name)
                if os.path.isfile(path):  # a dangling link is skipped, as the daemon does
                    files.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    digest = hashlib.sha256()
    for relative, path in sorted(files, key=lambda f: f[0].encode()):
        with open(path, "rb") as f:
            content = f.read()
        name = relative.encode()
        digest.update(b"path" + len(name).to_bytes(8, "little") + name)
        digest.update(b"content" + len(content).to_bytes(8, "little") + content)
    value = digest.hexdigest()
    with _fingerprints_lock:
        _fingerprints[root] = value
    return value


@dataclass(frozen=True)
class JitTree:
    """This process's copy of a tree the daemon serves, for ad-hoc modules.

    ``root``: the directory (the daemon's copy must hold the same source
    files); ``name``: the tree's name on the daemon (``--kernels
    NAME=DIR``; ``""`` for a daemon of one tree); ``files_dir``: what
    ``cuda_files`` and ``cpp_files`` are relative to; ``include_dirs``: tree
    directories every module searches."""

    root: str
    name: str = ""
    files_dir: str = "csrc"
    include_dirs: Tuple[str, ...] = ("include",)

    @classmethod
    def from_env(cls) -> "JitTree":
        """``$JITD_JIT_ROOT`` (required), ``$JITD_JIT_TREE``,
        ``$JITD_JIT_FILES_DIR`` and ``$JITD_JIT_INCLUDE_DIRS``
        (colon-separated)."""
        root = os.environ.get("JITD_JIT_ROOT", "")
        if not root:
            raise ValueError("jitd.load_jit needs the kernel tree this server ships: set JITD_JIT_ROOT (and "
                             "JITD_JIT_TREE, its name on the daemon), or use jitd.jit_loader(root, tree=NAME)")
        include = os.environ.get("JITD_JIT_INCLUDE_DIRS")
        return cls(root, os.environ.get("JITD_JIT_TREE", ""), os.environ.get("JITD_JIT_FILES_DIR", "csrc"),
                   tuple(d for d in include.split(":") if d) if include is not None else ("include",))


def _tree_path(tree: JitTree, path: str, base: str, what: str) -> str:
    """``path`` (relative to ``base`` in the tree, or absolute inside it) as
    a tree path."""
    root = os.path.realpath(tree.root)
    if os.path.isabs(path):
        relative = os.path.relpath(os.path.realpath(path), root).replace(os.sep, "/")
    else:
        relative = posixpath.normpath(posixpath.join(base, str(path).replace(os.sep, "/")))
    if relative == "." or relative.startswith("../") or relative == ".." or relative.startswith("/"):
        raise ValueError(f"jitd.load_jit: {what} {path!r} is outside the kernel tree {root}: a module reads only "
                         "the tree's files")
    return relative


def module_spec(*args: Any, tree: JitTree, cpp_files: Optional[Sequence[str]] = None,
                cuda_files: Optional[Sequence[str]] = None,
                cpp_wrappers: Optional[Iterable[Tuple[str, str]]] = None,
                cuda_wrappers: Optional[Iterable[Tuple[str, str]]] = None,
                extra_cflags: Optional[Sequence[str]] = None, extra_cuda_cflags: Optional[Sequence[str]] = None,
                extra_ldflags: Optional[Sequence[str]] = None,
                extra_include_paths: Optional[Sequence[str]] = None, arch: Any = None) -> KernelSpec:
    """The :class:`jitd.KernelSpec` of the ad-hoc module ``load_jit(*args,
    ...)`` asks for (see the module's documentation)."""
    if extra_ldflags:
        raise ValueError(f"jitd.load_jit: extra_ldflags {list(extra_ldflags)!r}: a jitd module links tvm-ffi and "
                         "the CUDA runtime only; declare what needs more as a module kernel of the tree")
    sources = [_tree_path(tree, f, tree.files_dir, "file") for f in [*(cpp_files or ()), *(cuda_files or ())]]
    if not sources:
        raise ValueError("jitd.load_jit: no cuda_files or cpp_files: name the files the module includes")
    includes = [_tree_path(tree, d, "", "include dir") for d in tree.include_dirs]
    includes += [_tree_path(tree, d, "", "include path") for d in (extra_include_paths or ())]
    exports = [(str(n), str(e)) for n, e in [*(cpp_wrappers or ()), *(cuda_wrappers or ())]]
    options: list[str] = []
    for option in [*(extra_cflags or ()), *(extra_cuda_cflags or ())]:
        if option not in options:
            options.append(str(option))
    name = "jit." + (_NAME_BAD.sub("_", "_".join(str(a) for a in args)) or "module")
    if len(name) > 128:
        name = name[:111] + "." + hashlib.sha256(name.encode()).hexdigest()[:16]
    module = ModuleSpec(sources=tuple(sources), exports=tuple(exports), include_dirs=tuple(dict.fromkeys(includes)),
                        options=tuple(options), tree_fingerprint=tree_fingerprint(tree.root))
    kernel = f"{tree.name}/{name}" if tree.name else name
    return KernelSpec(kernel, arch=arch if arch is not None else "", module=module)


def jit_loader(root: str, *, tree: str = "", files_dir: str = "csrc", include_dirs: Sequence[str] = ("include",),
               arch: Any = None, endpoint: Optional[str] = None, timeout: Optional[float] = None) -> Callable[..., Any]:
    """A function with ``load_jit``'s arguments that asks jitd for the module
    and returns its ``tvm_ffi.Module`` (see the module's documentation)."""
    jit_tree = JitTree(root, tree, files_dir, tuple(include_dirs))

    def load(*args: Any, build_directory: Optional[str] = None, **kwargs: Any) -> Any:
        del build_directory  # the daemon's cache takes its place
        return _load(module_spec(*args, tree=jit_tree, arch=arch, **kwargs), endpoint, timeout)

    return load


def load_jit(*args: Any, cpp_files: Optional[Sequence[str]] = None, cuda_files: Optional[Sequence[str]] = None,
             cpp_wrappers: Optional[Iterable[Tuple[str, str]]] = None,
             cuda_wrappers: Optional[Iterable[Tuple[str, str]]] = None, extra_cflags: Optional[Sequence[str]] = None,
             extra_cuda_cflags: Optional[Sequence[str]] = None, extra_ldflags: Optional[Sequence[str]] = None,
             extra_include_paths: Optional[Sequence[str]] = None, build_directory: Optional[str] = None,
             tree: Optional[JitTree] = None, arch: Any = None, endpoint: Optional[str] = None,
             timeout: Optional[float] = None) -> Any:
    """``load_jit`` through jitd: the ``tvm_ffi.Module`` of the ad-hoc module
    these arguments describe, over ``tree`` (default
    :meth:`JitTree.from_env`). Raises what :func:`jitd.load_module` raises,
    and ValueError for an argument jitd cannot honour."""
    del build_directory  # the daemon's cache takes its place
    spec = module_spec(*args, tree=tree if tree is not None else JitTree.from_env(), cpp_files=cpp_files,
                       cuda_files=cuda_files, cpp_wrappers=cpp_wrappers, cuda_wrappers=cuda_wrappers,
                       extra_cflags=extra_cflags, extra_cuda_cflags=extra_cuda_cflags, extra_ldflags=extra_ldflags,
                       extra_include_paths=extra_include_paths, arch=arch)
    return _load(spec, endpoint, timeout)


def _load(spec: KernelSpec, endpoint: Optional[str], timeout: Optional[float]) -> Any:
    from . import modules  # modules imports the client, which imports this module's types
    return modules.load(modules._client_for(endpoint).get(spec, timeout=timeout))
