"""Shared fixtures for the contract suites every vendor runs unchanged.

The vendor under test is chosen by torch-fl itself (``FLAGOS_VENDOR``; CI uses the built-in ``sim``
vendor with two virtual host-memory devices). Tests skip only through the fixtures below, each with a
reason that names the vendor: no device at all (``flagos``), fewer than two devices
(``two_devices``), a capability the runtime does not declare (``require_cap``), or no fault
injection declared by the vendor (``simctl``, ``Vendor.fault_injection``). Every skip and every
vendor-dependent branch is decided by what the runtime or the vendor declares, never by the
vendor's name (which only appears in the reasons). Tolerances come from
:mod:`torch_fl.conformance.tolerances`, shared with operator conformance.
"""

from __future__ import annotations

import os

import _status_record
import pytest
import torch

MARKERS = {
    "device": "devices, current device, streams and events of the flagos device",
    "memory": "caching allocator statistics and memory info",
    "copy": "copies in every direction, dtype casts, strides, conj/neg bits",
    "views": "view operators aliasing flagos storage, resize_, set_",
    "factories": "factory functions honouring explicit and current device indices",
    "multidevice": "needs at least two flagos devices",
    "errors": "bad input raises the exception CUDA would raise and leaves the process usable",
    "threads": "concurrent use from several threads",
    "overlap": "arguments sharing memory: overlap errors and results exactly as on CPU",
    "lifecycle": "fork, runtime faults on autograd threads and at exit, pinned-free failures",
    "serialization": "torch.save / torch.load of flagos tensors",
    "pinned": "pinned host memory and DataLoader pinning",
    "training": "autograd training step against CPU",
    "sim_only": "needs the runtime's fault injection (Vendor.fault_injection; sim declares it)",
    "distributed": "torch.distributed on flagos: backend, collectives, DDP, FSDP2, DCP",
    "multiprocessing": "flagos tensors through torch.multiprocessing queues, pipes, Process arguments",
}


def pytest_configure(config):
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    # docs/contracts.md's status row of this vendor and machine (FLAGOS_TEST_CONTRACTS_DIR).
    _status_record.register(config)


def pytest_collection_modifyitems(config, items):
    # Tests that take the two_devices fixture are multi-device tests whatever their module says.
    for item in items:
        if "two_devices" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.multidevice)


# ---------------------------------------------------------------------------------------------
# dtypes and tolerances
# ---------------------------------------------------------------------------------------------


def _dtypes(*names: str) -> list[torch.dtype]:
    return [getattr(torch, n) for n in names if isinstance(getattr(torch, n, None), torch.dtype)]


