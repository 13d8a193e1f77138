"""Data loading: label conventions, validation errors, row splits."""

import numpy as np
import pytest

from isparse import ConfigError, DataError, load_dataset, load_libsvm, split_rows
from isparse.data import to_pm1

pytestmark = pytest.mark.needs_data


@pytest.mark.parametrize("name, N, d, n_pos, labels", [
    ("mushrooms", 8124, 112, 4208, "1 -> -1, 2 -> +1"),   # labels {1, 2}: 2 -> +1
    ("phishing", 11055, 68, 6157, "0 -> -1, 1 -> +1"),    # labels {0, 1}
    ("a1a", 1605, 123, 395, "-1 -> -1, 1 -> +1"),         # labels +-1, only indices up to 119 used
])
def test_named_sets_shapes_and_labels(name, N, d, n_pos, labels):
    ds = load_dataset(name)
    assert ds.A.shape == (N, d)
    assert set(np.unique(ds.b)) == {-1.0, 1.0}
    assert int((ds.b == 1).sum()) == n_pos  # counts from ../shared/datasets/SOURCES.md
    assert ds.labels == labels              # the mapping the run logs as data.labels


def test_breast_cancer_is_bundled_and_standardized():
    ds = load_dataset("breast_cancer")
    assert ds.A.shape == (569, 30)
    X = ds.A.toarray()
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(0), 1, atol=1e-12)


def test_to_pm1_rejects_non_binary():
    with pytest.raises(DataError, match="exactly two distinct labels"):
        to_pm1([0, 1, 2])


def test_malformed_libsvm_names_file_and_line(tmp_path):
    f = tmp_path / "bad.svm"
    f.write_text("1 1:0.5 2:1\n-1 3:abc\n")
    with pytest.raises(DataError, match=r"bad.svm is not a valid LIBSVM file \(line 2"):
        load_libsvm(f)


def test_nan_in_data_is_rejected(tmp_path):
    f = tmp_path / "nan.svm"
    f.write_text("1 1:0.5\n-1 2:nan\n")
    with pytest.raises(DataError, match="NaN or infinite feature value in row 2"):
        load_libsvm(f)


def test_missing_data_dir_and_file(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="'data.dir'.*existing directory"):
        load_dataset("a1a", data_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="was not found: no file"):
        load_dataset("a1a", data_dir=str(tmp_path))
    monkeypatch.delenv("ISPARSE_DATA_DIR")
    with pytest.raises(ConfigError, match="ISPARSE_DATA_DIR"):
        load_dataset("a1a")
    with pytest.raises(ConfigError, match="'data' parameter must be one of"):
        load_dataset("iris")


def test_split_rows_is_a_partition():
    parts = split_rows(103, 10, "shuffle", seed=3)
    allrows = np.concatenate(parts)
    assert sorted(allrows.tolist()) == list(range(103))
    assert {len(p) for p in parts} == {10, 11}
    contiguous = split_rows(103, 10, "contiguous")
    assert contiguous[0].tolist() == list(range(11))
    with pytest.raises(ConfigError, match=r"^The 'n' parameter must be in \[1, N \(rows of the data set\) = 5\]; got 6\.$"):
        split_rows(5, 6)                                   # a library function names its own argument


def test_index_past_declared_dimension_names_the_line(tmp_path):
    f = tmp_path / "wide.svm"
    f.write_text("1 1:0.5 2:1\n-1 3:1\n1 7:1\n")
    with pytest.raises(DataError, match=r"line 3: '1 7:1': feature index 7 is past the declared dimension 5"):
        load_libsvm(f, n_features=5)


def test_empty_rows_keep_drop_or_error(tmp_path):
    f = tmp_path / "empty.svm"
    f.write_text("1 1:0.5\n-1\n1 2:1\n-1 1:1\n")
    with pytest.warns(UserWarning, match="1 rows have no features \\(the first at line 2\\)"):
        assert load_libsvm(f).N == 4
    assert load_libsvm(f, empty_rows="drop").N == 3
    with pytest.raises(DataError, match="empty.svm: 1 rows have no features \\(the first at line 2\\)"):
        load_libsvm(f, empty_rows="error")
