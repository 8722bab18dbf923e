"""RNG contract: one Philox-style default generator per flagos device, seeded and saved like CUDA's.

Seeding (``torch.manual_seed``, ``torch.flagos.manual_seed(_all)``, ``seed``, ``initial_seed``),
the 16-byte state (seed, offset) and its round trip, ``torch.random.fork_rng``, explicit
``torch.Generator("flagos")`` objects, per-device independence, and draws that do not depend on the
backend an RNG op is routed to: every producer takes (seed, offset) from the same generator, so a
seeded run gives the same numbers with the ops on a ``box:<key>`` backend or on the CPU fallback
(checked in child processes, since routes are read at start-up). Distributions are checked on 1e6
samples at five standard errors.
"""

from __future__ import annotations

import math
import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn.functional as F

pytestmark = [pytest.mark.rng, pytest.mark.usefixtures("flagos")]

DEV = "flagos"
STATE_BYTES = 16
N = 1_000_000
SIGMAS = 5.0


def _vendor_name() -> str:
    import torch_fl

    return str(torch_fl.vendor().name)


def state_words(state: torch.Tensor) -> tuple[int, int]:
    """(seed, offset) of a 16-byte generator state."""
    words = state.view(torch.int64).tolist()
    return words[0] & (2**64 - 1), words[1]


def draw(n: int = 64, device: str = DEV, generator: torch.Generator | None = None) -> torch.Tensor:
    return torch.rand(n, device=device, generator=generator).cpu()


@pytest.fixture
def restore_rng(flagos):
    """Every flagos generator's state and the CPU one come back after the test."""
    cpu = torch.get_rng_state()
    states = flagos.get_rng_state_all()
    yield
    torch.set_rng_state(cpu)
    flagos.set_rng_state_all(states)


# ---------------------------------------------------------------------------------------------
# the device module's surface
# ---------------------------------------------------------------------------------------------


def test_default_generators(flagos):
    gens = flagos.default_generators
    assert isinstance(gens, tuple) and len(gens) == flagos.device_count()
    for i, gen in enumerate(gens):
        assert isinstance(gen, torch.Generator)
        assert gen.device == torch.device(DEV, i)
        assert gens[i] is flagos.default_generators[i]


def test_state_layout(flagos, restore_rng):
    flagos.manual_seed(1234)
    state = flagos.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    assert state.numel() == STATE_BYTES and state.is_contiguous()
    assert state_words(state) == (1234, 0)
    draw()
    seed, offset = state_words(flagos.get_rng_state())
    assert seed == 1234 and offset > 0, "a draw must advance the Philox offset"
    # The state is a copy: changing it changes nothing.
    state.zero_()
    assert state_words(flagos.get_rng_state())[0] == 1234


def test_torch_manual_seed_seeds_every_device(flagos, restore_rng):
    torch.manual_seed(77)
    for i in range(flagos.device_count()):
        assert flagos.default_generators[i].initial_seed() == 77
        assert state_words(flagos.get_rng_state(i)) == (77, 0)
    a = draw()
    torch.manual_seed(77)
    assert torch.equal(draw(), a)
    torch.manual_seed(78)
    assert not torch.equal(draw(), a)


def test_negative_seed_wraps_as_on_cpu(flagos, restore_rng):
    torch.manual_seed(-1)
    assert flagos.initial_seed() == torch.initial_seed() == 2**64 - 1


def test_manual_seed_is_current_device_only(flagos, two_devices, restore_rng):
    flagos.manual_seed_all(5)
    flagos.set_device(1)
    flagos.manual_seed(9)
    assert flagos.initial_seed() == 9
    assert flagos.default_generators[0].initial_seed() == 5
    assert flagos.default_generators[1].initial_seed() == 9
    flagos.set_device(0)
    assert flagos.initial_seed() == 5


def test_manual_seed_all(flagos, restore_rng):
    flagos.manual_seed_all(31)
    assert [g.initial_seed() for g in flagos.default_generators] == [31] * flagos.device_count()


