"""attnlab.nn."""
