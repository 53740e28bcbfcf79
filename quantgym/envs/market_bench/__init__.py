"""Market-Bench: backtester synthesis over limit-order-book data (spec: docs/spec/market_bench.md)."""
