"""Random numbers on ``flagos``: one Philox default generator per device, like ``torch.cuda``.

Seeding before the device module is initialised is queued (``torch.manual_seed`` calls
:func:`manual_seed_all` even on a machine without a ``flagos`` device) and applied at
initialisation. A state is 16 bytes, CUDA's layout: the 64-bit seed and the 64-bit Philox offset.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from torch_fl import _C
from torch_fl.device import lazy
from torch_fl.device.index import DeviceLike, explicit_index, resolve

__all__ = [
    "default_generators",
    "get_rng_state",
    "get_rng_state_all",
    "initial_seed",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "set_rng_state",
    "set_rng_state_all",
]

#: Bytes in a generator state: seed (int64) then Philox offset (int64), as CUDA's.
STATE_BYTES = 16

_generators: tuple[torch.Generator, ...] = ()


def default_generators() -> tuple[torch.Generator, ...]:
    """The default generator of every ``flagos`` device (empty when there is no device).

    ``torch.flagos.default_generators`` is this tuple. Reading it initialises the device module so
    that queued seeds are applied first.
    """
    global _generators
    count = _C.device_count()
    if count == 0:
        return ()
    lazy._lazy_init()
    if len(_generators) != count:
        _generators = tuple(_C.default_generator(i) for i in range(count))
    return _generators


def _generator(index: int) -> torch.Generator:
    return default_generators()[index]


def _index_for_call(device: DeviceLike) -> int | None:
    """The explicit index of ``device`` (validated now if possible); None for the current one."""
    index = explicit_index(device)
    if index is not None and lazy.is_initialized():
        index = resolve(index)
    return index


def get_rng_state(device: DeviceLike = "flagos") -> torch.Tensor:
    """The state of ``device``'s default generator as a 16-byte ``torch.uint8`` CPU tensor."""
    index = resolve(device)
    return _generator(index).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    """The generator state of every ``flagos`` device."""
    return [get_rng_state(i) for i in range(len(default_generators()))]


def _check_state(new_state: object, index: int | None) -> None:
    where = "the current flagos device" if index is None else f"flagos:{index}"
    expected = STATE_BYTES
    if index is not None and lazy.is_initialized():
        expected = _generator(index).get_state().numel()
    ok = (
        isinstance(new_state, torch.Tensor)
        and new_state.dtype == torch.uint8
        and new_state.device.type == "cpu"
        and new_state.numel() == expected
    )
    if not ok:
        got = (
            f"a {new_state.numel()}-element {new_state.dtype} tensor on {new_state.device}"
            if isinstance(new_state, torch.Tensor)
            else f"a {type(new_state).__name__}"
        )
        raise RuntimeError(
            f"flagos: set_rng_state for {where} needs a {expected}-byte torch.uint8 CPU tensor "
            f"(Philox seed and offset, as get_rng_state returns), but got {got}"
        )


def set_rng_state(new_state: torch.Tensor, device: DeviceLike = "flagos") -> None:
    """Set the state of ``device``'s default generator (applied at initialisation if not yet)."""
    index = _index_for_call(device)
    _check_state(new_state, index)
    with torch._C._DisableFuncTorch():
        state = new_state.clone(memory_format=torch.contiguous_format)

    def cb() -> None:
        _generator(resolve(index)).set_state(state)

    lazy._lazy_call(cb)


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    """Set the generator state of every device, one state per device in index order."""
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def manual_seed(seed: int) -> None:
    """Seed the current device's generator (queued until initialisation)."""
    seed = int(seed)

    def cb() -> None:
        _generator(resolve(None)).manual_seed(seed)

    lazy._lazy_call(cb, seed=True)


def manual_seed_all(seed: int) -> None:
    """Seed the generators of all devices (queued until initialisation)."""
    seed = int(seed)

    def cb() -> None:
        for generator in default_generators():
            generator.manual_seed(seed)

    lazy._lazy_call(cb, seed_all=True)


def seed() -> None:
    """Seed the current device's generator with a non-deterministic number."""

    def cb() -> None:
        _generator(resolve(None)).seed()

    lazy._lazy_call(cb)


def seed_all() -> None:
    """Seed every device's generator with one non-deterministic number."""

    def cb() -> None:
        generators = default_generators()
        if generators:
            first = generators[0]
            first.seed()
            for generator in generators[1:]:
                generator.manual_seed(first.initial_seed())

    lazy._lazy_call(cb)


def initial_seed() -> int:
    """The seed of the current device's generator."""
    return int(_generator(resolve(None)).initial_seed())
