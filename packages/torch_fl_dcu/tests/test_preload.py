"""The bundle preload on CPU: fabricated DTK device libraries loaded onto the installed torch's
real core, and each way it must refuse, with its message."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import FUSE, HIP_VERSION, pth_installed, run_python, torch_base_version

pytestmark = pytest.mark.dcu

LOADED = """
import ctypes, torch_fl_dcu
st = torch_fl_dcu.state()
print("STATUS", st.status)
print("ORDER", " ".join(p.name for p in st.loaded))
g = ctypes.CDLL(None)
print("GLOBAL", hasattr(g, "tfl_fake_torch_hip_loaded"), hasattr(g, "tfl_fake_c10_hip"))
import torch
print("HIP", torch.version.hip)
"""


def _field(out: str, key: str) -> str:
    for line in out.splitlines():
        if line.startswith(key + " "):
            return line[len(key) + 1 :]
    raise AssertionError(f"no {key} line in:\n{out}")


def test_bundle_loads_global_in_order_before_torch(bundle):
    done = run_python(
        LOADED, bundle, {"FLAGOS_VENDOR": "sim", "FLAGOS_DCU_SKIP_RUNTIME_CHECK": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert _field(done.stdout, "STATUS") == "loaded"
    assert _field(done.stdout, "ORDER").split() == [
        "libc10.so",
        "libtorch_cpu.so",
        "libtorch.so",
        "libtorch_fl_dcu_abi_shim.so",
        "libc10_hip.so",
        "libmagma.so",
        "libtorch_hip.so",
    ]
    # RTLD_GLOBAL: the device libraries' symbols are in the process's global scope.
    assert _field(done.stdout, "GLOBAL") == "True True"
    assert _field(done.stdout, "HIP") == HIP_VERSION


def test_torch_files_untouched(bundle):
    from conftest import torch_dir

    before = {p: p.stat().st_mtime_ns for p in (torch_dir() / "lib").iterdir()}
    version = (torch_dir() / "version.py").read_bytes()
    done = run_python(
        LOADED, bundle, {"FLAGOS_VENDOR": "sim", "FLAGOS_DCU_SKIP_RUNTIME_CHECK": "1"}
    )
    assert done.returncode == 0, done.stderr
    assert {p: p.stat().st_mtime_ns for p in (torch_dir() / "lib").iterdir()} == before
    assert (torch_dir() / "version.py").read_bytes() == version


@pytest.mark.skipif(
    not pth_installed(), reason="torch-fl-dcu is not installed (no torch_fl_dcu.pth)"
)
def test_startup_hook_loads_the_bundle_without_an_explicit_import(bundle):
    code = "import torch, torch_fl_dcu; print('HIP', torch.version.hip); print('STATUS', torch_fl_dcu.state().status)"
    done = run_python(code, bundle, {"FLAGOS_VENDOR": "sim", "FLAGOS_DCU_SKIP_RUNTIME_CHECK": "1"})
    assert done.returncode == 0, done.stderr
    assert _field(done.stdout, "HIP") == HIP_VERSION
    assert _field(done.stdout, "STATUS") == "loaded"


def test_version_mismatch_names_both_versions(bundle):
    from conftest import write_bundle_json

    write_bundle_json(bundle, torch_version="2.9.1", vendor_torch_version="2.9.1+das.test")
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    assert "was built for torch 2.9.1" in done.stderr
    assert f"the installed torch is {torch_base_version()}" in done.stderr
    assert "Install torch==2.9.1" in done.stderr


def test_missing_library_is_named(bundle):
    (bundle / "lib" / "libmagma.so").unlink()
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    assert "the DTK bundle is incomplete: libmagma.so" in done.stderr


def test_wrong_order_of_needed_libraries(bundle):
    from conftest import write_bundle_json

    write_bundle_json(
        bundle,
        libraries=[
            "libtorch_fl_dcu_abi_shim.so",
            "libtorch_hip.so",
            "libmagma.so",
            "libc10_hip.so",
        ],
    )
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    assert "wrong load order" in done.stderr
    assert "libtorch_hip.so is listed before libc10_hip.so, which it needs" in done.stderr


def test_shim_must_load_first(bundle):
    from conftest import write_bundle_json

    write_bundle_json(
        bundle,
        libraries=[
            "libc10_hip.so",
            "libmagma.so",
            "libtorch_fl_dcu_abi_shim.so",
            "libtorch_hip.so",
        ],
    )
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    assert "the ABI shim libtorch_fl_dcu_abi_shim.so must load before libc10_hip.so" in done.stderr


def test_without_the_shim_the_unbound_symbol_names_the_shim(bundle):
    from conftest import write_bundle_json

    # bundle.json without the shim in its load list (but still knowing the shim's symbols).
    write_bundle_json(
        bundle, libraries=["libc10_hip.so", "libmagma.so", "libtorch_hip.so"], shim=None
    )
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    assert f"undefined symbol: {FUSE}" in done.stderr
    assert "is defined by the ABI shim" in done.stderr


def test_unknown_symbol_points_at_the_abi_check(bundle):
    from conftest import write_bundle_json

    write_bundle_json(
        bundle,
        libraries=["libc10_hip.so", "libmagma.so", "libtorch_hip.so"],
        shim=None,
        shim_symbols=[],
    )
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    assert "python -m torch_fl_dcu.tools.abi_check" in done.stderr


def test_other_layout_is_rejected(bundle):
    from conftest import write_bundle_json

    write_bundle_json(bundle, layout="vendor-core")
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    assert "has layout 'vendor-core'" in done.stderr


def test_torch_imported_first_is_rejected(bundle):
    # python -S: no .pth start-up hook, so torch really is imported before the bundle.
    code = "import torch\ntry:\n    import torch_fl_dcu\nexcept ImportError as e:\n    print('ERR', e)\n"
    done = run_python(code, bundle, {"FLAGOS_VENDOR": "sim"}, no_site=True)
    assert done.returncode == 0, done.stderr
    assert "torch was imported before the DTK bundle could load" in done.stdout
    assert "import torch_fl_dcu before torch" in done.stdout


def test_torch_imported_first_fails_import_torch_when_dcu_is_the_vendor(bundle):
    done = run_python("import torch", bundle, {"FLAGOS_VENDOR": "dcu"}, no_site=True)
    # FLAGOS_VENDOR=dcu with the vendor package failing to load: import torch fails, naming why.
    assert done.returncode != 0
    assert "torch was imported before the DTK bundle could load" in done.stderr


def test_runtime_check_requires_cuda_kernels(bundle):
    code = "import torch_fl_dcu, torch"
    done = run_python(code, bundle, {"FLAGOS_VENDOR": "dcu"})
    assert done.returncode != 0
    assert (
        "has no CUDA-key kernel for aten::mm, aten::add.Tensor, aten::_softmax, aten::bmm"
        in done.stderr
    )
    assert "FLAGOS_DCU_SKIP_RUNTIME_CHECK=1" in done.stderr
    skipped = run_python(
        code + "\nprint('HIP', torch.version.hip)",
        bundle,
        {"FLAGOS_VENDOR": "dcu", "FLAGOS_DCU_SKIP_RUNTIME_CHECK": "1"},
    )
    assert skipped.returncode == 0, skipped.stderr
    assert _field(skipped.stdout, "HIP") == HIP_VERSION


def test_runtime_check_passes_when_cuda_kernels_exist():
    code = """
