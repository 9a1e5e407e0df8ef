"""attnlab.tasks."""
