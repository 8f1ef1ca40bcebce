"""What a model reads: how a search finds and ranks, answers shaped for a glance or the budget,
paging and cursors.

- :mod:`.query`: the one search rule (the whole query first, then words) and the entry point,
  :func:`.query.search` (graph in memory -> the answer of facts);
- :mod:`.answer`: a search's answer made of the facts that answer it (ranked observations,
  partial entities marked, semantic candidates fused when a model is installed);
- :mod:`.paging`: the answer budget, pages (of entities, and of facts for searches), cursors.

The rules are documented once, in those modules' docstrings, and in docs/search.md.
"""
