"""The values jitd's calls take and return: plain, typed, immutable
dataclasses (no protobuf messages leak out), picklable so they cross
process boundaries. Field meanings are those of proto/jitd/v1/*.proto.

The bottom floor of jitd's imports: it imports no other jitd module. The
launchers (jitd.driver, jitd.torch) import it, and KernelResult.launch
reaches them through jitd._launch, which ``import jitd`` hands to it."""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Optional, Sequence, Union

# ---------------------------------------------------------------------------
# Kernel instantiations


class Mode(enum.Enum):
    """How :meth:`jitd.Client.get_kernel` treats a miss (GetKernelRequest.Mode)."""

    #: Compile on a miss and answer with the cubin (the default).
    COMPILE = "compile"
    #: Never compile: a miss raises :class:`jitd.NotFound`. Proves an image
    #: was warmed ("crash on miss").
    CACHED_ONLY = "cached_only"
    #: Answer at once; on a miss the daemon compiles in the background and
    #: the result has ``origin == "none"`` and no cubin.
    PREFETCH = "prefetch"

    @classmethod
    def of(cls, mode: Mode | str) -> Mode:
        """A Mode from itself or its name, any case ("cached_only")."""
        if isinstance(mode, Mode):
            return mode
        try:
            return cls[str(mode).upper()]
        except KeyError:
            raise ValueError(f"mode {mode!r} is not one of compile, cached_only, prefetch") from None


ParamValue = Union[str, int, bool, Any]
ParamsLike = Union[Mapping[str, ParamValue], Iterable["tuple[str, ParamValue]"]]

# dtype objects (torch, numpy, cupy) named by their str(), mapped to the
# manifest's dtype values, so that `dtype=x.dtype` works.
_DTYPE_NAMES = {
    "torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.half": "fp16", "torch.float32": "fp32",
    "torch.float": "fp32", "torch.float64": "fp64", "torch.double": "fp64",
    "bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64",
}
# What people write for a dtype param (named "dtype"), beside the
# manifest's own names.
_DTYPE_ALIASES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "f16": "fp16", "float32": "fp32", "float": "fp32",
    "single": "fp32", "f32": "fp32", "float64": "fp64", "double": "fp64", "f64": "fp64",
}


def _dtype_text(value: Any) -> Optional[str]:
    """The manifest's name of a dtype given as a torch, NumPy or CuPy dtype,
    a NumPy/CuPy scalar type (``np.float16``, ``cp.float16``) or a common
    name (``"float16"``, ``"half"``); None when it is none of these."""
    if isinstance(value, str):
        return _DTYPE_ALIASES.get(value.lower())
    text = str(value)
    if text in _DTYPE_NAMES:
        return _DTYPE_NAMES[text]
    if isinstance(value, type):  # np.float16, cp.float16, ml_dtypes.bfloat16
        return _DTYPE_NAMES.get(getattr(value, "__name__", ""))
    return None


def arch_text(arch: Any) -> str:
    """An arch as the daemon reads it (``"sm_90"``) from what callers hold:
    ``"sm_90"``, ``"sm_90a"``, ``90``, ``"90"``, ``(9, 0)`` (what
    ``torch.cuda.get_device_capability()`` returns), a ``torch.device`` of a
    GPU, or a CuPy ``Device``; ``None`` or ``""`` for the default."""
    if arch is None or arch == "":
        return ""
    if isinstance(arch, bool):
        raise TypeError(f"arch {arch!r} is not an arch")
    if isinstance(arch, int):
        return f"sm_{arch}"
    if isinstance(arch, str):
        return f"sm_{arch}" if arch.isdigit() else arch
    if isinstance(arch, (tuple, list)) and len(arch) == 2 and all(isinstance(v, int) for v in arch):
        return f"sm_{arch[0]}{arch[1]}"
    capability = getattr(arch, "compute_capability", None)  # cupy.cuda.Device: "90"
    if isinstance(capability, str) and capability.isdigit():
        return f"sm_{capability}"
    if getattr(arch, "type", None) == "cuda":  # torch.device("cuda:0")
        import torch  # the caller holds a torch.device: torch is there
        return arch_text(torch.cuda.get_device_capability(arch))
    raise TypeError(f"arch {arch!r} ({type(arch).__name__}) is not an arch: give 'sm_90', 90, (9, 0) or a device")


