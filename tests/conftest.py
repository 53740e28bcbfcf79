"""Shared pytest configuration. Tests never touch the network."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
