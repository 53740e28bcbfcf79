"""The kernel layers under the audit hook, tested on their own.

The audit hook is the first layer; these tests show that the seccomp filter and the Landlock
rules refuse the same operations even for code that never passes through an audited Python call
(as an agent would after a native-code escape). Each test runs a trusted helper child process
that installs one layer and then tries the forbidden operations.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from quantgym.sandbox import SandboxLimits, _landlock, _seccomp, run_in_sandbox


def _child(code: str, tmp_path) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not _seccomp.supported(), reason="seccomp filter is encoded for Linux x86-64 only")
def test_seccomp_refuses_processes_sockets_writes_and_limit_raising(tmp_path):
    res = _child(
        f"""
        import json, os, resource, socket
        from quantgym.sandbox import _seccomp
        out = {{"installed": _seccomp.install()}}
        def attempt(name, fn):
            try:
                fn()
                out[name] = "allowed"
            except (OSError, ValueError) as exc:
                out[name] = type(exc).__name__
        attempt("fork", os.fork)
        attempt("exec", lambda: os.execv("/bin/true", ["true"]))
        attempt("socket", socket.socket)
        attempt("write", lambda: open({str(tmp_path / 'w.txt')!r}, "w"))
        attempt("unlink", lambda: os.unlink({str(tmp_path)!r} + "/nothing"))
        attempt("kill_init", lambda: os.kill(1, 0))
        attempt("raise_cpu_limit", lambda: resource.setrlimit(resource.RLIMIT_CPU, (10**9, 10**9)))
        attempt("read", lambda: open("/etc/hostname").read())
        print(json.dumps(out))
        """,
        tmp_path,
    )
    assert res["installed"] is True
    for name in ("fork", "exec", "socket", "write", "unlink", "kill_init"):
        assert res[name] == "PermissionError", name
    assert res["raise_cpu_limit"] == "ValueError"  # EPERM from prlimit64, reported by Python as ValueError
    assert res["read"] == "allowed"  # reads are the audit hook's and Landlock's job
    assert not (tmp_path / "w.txt").exists()


@pytest.mark.skipif(_landlock.abi_version() == 0, reason="Landlock is not available on this kernel")
def test_landlock_limits_reads_to_the_allowed_tree(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "ok.txt").write_text("fine")
    (tmp_path / "secret.txt").write_text("secret")
    package_source = str(Path(_landlock.__file__).resolve())
    res = _child(
        f"""
        import json, os, sys, sysconfig
        import numpy
        from quantgym.sandbox import _landlock
        code = [sysconfig.get_paths()["stdlib"], os.path.dirname(numpy.__file__), "/usr/lib", "/lib"]
        maps = [l.split(None, 5)[5].strip() for l in open("/proc/self/maps") if l.count(" ") >= 5 and ".so" in l]
        abi = _landlock.install(code + [{str(allowed)!r}], maps, [])
        out = {{"abi": abi}}
        def attempt(name, fn):
            try:
                fn()
                out[name] = "allowed"
            except OSError as exc:
                out[name] = type(exc).__name__
        fd_read = lambda p: os.close(os.open(p, os.O_RDONLY))
        attempt("allowed_file", lambda: fd_read({str(allowed / 'ok.txt')!r}))
        attempt("secret_file", lambda: fd_read({str(tmp_path / 'secret.txt')!r}))
        attempt("etc_passwd", lambda: fd_read("/etc/passwd"))
        attempt("create", lambda: os.close(os.open({str(allowed / 'new.txt')!r}, os.O_WRONLY | os.O_CREAT)))
        attempt("package_source", lambda: fd_read({package_source!r}))
        print(json.dumps(out))
        """,
        tmp_path,
    )
    assert res["abi"] >= 1
    assert res["allowed_file"] == "allowed"
    assert res["secret_file"] == res["etc_passwd"] == res["create"] == res["package_source"] == "PermissionError"
    assert not (allowed / "new.txt").exists()


def test_sandbox_reports_the_layers_it_installed():
    r = run_in_sandbox("def f():\n    return 1\n", "quantgym.sandbox.runners:call_function", {"function": "f"},
                       SandboxLimits(cpu_seconds=10.0, wall_seconds=60.0))
    assert r.ok
    assert r.details["seccomp"] is _seccomp.supported()
    assert r.details["landlock"] == _landlock.abi_version()
    assert "landlock_error" not in r.details and "seccomp_error" not in r.details


@pytest.mark.skipif(not _seccomp.supported(), reason="seccomp filter is encoded for Linux x86-64 only")
def test_a_refused_seccomp_install_raises_with_the_kernels_reason(tmp_path):
    """The filter forbids stacking another filter: a second install is a real kernel refusal (EPERM)."""
    res = _child(
        """
        import json
        from quantgym.sandbox import _seccomp
        out = {"first": _seccomp.install()}
        try:
            _seccomp.install()
        except OSError as exc:
            out["second"] = [type(exc).__name__, exc.errno, str(exc)]
        print(json.dumps(out))
        """, tmp_path)
    assert res["first"] is True
    name, errno_, text = res["second"]
    assert name == "PermissionError" and errno_ == 1
    assert "seccomp(SECCOMP_SET_MODE_FILTER) refused" in text and "Operation not permitted" in text


def test_a_layer_whose_install_fails_is_recorded_with_its_exception_text(monkeypatch):
    """The child keeps the exception line of a failed layer; the host passes it on in ``details``."""
    from quantgym.sandbox import _child, _host

    def refused_landlock(*a, **k):
        raise PermissionError(1, "landlock_restrict_self refused: Operation not permitted")

    def broken_seccomp():
        raise RuntimeError("libc has no\nsyscall symbol")

    monkeypatch.setattr(_landlock, "install", refused_landlock)
    monkeypatch.setattr(_seccomp, "install", broken_seccomp)
    extra = _child._install_kernel_layers([], [], [], [])
    assert extra == {"landlock": 0, "seccomp": False,
                     "landlock_error": "PermissionError: [Errno 1] landlock_restrict_self refused: "
                                       "Operation not permitted",
                     "seccomp_error": "RuntimeError: libc has no syscall symbol"}
    details = _host._child_details({**extra, "startup_seconds": 0.1, "seccomp_error": "x\n" * 400,
                                    "landlock_error": 5, "pid": 7})
    assert details["seccomp"] is False and details["landlock"] == 0 and details["startup_seconds"] == 0.1
    assert details["seccomp_error"] == ("x " * 250)[:500] and "landlock_error" not in details  # typed, bounded
    assert "pid" not in details  # only the fields the child may report
