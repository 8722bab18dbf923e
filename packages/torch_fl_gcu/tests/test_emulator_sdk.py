"""The TopsRider emulator enforces the SDK contract (docs/gcu.md), tested on the SDK itself
through ctypes: what the runtime and kernels of torch-fl-gcu are built to respect."""

from __future__ import annotations

import ctypes

import pytest

pytestmark = pytest.mark.gcu

SUCCESS, INVALID_VALUE, INVALID_DEVICE_POINTER, INVALID_DEVICE, NOT_READY = 0, 1, 17, 101, 600
D2D = 3


@pytest.fixture(scope="module")
def rt(emu):
    lib = emu.library()
    vp, sz, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    for name, args in {
        "topsSetDevice": [i],
        "topsGetDevice": [ctypes.POINTER(i)],
        "topsMalloc": [ctypes.POINTER(vp), sz],
        "topsFree": [vp],
        "topsMemcpy": [vp, vp, sz, i],
        "topsMemcpyPeer": [vp, i, vp, i, sz],
        "topsMemcpyPeerAsync": [vp, i, vp, i, sz, vp],
        "topsMemset": [vp, i, sz],
        "topsStreamCreate": [ctypes.POINTER(vp)],
        "topsStreamSynchronize": [vp],
        "topsStreamDestroy": [vp],
        "topsGetErrorString": [i],
    }.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_char_p if name == "topsGetErrorString" else i
    return lib


class Cards:
    def __init__(self, rt):
        self.rt = rt
        self.live: list[tuple[int, int]] = []

    def malloc(self, card: int, n: int) -> int:
        assert self.rt.topsSetDevice(card) == SUCCESS
        p = ctypes.c_void_p()
        assert self.rt.topsMalloc(ctypes.byref(p), n) == SUCCESS
        self.live.append((card, p.value))
        return p.value

    def write(self, card: int, ptr: int, data: bytes) -> None:
        self.rt.topsSetDevice(card)
        assert self.rt.topsMemcpy(ptr, data, len(data), 1) == SUCCESS

    def read(self, card: int, ptr: int, n: int) -> bytes:
        self.rt.topsSetDevice(card)
        buf = ctypes.create_string_buffer(n)
        assert self.rt.topsMemcpy(buf, ptr, n, 2) == SUCCESS
        return buf.raw

    def free_all(self) -> None:
        for card, p in self.live:
            self.rt.topsSetDevice(card)
            self.rt.topsFree(p)
        self.rt.topsSetDevice(0)


@pytest.fixture
def cards(rt):
    c = Cards(rt)
    yield c
    c.free_all()


def test_pointers_are_device_scoped(rt, cards):
    p = cards.malloc(1, 64)
    rt.topsSetDevice(0)
    assert rt.topsMemset(p, 0, 64) == INVALID_DEVICE_POINTER  # card 1's pointer, card 0 current
    assert rt.topsFree(p) == INVALID_DEVICE_POINTER
    rt.topsSetDevice(1)
    assert rt.topsMemset(p, 7, 64) == SUCCESS
    assert cards.read(1, p, 4) == b"\x07" * 4


def test_cross_card_memcpy_fails_and_leaves_destination_untouched(rt, cards):
    src, dst = cards.malloc(0, 16), cards.malloc(1, 16)
    cards.write(0, src, b"A" * 16)
    cards.write(1, dst, b"B" * 16)
    for current in (0, 1):
        rt.topsSetDevice(current)
        assert rt.topsMemcpy(dst, src, 16, D2D) == INVALID_DEVICE_POINTER
    assert cards.read(1, dst, 16) == b"B" * 16  # stale, not copied


def test_peer_copy_needs_one_of_the_two_cards_current(emu, rt, cards, monkeypatch):
    src, dst = cards.malloc(0, 8), cards.malloc(1, 8)
    cards.write(0, src, b"peerpeer")
    rt.topsSetDevice(1)
    assert rt.topsMemcpyPeer(dst, 1, src, 0, 8) == SUCCESS
    assert cards.read(1, dst, 8) == b"peerpeer"
    assert rt.topsMemcpyPeer(dst, 1, src, 1, 8) == INVALID_DEVICE_POINTER  # src is not card 1's


def test_async_peer_copy_needs_a_stream_of_the_source_card(rt, cards):
    src, dst = cards.malloc(0, 8), cards.malloc(1, 8)
    cards.write(0, src, b"12345678")
    rt.topsSetDevice(1)
    s1 = ctypes.c_void_p()
    assert rt.topsStreamCreate(ctypes.byref(s1)) == SUCCESS
    # The hardware stalls here; the emulator reports it.
    assert rt.topsMemcpyPeerAsync(dst, 1, src, 0, 8, s1) == INVALID_VALUE
    rt.topsSetDevice(0)
    assert rt.topsMemcpyPeerAsync(dst, 1, src, 0, 8, None) == SUCCESS
    assert cards.read(1, dst, 8) == b"12345678"
    rt.topsSetDevice(1)
    assert rt.topsStreamDestroy(s1) == SUCCESS


def test_fault_injection_hits_the_nth_call(emu, rt, cards):
    p = cards.malloc(0, 8)
    emu.inject_fault("topsMemset", "topsErrorIllegalAddress", nth=2)
    rt.topsSetDevice(0)
    assert rt.topsMemset(p, 1, 8) == SUCCESS
    assert rt.topsMemset(p, 2, 8) == 700
    assert rt.topsMemset(p, 3, 8) == SUCCESS
    assert b"illegal" in rt.topsGetErrorString(700)


def test_second_producer_is_not_ordered_with_sdk_work(emu, rt, cards):
    """The S60 hazard: SDK work submitted behind a queued Triton kernel does not see its output."""
    p = cards.malloc(0, 4)
    cards.write(0, p, b"old!")
    emu.launch_foreign(0, p, b"new!")  # NULL stream: card 0's default stream
    assert emu.pending_foreign(0) == 1
    assert cards.read(0, p, 4) == b"old!"  # topsMemcpy ran ahead of the queued kernel
    assert rt.topsStreamSynchronize(None) == SUCCESS  # draining the stream runs it
    assert emu.pending_foreign(0) == 0
    assert cards.read(0, p, 4) == b"new!"


def test_controls_are_the_emulator_frameworks(emu, rt, cards):
    """The controls every torch-fl emulator shares: faults by SDK function name add up, call
    counters, a reset, the violation record."""
    lib = emu.library()
    lib.topsEmuInjectFault.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.topsEmuReset.restype = None
    lib.topsEmuViolationCount.restype = ctypes.c_uint64
    lib.topsEmuLastViolation.restype = ctypes.c_char_p
    p = cards.malloc(0, 8)
    rt.topsSetDevice(0)
    assert lib.topsEmuInjectFault(b"topsMemset", 1, 700) == 0
    assert lib.topsEmuInjectFault(b"topsMemset", 2, INVALID_VALUE) == 0
    assert [rt.topsMemset(p, 0, 8) for _ in range(3)] == [700, INVALID_VALUE, SUCCESS]
    assert lib.topsEmuInjectFault(b"aclrtMalloc", 1, 700) == -1  # not a TopsRider function
    assert lib.topsEmuInjectFault(b"topsMemset", 0, 700) == -1
    assert lib.topsEmuInjectFault(b"topsMemset", 1, 0) == -1
    assert emu.call_count("topsMemset") >= 3
    lib.topsEmuReset()
    assert emu.call_count("topsMemset") == 0
    assert lib.topsEmuViolationCount() == 0 and lib.topsEmuLastViolation() == b""