def test_seed_is_nondeterministic(flagos, restore_rng):
    flagos.manual_seed(3)
    flagos.seed()
    first = flagos.initial_seed()
    flagos.seed()
    second = flagos.initial_seed()
    assert len({3, first, second}) == 3
    assert state_words(flagos.get_rng_state())[1] == 0, "seed() restarts the offset"


def test_seed_all_gives_every_device_one_seed(flagos, two_devices, restore_rng):
    flagos.manual_seed_all(3)
    flagos.seed_all()
    seeds = {g.initial_seed() for g in flagos.default_generators}
    assert len(seeds) == 1 and seeds != {3}


def test_torch_seed_reaches_flagos(flagos, restore_rng):
    s = torch.seed()
    assert [g.initial_seed() for g in flagos.default_generators] == [s] * flagos.device_count()


LAZY_CHILDREN = {
    # torch.manual_seed before anything initialised the device module: queued, applied at init.
    "manual_seed": """
        import torch
        assert not torch.flagos.is_initialized()
        torch.manual_seed(7)
        assert not torch.flagos.is_initialized(), "seeding must not initialise the device"
        first = torch.rand(8, device="flagos").cpu()
        assert [g.initial_seed() for g in torch.flagos.default_generators] == [7] * len(
            torch.flagos.default_generators
        )
        torch.flagos.manual_seed(7)
        assert torch.equal(torch.rand(8, device="flagos").cpu(), first)
    """,
    # set_rng_state before initialisation: validated now, applied at init.
    "set_rng_state": """
        import torch
        state = torch.tensor([9, 0], dtype=torch.int64).view(torch.uint8)
        try:
            torch.flagos.set_rng_state(torch.zeros(8, dtype=torch.uint8))
        except RuntimeError:
            pass
        else:
            raise AssertionError("a wrong-sized state was accepted before initialisation")
        torch.flagos.set_rng_state(state)
        assert not torch.flagos.is_initialized()
        first = torch.rand(8, device="flagos").cpu()
        assert torch.flagos.initial_seed() == 9
        torch.flagos.manual_seed(9)
        assert torch.equal(torch.rand(8, device="flagos").cpu(), first)
    """,
}


def test_seeding_before_initialisation():
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_OP_")}
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, code in LAZY_CHILDREN.items()
    }
    for name, proc in procs.items():
        output, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"{name} before initialisation:\n{output}"


# ---------------------------------------------------------------------------------------------
# state round trips
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "producer",
    ["rand", "randn", "bernoulli", "dropout", "multinomial", "randint", "randperm", "normal"],
)
def test_state_round_trip(producer, flagos, restore_rng):
    def make():
        if producer == "rand":
            return torch.rand(100, device=DEV)
        if producer == "randn":
            return torch.randn(100, device=DEV)
        if producer == "bernoulli":
            return torch.empty(100, device=DEV).bernoulli_(0.5)
        if producer == "dropout":
            return F.dropout(torch.ones(100, device=DEV), 0.5)
        if producer == "multinomial":
            return torch.multinomial(torch.ones(50, device=DEV), 20)
        if producer == "randint":
            return torch.randint(0, 10**6, (100,), device=DEV)
        if producer == "randperm":
            return torch.randperm(100, device=DEV)
        return torch.normal(torch.zeros(100, device=DEV), torch.ones(100, device=DEV))

    flagos.manual_seed(11)
    make()  # start somewhere other than offset 0
    state = flagos.get_rng_state()
    a = make().cpu()
    after = flagos.get_rng_state()
    assert state_words(after)[1] > state_words(state)[1]
    flagos.set_rng_state(state)
    b = make().cpu()
    assert torch.equal(a, b)
    assert torch.equal(flagos.get_rng_state(), after), "the same draws consume the same offset"
    c = make().cpu()
    assert not torch.equal(a, c), "the next draw continues the stream instead of repeating it"


