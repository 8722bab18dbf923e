"""Choosing the inner collective library of a ``flagos`` process group ("the tier").

Tiers, in the order they are tried (the first available one wins):

========== ======================================================================================
flagcx     FlagCX's torch backend (``import flagcx``) on alias views of the torch device the
           runtime mirrors; tried first wherever ``flagcx`` is importable.
nccl       ProcessGroupNCCL on zero-copy CUDA alias views (vendor profile ``cuda-abi``).
vendor     the vendor's own collective library (HCCL on Ascend, ...) through core's c10d backend
           over the collective ABI (include/torch_fl/collective.h), on flagos memory itself, where
           the vendor declares one (``Vendor.collective_library_path()``) and it loads here;
           otherwise skipped, saying why.
gloo-alias ProcessGroupGloo on zero-copy CPU alias views (profile ``host-memory``).
gloo-staged ProcessGroupGloo on pinned host copies: copy in, collective, copy back (any vendor).
========== ======================================================================================

``FLAGOS_DIST_TIER=<tier>`` forces one (an unavailable forced tier is an error saying why). The
choice and the reason each earlier tier was skipped are kept on the group
(:func:`torch_fl.distributed.tier`) and printed with ``FLAGOS_LOG=dist``: never silent.

A group created with backend ``gloo`` (:mod:`torch_fl.distributed.gloo`) runs gloo whatever the
vendor: it chooses among :data:`GLOO_TIERS` only.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os

import torch
import torch.distributed as dist

from torch_fl.distributed import profile as profiles

__all__ = [
    "ENV_VAR",
    "GLOO_TIERS",
    "TIERS",
    "TierChoice",
    "TierUnavailableError",
    "choose",
]

ENV_VAR = "FLAGOS_DIST_TIER"
FLAGCX = "flagcx"
NCCL = "nccl"
VENDOR = "vendor"
GLOO_ALIAS = "gloo-alias"
GLOO_STAGED = "gloo-staged"
TIERS = (FLAGCX, NCCL, VENDOR, GLOO_ALIAS, GLOO_STAGED)
#: The tiers whose inner library is ProcessGroupGloo: those a ``gloo`` group can run.
GLOO_TIERS = (GLOO_ALIAS, GLOO_STAGED)


class TierUnavailableError(RuntimeError):
    """The tier forced with FLAGOS_DIST_TIER cannot run here (the message says why)."""


@dataclasses.dataclass(frozen=True)
class TierChoice:
    """The inner collective library of one ``flagos`` process group, and why."""

    #: The chosen tier, one of :data:`TIERS`.
    name: str
    #: Why it was chosen, as a clause ("vendor 'sim' declares profile host-memory ...").
    reason: str
    #: Every tier tried before it, with the reason it was skipped.
    skipped: dict[str, str]
    vendor: str
    profile: str
    runtime: str
    #: Device type the inner library sees flagos memory as: "cuda", "cpu" or "flagos" itself.
    view_device: str
    #: Whether inner tensors alias flagos memory (False: host-staged copies).
    zero_copy: bool

    def describe(self) -> str:
        """One paragraph for logs and bug reports."""
        lines = [
            f"tier {self.name} (vendor {self.vendor!r}, profile {self.profile}, runtime "
            f"{self.runtime!r}): {self.reason}"
        ]
        for name, why in self.skipped.items():
            lines.append(f"  skipped {name}: {why}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()


def _runtime() -> str:
    from torch_fl import _C

    return str(_C.runtime_name())


def _host_addressable() -> bool:
    from torch_fl import _C

    return bool(_C.runtime_capabilities() & _C.CAP_HOST_ADDRESSABLE_MEMORY)


def _mirrored_type(runtime: str) -> str | None:
    # The delegate runtime names itself "delegate:<torch device type>" (e.g. "delegate:cuda").
    return runtime.split(":", 1)[1] if runtime.startswith("delegate:") else None


def _why_not(tier: str, vendor: str, profile: str, runtime: str) -> str | None:
    """None when ``tier`` can run here, else the reason it cannot."""
    mirrored = _mirrored_type(runtime)
    if tier == FLAGCX:
        if importlib.util.find_spec("flagcx") is None:
            return "the flagcx package is not importable"
        if mirrored is None:
            return (
                f"FlagCX's torch backend takes tensors of the vendor's torch device, and runtime "
                f"{runtime!r} mirrors no torch device type to alias flagos memory as"
            )
        return None
    if tier == NCCL:
        if profile != profiles.CUDA_ABI:
            return f"vendor {vendor!r} declares profile {profile}, not {profiles.CUDA_ABI}"
        if mirrored != "cuda":
            return f"runtime {runtime!r} does not mirror CUDA, so there are no CUDA alias views"
        if not dist.is_nccl_available():
            return "this torch build has no NCCL (torch.distributed.is_nccl_available() is False)"
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False"
        return None
    if tier == VENDOR:
        return _vendor_library_why_not(vendor)
    if not dist.is_gloo_available():
        return "this torch build has no gloo"
    if tier == GLOO_ALIAS:
        if profile != profiles.HOST_MEMORY:
            return f"vendor {vendor!r} declares profile {profile}, not {profiles.HOST_MEMORY}"
        if not _host_addressable():
            return f"runtime {runtime!r} does not declare CAP_HOST_ADDRESSABLE_MEMORY"
        return None
    return None  # gloo-staged runs wherever gloo does


def vendor_library_path() -> str | None:
    """The collective library the vendor tier loads (None: the vendor declares none here)."""
    import torch_fl

    declare = getattr(torch_fl.vendor(), "collective_library_path", None)
    path = declare() if callable(declare) else None
    return str(path) if path else None


def _vendor_library_why_not(vendor: str) -> str | None:
    """Why the vendor's own collective library cannot serve flagos groups, or None if it can."""
    import torch_fl
    from torch_fl import _C

    declare = getattr(torch_fl.vendor(), "collective_library", None)
    library = declare() if callable(declare) else None
    name, unavailable = library if library is not None else (None, None)
    if unavailable:
        return f"{name}: {unavailable}"
    path = vendor_library_path()
    if path is None:
        if name is None:
            return f"vendor {vendor!r} declares no collective library of its own"
        return f"vendor {vendor!r} names {name} but no library implementing the collective ABI"
    try:
        _C.collective_fields(path)  # loads and checks its table
    except Exception as exc:
        return str(exc)
    return None


