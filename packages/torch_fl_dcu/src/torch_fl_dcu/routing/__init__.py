"""The dcu route tables (``routes/dcu.conf``, ``routes/dcu-flaggems.conf``), their inputs (the
FlagGems snapshot (core's ``torch_fl/routing/flaggems_ops.txt``) and the DCU gap set ``gaps.json``) and their generator
(:mod:`.generate`)."""
