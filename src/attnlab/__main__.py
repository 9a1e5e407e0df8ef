"""``python -m attnlab`` runs the ``attnlab`` command (torchrun uses this)."""

from attnlab.cli import main

main()
