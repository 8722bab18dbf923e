"""tools/pytorch_suites.py: PyTorch-style device-generic test files run on flagos and on CPU, and
each failure sorted by whether its CPU counterpart fails too, is explained, or is flagos's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.tooling

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "pytorch_suites.py"
sys.path.insert(0, str(TOOL.parent))
import pytorch_suites  # noqa: E402

FLAGOS = pytorch_suites.FLAGOS_NAMES

# A device-generic file as PyTorch writes them: one class, instantiated per device type.
SUITE = textwrap.dedent(
    """
    import torch
    from torch.testing._internal.common_device_type import (
        dtypes, instantiate_device_type_tests, onlyCPU)
    from torch.testing._internal.common_utils import TestCase, run_tests

    class TestProbe(TestCase):
        def test_same(self, device):
            self.assertEqual(torch.arange(4, device=device).sum().item(), 6)

        @dtypes(torch.float32, torch.int64)
        def test_differs(self, device, dtype):
            # Stands for a flagos bug: wrong on flagos only.
            x = torch.ones(3, dtype=dtype, device=device)
            self.assertEqual(x.sum().item(), 3 if device == "cpu" else 4)

        def test_broken_everywhere(self, device):
            self.assertEqual(1, 2)

        @onlyCPU
        def test_cpu_only(self, device):
            pass

        def test_native_side_runs_without_torch_fl(self, device):
            import sys
            self.assertEqual("torch_fl" in sys.modules, device.startswith("flagos"))

    instantiate_device_type_tests(TestProbe, globals())

    if __name__ == "__main__":
        run_tests()
    """
)


def test_device_names_come_out_of_class_and_test_names() -> None:
    d = pytorch_suites.device_free
    assert d("t.py::TestIndexingFLAGOS::test_cpu_indices_flagos", FLAGOS) == (
        "t.py::TestIndexing::test_cpu_indices"
    )
    assert d("t.py::TestIndexingPRIVATEUSE1::test_cpu_indices_flagos", FLAGOS) == (
        "t.py::TestIndexing::test_cpu_indices"
    )
    assert d("t.py::TestIndexingCPU::test_cpu_indices_cpu", ("cpu",)) == (
        "t.py::TestIndexing::test_cpu_indices"
    )
    assert d("t.py::TestAnyCUDA::test_to_SparseCSR_int64_cuda_uint8", ("cuda",)) == (
        "t.py::TestAny::test_to_SparseCSR_int64_uint8"
    )
    # A class that is not per device keeps its tests' names.
    assert (
        d("t.py::TestOneOff::test_cuda_from_cpu", ("cpu",))
        == "t.py::TestOneOff::test_cuda_from_cpu"
    )


def test_explanations_match_a_test_or_its_named_dtypes_only() -> None:
    entries = [
        {"test": "f.py::T::test_a", "reason": "all dtypes"},
        {"test": "f.py::T::test_b", "dtypes": ["bfloat16"], "reason": "one dtype"},
    ]
    found = pytorch_suites.explanation
    assert found("f.py::T::test_a", entries)["reason"] == "all dtypes"
    assert found("f.py::T::test_a_float32", entries)["reason"] == "all dtypes"
    assert found("f.py::T::test_b_bfloat16", entries)["reason"] == "one dtype"
    assert found("f.py::T::test_b_float32", entries) is None
    assert found("f.py::T::test_ab", entries) is None
    # Another test whose name extends the entry's is not a variant of it.
    assert found("f.py::T::test_a_big", entries) is None
    assert found("f.py::T::test_a_int64_float16", entries)["reason"] == "all dtypes"


def test_parametrized_explanations_match_any_variant_failing_their_way() -> None:
    entries = [
        {
            "test": "f.py::T::test_c",
            "parametrized": True,
            "message": "Overrideable",
            "reason": "an enum",
        }
    ]
    found = pytorch_suites.explanation
    assert found("f.py::T::test_c_slow2d_has_bias_True", entries, "x: Overrideable != Slow2d")
    # The same test failing another way is not explained; passing, it is named (to be stale).
    assert found("f.py::T::test_c_slow2d_has_bias_True", entries, "mismatched values") is None
    assert found("f.py::T::test_c_slow2d", entries, None)["reason"] == "an enum"
    assert found("f.py::T::test_cd", entries, "Overrideable") is None


def test_an_entry_is_stale_only_when_none_of_its_tests_fails_its_way() -> None:
    ps = pytorch_suites
    entries = [{"test": "f.py::T::test_c", "parametrized": True, "message": "enum", "reason": "r"}]

    def run(*outcomes):
        flagos = ps.Side("flagos", {f"f.py::TFLAGOS::test_c_{i}_flagos": o for i, o in outcomes})
        native = ps.Side(
            "cpu", {f"f.py::TCPU::test_c_{i}_cpu": ps.Outcome("passed") for i, _ in outcomes}
        )
        return ps.compare(flagos, native, entries)

    mixed = run(("a", ps.Outcome("failed", "enum differs")), ("b", ps.Outcome("passed")))
    assert len(mixed["explained"]) == 1 and mixed["explained_passing"] == []
    assert run(("a", ps.Outcome("passed")))["explained_passing"][0]["entry"] == "f.py::T::test_c"
    other_way = run(("a", ps.Outcome("failed", "values differ")))
    assert len(other_way["flagos_only"]) == 1 and other_way["explained"] == []


def test_deselection_is_per_side_and_per_vendor() -> None:
    entries = pytorch_suites.explained_for("cuda")
    assert any(e.get("deselect") for e in entries)
    k = pytorch_suites.deselection("flagos", entries, "sort")
    assert k[0] == "-k" and k[1].startswith("(sort) and not ")
    assert "test_trivial_fancy_out_of_bounds_flagos" in k[1]
    assert not any(e.get("deselect") for e in pytorch_suites.explained_for("sim"))
    assert pytorch_suites.deselection("cpu", pytorch_suites.explained_for("sim"), None) == []


def test_explained_entries_name_a_test_and_a_reason() -> None:
    data = json.loads(pytorch_suites.EXPLAINED.read_text())
    for entry in data["explained"]:
        assert entry["test"].count("::") == 2 and entry["reason"], entry


@pytest.mark.timeout(300)
def test_a_flagos_only_failure_is_found_and_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(SUITE)
    out = tmp_path / "result.json"
    env = {**os.environ, "FLAGOS_VENDOR": "sim"}
    proc = subprocess.run(
        [sys.executable, str(TOOL), "--tests", str(tmp_path), "test_probe.py", "--workers", "1"]
        + ["--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    only = sorted(r["test"].rsplit("::", 1)[-1] for r in result["flagos_only"])
    assert only == ["test_differs_flagos_float32", "test_differs_flagos_int64"], result
    assert [r["test"].rsplit("::", 1)[-1] for r in result["both_fail"]] == [
        "test_broken_everywhere_flagos"
    ]
    assert result["counts"]["flagos"] == {"passed": 2, "failed": 3, "skipped": 1}
    # torch-fl is not loaded on the native side (it would break CUDA's autograd there).
    assert result["counts"]["cpu"]["passed"] == 5 and not result["native_only"], result
    assert "flagos-only failures: 2" in proc.stdout