def _options(options: Any) -> tuple:
    """Options as a tuple of strings: a string is one or more options
    separated by spaces (``"-lineinfo"``, ``"-lineinfo -DX=1"``)."""
    if isinstance(options, str):
        return tuple(options.split())
    return tuple(options)


def param_text(value: ParamValue) -> str:
    """A param value as the daemon reads it: strings as they are, ints in
    decimal, booleans as ``true``/``false``, and dtype objects
    (``torch.bfloat16``, ``numpy.dtype('float16')``) as the manifest's names
    (``bf16``, ``fp16``, ``fp32``, ``fp64``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if text in _DTYPE_NAMES:
        return _DTYPE_NAMES[text]
    raise TypeError(f"param value {value!r} ({type(value).__name__}) is not a str, int, bool or dtype")


# Characters the canonical form uses as punctuation, escaped as %XX inside
# names and values (as the C++ client's CanonicalSpec does).
_RESERVED = "%,=@[]{}"


def _escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _RESERVED else c for c in text)


@dataclass(frozen=True)
class ModuleSpec:
    """An ad-hoc module's spec (``jitd.v1.ModuleSpec``; :func:`jitd.load_jit`
    builds one): tree paths of the files its unit includes and of its
    include dirs, its exports as ``(name, C++ expression)`` pairs, nvcc
    options, and the fingerprint of the client's copy of the tree
    (:func:`jitd.jit.tree_fingerprint`)."""

    sources: tuple[str, ...]
    exports: tuple[tuple[str, str], ...]
    include_dirs: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    tree_fingerprint: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", tuple(str(s) for s in self.sources))
        object.__setattr__(self, "exports", tuple((str(n), str(e)) for n, e in self.exports))
        object.__setattr__(self, "include_dirs", tuple(str(d) for d in self.include_dirs))
        object.__setattr__(self, "options", tuple(str(o) for o in self.options))

    def digest(self) -> str:
        """A short hash of every field, for the canonical spec."""
        text = repr((self.sources, self.exports, self.include_dirs, self.options, self.tree_fingerprint))
        return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class KernelSpec:
    """One kernel instantiation: manifest name, params, arch, options.

    Hashable and normalised: ``params`` is stored as sorted ``(name, value)``
    pairs of strings (any mapping or pairs are accepted, values converted
    by :func:`param_text`), ``options`` sorted without duplicates (the daemon
    treats them as a set), ``arch`` ``""`` for the default::

        KernelSpec("diffusion.modulate_scale_shift", {"dtype": "bf16"})
        KernelSpec.of("norm.rmsnorm", dtype=torch.bfloat16, threads=256)
    """

    kernel: str
    #: Any mapping or (name, value) pairs; stored as sorted pairs of strings.
    params: ParamsLike = ()
    arch: str = ""
    #: Stored sorted, without duplicates.
    options: Sequence[str] = ()
    #: Several archs in one fatbin (a cubin per ``sm_`` arch, the PTX of
    #: each ``compute_`` arch), in this order; ``arch`` must then be empty.
    archs: Sequence[str] = ()
    #: The daemon's fleet set (its ``--fleet-archs``) as one fatbin, plus the
    #: PTX of the lowest. Not with ``arch`` or ``archs``.
    fleet: bool = False
    #: An ad-hoc module (load_jit's form): ``kernel`` names it; no params,
    #: options, archs or fleet.
    module: Optional[ModuleSpec] = None

    def __post_init__(self) -> None:
        if not isinstance(self.kernel, str) or not self.kernel:
            raise ValueError(f"a kernel spec needs a kernel name, got {self.kernel!r}")
        items = self.params.items() if isinstance(self.params, Mapping) else self.params

        def text(name: str, value: ParamValue) -> str:
            if name == "dtype":
                dtype = _dtype_text(value)
                if dtype is not None:
                    return dtype
            return param_text(value)

        params = tuple(sorted((str(name), text(str(name), value)) for name, value in items))
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "arch", arch_text(self.arch))
        object.__setattr__(self, "options", tuple(sorted(set(_options(self.options)))))
        object.__setattr__(self, "archs", tuple(arch_text(a) for a in self.archs))
        if self.archs and self.arch:
            raise ValueError(f"name one arch ({self.arch!r}) or several (archs={list(self.archs)!r}), not both")
        if self.fleet and (self.arch or self.archs):
            raise ValueError("fleet=True asks for the daemon's fleet set: leave arch and archs out")
        if self.module is not None and (self.params or self.options or self.archs or self.fleet):
            raise ValueError("an ad-hoc module's spec holds its exports and options: no params, options, archs or "
                             "fleet")

    @classmethod
    def of(cls, kernel: str, arch: str | None = None, *, options: Iterable[str] = (),
           params: ParamsLike | None = None, archs: Iterable[Any] = (), fleet: bool = False,
           **more_params: ParamValue) -> KernelSpec:
        """A spec from keyword params (``dtype="bf16"``); ``params=`` holds
        names that are not identifiers or clash with these arguments."""
        merged: dict[str, ParamValue] = dict(params.items() if isinstance(params, Mapping) else (params or ()))
        merged.update(more_params)
        return cls(kernel, tuple(merged.items()), arch_text(arch), _options(options), tuple(archs), fleet)

    @property
    def param_dict(self) -> dict[str, str]:
        """The params as a dict."""
        return dict(self.params)

    def with_arch(self, arch: Any) -> KernelSpec:
        return dataclasses.replace(self, arch=arch_text(arch))

    def canonical(self) -> str:
        """The C++ client's CanonicalSpec: ``kernel{k=v,k=v}@arch[opt,opt]``
        (``@`` with nothing after it: the default arch); equal exactly for
        specs the daemon answers alike. ``str()`` is the same spelling
        unescaped, as jitd's messages and logs write an instantiation."""
        params = ",".join(f"{_escape(k)}={_escape(v)}" for k, v in self.params)
        options = f"[{','.join(_escape(o) for o in self.options)}]" if self.options else ""
        archs = "%%fleet" if self.fleet else ("%" + ",".join(_escape(a) for a in self.archs) if self.archs else "")
        module = f"%module:{self.module.digest()}" if self.module is not None else ""
        return f"{_escape(self.kernel)}{{{params}}}@{archs}{_escape(self.arch)}{options}{module}"

    def __str__(self) -> str:
        # As the daemon and jitctl spell it (text::Instantiation in C++).
        params = ",".join(f"{k}={v}" for k, v in self.params)
        text = f"{self.kernel}{{{params}}}"
        if self.arch or self.archs or self.fleet:
            text += f"@{'fleet' if self.fleet else self.arch or '+'.join(self.archs)}"
        if self.options:
            text += f"[{','.join(self.options)}]"
        return text

    def __repr__(self) -> str:
        return f"KernelSpec({self})"


