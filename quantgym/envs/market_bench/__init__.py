"""Market-Bench: backtester synthesis over limit-order-book data (spec shared/spec/market_bench.md)."""
