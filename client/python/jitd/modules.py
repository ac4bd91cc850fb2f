"""Module kernels: tvm-ffi shared objects from the daemon, loaded into this
process. ``import jitd`` imports this module but not ``tvm_ffi``, which the
first load imports.

::

    import jitd
    mod = jitd.load_module("activation.silu_and_mul", dtype="bf16")   # a tvm_ffi.Module
    mod.silu_and_mul(out, x)                     # or mod["silu_and_mul"]: tensors (DLPack), out first
    mod = jitd.Client().load_module("diffusion.residual_gate_add", dtype="fp16")
    mod = jitd.modules.load(k)                   # k: a get_kernel result of a module kernel

A kernel of ``kind = "module"`` is built by the daemon with nvcc into a host
shared object whose exports are tvm-ffi functions; it comes back from
GetKernel as any kernel does, the shared object in ``cubin``. Loading it:

1. a cubin, PTX or fatbin (an NVRTC kernel) is :class:`jitd.NotAModule`;
2. ``tvm_ffi`` is imported, and its version must equal the daemon's (the one
   the module was built against) in major.minor, else
   :class:`jitd.ModuleUnavailable` says what to install;
3. the bytes go to ``<key>.so`` in a directory private to this user
   (:func:`module_dir`). A file of this user already there (a regular file,
   not a link, no one else may write it) that holds exactly the bytes
   received is used as it is; otherwise they are written to a new file
   (``O_EXCL|O_NOFOLLOW``, mode 0500) renamed into place, then read back and
   compared with the bytes received (:class:`jitd.DataLoss` when they
   differ);
4. ``tvm_ffi.load_module`` loads it. The shared object links
   ``libcudart.so.13``, which must be on the dynamic loader's path.

Each content key is loaded once per process: later loads, through any
client, return the same module object without writing the file again.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import secrets
import stat
import tempfile
import threading
from typing import TYPE_CHECKING, Any, Optional

from .errors import DataLoss, ModuleUnavailable, NotAModule
from .types import KernelResult, ParamValue

if TYPE_CHECKING:
    from .client import Client

__all__ = ["load", "load_module", "module_dir"]

#: The loader's hint when a library the shared object needs is not found.
CUDART_HINT = ("libcudart.so.13 (the CUDA runtime) must be on the loader path: torch ships one; "
               "or LD_LIBRARY_PATH=/usr/local/cuda/lib64")

# Loaded modules by content key, for this process (a forked child keeps
# them: the libraries stay mapped in it).
_loaded: dict[str, Any] = {}
# Held while a module is written and loaded, so that concurrent first loads
# of a key write and load it once.
_lock = threading.Lock()
# Clients of jitd.load_module(endpoint=...), by endpoint.
_clients: dict[str, "Client"] = {}
_clients_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _lock, _clients_lock
    _lock = threading.Lock()
    _clients_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

# A content key as the daemon writes it: hex, nothing that could leave the
# directory as a file name.
_KEY = re.compile(r"[0-9a-f]{16,128}")
_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")
_EM_CUDA = 190
_FATBIN_MAGIC = (0xBA55ED50).to_bytes(4, "little")


def load_module(kernel: str, *, arch: Optional[str] = None, endpoint: Optional[str] = None,
                timeout: Optional[float] = None, **params: ParamValue) -> Any:
    """A module kernel, loaded: the ``tvm_ffi.Module`` of
    :meth:`jitd.Client.load_module`, through a process-wide client of
    ``endpoint`` (default: :func:`jitd.default_client`, on
    ``$JITD_ENDPOINT`` or the default socket)::

        mod = jitd.load_module("activation.silu_and_mul", dtype="bf16")
        mod.silu_and_mul(out, x)
    """
    return _client_for(endpoint).load_module(kernel, arch, timeout=timeout, **params)


def _client_for(endpoint: Optional[str]) -> "Client":
    """The process-wide client of ``endpoint`` (None: the default client)."""
    from .kernel_set import default_client  # jitd.kernel_set imports jitd.client, which imports this module
    if endpoint is None:
        return default_client()
    from .client import Client
    with _clients_lock:
        client = _clients.get(endpoint)
        if client is None:
            client = _clients[endpoint] = Client(endpoint)
        return client


def load(result: KernelResult) -> Any:
    """The ``tvm_ffi.Module`` of a module kernel's :meth:`jitd.Client.get_kernel`
    result (see the module's documentation for the steps).

    Raises :class:`jitd.NotAModule` for an NVRTC kernel (a cubin, PTX or
    fatbin: launch it with ``result[grid, block](...)``),
    :class:`jitd.ModuleUnavailable` when this process cannot load the module
    (no ``tvm_ffi``; another tvm-ffi major.minor than the daemon's, or a
    daemon that does not say which; a directory that is not private; the
    loader's refusal, e.g. ``libcudart.so.13`` not on its path), and
    :class:`jitd.DataLoss` when the file written does not read back as the
    bytes received.
    """
    result._require_cubin()
    if not result.is_module:
        raise NotAModule(f"{result.spec} is an NVRTC kernel (the daemon answered a {_what(result.cubin)}, not a "
                         "tvm-ffi shared object): load it with get_kernel() and launch that "
                         "(k[grid, block](*args)), or ask load_module() for a kernel of kind \"module\"")
    tvm_ffi = _import_tvm_ffi(result)
    _check_version(result, tvm_ffi)
    if not _KEY.fullmatch(result.key):
        raise DataLoss(f"{result.spec}: the daemon's content key {result.key!r} is not a hex key; not loaded")
    module = _loaded.get(result.key)
    if module is not None:
        return module
    with _lock:
        module = _loaded.get(result.key)
        if module is None:
            path = _write(result, module_dir())
            module = _load_file(result, tvm_ffi, path)
            _loaded[result.key] = module
        return module


def module_dir() -> str:
    """The directory modules are written to, made (mode 0700) when it is
    not there: ``$XDG_RUNTIME_DIR/jitd-modules`` when ``XDG_RUNTIME_DIR``
    names a directory this user may write, else ``jitd-modules-<uid>`` in
    :func:`tempfile.gettempdir`. :class:`jitd.ModuleUnavailable` when it is
    not a directory (a symbolic link included), belongs to another user or
    is writable by group or others: code is never loaded from where someone
    else could have put it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime) and os.access(runtime, os.W_OK | os.X_OK):
        path = os.path.join(runtime, "jitd-modules")
    else:
        path = os.path.join(tempfile.gettempdir(), f"jitd-modules-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise ModuleUnavailable(f"cannot create the module directory {path}: {error.strerror}") from error
    try:
        info = os.lstat(path)
    except OSError as error:
        raise ModuleUnavailable(f"cannot inspect the module directory {path}: {error.strerror}") from error
    refuse = f"refusing to load modules from {path}"
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
        raise ModuleUnavailable(f"{refuse}: it is {kind}; remove it (jitd makes it again, mode 0700)")
    if info.st_uid != os.getuid():
        raise ModuleUnavailable(f"{refuse}: it belongs to uid {info.st_uid}, not to this user (uid {os.getuid()}); "
                                "remove it (jitd makes it again, mode 0700)")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ModuleUnavailable(f"{refuse}: group or others may write to it (mode "
                                f"{stat.S_IMODE(info.st_mode):04o}); `chmod 700 {path}`, or remove it")
    return path


def _what(data: bytes) -> str:
    """What the daemon's bytes are, in words, for NotAModule."""
    if data[:4] == b"\x7fELF":
        machine = int.from_bytes(data[18:20], "little") if len(data) >= 20 else -1
        return "cubin" if machine == _EM_CUDA else f"ELF for machine {machine}"
    if data[:4] == _FATBIN_MAGIC:
        return "fatbin"
    return "PTX"


def _import_tvm_ffi(result: KernelResult) -> Any:
    wanted = result.tvm_ffi_version
    install = (f"pip install apache-tvm-ffi=={wanted}" if wanted else
               "pip install apache-tvm-ffi (of the version the daemon's tvm-ffi has: it does not say which)")
    try:
        return importlib.import_module("tvm_ffi")
    except (ImportError, OSError) as error:
        raise ModuleUnavailable(f"{result.spec} is a tvm-ffi module, and this process cannot import tvm_ffi "
                                f"({error}): {install}") from error


def _check_version(result: KernelResult, tvm_ffi: Any) -> None:
    """ModuleUnavailable unless this process's tvm-ffi and the daemon's
    (the module was built against its headers) agree in major.minor."""
    ours = str(getattr(tvm_ffi, "__version__", "") or "")
    theirs = result.tvm_ffi_version
    ours_mm, theirs_mm = _MAJOR_MINOR.match(ours), _MAJOR_MINOR.match(theirs)
    if theirs_mm is None:
        raise ModuleUnavailable(f"{result.spec} was built against a tvm-ffi version the daemon does not know "
                                f"(it answered {result.nvrtc_version!r}); this process has tvm-ffi "
                                f"{ours or 'of no version'}: refusing to load a module whose tvm-ffi ABI is unknown")
    if ours_mm is None or ours_mm.groups() != theirs_mm.groups():
        raise ModuleUnavailable(f"{result.spec} was built against tvm-ffi {theirs} (the daemon's), and this process "
                                f"has tvm-ffi {ours or 'of no version'}: they must agree in major.minor; "
                                f"pip install apache-tvm-ffi=={theirs}")


def _write(result: KernelResult, directory: str) -> str:
    """``directory/<key>.so`` holding the module, byte for byte the bytes
    received: the file an earlier process of this user left there when it
    holds exactly them (a fresh process's hit then writes nothing), else a
    new file renamed into place and read back."""
    final = os.path.join(directory, f"{result.key}.so")
    if _read_own(final) == result.cubin:
        return final
    temporary = os.path.join(directory, f".{result.key}.{os.getpid()}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o500)
        try:
            os.fchmod(fd, 0o500)  # whatever the umask
            with os.fdopen(fd, "wb", closefd=False) as file:
                file.write(result.cubin)
        finally:
            os.close(fd)
        os.replace(temporary, final)
    except OSError as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise ModuleUnavailable(f"{result.spec}: cannot write the module to {final}: {error.strerror or error}") \
            from error
    try:
        fd = os.open(final, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            on_disk = file.read()
    except OSError as error:
        raise ModuleUnavailable(f"{result.spec}: cannot read back {final}: {error.strerror or error}") from error
    if on_disk != result.cubin:
        raise DataLoss(f"{result.spec}: {final} does not hold the bytes received from the daemon (SHA-256 "
                       f"{hashlib.sha256(on_disk).hexdigest()} on disk, {hashlib.sha256(result.cubin).hexdigest()} "
                       "received); not loaded")
    return final


def _read_own(path: str) -> Optional[bytes]:
    """The bytes of ``path`` when it is a regular file of this user that no
    one else may write (not a link), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None
        return file.read()


def _load_file(result: KernelResult, tvm_ffi: Any, path: str) -> Any:
    try:
        return tvm_ffi.load_module(path)
    except (OSError, RuntimeError) as error:
        message = str(error).strip()
        if "cannot open shared object file" in message:
            missing = re.findall(r"([^\s:/]+\.so[.\w]*): cannot open shared object file", message)
            if missing and not any("cudart" in name for name in missing):
                hint = f"{', '.join(missing)} must be on the loader path (LD_LIBRARY_PATH)"
            else:
                hint = CUDART_HINT
            raise ModuleUnavailable(f"{result.spec}: the dynamic loader cannot load {path}: {message}. {hint}") \
                from error
        if "failed to map segment" in message:
            raise ModuleUnavailable(f"{result.spec}: the dynamic loader cannot map {path}: {message}. Is its "
                                    "directory on a noexec mount? Set XDG_RUNTIME_DIR (or TMPDIR) to a directory "
                                    "where shared objects may be loaded") from error
        raise ModuleUnavailable(f"{result.spec}: tvm_ffi.load_module({path!r}) failed: {message}") from error
