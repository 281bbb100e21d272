"""route() against the inverse of numpy's stable argsort."""
import numpy as np
import pytest

import moeperm
import models


@pytest.mark.parametrize("tokens,top_k,experts", [(1, 1, 1), (64, 8, 64), (100, 2, 3),
                                                  (37, 6, 1000), (5, 4, 1 << 30)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_routing_equals_inverse_stable_argsort(tokens, top_k, experts, dtype):
    rng = np.random.default_rng(tokens + top_k + experts)
    ids = rng.integers(0, experts, (tokens, top_k)).astype(dtype)
    result = moeperm.route(ids, experts)
    assert result.dtype == np.int32 and result.shape == (tokens * top_k,)
    assert (result == models.route(ids)).all()
    assert (moeperm.route(ids) == result).all()  # num_experts from the ids


def test_strided_expert_ids_are_read_in_row_major_order():
    rng = np.random.default_rng(31)
    base = rng.integers(0, 8, (20, 12)).astype(np.int32)
    ids = base[::2, 1::3].T
    assert (moeperm.route(ids, 8) == models.route(np.ascontiguousarray(ids))).all()


def test_empty_routing_is_empty():
    assert moeperm.route(np.zeros((0, 4), dtype=np.int32)).shape == (0,)


def test_expert_id_out_of_range_names_it():
    with pytest.raises(moeperm.Error, match=r"^expert_ids\[3\] = 4 is outside \[0, 3\]$") as e:
        moeperm.route(np.array([0, 1, 2, 4], dtype=np.int32), 4)
    assert e.value.status == 161002


def test_negative_expert_id_names_it():
    with pytest.raises(moeperm.Error, match=r"^expert_ids\[1\] = -1 is outside \[0, 2\]$"):
        moeperm.route(np.array([0, -1, 2], dtype=np.int64))


def test_int64_expert_id_beyond_int32_names_it():
    with pytest.raises(moeperm.Error, match=r"^expert_ids\[2\] = 4294967296 is outside \[0, 7\]$"):
        moeperm.route(np.array([0, 1, 1 << 32], dtype=np.int64), 8)


@pytest.mark.parametrize("experts,match", [(0, r"^num_experts = 0 is below 1$"),
                                           (1 << 31, r"^num_experts = 2147483648 is above")])
def test_num_experts_outside_int32_range_is_refused(experts, match):
    with pytest.raises(moeperm.Error, match=match):
        moeperm.route(np.array([0], dtype=np.int32), experts)


def test_float_expert_ids_are_a_type_error():
    with pytest.raises(TypeError, match=r"^expert_ids dtype float32 is not supported here"):
        moeperm.route(np.zeros(4, dtype=np.float32))