INT_DTYPES = _dtypes("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
FLOAT_DTYPES = _dtypes("float16", "bfloat16", "float32", "float64")
COMPLEX_DTYPES = _dtypes("complex64", "complex128")
FLOAT8_DTYPES = _dtypes(
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu"
)


def _cpu_can_copy(dtype: torch.dtype) -> bool:
    """The reference for "supported": CPU can make, copy (strided) and read back this dtype."""
    try:
        x = torch.zeros(2, 3, dtype=dtype)
        torch.empty(3, 2, dtype=dtype).copy_(x.t())
        x[0, 0].item()
        return True
    except (RuntimeError, TypeError):
        return False


# Every dtype CPU supports for copies: the dtype list the copy, item and serialization contracts use.
COPY_DTYPES = [
    d
    for d in [torch.bool, *INT_DTYPES, *FLOAT_DTYPES, *COMPLEX_DTYPES, *FLOAT8_DTYPES]
    if _cpu_can_copy(d)
]


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """rtol/atol for a result computed (not copied) on flagos, compared against CPU: the one table,
    :func:`torch_fl.conformance.tolerances.for_dtype` (PyTorch's defaults; integers and bool exact).
    Copies are always compared bit-exactly instead."""
    from torch_fl.conformance import tolerances

    return tolerances.for_dtype(dtype).kwargs()


@pytest.fixture(params=COPY_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def copy_dtype(request) -> torch.dtype:
    return request.param


def _cast_pairs() -> list[tuple[torch.dtype, torch.dtype]]:
    """(source, destination) dtypes for casting copies: every copy dtype to and from float32, plus
    pairs that matter in practice. Complex -> real is left out (it drops the imaginary part)."""
    pairs = []
    for d in COPY_DTYPES:
        pairs += [(d, torch.float32), (torch.float32, d)]
    pairs += [
        (torch.float16, torch.bfloat16),
        (torch.bfloat16, torch.float16),
        (torch.int64, torch.int32),
        (torch.int32, torch.int64),
        (torch.uint8, torch.bool),
        (torch.bool, torch.float16),
        (torch.int8, torch.uint8),
        (torch.float64, torch.complex64),
        (torch.complex64, torch.complex128),
        (torch.complex128, torch.complex64),
        (torch.int16, torch.float64),
    ]
    pairs = [(s, d) for s, d in pairs if s != d and not (s.is_complex and not d.is_complex)]
    return list(dict.fromkeys(pairs))


CAST_PAIRS = _cast_pairs()


def _dtype_id(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def pytest_generate_tests(metafunc):
    if "cast_pair" in metafunc.fixturenames:
        metafunc.parametrize(
            "cast_pair", CAST_PAIRS, ids=[f"{_dtype_id(s)}-{_dtype_id(d)}" for s, d in CAST_PAIRS]
        )


@pytest.fixture
def tol():
    """tol(dtype) -> {"rtol": ..., "atol": ...} for torch.testing.assert_close."""
    return tolerance


# ---------------------------------------------------------------------------------------------
# data helpers
# ---------------------------------------------------------------------------------------------


def random_tensor(shape, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """A CPU tensor whose bytes are random (NaN payloads, denormals, infinities included).

    bool only gets 0/1 bytes: other byte values are not valid bools.
    """
    g = torch.Generator().manual_seed(seed)
    numel = 1
    for s in shape:
        numel *= s
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=g, dtype=torch.uint8).bool()
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (numel * itemsize,), generator=g, dtype=torch.uint8)
    return raw.view(dtype).reshape(shape)


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of t's elements in logical (row-major) order, as a CPU uint8 tensor."""
    t = t.detach().cpu().resolve_conj().resolve_neg()
    return t.contiguous().reshape(-1).view(torch.uint8)


def assert_bit_equal(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    a, e = raw_bytes(actual), raw_bytes(expected)
    if not torch.equal(a, e):
        diff = (a != e).nonzero().reshape(-1)
        raise AssertionError(
            f"{diff.numel()} of {a.numel()} bytes differ (first at byte {int(diff[0])}: "
            f"{int(a[diff[0]])} != {int(e[diff[0]])}) for dtype {actual.dtype}"
        )


@pytest.fixture
def bits():
    """Helpers for bit-exact comparisons: bits.random(shape, dtype, seed), bits.equal(a, e)."""

    class _Bits:
        random = staticmethod(random_tensor)
        raw = staticmethod(raw_bytes)
        equal = staticmethod(assert_bit_equal)

    return _Bits


# ---------------------------------------------------------------------------------------------
# device fixtures
# ---------------------------------------------------------------------------------------------


def _vendor_name() -> str:
    try:
        import torch_fl

        return str(torch_fl.vendor().name)
    except Exception as exc:  # the reason string must never be what fails
        return f"<unknown vendor: {type(exc).__name__}: {exc}>"


def _runtime_name() -> str:
    import torch_fl

    return str(torch_fl._C.runtime_name())


@pytest.fixture(scope="session")
def _flagos_session():
    # Importing torch is meant to be enough (backend autoload); import torch_fl explicitly so an
    # install without the entry point still fails loudly here rather than as a skip.
    import torch_fl  # noqa: F401

    mod = getattr(torch, "flagos", None)
    assert mod is not None, "torch.flagos is missing after importing torch_fl"
    if not mod.is_available():
        pytest.skip(
            f"no flagos device: vendor {_vendor_name()!r} reports is_available() False "
            f"(FLAGOS_VENDOR={os.environ.get('FLAGOS_VENDOR', '<unset>')})"
        )
    return mod


def _stream_key(s) -> tuple:
    return (s.device_type, s.device_index, s.stream_id)


@pytest.fixture
def flagos(_flagos_session):
    """torch.flagos, after checking a device exists. Restores the current device and every
    device's current stream after the test so tests cannot leak state into each other."""
    mod = _flagos_session
    n = mod.device_count()
    device = mod.current_device()
    streams = [mod.current_stream(i) for i in range(n)]
    yield mod
    for i, s in enumerate(streams):
        if _stream_key(mod.current_stream(i)) != _stream_key(s):
            mod.set_stream(s)
    mod.set_device(device)


@pytest.fixture
def two_devices(flagos):
    n = flagos.device_count()
    if n < 2:
        pytest.skip(f"needs 2 flagos devices; vendor {_vendor_name()!r} has {n}")
    return (torch.device("flagos", 0), torch.device("flagos", 1))


@pytest.fixture
def box_backend(_flagos_session) -> str:
    """A box:<key> backend of this vendor (box:cpu on sim, box:cuda on cuda); skips when its route
    table has none."""
    from torch_fl import _C

    boxes = sorted(b for b in _C.router_backends() if b.startswith("box:"))
    if not boxes:
        pytest.skip(f"vendor {_vendor_name()!r} has no box:<key> backend")
    return "box:cpu" if "box:cpu" in boxes else boxes[0]


@pytest.fixture(scope="session")
def vendor_caps(_flagos_session) -> frozenset[str]:
    """Capability names the active runtime declares, e.g. {"PEER_COPY", "EVENT_TIMING"}."""
    import torch_fl

    caps = torch_fl._C.runtime_capabilities()
    if isinstance(caps, int):
        names = set()
        for attr in dir(torch_fl._C):
            if attr.startswith("CAP_"):
                bit = getattr(torch_fl._C, attr)
                if isinstance(bit, int) and bit and caps & bit == bit:
                    names.add(attr[len("CAP_") :])
        return frozenset(names)
    return frozenset(str(c).upper().removeprefix("CAP_").removeprefix("TFL_CAP_") for c in caps)


@pytest.fixture(scope="session")
def exact_kernels(_flagos_session) -> bool:
    """Whether the vendor's kernels are the CPU's own on host memory (sim's box:cpu), so results
    are bit-identical to CPU ones: :func:`torch_fl.testing.cpu_kernels`, decided by
    CAP_HOST_ADDRESSABLE_MEMORY and the backends the route table names. Other vendors run their own
    kernels (CUDA, FlagGems, native SDK kernels), whose rounding differs from the CPU's by a few
    ulps: contracts that demand bit equality with CPU hold there within the per-dtype tolerance
    instead."""
    from torch_fl import testing

    return testing.cpu_kernels()


@pytest.fixture(scope="session", autouse=True)
def _full_fp32_precision():
    """Contracts compare fp32 results with the CPU's: no TF32 in matmuls/convolutions (the cuda
    vendor's box:cuda kernels are torch's CUDA kernels, which honour these switches)."""
    cudnn = torch.backends.cudnn
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    # Through flags(): torch's testing helpers may have frozen cudnn's global switches.
    with cudnn.flags(
        enabled=cudnn.enabled,
        benchmark=cudnn.benchmark,
        deterministic=cudnn.deterministic,
        allow_tf32=False,
    ):
        yield
    torch.backends.cuda.matmul.allow_tf32 = saved


def codegen_skip_reason() -> str | None:
    """Why Inductor generates no kernels for flagos on this vendor, or None where it does: a
    vendor with no compile scheduling (device memory the host cannot read, no Triton target)
    runs compiled graphs on its routed kernels instead (docs/compile.md)."""
    import torch_fl.compile

    if torch_fl.compile.scheduling() is None:
        return (
            f"vendor {_vendor_name()!r} declares no compile_scheduling and its memory is not "
            "host-addressable: Inductor generates no kernels there, compiled graphs run on its "
            "routed kernels (docs/compile.md)"
        )
    return None


@pytest.fixture
def vendor_codegen(flagos) -> None:
    """Skips, saying why, where Inductor generates no code for the vendor (tests of the generated
    code itself; compiled models run on every vendor)."""
    reason = codegen_skip_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def require_cap(vendor_caps):
    """require_cap("EVENT_TIMING") skips, naming the vendor and runtime, unless it is declared."""

    def _require(name: str) -> None:
        if name not in vendor_caps:
            pytest.skip(
                f"vendor {_vendor_name()!r} (runtime {_runtime_name()!r}) does not declare "
                f"CAP_{name}; declared: {sorted(vendor_caps)}"
            )

    return _require


@pytest.fixture
def simctl(flagos):
    """The runtime's fault-injection controls (the module the vendor names in
    ``Vendor.fault_injection``: ``torch_fl.runtimes.sim`` on sim); skips where the vendor declares
    none. Faults left behind by a failing test are cleared afterwards."""
    import importlib

    import torch_fl

    module = getattr(torch_fl.vendor(), "fault_injection", None)
    if not module:
        pytest.skip(
            f"vendor {_vendor_name()!r} (runtime {_runtime_name()!r}) declares no fault injection "
            "(Vendor.fault_injection)"
        )
    controls = importlib.import_module(module)
    controls.clear_faults()
    yield controls
    controls.clear_faults()


def allocated(flagos_mod) -> list[int]:
    """memory_allocated of every device, after a garbage collection and a synchronize (tensors
    an earlier test left in reference cycles would otherwise be freed in the middle of a test that
    compares two snapshots)."""
    import gc

    gc.collect()
    n = flagos_mod.device_count()
    for i in range(n):
        flagos_mod.synchronize(i)
    return [flagos_mod.memory_allocated(i) for i in range(n)]


@pytest.fixture
def mem_snapshot(flagos):
    """mem_snapshot() -> memory_allocated of each device (synchronized first)."""
    return lambda: allocated(flagos)


def _mirrored_device_type() -> str | None:
    """The torch device type whose memory flagos memory is, as the runtime declares it: the
    delegate runtime is named ``delegate:<device type>`` (cuda and dcu: ``delegate:cuda``)."""
    runtime = _runtime_name()
    return runtime.split(":", 1)[1] if runtime.startswith("delegate:") else None


@pytest.fixture
def native_device(flagos) -> str:
    """The device whose answers flagos keeps: the mirrored backend's where flagos memory is its
    memory (the cuda vendor answers as CUDA: its kernels are CUDA's), else the CPU."""
    mirrored = _mirrored_device_type()
    return mirrored if mirrored and getattr(torch, mirrored).is_available() else "cpu"


@pytest.fixture
def flagos_owns_pinned_memory(flagos):
    """Skip where another accelerator in the process owns `pin_memory=True`.

    PyTorch resolves the device of `pin_memory=True` / `is_pinned()` itself; with CUDA present
    beside a vendor whose memory is not CUDA's (sim on a GPU machine) torch 2.11 pins factory
    tensors with CUDA's allocator, so those tensors are not flagos-pinned. Where the runtime mirrors
    CUDA (the delegate runtime), CUDA's pinned memory is flagos's. Pinned copies are still tested
    through `Tensor.pin_memory()` in test_pinned.py.
    """
    acc = getattr(torch, "accelerator", None)
    current = acc.current_accelerator() if acc is not None else None
    other = None
    if current is not None and current.type != "flagos":
        other = current.type
    elif torch.cuda.is_available() and _mirrored_device_type() != "cuda":
        other = "cuda"
    if other is not None:
        pytest.skip(
            f"{other} is present in this process and owns pin_memory=True (vendor "
            f"{_vendor_name()!r}, runtime {_runtime_name()!r})"
        )