def test_state_all_round_trip(flagos, two_devices, restore_rng):
    flagos.manual_seed_all(21)
    states = flagos.get_rng_state_all()
    assert len(states) == flagos.device_count()
    a = [draw(device=str(d)) for d in two_devices]
    flagos.set_rng_state_all(states)
    b = [draw(device=str(d)) for d in two_devices]
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_state_for_an_explicit_device(flagos, two_devices, restore_rng):
    flagos.manual_seed_all(4)
    draw(device="flagos:1")
    state1 = flagos.get_rng_state(1)
    state1_dev = flagos.get_rng_state(torch.device("flagos", 1))
    state1_str = flagos.get_rng_state("flagos:1")
    assert torch.equal(state1, state1_dev) and torch.equal(state1, state1_str)
    assert not torch.equal(state1, flagos.get_rng_state(0))
    flagos.set_rng_state(flagos.get_rng_state(0), "flagos:1")
    assert torch.equal(flagos.get_rng_state(1), flagos.get_rng_state(0))


def test_set_offset_and_seed_through_the_generator(flagos, restore_rng):
    gen = flagos.default_generators[0]
    gen.manual_seed(8)
    a = draw()
    gen.manual_seed(8)
    gen.set_offset(gen.get_offset())  # a no-op
    assert torch.equal(draw(), a)
    gen.manual_seed(8)
    draw()
    offset = gen.get_offset()
    b = draw()
    gen.set_offset(offset)
    assert torch.equal(draw(), b)


# ---------------------------------------------------------------------------------------------
# bad states
# ---------------------------------------------------------------------------------------------

BAD_STATES = {
    "8_bytes": lambda: torch.zeros(8, dtype=torch.uint8),
    "17_bytes": lambda: torch.zeros(17, dtype=torch.uint8),
    "empty": lambda: torch.zeros(0, dtype=torch.uint8),
    "cpu_generator_state": lambda: torch.get_rng_state(),  # 5056 bytes: CPU's mt19937
    "int64_words": lambda: torch.zeros(2, dtype=torch.int64),
    "float": lambda: torch.zeros(16, dtype=torch.float32),
    "on_flagos": lambda: torch.zeros(16, dtype=torch.uint8, device=DEV),
}


@pytest.mark.parametrize("bad", list(BAD_STATES))
def test_set_rng_state_rejects_bad_state(bad, flagos, restore_rng):
    flagos.manual_seed(6)
    draw()
    before = flagos.get_rng_state()
    with pytest.raises((RuntimeError, TypeError)) as info:
        flagos.set_rng_state(BAD_STATES[bad]())
    message = str(info.value)
    assert "16" in message or "uint8" in message.lower() or "byte" in message.lower(), message
    assert torch.equal(flagos.get_rng_state(), before), "a refused state must change nothing"
    draw()  # and the generator still works


@pytest.mark.parametrize("bad", ["8_bytes", "17_bytes", "cpu_generator_state", "float"])
def test_generator_set_state_rejects_bad_state(bad, flagos):
    gen = torch.Generator(DEV)
    gen.manual_seed(6)
    before = gen.get_state()
    with pytest.raises((RuntimeError, TypeError), match=r"(?i)size|byte|uint8"):
        gen.set_state(BAD_STATES[bad]())
    assert torch.equal(gen.get_state(), before)


def test_set_rng_state_rejects_bad_device(flagos):
    with pytest.raises((RuntimeError, ValueError), match=r"(?i)device|ordinal|index"):
        flagos.set_rng_state(flagos.get_rng_state(), flagos.device_count() + 5)


# ---------------------------------------------------------------------------------------------
# fork_rng
# ---------------------------------------------------------------------------------------------


def test_fork_rng_restores_every_device(flagos, restore_rng):
    flagos.manual_seed_all(13)
    before = flagos.get_rng_state_all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the "initialising every device" advice
        with torch.random.fork_rng(device_type=DEV):
            flagos.manual_seed_all(99)
            for i in range(flagos.device_count()):
                draw(device=f"flagos:{i}")
    after = flagos.get_rng_state_all()
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_fork_rng_draws_match_outside(flagos, restore_rng):
    flagos.manual_seed(13)
    with torch.random.fork_rng(devices=[flagos.current_device()], device_type=DEV):
        inside = draw()
    assert torch.equal(draw(), inside), "the fork starts from the state outside"


def test_fork_rng_only_named_devices(flagos, two_devices, restore_rng):
    flagos.manual_seed_all(13)
    with torch.random.fork_rng(devices=[1], device_type=DEV):
        draw(device="flagos:0")
        draw(device="flagos:1")
    assert state_words(flagos.get_rng_state(1)) == (13, 0)
    assert state_words(flagos.get_rng_state(0))[1] > 0, "device 0 was not forked"