#: Where the daemon found a cubin (GetKernelResponse.Source).
Origin = Literal["memory", "disk", "remote", "compiled", "none", "fallback", "bundle", "unspecified"]
#: The old name of :data:`Origin`.
Source = Origin


@dataclass(frozen=True, repr=False, eq=False)
class KernelResult:
    """A kernel instantiation's cubin and what is needed to launch it.

    Attributes:
        kernel, params, arch, options: what was asked (``arch`` is the one
            compiled for, the daemon's default when none was asked).
        key: hex content key, the cache's identity of this cubin.
        cubin: the cubin (ELF) bytes; empty only for a PREFETCH miss. For
            a module kernel (``kind = "module"``), the tvm-ffi shared object
            (see :attr:`is_module`; load it with :func:`jitd.load_module`).
        symbols: name expression -> lowered (mangled) name, for every entry
            point (``cuModuleGetFunction`` takes the lowered name); for a
            module, export -> ``__tvm_ffi_<export>``.
        origin: where the daemon found it: "memory" (its hot cache), "disk",
            "remote" (the shared tier), "compiled" (by this request), or
            "none" (a PREFETCH miss: no cubin yet, compiling in the
            background). ``source`` is its old name, kept as an alias.
        compile_ms: wall time of the NVRTC compile that produced the cubin
            (when it was compiled, not for this request).
        log: NVRTC's log of that compile (warnings), also on success.
        nvrtc_version: "major.minor" of the NVRTC that compiled it; for a
            module, what built it: ``"nvcc V13.0.88; tvm-ffi 0.1.15.post2;
            toolchain <fingerprint>"``
            (see :attr:`tvm_ffi_version`).
        served_us: the daemon's time answering this request, microseconds.

    Launching (the CUDA driver through ctypes, :mod:`jitd.driver`)::

        k.launch(grid, block, out, x, n)             # or, as CuPy and Numba spell it:
        k[grid, block](out, x, n)                    # k[grid, block, stream, shared_mem](...)
        k.entry("ns::kernel<float>")[grid, block](out, x, n)   # one of several entry points

    Results compare by identity: the client's memo hands out one object per
    instantiation. Treat ``params`` and ``symbols`` as read-only.
    """

    kernel: str
    params: dict[str, str]
    arch: str
    options: tuple[str, ...]
    key: str
    cubin: bytes
    symbols: dict[str, str]
    origin: Origin
    compile_ms: float
    log: str
    nvrtc_version: str
    served_us: int
    #: For a fatbin (``archs``, ``fleet``): what it holds, in order; ``cubin``
    #: is then the fatbin, and ``arch`` names them joined by ``+``.
    fatbin_archs: tuple[str, ...] = ()

    @property
    def source(self) -> Origin:
        """The old name of :attr:`origin` (where the daemon found the cubin,
        not CUDA source)."""
        return self.origin

    @property
    def is_module(self) -> bool:
        """Whether :attr:`cubin` holds a host shared object (a module
        kernel's tvm-ffi library, for :func:`jitd.load_module`) rather than
        a cubin, PTX or fatbin: an ELF for x86-64 or AArch64."""
        return is_shared_object(self.cubin)

    @property
    def tvm_ffi_version(self) -> str:
        """The tvm-ffi version a module was built against, from
        :attr:`nvrtc_version` (``"0.1.15.post2"``); ``""`` for an NVRTC
        kernel and when the daemon does not know it."""
        match = _TVM_FFI_VERSION.search(self.nvrtc_version)
        if match is None or match.group(1) == "unknown":
            return ""
        return match.group(1)

    @property
    def spec(self) -> KernelSpec:
        """The instantiation, with the arch it was compiled for."""
        return KernelSpec(self.kernel, tuple(self.params.items()), self.arch, self.options)

    @property
    def ready(self) -> bool:
        """Whether there is a cubin to load: False only for a PREFETCH miss."""
        return bool(self.cubin)

    def _require_cubin(self) -> None:
        """ValueError unless there is a cubin; for a PREFETCH miss, one that
        says so and how to wait for it. Every use of the cubin (loading,
        launching, entry points, writing) checks first."""
        if self.cubin:
            return
        if self.origin == "none":
            raise ValueError(f"{self.spec} has no cubin yet: this is the answer to a PREFETCH request "
                             "(mode='prefetch'), and the daemon has only queued the compile; call "
                             "client.get_kernel(...) again without mode= (mode 'compile', the default) to wait "
                             "for the cubin")
        raise ValueError(f"{self.spec} has no cubin (origin {self.origin})")

    def lowered_name(self, expression: str | None = None) -> str:
        """The lowered name of a name expression
        (``"sglang::modulate_scale_shift::modulate_scale_shift_kernel<__nv_bfloat16>"``);
        with no expression, the only entry point's. KeyError naming the
        expressions there are otherwise (ValueError for a PREFETCH miss)."""
        self._require_cubin()
        if expression is None:
            if len(self.symbols) != 1:
                raise KeyError(f"{self.spec} has {len(self.symbols)} entry points; name one of: "
                               + ", ".join(self.symbols))
            return next(iter(self.symbols.values()))
        try:
            return self.symbols[expression]
        except KeyError:
            raise KeyError(f"{self.spec} has no entry point {expression!r}; its entry points: "
                           + ", ".join(self.symbols)) from None

    def write(self, path: str | Path) -> Path:
        """Writes the cubin to ``path`` (for tools that take a file)."""
        self._require_cubin()
        path = Path(path)
        path.write_bytes(self.cubin)
        return path

    def entry(self, expression: str) -> KernelEntry:
        """One entry point, by name expression or lowered name, to launch:
        ``k.entry("ns::kernel<float>")[grid, block](*args)``. KeyError naming
        the entry points when there is no such one."""
        if expression not in self.symbols.values():
            self.lowered_name(expression)  # raises, naming the entry points
        return KernelEntry(self, expression)

    def launch(self, grid: Dim, block: Dim, *args: Any, stream: Any = None, shared_mem: int = 0,
               entry: Optional[str] = None) -> None:
        """Launches the kernel with ``grid`` x ``block`` threads (ints, or up
        to three ints each) on ``args``; asynchronous, like every CUDA launch.

        Arguments: torch tensors and anything with ``__cuda_array_interface__``
        (CuPy, Numba arrays) pass their device pointers; Python ints and
        floats are packed to the size of the kernel's parameter, as the
        driver reports it (no ``cp.int64(n)`` needed); ctypes values pass as
        they are. ``entry``: the entry point's name expression (or lowered
        name), needed only when the kernel has several.

        Stream: ``stream`` (a torch or CuPy stream, anything with
        ``__cuda_stream__``, or a CUstream as an int); by default torch's
        current stream of the tensors' device when a torch tensor is among
        ``args`` (as :func:`jitd.torch.launch`), else the default stream.
        Where: the torch tensors' device's primary context, else the calling
        thread's current CUDA context (the one CuPy uses), else device 0's.
        The cubin is loaded once per context (:func:`jitd.driver.load`)."""
        self._require_cubin()
        if entry is None and len(self.symbols) != 1:
            raise TypeError(f"{self.spec} has {len(self.symbols)} entry points: name one, "
                            "k.launch(grid, block, *args, entry=EXPR) or k.entry(EXPR)[grid, block](*args), "
                            "EXPR one of: " + ", ".join(self.symbols))
        if _launcher is None:  # set by `import jitd`
            raise RuntimeError("KernelResult.launch needs jitd._launch, which `import jitd` hands to jitd.types")
        _launcher(self, entry, grid, block, *args, stream=stream, shared_mem=shared_mem)

    def __getitem__(self, config: tuple) -> Callable[..., None]:
        """``k[grid, block]``, ``k[grid, block, stream]`` or ``k[grid, block,
        stream, shared_mem]`` (Numba's and cupyx.jit's launch syntax): a
        function of the kernel's arguments that launches it (see :meth:`launch`)."""
        return _configured(self.launch, config, f"{self.spec}")

    def __call__(self, grid: Dim, block: Dim, args: Sequence[Any], *, shared_mem: int = 0,
                 stream: Any = None) -> None:
        """``k(grid, block, (arg, ...))``: ``cupy.RawKernel``'s call, so code
        written for one runs with this; see :meth:`launch`."""
        self.launch(grid, block, *_arguments(args, f"{self.spec}"), stream=stream, shared_mem=shared_mem)

    def __repr__(self) -> str:
        return (f"KernelResult({self.spec}, key={self.key[:16]}…, {len(self.cubin)} bytes, origin={self.origin}, "
                f"symbols={self.symbols!r})")


