"""Generic data readers and the bundled (packaged) real data of quantgym.

- :mod:`quantgym.data.sse_l2`: the reader of the real SSE Level-2 day of 600519 (the exchange's own
  file format; Market-Bench's limit-order-book readers, :mod:`quantgym.envs.market_bench.lob`, use it);
- :mod:`quantgym.data.a_share_l2`: readers of the real A-share Level-2 samples (tick orders, tick
  trades, trade tapes, 10-level snapshots; not shipped, the vendor is unknown) into the intraday
  schema of :mod:`~quantgym.data.sse_l2`;
- :mod:`quantgym.data.lobster`: LOBSTER message/order-book files and the book rebuilder (the level-L
  book after every message, forward and backward from one known row, with a mask of what the
  message file cannot know);
- ``quantgym/data/bundled/``: the packaged real data sets (see ``docs/data.md`` for provenance).

A task's own data rules live in its folder, e.g. PortBench's loader, availability and regime rules in
:mod:`quantgym.envs.portbench.data` and :mod:`quantgym.envs.portbench.availability`.
"""