def test_fork_rng_disabled(flagos, restore_rng):
    flagos.manual_seed(13)
    with torch.random.fork_rng(devices=[0], enabled=False, device_type=DEV):
        draw()
    assert state_words(flagos.get_rng_state(0))[1] > 0


# ---------------------------------------------------------------------------------------------
# explicit generators
# ---------------------------------------------------------------------------------------------


def test_explicit_generator(flagos, restore_rng):
    g = torch.Generator(DEV)
    assert g.device == torch.device(DEV, flagos.current_device())
    g.manual_seed(42)
    assert g.initial_seed() == 42 and state_words(g.get_state()) == (42, 0)

    flagos.manual_seed(1)
    default_before = flagos.get_rng_state()
    a = draw(generator=g)
    assert torch.equal(flagos.get_rng_state(), default_before), "g must not use the default"
    assert g.get_offset() > 0

    g.manual_seed(42)
    assert torch.equal(draw(generator=g), a)
    # A fresh generator and the default generator seeded alike give the same stream.
    flagos.manual_seed(42)
    assert torch.equal(draw(), a)


def test_explicit_generator_on_each_device(flagos, two_devices, restore_rng):
    g0 = torch.Generator(two_devices[0]).manual_seed(3)
    g1 = torch.Generator(two_devices[1]).manual_seed(3)
    assert g1.device == two_devices[1]
    x0 = torch.randn(50, device=two_devices[0], generator=g0)
    x1 = torch.randn(50, device=two_devices[1], generator=g1)
    assert x1.device == two_devices[1]
    assert torch.equal(x0.cpu(), x1.cpu())
    assert g0.get_offset() == g1.get_offset() > 0


@pytest.mark.parametrize(
    "producer",
    ["rand", "randn", "bernoulli_", "bernoulli_p", "multinomial", "randint", "randperm", "normal"],
)
def test_explicit_generator_reproduces(producer, flagos, restore_rng):
    def make(g):
        if producer == "rand":
            return torch.rand(100, device=DEV, generator=g)
        if producer == "randn":
            return torch.randn(100, device=DEV, generator=g)
        if producer == "bernoulli_":
            return torch.empty(100, device=DEV).bernoulli_(0.5, generator=g)
        if producer == "bernoulli_p":
            return torch.bernoulli(torch.full((100,), 0.5, device=DEV), generator=g)
        if producer == "multinomial":
            return torch.multinomial(torch.ones(50, device=DEV), 20, generator=g)
        if producer == "randint":
            return torch.randint(0, 10**6, (100,), device=DEV, generator=g)
        if producer == "randperm":
            return torch.randperm(100, device=DEV, generator=g)
        return torch.normal(0.0, 1.0, (100,), device=DEV, generator=g)

    flagos.manual_seed(1)
    default_before = flagos.get_rng_state()
    g = torch.Generator(DEV).manual_seed(123)
    a = make(g).cpu()
    b = make(g).cpu()
    assert not torch.equal(a, b)
    g.manual_seed(123)
    assert torch.equal(make(g).cpu(), a)
    assert torch.equal(make(g).cpu(), b)
    assert torch.equal(flagos.get_rng_state(), default_before)


def test_generator_state_clone_and_pickle(flagos):
    g = torch.Generator(DEV).manual_seed(17)
    draw(generator=g)
    clone = g.clone_state()
    assert clone.device == g.device and torch.equal(clone.get_state(), g.get_state())
    restored = pickle.loads(pickle.dumps(g))
    assert restored.device == g.device
    assert torch.equal(restored.get_state(), g.get_state())
    expected = draw(generator=g)
    assert torch.equal(draw(generator=clone), expected)
    assert torch.equal(draw(generator=restored), expected)


def test_cpu_generator_is_refused_for_flagos_draws(flagos):
    """As CUDA: "Expected a 'cuda' device type for generator but found 'cpu'"."""
    with pytest.raises(RuntimeError, match=r"(?i)generator"):
        torch.rand(8, device=DEV, generator=torch.Generator())


