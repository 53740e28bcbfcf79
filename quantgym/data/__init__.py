"""Generic data readers and the bundled (packaged) real data of quantgym.

- :mod:`quantgym.data.lob`: limit-order-book readers into one book schema (LOBSTER, Databento MBP-10,
  SSE Level-2) and their cleaning steps;
- :mod:`quantgym.data.sse_l2`: the reader of the real SSE Level-2 day of 600519;
- ``quantgym/data/bundled/``: the packaged real data sets (see ``docs/data.md`` for provenance).

A task's own data rules live in its folder, e.g. PortBench's loader, availability and regime rules in
:mod:`quantgym.envs.portbench.data` and :mod:`quantgym.envs.portbench.availability`.
"""