def _reason(tier: str, vendor: str, profile: str) -> str:
    return {
        FLAGCX: "flagcx is importable and its torch backend takes alias views of flagos memory",
        NCCL: f"vendor {vendor!r} declares profile {profile}: NCCL on CUDA alias views",
        VENDOR: (
            f"vendor {vendor!r} has a collective library ({vendor_library_path()}): its "
            f"collectives run on flagos memory, on the communicator's stream"
        ),
        GLOO_ALIAS: f"vendor {vendor!r} declares profile {profile}: gloo on CPU alias views",
        GLOO_STAGED: (
            f"vendor {vendor!r} declares profile {profile}: gloo on pinned host copies (no "
            f"collective library of the vendor runs here)"
        ),
    }[tier]


def choose(environ: dict[str, str] | None = None, within: tuple[str, ...] = TIERS) -> TierChoice:
    """The tier for a new ``flagos`` process group in this process.

    ``within``: the tiers the group can run (:data:`GLOO_TIERS` for a group created with backend
    ``gloo``); the others are skipped, and a tier forced outside them does not apply.
    """
    env = os.environ if environ is None else environ
    vendor, profile = profiles.vendor_profile()
    runtime = _runtime()
    forced = env.get(ENV_VAR, "").strip().lower()
    if forced and forced not in TIERS:
        raise TierUnavailableError(f"{ENV_VAR}={forced!r} names no tier; tiers: {', '.join(TIERS)}")
    skipped: dict[str, str] = {}
    if forced and forced not in within:
        skipped[forced] = (
            f"{ENV_VAR}={forced} is set, but this group runs only {', '.join(within)} (the group "
            f"was created with backend gloo)"
        )
        forced = ""
    for tier in TIERS:
        if tier in skipped:
            continue
        if tier not in within:
            skipped[tier] = f"the group runs only {', '.join(within)} (created with backend gloo)"
            continue
        if forced and tier != forced:
            skipped[tier] = f"{ENV_VAR}={forced} is set"
            continue
        why = _why_not(tier, vendor, profile, runtime)
        if why is not None:
            if forced:
                raise TierUnavailableError(
                    f"{ENV_VAR}={forced} is set but tier {tier} cannot run with vendor "
                    f"{vendor!r} (runtime {runtime!r}): {why}"
                )
            skipped[tier] = why
            continue
        reason = f"{ENV_VAR}={forced} is set" if forced else _reason(tier, vendor, profile)
        mirrored = _mirrored_type(runtime)
        view = {NCCL: "cuda", FLAGCX: mirrored or "cpu", VENDOR: "flagos"}.get(tier, "cpu")
        return TierChoice(
            name=tier,
            reason=reason,
            skipped={t: skipped[t] for t in TIERS if t in skipped},
            vendor=vendor,
            profile=profile,
            runtime=runtime,
            view_device=view,
            zero_copy=tier != GLOO_STAGED,
        )
    raise TierUnavailableError(  # only reachable without gloo
        f"torch_fl.distributed: no collective tier can run with vendor {vendor!r}: "
        + "; ".join(f"{k}: {v}" for k, v in skipped.items())
    )