def test_flagos_generator_is_refused_for_cpu_draws(flagos):
    """As CUDA: "Expected a 'cpu' device type for generator but found 'cuda'"."""
    with pytest.raises(RuntimeError, match=r"(?i)generator|device"):
        torch.rand(8, generator=torch.Generator(DEV))


# ---------------------------------------------------------------------------------------------
# devices are independent
# ---------------------------------------------------------------------------------------------


def test_devices_have_independent_streams(flagos, two_devices, restore_rng):
    d0, d1 = (str(d) for d in two_devices)
    flagos.manual_seed_all(50)
    ref1 = [draw(device=d1) for _ in range(3)]

    flagos.manual_seed_all(50)
    state1 = flagos.get_rng_state(1)
    draws0 = [draw(device=d0) for _ in range(5)]  # device 0's draws ...
    assert torch.equal(flagos.get_rng_state(1), state1)  # ... leave device 1 alone
    interleaved = []
    for _ in range(3):
        interleaved.append(draw(device=d1))
        draw(device=d0)
    assert all(torch.equal(a, b) for a, b in zip(interleaved, ref1, strict=True))
    # Seeded alike, the devices give the same sequence (as CUDA devices do).
    assert torch.equal(draws0[0], ref1[0])


def test_current_device_draws_use_that_devices_generator(flagos, two_devices, restore_rng):
    flagos.manual_seed_all(8)
    flagos.set_device(1)
    x = torch.rand(16, device=DEV)
    assert x.device == two_devices[1]
    assert state_words(flagos.get_rng_state(1))[1] > 0
    assert state_words(flagos.get_rng_state(0)) == (8, 0)


# ---------------------------------------------------------------------------------------------
# every route draws the same numbers
# ---------------------------------------------------------------------------------------------

# Every RNG overload the producers in CHILD call on flagos.
RNG_OPS = [
    "uniform_",
    "normal_",
    "normal.Tensor_Tensor",
    "normal.Tensor_float",
    "normal.float_Tensor",
    "bernoulli_.float",
    "bernoulli_.Tensor",
    "multinomial",
    "random_",
    "random_.from",
    "random_.to",
    "randperm.generator_out",
    "exponential_",
    "log_normal_",
    "geometric_",
    "cauchy_",
    "poisson",
]

CHILD = """
import sys
import torch
import torch.nn.functional as F
from torch_fl import census

def producers(d, g=None):
    ones = lambda n: torch.ones(n, device=d)
    return {
        "rand": torch.rand(1000, device=d, generator=g),
        "rand_f64": torch.rand(100, device=d, dtype=torch.float64, generator=g),
        "rand_f16": torch.rand(100, device=d, dtype=torch.float16, generator=g),
        "randn": torch.randn(1000, device=d, generator=g),
        "randn_bf16": torch.randn(100, device=d, dtype=torch.bfloat16, generator=g),
        "uniform_": torch.empty(100, device=d).uniform_(-2, 3, generator=g),
        "normal_": torch.empty(100, device=d).normal_(1, 2, generator=g),
        "normal_tt": torch.normal(ones(100) * 0, ones(100), generator=g),
        "normal_tf": torch.normal(ones(100) * 0, 2.0, generator=g),
        "normal_ft": torch.normal(1.0, ones(100), generator=g),
        "bernoulli_p": torch.empty(1000, device=d).bernoulli_(0.3, generator=g),
        "bernoulli_t": torch.bernoulli(ones(1000) * 0.3, generator=g),
        "bernoulli_tt": torch.empty(1000, device=d).bernoulli_(ones(1000) * 0.7, generator=g),
        "multinomial_r": torch.multinomial(
            torch.tensor([0.1, 0.2, 0.7], device=d), 100, replacement=True, generator=g
        ),
        "multinomial_nr": torch.multinomial(ones(40) + 0.5, 20, generator=g),
        "randint": torch.randint(0, 1000, (100,), device=d, generator=g),
        "randperm": torch.randperm(64, device=d, generator=g),
        "random_": torch.empty(100, device=d).random_(generator=g),
        "random_to": torch.empty(100, device=d).random_(7, generator=g),
        "exponential_": torch.empty(100, device=d).exponential_(generator=g),
        "log_normal_": torch.empty(100, device=d).log_normal_(generator=g),
        "geometric_": torch.empty(100, device=d).geometric_(0.3, generator=g),
        "cauchy_": torch.empty(100, device=d).cauchy_(generator=g),
        "poisson": torch.poisson(ones(100) * 3, generator=g),
    }

with census.counting() as counts:
    torch.manual_seed(1234)
    out = {"default/" + k: v for k, v in producers("flagos").items()}
    out["dropout"] = F.dropout(torch.ones(1000, device="flagos"), 0.4)
    g = torch.Generator("flagos").manual_seed(99)
    out.update({"explicit/" + k: v for k, v in producers("flagos", g).items()})
    out["explicit/state"] = g.get_state()
    if torch.flagos.device_count() > 1:
        out.update({"device1/" + k: v for k, v in producers("flagos:1").items()})
    for i, state in enumerate(torch.flagos.get_rng_state_all()):
        out[f"state/{i}"] = state
torch.save({k: v.cpu() for k, v in out.items()}, sys.argv[1])
torch.save(counts, sys.argv[2])
"""


