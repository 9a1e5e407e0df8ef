"""attnlab.viz."""
