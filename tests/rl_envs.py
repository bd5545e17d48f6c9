"""Environments for the tests (tests/test_rl.py), in a module of the standard library alone, so that
an environment's worker process (spmdgpt/rl/envworker.py) imports them in milliseconds."""

import time


class TwoActionsEnv:
    """A test environment: each action is answered "7" and rewarded 0.5; the second ends the episode."""

    def reset(self, prompt, record):
        self.n = 0
        return "9"  # (the first observation, read after the prompt)

    def step(self, action):
        self.n += 1
        return "7", 0.5, self.n == 2


class RaisingEnv(TwoActionsEnv):
    def step(self, action):
        if self.n:
            raise RuntimeError("broken")
        return super().step(action)


class NotTextEnv(TwoActionsEnv):
    def step(self, action):
        return 7, 0.5, False


class NeverDoneEnv(TwoActionsEnv):
    def step(self, action):
        return "7", 0.25, False


class ResetFailsEnv(TwoActionsEnv):
    def reset(self, prompt, record):
        return None


class SleepyEnv(TwoActionsEnv):
    """Its second action takes a minute: past any test's rl.env_timeout."""

    def step(self, action):
        if self.n:
            time.sleep(60)
        return super().step(action)


class SleepyResetEnv(TwoActionsEnv):
    """Its reset takes a minute."""

    def reset(self, prompt, record):
        time.sleep(60)


class ExitingEnv(TwoActionsEnv):
    """Its step ends its process."""

    def step(self, action):
        import os

        os._exit(3)


class NumpyEnv(TwoActionsEnv):
    """NumPy's text, number and truth value."""

    def step(self, action):
        import numpy as np

        return np.str_("7"), np.float32(0.5), np.True_