def _child_env(backend: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FLAGOS_OP_") and k not in ("FLAGOS_BACKEND_CONFIG", "FLAGOS_LOG")
    }
    for op in RNG_OPS:
        env["FLAGOS_OP_" + op.replace(".", "__")] = backend
    return env


@pytest.fixture(scope="module")
def box_backend() -> str:
    from torch_fl import _C

    boxes = sorted(b for b in _C.router_backends() if b.startswith("box:"))
    if not boxes:
        pytest.skip(f"vendor {_vendor_name()!r} has no box:<key> backend to compare with cpu")
    return boxes[0]


def test_same_draws_on_every_route(box_backend, tmp_path, exact_kernels):
    backends = [box_backend, "cpu"]
    procs = {}
    for b in backends:
        tag = b.replace(":", "_")
        paths = (tmp_path / f"{tag}.pt", tmp_path / f"{tag}.counts.pt")
        cmd = [sys.executable, "-c", textwrap.dedent(CHILD), *map(str, paths)]
        proc = subprocess.Popen(
            cmd, env=_child_env(b), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        procs[b] = (proc, paths)
    results, counts = {}, {}
    for b, (proc, paths) in procs.items():
        output, _ = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"child with RNG ops on {b} failed:\n{output}"
        results[b] = torch.load(paths[0])
        counts[b] = torch.load(paths[1])

    # The routes really were taken: every RNG op the child called ran on that backend only.
    for b in backends:
        called = {op: per for op, per in counts[b].items() if op.removeprefix("aten::") in RNG_OPS}
        assert len(called) == len(RNG_OPS), sorted(called)
        wrong = {op: per for op, per in called.items() if set(per) != {b}}
        assert not wrong, f"with FLAGOS_OP_*={b}: {wrong}"

    ref, other = results[box_backend], results["cpu"]
    assert sorted(ref) == sorted(other)
    # The draws are real: not constant, and different streams differ.
    for res in (ref, other):
        assert res["default/rand"].unique().numel() > 900
        assert not torch.equal(res["default/rand"], res["explicit/rand"])
    if not exact_kernels:
        pytest.skip(
            f"{box_backend} draws with its own Philox kernels, the CPU fallback with the CPU "
            "generator: both advance the one flagos seed/offset stream (test_generator_contract), "
            "but identical numbers across them need one algorithm, which only host-kernel vendors have"
        )
    differ = [k for k in ref if not torch.equal(ref[k], other[k])]
    assert not differ, f"{box_backend} and the CPU fallback draw differently for {differ}"


# ---------------------------------------------------------------------------------------------
# distributions (1e6 samples, 5 standard errors)
# ---------------------------------------------------------------------------------------------


def within(value: float, expected: float, stderr: float, what: str) -> None:
    assert abs(value - expected) <= SIGMAS * stderr, (
        f"{what}: {value:.6g}, expected {expected:.6g} +- {SIGMAS} x {stderr:.3g}"
    )


@pytest.fixture
def seeded(flagos, restore_rng):
    flagos.manual_seed(2024)


def _moments(x: torch.Tensor) -> tuple[float, float]:
    x = x.double()
    return x.mean().item(), x.var().item()


@pytest.mark.usefixtures("seeded")
def test_rand_distribution():
    x = torch.rand(N, device=DEV)
    assert x.dtype == torch.float32 and x.device.type == DEV
    x = x.cpu()
    assert x.min().item() >= 0.0 and x.max().item() < 1.0
    mean, var = _moments(x)
    within(mean, 0.5, math.sqrt(1 / 12 / N), "rand mean")
    # var of the sample variance of U(0,1): (mu4 - sigma^4) / n, mu4 = 1/80.
    within(var, 1 / 12, math.sqrt((1 / 80 - 1 / 144) / N), "rand variance")
    # Each tenth of [0, 1) gets a tenth of the samples.
    counts = torch.histc(x, bins=10, min=0, max=1)
    for c in counts.tolist():
        within(c / N, 0.1, math.sqrt(0.1 * 0.9 / N), "rand decile share")


@pytest.mark.usefixtures("seeded")
def test_uniform_bounds():
    x = torch.empty(N, device=DEV).uniform_(-3, 5).cpu()
    assert x.min().item() >= -3 and x.max().item() < 5
    within(x.double().mean().item(), 1.0, 8 / math.sqrt(12 * N), "uniform_(-3, 5) mean")


@pytest.mark.usefixtures("seeded")
def test_randn_distribution():
    x = torch.randn(N, device=DEV).cpu()
    assert torch.isfinite(x).all()
    mean, var = _moments(x)
    within(mean, 0.0, math.sqrt(1 / N), "randn mean")
    within(var, 1.0, math.sqrt(2 / N), "randn variance")
    p1 = 0.6826894921370859  # P(|X| < 1)
    within((x.abs() < 1).double().mean().item(), p1, math.sqrt(p1 * (1 - p1) / N), "P(|x|<1)")
    p3 = 0.0026997960632601866  # P(|X| > 3)
    within((x.abs() > 3).double().mean().item(), p3, math.sqrt(p3 * (1 - p3) / N), "P(|x|>3)")


@pytest.mark.usefixtures("seeded")
def test_normal_with_parameters():
    x = torch.empty(N, device=DEV).normal_(2.0, 3.0).cpu()
    mean, var = _moments(x)
    within(mean, 2.0, 3.0 / math.sqrt(N), "normal_(2, 3) mean")
    within(var, 9.0, 9.0 * math.sqrt(2 / N), "normal_(2, 3) variance")


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.9])
def test_bernoulli_distribution(p):
    stderr = math.sqrt(p * (1 - p) / N)
    x = torch.empty(N, device=DEV).bernoulli_(p).cpu()
    assert set(x.unique().tolist()) <= {0.0, 1.0}
    within(x.double().mean().item(), p, stderr, f"bernoulli_({p}) mean")
    y = torch.bernoulli(torch.full((N,), p, device=DEV)).cpu()
    within(y.double().mean().item(), p, stderr, f"bernoulli(full({p})) mean")


