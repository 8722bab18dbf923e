"""The route table generator of torch-fl-musa (``python -m torch_fl_musa.routing.generate``)."""
