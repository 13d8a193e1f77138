"""Pieces that break their contract, for tests/test_outside_problem.py's checks to find (each registers on import; the
test removes them again). A module of tests/, so that the session's Dask workers import them too."""

import numpy as np

from isparse.methods import Method
from ternary_codec import Ternary


class HalvedTernary(Ternary):
    """Declared unbiased like its base, but every value comes back halved: E Q(v) = v / 2."""

    name = "halved_ternary_test"

    def decode(self, payload, counts):
        return 0.5 * super().decode(payload, counts)


class GlobalRandomIBCD(Method):
    """IBCD whose messages carry noise from numpy's global random state: no two runs agree."""

    name, theory = "global_random_test", None

    def worker_step(self, data, state, x, t, donate=False):
        s = self.sampled(data, t)
        g = self.local_grads(data, x, s)
        return self.send(s, g * (1.0 + 1e-3 * np.random.random_sample(g.size))), state

    def master_step(self, state, x, batch, donate=False):
        return self.averaged_step(x, batch), state


class HostClippedIBCD(GlobalRandomIBCD):
    """IBCD that clips its messages at a tenth of the largest entry of its whole host: a worker's message depends on
    which workers share its host, so the in-process engine (one host) and Dask (two) differ, each run repeatable."""

    name = "host_clipped_test"

    def worker_step(self, data, state, x, t, donate=False):
        s = self.sampled(data, t)
        g = self.local_grads(data, x, s)
        top = 0.1 * np.abs(g).max()
        return self.send(s, np.clip(g, -top, top)), state
