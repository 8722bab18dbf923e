"""Differential fuzzer: random short PyTorch programs run on CPU tensors and on flagos tensors.

    FLAGOS_VENDOR=sim python tools/differential_fuzz.py --seed 0 --count 2000

The fuzzer is the package ``tools/fuzz`` (its docstring says what a program is and how the two
runs are compared); this script is its command line.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz.cli import main  # noqa: E402

if __name__ == "__main__":
    main()
