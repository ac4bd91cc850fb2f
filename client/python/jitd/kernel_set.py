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
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
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

    # --- Getting them ---------------------------------------------------------------

    def _expand(self, archs: Sequence[str]) -> list[KernelSpec]:
        specs = list(self)
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
                f"{client.endpoint} (strict start: nothing is compiled). Warm the image's cache "
                f"(`jitd warm --cache-dir DIR --manifest FILE`, or KernelSet.warm without strict):\n{listed}",
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
