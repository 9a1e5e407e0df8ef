"""attnlab.training."""