#: A grid or block size: an int, or up to three ints.
Dim = Union[int, Sequence[int]]

# ELF e_machine values of the hosts a module's shared object is built for;
# a cubin's is EM_CUDA (190).
_EM_X86_64 = 62
_EM_AARCH64 = 183
# "nvcc V13.0.88; tvm-ffi 0.1.15.post2; toolchain <fingerprint>": a
# module's nvrtc_version.
_TVM_FFI_VERSION = re.compile(r"(?:^|;)\s*tvm-ffi\s+([^;\s]+)")


def is_shared_object(data: bytes) -> bool:
    """Whether ``data`` is a host ELF (e_machine, the little-endian u16 at
    byte 18, is x86-64 or AArch64): a module kernel's shared object. A
    cubin is an ELF for EM_CUDA, PTX is text, a fatbin has its own magic."""
    return (len(data) >= 20 and data[:4] == b"\x7fELF"
            and int.from_bytes(data[18:20], "little") in (_EM_X86_64, _EM_AARCH64))

#: What :meth:`KernelResult.launch` hands a checked launch to, as ``(result,
#: entry, grid, block, *args, stream=, shared_mem=)``: :func:`jitd._launch.launch`,
#: set by ``import jitd``. This module is the bottom floor of jitd's imports: the
#: launchers (jitd.driver, jitd.torch) import it, it imports none of them.
_launcher: Optional[Callable[..., None]] = None


