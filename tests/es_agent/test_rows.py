from __future__ import annotations

from typing import Any

import pytest
import torch

from es_agent.errors import CandidateRowError
from es_agent.rows import SEED_BOUND, CandidateRow, check_rows, decode_row, decode_rows, encode_rows


def test_rows_round_trip_exactly_with_large_seeds() -> None:
    rows = [CandidateRow(SEED_BOUND - 1, 0.02, 7, (0, 3, 1)), CandidateRow(1234567890, -0.02, 7, (2, 0, 0))]
    packed = encode_rows(rows)
    assert packed.dtype == torch.float64 and packed.shape == (2, 6)
    assert decode_rows(packed) == rows


@pytest.mark.parametrize("bad", [[1.5, 0.1, 0.0], [1.0, 0.1, 2.0, 0.5], [1.0]])
def test_decode_rejects_malformed_rows(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        decode_row(bad)


def test_row_rejects_seed_outside_the_one_seed_bound() -> None:
    assert SEED_BOUND == 2**31
    with pytest.raises(CandidateRowError, match="noise_seed"):
        CandidateRow(SEED_BOUND, 0.1, 0, ())
    with pytest.raises(CandidateRowError, match="env_seed"):
        CandidateRow(0, 0.1, SEED_BOUND, ())


def test_check_rows_decodes_valid_rows() -> None:
    rows = [CandidateRow(5, 0.1, 9, (0, 2)), CandidateRow(5, -0.1, 9, (1, 0))]
    assert check_rows(encode_rows(rows), [2, 3], ["system", "skills"]) == rows
    assert check_rows(encode_rows(rows).tolist(), [2, 3]) == rows


@pytest.mark.parametrize(("values", "match"), [
    ([[1.0, 0.1, 2.0]], r"shape \(N >= 1, 5\).*\(0 prompt slot"),
    (torch.empty(0, 5, dtype=torch.float64), r"shape"),
    ([[1.0, 0.1, 2.0, 0.0, float("nan")]], "row 0 has non-finite"),
    ([[1.0, 0.1, 2.0, 0.0, 0.0], [1.5, 0.1, 2.0, 0.0, 0.0]], "row 1: noise_seed 1.5"),
    ([[1.0, 0.1, -2.0, 0.0, 0.0]], "row 0: env_seed=-2"),
    ([[float(2**31), 0.1, 2.0, 0.0, 0.0]], "row 0: noise_seed=2147483648"),
    ([[1.0, 0.1, 2.0, 0.0, 3.0]], "row 0: prompt id 3 out of range for slot 'skills' \\(it has 3 variant"),
    ([[1.0, 0.1, 2.0, 2.0, 0.0]], "prompt id 2 out of range for slot 'system'"),
])
def test_check_rows_names_the_row_and_the_bad_value(values: Any, match: str) -> None:
    with pytest.raises(CandidateRowError, match=match):
        check_rows(values, [2, 3], ["system", "skills"])
