"""What every benchmark prints about the machine it ran on."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def build_id() -> str:
    """The source tree's commit (and whether it was dirty), for the record."""
    import subprocess

    try:
        return subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=os.path.dirname(os.path.abspath(__file__)),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def load_avg() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def record_end(env: dict, elapsed: float, note: str = "") -> None:
    """Prints the load average at the end of a run (``note`` qualifies it) and records it in
    ``env`` as ``loadavg_end``: the figures' context, in the output and the JSON alike."""
    env["loadavg_end"] = load1 = load_avg()
    print(f"load average at end: {load1:.2f}{note}; took {elapsed:.1f} s")


def describe(load0: float) -> dict:
    """The machine and software a run measured, printed and returned for the JSON record."""
    import sys

    import torch

    try:
        import torch_fl
    except ImportError:
        # An A/B parent over build sites, with no build installed: the children import theirs.
        torch_fl = None
    env = {
        "torch": torch.__version__,
        "torch_fl": torch_fl.__version__ if torch_fl else "(per build site)",
        "vendor": str(torch_fl.vendor().name) if torch_fl else os.environ.get("FLAGOS_VENDOR", "?"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "source": build_id(),
        "loadavg_start": load0,
    }
    print(
        f"torch {env['torch']}, torch_fl {env['torch_fl']}, vendor {env['vendor']}, "
        f"{env['cpu']} ({env['cores']} cores, {env['threads']} torch threads)"
    )
    print(f"load average at start: {load0:.2f}")
    if load0 > 1.5:
        print("WARNING: the machine is busy (load > 1.5); figures will be noisy", file=sys.stderr)
    return env
