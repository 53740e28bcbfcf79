"""Tests of the RL side (wrappers, vector env, SB3 training): the SB3 ones skip without the ``rl`` extra."""

#: skip reason of a test that needs stable-baselines3 / torch (the ``rl`` extra; docs/rl.md names the CPU torch)
NEEDS_RL = "needs the 'rl' extra (stable-baselines3, torch): pip install -e \".[rl]\""
