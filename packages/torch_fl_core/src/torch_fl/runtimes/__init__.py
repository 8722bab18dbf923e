"""Runtime libraries built into torch-fl core (the C ABI side of a vendor)."""
