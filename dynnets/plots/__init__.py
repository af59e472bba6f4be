"""Plots: matplotlib figures of the runs and experiments (:mod:`.figures`)."""