@dataclass(frozen=True)
class KernelEntry:
    """One entry point of a :class:`KernelResult`, from ``k.entry(expr)``:
    ``.launch(grid, block, *args, ...)`` and ``[grid, block](*args)`` as
    the result's own, for this entry point."""

    result: KernelResult
    #: A name expression or a lowered name.
    expression: str

    def launch(self, grid: Dim, block: Dim, *args: Any, stream: Any = None, shared_mem: int = 0) -> None:
        """:meth:`KernelResult.launch` of this entry point."""
        self.result.launch(grid, block, *args, stream=stream, shared_mem=shared_mem, entry=self.expression)

    def __getitem__(self, config: tuple) -> Callable[..., None]:
        return _configured(self.launch, config, f"{self.result.spec} {self.expression}")

    def __call__(self, grid: Dim, block: Dim, args: Sequence[Any], *, shared_mem: int = 0,
                 stream: Any = None) -> None:
        self.launch(grid, block, *_arguments(args, f"{self.result.spec} {self.expression}"), stream=stream,
                    shared_mem=shared_mem)

    def __repr__(self) -> str:
        return f"KernelEntry({self.result.spec}, {self.expression!r})"


def _arguments(args: Any, what: str) -> tuple:
    """The kernel arguments of a RawKernel-style call: one tuple or list."""
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"{what}(grid, block, args) takes the kernel's arguments as one tuple, as cupy.RawKernel "
                        f"does, got {type(args).__name__}; or launch with k[grid, block](*args)")
    return tuple(args)


