"""The Ascend route table (``routes/ascend.conf``) and its generator (:mod:`.generate`)."""
