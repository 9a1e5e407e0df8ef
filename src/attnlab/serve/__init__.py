"""``attnlab serve``: a local web app that looks inside the loaded models with the user's own text.

- :mod:`~attnlab.serve.views`: every computation, as pure functions of a loaded model and text
  (tokens, attention and head detectors, next token, logit lens, generation, head ablation,
  sentence similarity, audit), each one a call of the library;
- :mod:`~attnlab.serve.app`: the Starlette app (the page, its files, the concept pages, one JSON
  endpoint per view) and its guards (Host and Origin, bounded bodies, JSON errors);
- :mod:`~attnlab.serve.jobs`: model work off the event loop, one worker thread, a bounded queue;
- :mod:`~attnlab.serve.server`: loading the models once, binding the socket, running uvicorn;
- ``static/``: the page, its script and style; the page loads nothing from anywhere else.
"""