def _configured(launch: Callable[..., None], config: Any, what: str) -> Callable[..., None]:
    """``launch`` with the grid, block, stream and shared memory of a
    ``[grid, block(, stream(, shared_mem))]`` subscript bound."""
    if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
        raise TypeError(f"{what}[...] takes grid, block and optionally stream and shared_mem "
                        f"(k[grid, block](*args)), got [{config!r}]")
    grid, block, stream, shared_mem = config + (None, 0)[len(config) - 2:]
    return functools.partial(launch, grid, block, stream=stream, shared_mem=shared_mem)


# ---------------------------------------------------------------------------
# Warm-up

WarmOutcome = Literal["compiled", "cached", "failed", "unspecified"]


@dataclass(frozen=True)
class WarmProgress:
    """One finished instantiation of a warm-up, with the running totals."""

    spec: KernelSpec
    key: str
    outcome: WarmOutcome
    #: Why it failed (with NVRTC's log), when outcome is "failed".
    error: str
    #: Instantiations finished so far (this one included), and in total.
    done: int
    total: int
    compiled: int
    cached: int
    failed: int
    elapsed_ms: int
    #: This instantiation's compile time (0 when cached).
    compile_ms: float

    def __str__(self) -> str:
        width = len(str(self.total))
        line = f"[{self.done:>{width}}/{self.total}] {self.outcome:<8} {self.spec}"
        if self.outcome == "compiled":
            line += f" ({self.compile_ms:.0f} ms)"
        if self.error:
            line += ": " + self.error.splitlines()[0]
        return line