import torch
from torch_fl_dcu import runtime_check
print("BEFORE", ",".join(runtime_check.missing_cuda_kernels()))
lib = torch.library.Library("aten", "IMPL")
for op in ("mm", "add.Tensor", "_softmax", "bmm"):
    lib.impl(op, lambda *a, **k: None, "CUDA")
print("AFTER", ",".join(runtime_check.missing_cuda_kernels()))
runtime_check.verify()
print("OK")
"""
    done = run_python(code, None, {"FLAGOS_VENDOR": "sim"})
    assert done.returncode == 0, done.stderr
    assert _field(done.stdout, "BEFORE") == "aten::mm,aten::add.Tensor,aten::_softmax,aten::bmm"
    assert _field(done.stdout, "AFTER") == ""
    assert "OK" in done.stdout


def test_preload_off_leaves_the_bundle_and_says_so(bundle):
    code = (
        "import ctypes, torch, torch_fl_dcu\n"
        "from torch_fl_dcu.vendor import vendor\n"
        "print('STATUS', torch_fl_dcu.state().status)\n"
        "print('GLOBAL', hasattr(ctypes.CDLL(None), 'tfl_fake_torch_hip_loaded'))\n"
        "print('WHY', vendor.why_absent())\n"
    )
    done = run_python(code, bundle, {"FLAGOS_VENDOR": "sim", "FLAGOS_DCU_PRELOAD": "0"})
    assert done.returncode == 0, done.stderr
    assert _field(done.stdout, "STATUS") == "disabled"
    assert _field(done.stdout, "GLOBAL") == "False"
    assert "FLAGOS_DCU_PRELOAD=0" in _field(done.stdout, "WHY")


def test_dtk_hipified_torch_needs_no_bundle(bundle, tmp_path):
    # A torch whose version.py says hip (DTK's own wheel): the bundle must not be loaded over it.
    fake = tmp_path / "site" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "version.py").write_text("__version__ = '2.10.0+das.dtk'\nhip = '6.3.26113'\n")
    code = "import torch_fl_dcu; print('STATUS', torch_fl_dcu.state().status)"
    path = os.pathsep.join(p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p)
    done = run_python(code, bundle, {"PYTHONPATH": path})
    assert done.returncode == 0, done.stderr
    assert _field(done.stdout, "STATUS") == "native"


def test_bundle_manifest_round_trip(bundle):
    from torch_fl_dcu._preload import read_bundle

    b = read_bundle(bundle)
    assert b is not None and b.hip_version == HIP_VERSION and b.shim_symbols == (FUSE,)
    data = json.loads((bundle / "bundle.json").read_text())
    assert Path(bundle / "lib" / data["shim"]).exists()


# ---------------------------------------------------------------------------------------------
# a malformed bundle.json: every message names the file, the field and the fix
# ---------------------------------------------------------------------------------------------

RESTAGE = "FLAGOS_DCU_PRELOAD=0 python -m torch_fl_dcu.tools.stage"


def _manifest(bundle: Path) -> str:
    return str((bundle / "bundle.json").resolve())


@pytest.mark.skipif(
    not pth_installed(), reason="torch-fl-dcu is not installed (no torch_fl_dcu.pth)"
)
@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('["libmagma.so"]', "is not a JSON object (it holds a list)"),
        ('{"format": 1,', "is not valid JSON"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
    ],
    ids=["list", "syntax", "binary"],
)
def test_malformed_manifest_never_breaks_an_unrelated_interpreter(bundle, text, said):
    path = bundle / "bundle.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    done = run_python("print('OK')", bundle)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "OK"
    assert "Traceback" not in done.stderr and "Error processing line" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # one warning, nothing else
    assert _manifest(bundle) in lines[0] and said in lines[0], lines[0]
    assert RESTAGE in lines[0] and "FLAGOS_DCU_PRELOAD=0" in lines[0]
    # The same interpreter imports torch on another vendor, and the warning is not repeated.
    sim = run_python(
        "import torch; print(torch.flagos.device_count())", bundle, {"FLAGOS_VENDOR": "sim"}
    )
    assert sim.returncode == 0, sim.stderr
    assert sim.stderr.count(_manifest(bundle)) == 1, sim.stderr
    assert "Traceback" not in sim.stderr


@pytest.mark.parametrize(
    ("changes", "field", "said"),
    [
        ({"libraries": "libmagma.so"}, "libraries", "a list of file names, not a string"),
        ({"torch_version": None}, "torch_version", "not null"),
        ({"official_core": [1, 2]}, "official_core", "a list of file names"),
        ({"hip_version": 6.3}, "hip_version", "must be a string"),
        ({"shim": ["x.so"]}, "shim", "a file name or null, not a list"),
    ],
    ids=["libraries-string", "torch_version-null", "official_core-ints", "hip-number", "shim-list"],
)
def test_manifest_field_of_the_wrong_type_is_named(bundle, changes, field, said):
    from conftest import write_bundle_json

    write_bundle_json(bundle, **changes)
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    err = done.stderr.strip().splitlines()[-1]
    assert _manifest(bundle) in err and f"field '{field}'" in err and said in err, err
    assert RESTAGE in err
    assert "incomplete: l" not in done.stderr and "torch==None" not in done.stderr


def test_manifest_without_a_required_field_is_named(bundle):
    data = json.loads((bundle / "bundle.json").read_text())
    del data["hip_version"]
    (bundle / "bundle.json").write_text(json.dumps(data))
    done = run_python("import torch_fl_dcu", bundle)
    assert done.returncode != 0
    err = done.stderr.strip().splitlines()[-1]
    assert _manifest(bundle) in err and "lacks the field 'hip_version'" in err, err
    assert RESTAGE in err


def test_malformed_manifest_fails_import_torch_naming_it(bundle):
    # FLAGOS_VENDOR unset: the dcu vendor package fails to load, and import torch says why.
    (bundle / "bundle.json").write_text("[]")
    done = run_python("import torch", bundle)
    assert done.returncode != 0
    assert "'list' object has no attribute" not in done.stderr
    assert f"{_manifest(bundle)} is not a JSON object" in done.stderr.splitlines()[-1] or any(
        f"{_manifest(bundle)} is not a JSON object" in ln for ln in done.stderr.splitlines()[1:]
    ), done.stderr
