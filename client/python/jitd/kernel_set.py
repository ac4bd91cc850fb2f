"""Declaring the kernels a server needs, and getting them all at start-up.

An inference server declares its kernels where it defines its ops, then
warms them in one call before it serves::

    KERNELS = jitd.KernelSet()
    MODULATE = KERNELS.add("diffusion.modulate_scale_shift", dtype="bf16")
    KERNELS.add_product("norm.rmsnorm", dtype=["bf16", "fp16"], threads=[256, 1024])

    @KERNELS.kernel("activation.silu_and_mul", dtype=["bf16", "fp16"])
    def silu_and_mul(out, x): ...

    # at start-up:
    KERNELS.warm(client, progress=True)         # compiles what is missing, raises if any fails
    # in a production image (or with JITD_STRICT=1 in its environment):
    KERNELS.warm(client, strict=True)           # compiles nothing; raises KernelsMissing
                                                # naming every instantiation not cached

Strict mode is the "crash on miss" switch: it asks with CACHED_ONLY, so an
image whose cache was not warmed fails at start, loudly, instead of
compiling for minutes while serving. What it fetched stays in the client's
memo, so the first real ``get_kernel`` is free.

The image is warmed at build time from the same declarations, without a
daemon or a GPU::

    KERNELS.write_spec("kernels.toml")          # the [[spec]] warm list (docs/WARM-LIST.md)
    # then: jitd warm --cache-dir /var/cache/jitd --manifest kernels.toml
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, TypeVar, Union

from .client import Client
from .errors import KernelsMissing, NotFound, WarmFailed
from .types import KernelResult, KernelSpec, Mode, ParamsLike, ParamValue, WarmProgress, WarmResult

F = TypeVar("F", bound=Callable[..., Any])

#: Environment variable that turns strict mode on for every warm() that
#: does not say otherwise: "1", "true" or "yes".
STRICT_ENV = "JITD_STRICT"


def strict_from_environment() -> bool:
    return os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def print_progress(progress: WarmProgress) -> None:
    """A warm-up progress line on stderr: ``[ 3/26] compiled norm.rmsnorm{...}@sm_90 (412 ms)``."""
    print(f"jitd: {progress}", file=sys.stderr, flush=True)


class KernelSet:
    """An ordered set of kernel instantiations (:class:`jitd.KernelSpec`),
    declared once, warmed or required together. Thread-safe."""

    def __init__(self, specs: Iterable[KernelSpec] = ()) -> None:
        self._lock = threading.Lock()
        self._specs: dict[KernelSpec, None] = {}
        for spec in specs:
            self._specs[spec] = None

    # --- Declaring ----------------------------------------------------------------

    def add(self, kernel: Union[str, KernelSpec], arch: Optional[str] = None, *, options: Sequence[str] = (),
            params: Optional[ParamsLike] = None, **more_params: ParamValue) -> KernelSpec:
        """Declares one instantiation and returns its spec (``client.get(spec)``
        fetches it). Params as in :meth:`jitd.Client.get_kernel`; a list
        value is an error here: see :meth:`add_product`."""
        if isinstance(kernel, KernelSpec):
            spec = kernel
        else:
            for name, value in more_params.items():
                if isinstance(value, (list, tuple, set, frozenset)):
                    raise TypeError(f"{name}={value!r}: add() takes one value per param; "
                                    "add_product() declares every combination")
            spec = KernelSpec.of(kernel, arch, options=options, params=params, **more_params)
        with self._lock:
            self._specs[spec] = None
        return spec

    def add_product(self, kernel: str, arch: Optional[str] = None, *, options: Sequence[str] = (),
                    **values: Union[ParamValue, Iterable[ParamValue]]) -> list[KernelSpec]:
        """Declares every combination of the given values (a scalar is one
        value): ``add_product("norm.rmsnorm", dtype=["bf16", "fp16"], threads=[256, 1024])``
        declares four instantiations."""
        names = list(values)
        choices = [list(v) if isinstance(v, (list, tuple, set, frozenset, range)) else [v] for v in values.values()]
        return [self.add(kernel, arch, options=options, params=dict(zip(names, combination)))
                for combination in itertools.product(*choices)]

    def kernel(self, kernel: str, arch: Optional[str] = None, *, options: Sequence[str] = (),
               **values: Union[ParamValue, Iterable[ParamValue]]) -> Callable[[F], F]:
        """A decorator declaring, where an op is defined, the kernels it
        launches (every combination, as :meth:`add_product`). The function is
        returned unchanged, with the specs in ``fn.jitd_specs``."""
        def declare(fn: F) -> F:
            specs = self.add_product(kernel, arch, options=options, **values)
            fn.jitd_specs = list(getattr(fn, "jitd_specs", [])) + specs  # type: ignore[attr-defined]
            return fn

        return declare

    def __iter__(self) -> Iterator[KernelSpec]:
        with self._lock:
            return iter(list(self._specs))

    def __len__(self) -> int:
        with self._lock:
            return len(self._specs)

    def __contains__(self, spec: object) -> bool:
        with self._lock:
            return spec in self._specs

    def __repr__(self) -> str:
        return f"jitd.KernelSet({len(self)} instantiations)"

    # --- The warm list ----------------------------------------------------------------

    def write_spec(self, path: Union[str, "os.PathLike[str]"], *, archs: Union[str, Sequence[str]] = ()) -> Path:
        """Writes the declared instantiations, for each of ``archs`` as
        :meth:`warm` would, as a warm list: the ``[[spec]]`` TOML file that
        ``jitd warm --cache-dir DIR --manifest FILE`` (at image build time:
        no daemon, no GPU) and ``jitctl warm --manifest FILE`` read; the
        format is in docs/WARM-LIST.md. A spec without an arch is written
        without one (the warm's ``--arch``, else the daemon's default).

        The file is replaced whole (written beside it, then renamed), so a
        build never reads half of one. ValueError for an empty set: the
        tools refuse a file without ``[[spec]]`` tables. Returns the path."""
        specs = self._expand(archs)
        if not specs:
            raise ValueError("the KernelSet declares no instantiations: a warm list needs at least one "
                             "(jitd warm refuses a file without [[spec]] tables)")
        lines = [f"# {len(specs)} kernel instantiations, written by jitd.KernelSet.write_spec.",
                 "# Warm a cache with them: jitd warm --cache-dir DIR --manifest FILE (docs/WARM-LIST.md).", ""]
        for spec in specs:
            lines += ["[[spec]]", f"kernel = {_toml_string(spec.kernel)}"]
            if spec.params:
                params = ", ".join(f"{_toml_key(name)} = {_toml_string(value)}" for name, value in spec.params)
                lines.append(f"params = {{ {params} }}")
            if spec.arch:
                lines.append(f"arch = {_toml_string(spec.arch)}")
            if spec.options:
                lines.append(f"options = [{', '.join(_toml_string(option) for option in spec.options)}]")
            lines.append("")
        path = Path(path)
        # Beside the file, with the mode a plain open() would give it (the
        # build's other users read it), under a name no one else picks.
        temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as file:
                file.write("\n".join(lines))
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
        return path

    # --- Getting them ---------------------------------------------------------------

    def _expand(self, archs: Union[str, Sequence[str]]) -> list[KernelSpec]:
        specs = list(self)
        if isinstance(archs, str):  # one arch: "sm_90", not "s", "m", ...
            archs = [archs] if archs else []
        if not archs:
            return specs
        return list(dict.fromkeys(spec if spec.arch else spec.with_arch(arch) for spec in specs for arch in archs))

    def warm(self, client: Optional[Client] = None, *, archs: Sequence[str] = (),
             progress: Union[bool, Callable[[WarmProgress], None]] = False, strict: Optional[bool] = None,
             concurrency: int = 0, timeout: Optional[float] = None) -> WarmResult:
        """Makes every declared instantiation ready in the daemon's cache, for
        each of ``archs`` (default: what each spec says, else the daemon's).

        Not strict: one Warm call compiles what is missing (``progress=True``
        prints a line per instantiation on stderr; a callable receives each
        :class:`jitd.WarmProgress`), and :class:`jitd.WarmFailed` is raised,
        after all were tried, when any failed to compile.

        Strict (``strict=True``, or ``$JITD_STRICT=1`` when ``strict`` is
        None): :meth:`require`: nothing is compiled, and
        :class:`jitd.KernelsMissing` names every instantiation not cached.

        ``client``: default :func:`jitd.default_client`."""
        client = client or default_client()
        if strict if strict is not None else strict_from_environment():
            results = self.require(client, archs=archs, timeout=timeout)
            items = [WarmProgress(spec=spec, key=result.key, outcome="cached", error="", done=i + 1,
                                  total=len(results), compiled=0, cached=i + 1, failed=0, elapsed_ms=0,
                                  compile_ms=0.0)
                     for i, (spec, result) in enumerate(results.items())]
            return WarmResult(total=len(items), compiled=0, cached=len(items), failed=0, elapsed_ms=0, items=items)
        specs = self._expand(archs)
        if not specs:
            return WarmResult(total=0, compiled=0, cached=0, failed=0, elapsed_ms=0)
        on_progress = print_progress if progress is True else (progress or None)
        result = client.warm(specs, concurrency=concurrency, on_progress=on_progress, timeout=timeout)
        if result.failures:
            lines = "\n".join(f"  {failure.spec}: {failure.error}" for failure in result.failures)
            raise WarmFailed(f"{len(result.failures)} of {result.total} kernel instantiations failed to compile:\n"
                             f"{lines}", failures=result.failures, endpoint=client.endpoint)
        return result

    def require(self, client: Optional[Client] = None, *, archs: Sequence[str] = (),
                timeout: Optional[float] = None) -> dict[KernelSpec, KernelResult]:
        """Every declared instantiation from the cache, compiling nothing
        (CACHED_ONLY): the results by spec, now also in the client's memo.
        :class:`jitd.KernelsMissing` lists every one that is not cached;
        other errors (no daemon, an unknown kernel name) are raised as they
        come."""
        client = client or default_client()
        results: dict[KernelSpec, KernelResult] = {}
        missing: list[KernelSpec] = []
        for spec in self._expand(archs):
            try:
                results[spec] = client.get(spec, mode=Mode.CACHED_ONLY, timeout=timeout)
            except KernelsMissing:
                raise
            except NotFound as error:
                if "unknown kernel" in error.message:
                    raise
                missing.append(spec)
        if missing:
            listed = "\n".join(f"  {spec}" for spec in missing)
            raise KernelsMissing(
                f"{len(missing)} of {len(missing) + len(results)} kernel instantiations are not in jitd's cache at "
                f"{client.endpoint} (strict start: nothing is compiled). Warm the image's cache at build time: "
                f"write this set's warm list with KernelSet.write_spec(FILE), then run "
                f"`jitd warm --cache-dir DIR --manifest FILE` (or call KernelSet.warm without strict):\n{listed}",
                missing=missing, endpoint=client.endpoint)
        return results


# --- The process-wide defaults ------------------------------------------------------

_default_client: Optional[Client] = None
_default_set = KernelSet()
_default_lock = threading.Lock()


def default_client() -> Client:
    """A process-wide :class:`jitd.Client` on the default endpoint, made on
    first use (fork-safe like any client)."""
    global _default_client
    with _default_lock:
        if _default_client is None:
            _default_client = Client()
        return _default_client


def default_kernel_set() -> KernelSet:
    """The KernelSet :func:`jitd.kernel` declares into."""
    return _default_set


def kernel(name: str, arch: Optional[str] = None, *, options: Sequence[str] = (),
           **values: Union[ParamValue, Iterable[ParamValue]]) -> Callable[[F], F]:
    """``@jitd.kernel("diffusion.modulate_scale_shift", dtype=["bf16", "fp16"])``:
    declares the kernels an op launches in :func:`default_kernel_set`;
    ``jitd.default_kernel_set().warm()`` then gets them all at start-up."""
    return _default_set.kernel(name, arch, options=options, **values)


# --- TOML, as much as a warm list needs ----------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
# TOML basic strings: these escapes, every other control character as \uXXXX.
_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_string(text: str) -> str:
    """``text`` as a TOML basic string (quoted, escaped)."""
    return '"' + "".join(_TOML_ESCAPES.get(c) or (f"\\u{ord(c):04X}" if ord(c) < 0x20 or ord(c) == 0x7F else c)
                         for c in text) + '"'


def _toml_key(name: str) -> str:
    """``name`` as a TOML key: bare when TOML allows it, else quoted (a dot
    in a bare key would make a nested table)."""
    return name if _BARE_KEY.fullmatch(name) else _toml_string(name)

