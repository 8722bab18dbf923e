"""The cuda route tables (``routes/cuda.conf``, ``routes/cuda-flaggems.conf``), the FlagGems gap set
they imply (``gaps.json``) and their generator (:mod:`.generate`)."""
