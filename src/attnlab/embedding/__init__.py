"""Sentence embeddings of a whole file, streamed (``attnlab embed --output``).

- :mod:`~attnlab.embedding.stream`: the file read in chunks, embedded part by part, the output
  assembled (bounded memory; resumable after an interruption).
- :mod:`~attnlab.embedding.parts`: the ``OUT.parts/`` folder: its lock, its manifest and its parts,
  each checked by its sha256.
"""
