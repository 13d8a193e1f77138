"""The project's exceptions survive pickling (a process pool or a Dask task sends them back to the sweep)."""

import pickle

import numpy as np
import pytest

from isparse import ConfigError
from isparse.engines import DivergenceError
from isparse.errors import DataError, check_range


def test_config_error_round_trips_with_key_and_message():
    with pytest.raises(ConfigError) as info:
        check_range("tau", 1.5, 0.0333, 1.0, low_text="1/m")
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is ConfigError and back.key == "tau" and str(back) == str(info.value)
    assert "'tau' parameter must be in [1/m = 0.0333, 1]; got 1.5" in str(back)


def test_data_and_divergence_errors_round_trip():
    back = pickle.loads(pickle.dumps(DataError("a.svm:4: bad value")))
    assert type(back) is DataError and str(back) == "a.svm:4: bad value"
    div = pickle.loads(pickle.dumps(DivergenceError(17, 2.5, np.arange(3.0))))
    assert (div.t, div.gamma) == (17, 2.5) and np.array_equal(div.x_last, np.arange(3.0))
    assert "iteration 17" in str(div)
