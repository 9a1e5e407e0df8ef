"""attnlab.lessons."""