@pytest.mark.usefixtures("seeded")
def test_bernoulli_follows_per_element_probabilities():
    probs = torch.tensor([0.0, 0.25, 1.0, 0.75], device=DEV).repeat(N // 4)
    x = torch.bernoulli(probs).cpu().view(-1, 4)
    assert (x[:, 0] == 0).all() and (x[:, 2] == 1).all()
    n = N // 4
    within(x[:, 1].double().mean().item(), 0.25, math.sqrt(0.25 * 0.75 / n), "p=0.25 column")
    within(x[:, 3].double().mean().item(), 0.75, math.sqrt(0.25 * 0.75 / n), "p=0.75 column")


@pytest.mark.usefixtures("seeded")
def test_multinomial_with_replacement():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    # Unnormalised weights are fine, as on CUDA.
    samples = torch.multinomial((probs * 7).to(DEV), N, replacement=True).cpu()
    assert samples.dtype == torch.int64 and samples.min() >= 0 and samples.max() <= 3
    counts = torch.bincount(samples, minlength=4).double() / N
    for k, p in enumerate(probs.tolist()):
        within(counts[k].item(), p, math.sqrt(p * (1 - p) / N), f"multinomial share of {k}")


@pytest.mark.usefixtures("seeded")
def test_multinomial_without_replacement():
    rows = N // 10
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4], device=DEV).expand(rows, 4)
    samples = torch.multinomial(probs, 2).cpu()
    assert (samples[:, 0] != samples[:, 1]).all(), "without replacement, no repeats in a row"
    first = torch.bincount(samples[:, 0], minlength=4).double() / rows
    for k, p in enumerate([0.1, 0.2, 0.3, 0.4]):
        within(first[k].item(), p, math.sqrt(p * (1 - p) / rows), f"first draw share of {k}")
    # A zero-weight category is never drawn.
    zero = torch.multinomial(torch.tensor([1.0, 0.0, 1.0], device=DEV).expand(rows, 3), 2)
    assert (zero.cpu() != 1).all()


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_distribution(p):
    x = torch.ones(N, device=DEV)
    y = F.dropout(x, p=p, training=True).cpu()
    kept = y != 0
    within(kept.double().mean().item(), 1 - p, math.sqrt(p * (1 - p) / N), f"dropout({p}) kept")
    torch.testing.assert_close(y[kept], torch.full_like(y[kept], 1 / (1 - p)))
    within(y.double().mean().item(), 1.0, math.sqrt(p / (1 - p) / N), f"dropout({p}) mean")
    # Not training: identity, no draws.
    state = torch.flagos.get_rng_state()
    assert torch.equal(F.dropout(x, p=p, training=False).cpu(), x.cpu())
    assert torch.equal(torch.flagos.get_rng_state(), state)