@dataclass(frozen=True)
class WarmResult:
    """A finished warm-up: totals, and every instantiation's progress."""

    total: int
    compiled: int
    cached: int
    failed: int
    elapsed_ms: int
    items: list[WarmProgress] = field(default_factory=list)

    @property
    def failures(self) -> list[WarmProgress]:
        return [item for item in self.items if item.outcome == "failed"]

    @property
    def ok(self) -> bool:
        return self.failed == 0

    def __str__(self) -> str:
        return (f"{self.total} instantiations: {self.compiled} compiled, {self.cached} cached, "
                f"{self.failed} failed in {self.elapsed_ms} ms")


# ---------------------------------------------------------------------------
# The manifest


@dataclass(frozen=True)
class KernelParam:
    """A template parameter of a kernel: its name, manifest type ("dtype",
    "enum", "int"), the values the daemon accepts, and its default ("" when
    required)."""

    name: str
    type: str
    allowed: list[str]
    default: str


@dataclass(frozen=True)
class KernelInfo:
    """A kernel of the daemon's manifest."""

    name: str
    source: str
    name_expression: str
    params: list[KernelParam]
    default_options: list[str]
    #: How many instantiations a full warm-up compiles per arch.
    instantiations: int
    description: str
    #: The entry points' arguments as C++, "(T* out, const T* x, int64_t n)"
    #: (T: the dtype's type), and how to launch them; "" when not declared.
    signature: str = ""
    launch: str = ""


@dataclass(frozen=True)
class Manifest:
    """The kernels the daemon registers (ListKernels), by name:
    ``manifest["norm.rmsnorm"]``, ``for kernel in manifest``, ``len(manifest)``."""

    kernels: list[KernelInfo]
    default_arch: str
    supported_archs: list[str]

    def __getitem__(self, name: str) -> KernelInfo:
        for kernel in self.kernels:
            if kernel.name == name:
                return kernel
        raise KeyError(f"the daemon's manifest has no kernel {name!r}")

    def __contains__(self, name: object) -> bool:
        return any(kernel.name == name for kernel in self.kernels)

    def __iter__(self) -> Iterator[KernelInfo]:
        return iter(self.kernels)

    def __len__(self) -> int:
        return len(self.kernels)

    @property
    def names(self) -> list[str]:
        return [kernel.name for kernel in self.kernels]


# ---------------------------------------------------------------------------
# The cache (CacheAdmin)


@dataclass(frozen=True)
class Entry:
    """One entry of the on-disk cache."""

    key: str
    kernel: str
    #: "k=v,k=v", sorted.
    params: str
    arch: str
    #: Size of the blob file (cubin plus metadata).
    size_bytes: int
    created_unix_ms: int
    #: Recency is recorded in batches: it may trail real use by about a second.
    last_used_unix_ms: int
    hits: int
    pinned: bool
    nvrtc_version: str
    compile_ms: float
    #: The extra NVRTC options its request added (canonical); empty for
    #: none, and for entries indexed before jitd recorded them.
    options: tuple[str, ...] = ()
    #: "cubin", "ptx" (a ``compute_N`` arch) or "module" (a module kernel's
    #: shared object; its builder is in :attr:`nvrtc_version`).
    kind: str = "cubin"


@dataclass(frozen=True)
class Entries:
    """ListEntries: the entries (most recently used first) and how many
    matched before ``limit``."""

    entries: list[Entry]
    total: int

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class EvictResult:
    """Evict: what went (or would go, with ``dry_run``) and what remains."""

    evicted: list[Entry]
    evicted_entries: int
    evicted_bytes: int
    dry_run: bool
    remaining_entries: int
    remaining_bytes: int


