"""Measurement engines: they run kernels and write records; printing is elsewhere."""
