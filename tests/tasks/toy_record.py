"""The toy task's record (tests/tasks/toy_task.py holds its code). Like every task record it imports
nothing but :mod:`quantgym.tasks`: records are loaded while Gymnasium registers the env ids."""

from quantgym.tasks import TaskOption, Task

_M = "tests.tasks.toy_task"

TASK = Task(name="toy", title="Toy", envs={"Toy-v0": (f"{_M}:ToyEnv", {})}, bench=_M,
            bench_options=(TaskOption("--bonus", "bonus", "points added to the oracle's score.", kind="str"),),
            eval=f"{_M}:ADAPTER",
            llm=f"{_M}:ToyLLMAgent", report=f"{_M}:report_section",
            baselines=f"{_M}:make_baseline", docs="tests/tasks/toy_task.py")
