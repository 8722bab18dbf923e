"""The GCU route table (``routes/gcu.conf``) and its generator (:mod:`.generate`)."""
