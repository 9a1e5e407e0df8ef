"""attnlab.audit."""
