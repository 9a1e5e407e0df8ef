"""The report application (``attnlab demo``): one self-contained HTML page that shows the rest of
attnlab, so it sits above all it shows (lessons, practice, audits, experiments, the explorer).

- :mod:`~attnlab.report.tour`: the whole tour built section by section, in two lanes side by side.
- :mod:`~attnlab.report.language_model`: its language-model section (a GPT trained on Shakespeare
  and the decoding, induction and faithfulness experiments on it).
- :mod:`~attnlab.report.page`: the page itself: sections, tables, inlined images, links to the
  concept pages.
"""
