"""A real multi-node Ray cluster on one machine for the tests: ``ray start --head`` plus worker nodes started
with ``ray start --address=...``, each a separate raylet with its own CPUs, custom resource tag and temp dir.

Each node is one ``ray start --block`` process in a session of its own, so all of a node's processes
(raylet, workers, agents) share its process group: :meth:`LocalRayCluster.kill` SIGKILLs that group, which
is what a machine that loses power does to its raylet. The cluster uses token authentication (a fresh token
in ``env``, which the driver must be given) and health checks of 0.5 s, so a dead node is declared dead in
about 2 s instead of Ray's default of about 15 s. ``ray stop`` is never used: it would stop every Ray on
the machine.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalRayCluster:
    """Head node (no CPUs: it runs no task, as on a cluster whose head only schedules) plus worker nodes."""

    def __init__(self) -> None:
        self.ray = str(Path(sys.executable).with_name("ray"))
        # short: Ray's unix socket paths under the temp dir must fit 107 characters
        self.root = Path(tempfile.mkdtemp(prefix="qgray", dir="/tmp"))
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        self.env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32), RAY_USAGE_STATS_ENABLED="0",
                        RAY_health_check_period_ms="500", RAY_health_check_failure_threshold="4",
                        RAY_health_check_initial_delay_ms="0",
                        # Ray starts task workers at niceness 15; beside the other test worker on the same
                        # cores they would get a few per cent of a core
                        RAY_worker_niceness="0")
        self.nodes: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, args: list[str]) -> None:
        d = self.root / name
        d.mkdir()
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 - kept open by the child
        self.nodes[name] = subprocess.Popen(
            [self.ray, "start", "--block", "--temp-dir", str(d), "--node-ip-address=127.0.0.1", *args],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, workers: dict[str, int], timeout: float = 120.0) -> "LocalRayCluster":
        """Start the head, then one worker node per ``{name: cpus}``; wait until all are in ``ray status``."""
        self._start("head", ["--head", f"--port={self.port}", "--num-cpus=0", "--include-dashboard=false"])
        self.wait_nodes(1, timeout)
        for name, cpus in workers.items():
            self.add_node(name, cpus)
        self.wait_nodes(1 + len(workers), timeout)
        return self

    def add_node(self, name: str, cpus: int) -> None:
        """A worker node with ``cpus`` CPUs and the custom resource ``qg_<name>`` (not waited for)."""
        self._start(name, [f"--address={self.address}", f"--num-cpus={cpus}", f'--resources={{"qg_{name}": 1}}'])

    def status(self) -> str:
        r = subprocess.run([self.ray, "status", f"--address={self.address}"], env=self.env, capture_output=True,
                           text=True, timeout=60)
        return r.stdout if r.returncode == 0 else ""

    def alive_nodes(self) -> int:
        """Active nodes in ``ray status`` (0 while the head is not up)."""
        text = self.status()
        active = text.split("Active:", 1)[-1].split("Pending:", 1)[0] if "Active:" in text else ""
        return len(re.findall(r"^\s+\d+\s+node_", active, flags=re.M))

    def wait_nodes(self, n: int, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for name, p in self.nodes.items():
                if p.poll() is not None:
                    raise RuntimeError(f"ray node {name} exited ({p.returncode}): {self.log(name)[-2000:]}")
            if self.alive_nodes() >= n:
                return
            time.sleep(0.5)
        raise TimeoutError(f"{n} Ray nodes not up after {timeout:.0f} s: {self.status()[-1500:]}")

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")

    def running(self, name: str, task: str) -> bool:
        """Whether node ``name`` runs a task of the remote function ``task`` now: a Ray worker titles its process
        ``ray::<function>`` while it runs one (``ray::IDLE`` between tasks); the worker is the node's if it is
        in the node's session (``start_new_session``) or descends from its ``ray start`` process."""
        root = self.nodes[name].pid
        title = f"ray::{task}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")[0] != title:
                    continue
                pid, hops = int(entry), 0
                while pid > 1 and hops < 32:
                    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                    if int(fields[3]) == root or pid == root:  # session id, or the node's own process
                        return True
                    pid, hops = int(fields[1]), hops + 1
            except (OSError, ValueError, IndexError):
                continue
        return False

    def kill(self, name: str) -> None:
        """SIGKILL every process of node ``name`` (its raylet, its workers and agents)."""
        p = self.nodes[name]
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait(timeout=30)

    def stop(self) -> None:
        for name in reversed(list(self.nodes)):
            try:
                os.killpg(self.nodes[name].pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 10
        for p in self.nodes.values():
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.nodes.values():  # what SIGTERM left (agents that outlive ray start)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.root, ignore_errors=True)
