from __future__ import annotations

import pytest
import torch

from es_agent.rows import CandidateRow, decode_row, decode_rows, encode_rows


def test_rows_round_trip_exactly_with_large_seeds() -> None:
    rows = [CandidateRow(2**53 - 1, 0.02, 7, (0, 3, 1)), CandidateRow(123456789012, -0.02, 7, (2, 0, 0))]
    packed = encode_rows(rows)
    assert packed.dtype == torch.float64 and packed.shape == (2, 6)
    assert decode_rows(packed) == rows


@pytest.mark.parametrize("bad", [[1.5, 0.1, 0.0], [1.0, 0.1, 2.0, 0.5], [1.0]])
def test_decode_rejects_malformed_rows(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        decode_row(bad)


def test_row_rejects_seed_that_float64_cannot_hold() -> None:
    with pytest.raises(ValueError, match="noise_seed"):
        CandidateRow(2**53, 0.1, 0, ())
