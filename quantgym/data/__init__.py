"""Generic data readers and the bundled (packaged) real data of quantgym.

- :mod:`quantgym.data.sse_l2`: the reader of the real SSE Level-2 day of 600519 (the exchange's own
  file format; Market-Bench's limit-order-book readers, :mod:`quantgym.envs.market_bench.lob`, use it);
- ``quantgym/data/bundled/``: the packaged real data sets (see ``docs/data.md`` for provenance).

A task's own data rules live in its folder, e.g. PortBench's loader, availability and regime rules in
:mod:`quantgym.envs.portbench.data` and :mod:`quantgym.envs.portbench.availability`.
"""
