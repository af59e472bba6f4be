"""Metrics on hand-made examples."""
import numpy as np
import pytest

from dynnets.metrics import (accuracy_by_length, binary_predictions, binary_sides, classification_report,
                             confusion_matrix, node_accuracy, root_binary_accuracy, root_fine_accuracy)


def _p(*rows):
    return np.array(rows, dtype=float)


def test_fine_accuracy_is_argmax():
    p = _p([0.1, 0.6, 0.1, 0.1, 0.1], [0.3, 0.1, 0.1, 0.1, 0.4], [0.0, 0.0, 1.0, 0.0, 0.0])
    assert root_fine_accuracy(p, [1, 0, 2]) == pytest.approx(2 / 3)
    assert node_accuracy(p, [1, 4, 2]) == 1.0


def test_binary_sst2_convention():
    """Neutral roots are dropped; the side with more probability mass wins,
    even when the argmax is neutral or sits on the other side."""
    p = _p([0.05, 0.30, 0.40, 0.15, 0.10],   # argmax neutral, negative mass 0.35 > 0.25 -> negative
           [0.26, 0.0, 0.0, 0.25, 0.49],     # argmax positive (4), positive mass 0.74 -> positive
           [0.45, 0.0, 0.1, 0.25, 0.20],     # argmax 0, but positive mass 0.45 == negative mass 0.45: tie -> negative
           [0.1, 0.1, 0.1, 0.6, 0.1],        # label 2: dropped whatever is predicted
           [0.0, 0.1, 0.2, 0.3, 0.4])        # positive
    labels = [1, 4, 3, 2, 0]
    np.testing.assert_array_equal(binary_predictions(p), [0, 1, 0, 1, 1])
    acc, n = root_binary_accuracy(p, labels)
    assert n == 4                        # the neutral root is not scored
    assert acc == pytest.approx(2 / 4)   # right: rows 0, 1; wrong: row 2 (tie -> negative, label 3), row 4
    assert root_binary_accuracy(p[3:4], [2]) == (0.0, 0)


def test_binary_sides_for_other_class_counts():
    assert binary_sides(5) == ([0, 1], [3, 4], 2)
    assert binary_sides(3) == ([0], [2], 1)
    assert binary_sides(2) == ([0], [1], None)
    acc, n = root_binary_accuracy(_p([0.7, 0.3], [0.2, 0.8], [0.6, 0.4]), [0, 1, 1])
    assert (acc, n) == (pytest.approx(2 / 3), 3)


def test_confusion_matrix_rows_true_columns_predicted():
    m = confusion_matrix([0, 1, 1, 2, 2, 2], [0, 1, 2, 2, 2, 0], 3)
    np.testing.assert_array_equal(m, [[1, 0, 1], [0, 1, 0], [0, 1, 2]])
    assert m.sum() == 6 and np.trace(m) == 4
    with pytest.raises(ValueError, match="confusion_matrix: example 1 has label 3 / prediction 1 outside 0..2"):
        confusion_matrix([0, 1], [0, 3], 3)


def test_accuracy_by_length_buckets():
    pred = [1, 1, 0, 0, 2, 2, 3]
    labels = [1, 0, 0, 1, 2, 2, 3]
    lengths = [3, 10, 11, 20, 25, 41, 60]
    b = accuracy_by_length(pred, labels, lengths)
    assert [x["bucket"] for x in b] == ["1-10", "11-20", "21-30", "31-40", "41+"]
    assert [x["n"] for x in b] == [2, 2, 1, 0, 2]
    assert [x["accuracy"] for x in b] == [0.5, 0.5, 1.0, None, 1.0]
    assert b[-1]["hi"] is None and b[0]["lo"] == 1
    custom = accuracy_by_length(pred, labels, lengths, edges=(20,))
    assert [(x["bucket"], x["n"]) for x in custom] == [("1-20", 4), ("21+", 3)]
    with pytest.raises(ValueError, match="edges must increase"):
        accuracy_by_length(pred, labels, lengths, edges=(20, 10))


def test_classification_report_has_every_metric():
    p = _p([0.1, 0.6, 0.1, 0.1, 0.1], [0.0, 0.1, 0.1, 0.1, 0.7])
    rep = classification_report(p, [1, 3], lengths=[4, 15], node_proba=p, node_labels=[1, 4])
    assert rep["n"] == 2 and rep["root_fine"] == 0.5 and rep["root_binary"] == 1.0 and rep["n_binary"] == 2
    assert rep["all_nodes"] == 1.0 and rep["n_nodes"] == 2
    assert rep["confusion"][3][4] == 1 and rep["confusion"][1][1] == 1
    assert [x["n"] for x in rep["by_length"]] == [1, 1, 0, 0, 0]


def test_shape_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"proba: expected a 2-D array \(n, num_classes >= 2\), got shape \(3,\)"):
        root_fine_accuracy(np.ones(3), [0, 1, 2])
    with pytest.raises(ValueError, match="labels: expected 2 integer labels"):
        root_fine_accuracy(np.ones((2, 5)), [0, 1, 2])
