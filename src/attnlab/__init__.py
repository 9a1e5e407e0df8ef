"""attnlab: the Transformer attention stack taken apart, implemented twice and proven correct.

* :mod:`attnlab.ref` -- the readable NumPy reference (float64 by default, forward only).
* :mod:`attnlab.nn` -- fast PyTorch modules that mirror ``ref`` file by file.
* :mod:`attnlab.models` -- whole models (RNN seq2seq, Transformer, GPT, BERT) built from ``nn``.
"""

__version__ = "0.1.0"
