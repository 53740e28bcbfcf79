"""Paper flags that change the market data are applied or refused on the user's own data, never silently
ignored: with data= that was not built with them, PortBenchEnv raises one clear
ValueError; data built with build_paper_data / load_paper_data under the same flags is accepted."""

import gymnasium as gym
import pytest

import quantgym  # noqa: F401
from quantgym.envs.portbench.data import load_portbench_data
from quantgym.envs.portbench.paper.config import PaperFidelity


@pytest.mark.parametrize("flag", ["weekday_calendar", "log_returns_equities", "winsorize"])
def test_data_flags_on_clean_data_are_refused(flag):
    with pytest.raises(ValueError, match=rf"paper flag\(s\) {flag} change the market data .*build_paper_data"):
        gym.make("PortBench-Balanced-v0", paper=PaperFidelity.only(flag), data=load_portbench_data())


def test_data_built_with_the_flags_is_accepted_and_labelled_paper():
    from quantgym.envs.portbench.paper.data import load_paper_data

    flags = PaperFidelity.only("weekday_calendar")
    env = gym.make("PortBench-Balanced-v0", paper=flags, data=load_paper_data(flags), period="covid_2020")
    assert env.unwrapped.config.fidelity == "paper"
    env.reset(seed=0)
    env.close()


def test_flags_that_do_not_touch_the_data_still_work_on_own_data():
    flags = PaperFidelity.only("mdd_no_start_peak")
    env = gym.make("PortBench-Balanced-v0", paper=flags, data=load_portbench_data())
    assert env.unwrapped.config.paper.mdd_no_start_peak
    env.close()