@pytest.mark.usefixtures("seeded")
def test_randint_and_randperm():
    x = torch.randint(0, 10, (N,), device=DEV).cpu()
    assert x.min() == 0 and x.max() == 9
    shares = torch.bincount(x, minlength=10).double() / N
    for k in range(10):
        within(shares[k].item(), 0.1, math.sqrt(0.09 / N), f"randint share of {k}")
    perm = torch.randperm(10_000, device=DEV).cpu()
    assert torch.equal(perm.sort().values, torch.arange(10_000))
    assert not torch.equal(perm, torch.arange(10_000))


@pytest.mark.usefixtures("seeded")
def test_successive_draws_are_uncorrelated():
    """Each call continues the stream: consecutive draws neither repeat nor correlate."""
    a = torch.randn(N, device=DEV).cpu().double()
    b = torch.randn(N, device=DEV).cpu().double()
    assert not torch.equal(a, b)
    corr = ((a - a.mean()) * (b - b.mean())).mean() / (a.std() * b.std())
    within(corr.item(), 0.0, 1 / math.sqrt(N), "correlation of consecutive randn calls")
    # Small draws in a row (a fresh offset each) are not shifted copies of one another.
    small = torch.stack([torch.rand(8, device=DEV).cpu() for _ in range(100)])
    assert small.unique(dim=0).shape[0] == 100
    # Neighbouring seeds give unrelated streams.
    torch.flagos.manual_seed(1)
    s1 = torch.randn(N, device=DEV).cpu().double()
    torch.flagos.manual_seed(2)
    s2 = torch.randn(N, device=DEV).cpu().double()
    corr = ((s1 - s1.mean()) * (s2 - s2.mean())).mean() / (s1.std() * s2.std())
    within(corr.item(), 0.0, 1 / math.sqrt(N), "correlation of seeds 1 and 2")


@pytest.mark.usefixtures("seeded")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_rand_in_other_dtypes(dtype):
    x = torch.rand(N, device=DEV, dtype=dtype)
    assert x.dtype == dtype
    x = x.cpu()
    assert x.min().item() >= 0 and x.max().item() < 1
    within(x.double().mean().item(), 0.5, math.sqrt(1 / 12 / N) + 2.0**-9, f"rand {dtype} mean")
    y = torch.randn(N, device=DEV, dtype=dtype).cpu().double()
    within(y.mean().item(), 0.0, math.sqrt(1 / N) + 2.0**-8, f"randn {dtype} mean")