@dataclass(frozen=True)
class VerifyResult:
    """Verify: every entry re-read against its checksum."""

    checked: int
    ok: int
    corrupt: int
    missing_blobs: int
    orphan_blobs: int
    #: Problems fixed (only with ``repair=True``).
    repaired: int
    #: One line per problem: key or file, and what is wrong.
    problems: list[str]
    #: SQLite's integrity check of the index: "ok" or its findings.
    index_integrity: str


@dataclass(frozen=True)
class Stats:
    """The daemon's counters (CacheAdmin.Stats); see StatsResponse in
    proto/jitd/v1/cache_admin.proto for each field's exact meaning."""

    # The on-disk cache, cumulative over the directory's life.
    entries: int
    bytes: int
    max_bytes: int
    high_watermark_bytes: int
    low_watermark_bytes: int
    pinned_entries: int
    pinned_bytes: int
    hits: int
    misses: int
    evictions: int
    corrupt: int
    publishes: int
    publish_failures: int
    cache_dir: str
    uptime_s: float
    # The request path of this daemon process, since it started.
    hot_entries: int
    hot_bytes: int
    hot_max_bytes: int
    requests: int
    memory_hits: int
    disk_hits: int
    compiles: int
    compile_failures: int
    compile_errors: int
    joined: int
    negative_hits: int
    cached_only_misses: int
    prefetches: int
    abandoned: int
    compiles_in_flight: int
    store_failures: int
    # The compile worker pool.
    workers: int
    busy_workers: int
    queue_depth: int
    max_queue: int
    worker_crashes: int
    worker_restarts: int
    # What the daemon compiles with.
    nvrtc_version: str
    kernels_fingerprint: str
    kernels: int
    kernels_dir: str
    hot_evictions: int
    # The shared remote tier (--remote); empty/zero without one.
    remote: str
    remote_hits: int
    remote_misses: int
    remote_corrupt: int
    remote_stores: int
    remote_errors: int
    remote_skipped: int
    remote_circuit_open: bool
    remote_outages: int
    remote_waits: int
    remote_takeovers: int
    remote_failures_shared: int
    remote_oversized: int
    remote_not_reread: int
    prefetches_refused: int
    peer_compiles_refused: int
    # Sealed seed bundles (--bundle); empty/zero without any.
    bundles: tuple[MountedBundle, ...]
    bundle_hits: int
    bundle_corrupt: int
    # The fleet set (--fleet-archs): what a fleet fatbin holds, and requests
    # for other archs by arch; empty without one.
    fleet_targets: tuple[str, ...]
    arch_misses: dict[str, int]
    #: The last recompile of the hot set after a toolkit change or at start
    #: (RewarmProgress's fields: state, trigger, hot_set, ready, ...).
    rewarm: dict[str, Any]
    #: Every kernel tree configured (``--kernels [NAME=]DIR``), served or
    #: refused, each as KernelTreeInfo's fields (name, dir, serving, error,
    #: kernels, fingerprint, kernel_namespace, lock, ...).
    trees: tuple[dict[str, Any], ...]
    #: Modules the remote tier held that this daemon refused: it has no
    #: signing key to verify code with, so it built them itself.
    remote_unsigned_modules: int

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class MountedBundle:
    """A sealed seed bundle the daemon serves from, read-only (``jitd
    --bundle``): its path, entries, file size, seal kind (``"sha256"`` or
    ``"hmac-sha256"``) and the seal in hex."""

    path: str
    entries: int
    bytes: int
    seal: str
    seal_hex: str


@dataclass(frozen=True)
class ClientCounters:
    """What a :class:`jitd.Client` has done so far (monotonic; for tests and
    metrics)."""

    #: GetKernel requests the daemon answered: RPCs sent (retries
    #: included) and local-path answers used (a local-path miss, asked again
    #: as an RPC, counts once).
    get_kernel_rpcs: int
    #: get_kernel() answers served by the memo without an RPC.
    memo_hits: int
    #: Attempts repeated after UNAVAILABLE or RESOURCE_EXHAUSTED.
    retries: int
    #: Of get_kernel_rpcs, the answers that came over the local path.
    local_answers: int = 0
