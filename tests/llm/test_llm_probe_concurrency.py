"""Calls that waited while the first call probed the endpoint go out together once it is known (``-j N``
keeps N calls in flight); before that, calls are serialised. No timing is asserted: the calls meet at a
barrier, which only concurrent calls can pass."""

from __future__ import annotations

import threading

from quantgym.agents.llm.client import CallResult, ChatEngine, LLMConfig

WAITERS = 3


class _CountingLock:
    """The engine's probe lock, counting the threads that came to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.came = threading.Condition()
        self.n = 0

    def __enter__(self):
        with self.came:
            self.n += 1
            self.came.notify_all()
        self._lock.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()


class _Engine(ChatEngine):
    """A ChatEngine whose HTTP send is replaced: the first call (the probe) is answered once every other thread
    waits for the probe lock; the later calls meet at a barrier of ``WAITERS`` parties."""

    def __init__(self) -> None:
        super().__init__(LLMConfig(model="m", base_url="http://127.0.0.1:9/v1"), api_key="k", transcript=None)
        self._call_lock = _CountingLock()
        self.barrier = threading.Barrier(WAITERS)
        self.sent = 0
        self.met: list[bool] = []
        self.guard = threading.Lock()

    def _send(self, req: dict, h: str):
        with self.guard:
            self.sent += 1
            first = self.sent == 1
        if first:  # the probe: answered once the other threads are waiting for it
            lock = self._call_lock
            with lock.came:
                lock.came.wait_for(lambda: lock.n == WAITERS + 1, timeout=10)
        else:
            try:
                self.barrier.wait(timeout=10)
                met = True
            except threading.BrokenBarrierError:
                met = False
            with self.guard:
                self.met.append(met)
        rec = {"ok": True, "text": "x", "usage": {}, "response": None, "tries": [{"status": 200}], "latency_s": 0.0}
        return CallResult(ok=True, text="x"), rec


def test_calls_waiting_for_the_probe_are_sent_together_once_it_answers():
    eng = _Engine()
    results = []

    def call(i: int) -> None:
        results.append(eng.chat([{"role": "user", "content": f"q{i}"}]))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(WAITERS + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == WAITERS + 1 and all(r.ok for r in results)
    assert eng.met == [True] * WAITERS  # serialised calls would each have waited alone at the barrier
