"""TopK.from_scores: one ranking per model, reused by every metric."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import D, S, Y, adversarial, as_sparse, brute_force_dcg, brute_order, delta, held_out

from recpack_ope.metrics import ranking
from recpack_ope.metrics.dcg import dcg, ips_dcg, ndcg
from recpack_ope.metrics.ranking import TopK, top_k_positions
from recpack_ope.metrics.recall import recall
from recpack_ope.propensity.discount import LogDiscount


def brute_force_top(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row: finite scores sorted descending, ties to the lower index, -1 padded."""
    out = np.full((scores.shape[0], k), -1)
    for u, row in enumerate(scores):
        order = sorted(
            (i for i in range(row.size) if np.isfinite(row[i])), key=lambda i: (-row[i], i)
        )
        out[u, : min(k, len(order))] = order[:k]
    return out


def test_from_dense_scores_with_ties_and_masked_items():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(30, 12)).astype(float)  # many ties
    scores[rng.random(scores.shape) < 0.3] = -np.inf
    np.testing.assert_array_equal(TopK.from_scores(scores, 5).items, brute_force_top(scores, 5))


def test_from_sparse_scores_ranks_only_stored_entries():
    # row 1 stores an explicit zero at item 2: a candidate with score 0
    scores = sp.csr_matrix(([2.0, 1.0, 0.0], ([0, 0, 1], [1, 3, 2])), shape=(2, 4))
    top = TopK.from_scores(scores, 3)
    np.testing.assert_array_equal(top.items, [[1, 3, -1], [2, -1, -1]])


def test_k_larger_than_catalogue_is_truncated():
    assert TopK.from_scores(np.array([[0.1, 0.3]]), 5).items.tolist() == [[1, 0]]


@pytest.mark.parametrize("k", [0, 2.5, True])
def test_invalid_k(k):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        TopK.from_scores(np.ones((2, 3)), k)


def test_integer_scores_beyond_2_53_rank_exactly():
    big = 2**53
    scores = np.array(
        [[big, big + 1, 3, big + 3], [-big - 2, -big - 1, -7, 5], [2**62, 2**62 + 1, 2**62 - 1, 1]],
        dtype=np.int64,
    )
    unsigned = np.array(
        [[2**63, 2**63 + 1, 5], [2**64 - 1, 2**64 - 2, 2**63 + 2048]], dtype=np.uint64
    )

    def brute(matrix, k):  # on Python ints (exact), ties to the lower item index
        return [
            sorted(range(len(row)), key=lambda i, row=row: (-int(row[i]), i))[:k] for row in matrix
        ]

    # float64 would tie big with big + 1 and 2**62 ± 1 with 2**62, and rank by item index.
    assert brute(scores, 3) == [[3, 1, 0], [3, 2, 1], [1, 0, 2]]
    assert TopK.from_scores(scores, 3).items.tolist() == brute(scores, 3)
    assert TopK.from_scores(sp.csr_matrix(scores), 3).items.tolist() == brute(scores, 3)
    assert TopK.from_scores(unsigned, 2).items.tolist() == brute(unsigned, 2)
    # DCG follows the exact ranking: user 0's relevant item 0 is at rank 3, not 2.
    assert dcg(Y, scores, discount=D).per_user[0] == delta(3)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: TopK.from_scores(sp.csr_matrix(S * 1j), 2), r"y_score has complex dtype"),
    ],
)
def test_complex_values_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def brute_items(values: np.ndarray, k: int) -> np.ndarray:
    """``brute_order`` as TopK items: (rows × min(k, width)), -1 padded."""
    width = min(k, values.shape[1])
    items = np.full((values.shape[0], width), -1)
    for u, order in enumerate(brute_order(values, k)):
        items[u, : order.size] = order
    return items


SHAPES = [(40, 1), (40, 7), (30, 60), (12, 300), (8, 700)]


@pytest.mark.parametrize("n_rows, width", SHAPES)
@pytest.mark.parametrize("k", [1, 2, 5, 20, 299, 700, 1000])
def test_top_k_positions_equal_a_stable_lexsort(n_rows, width, k):
    values = adversarial(np.random.default_rng(width * 1000 + k), n_rows, width)
    rows, positions, ranks = top_k_positions(values, k)
    expected = brute_order(values, k)
    assert rows.tolist() == [u for u, o in enumerate(expected) for _ in o]
    assert positions.tolist() == [p for o in expected for p in o]
    assert ranks.tolist() == [r + 1 for o in expected for r in range(o.size)]


@pytest.mark.parametrize("width", [60, 700])
def test_tie_at_the_kth_place_keeps_the_leftmost(width):
    # k = 3: the third place is shared by five entries, the leftmost wins; row 1 has a tie
    # inside the top 3 only, row 2 at the boundary only.
    values = np.full((3, width), -np.inf)
    values[0, [4, 9, 20, 33, 41, 50, 51]] = [7, 5, 5, 9, 5, 5, 5]
    values[1, [3, 8, 30]] = [2, 2, 9]
    values[1, 40:] = 1
    values[2, [5, 6, 7, 8]] = [1, 3, 1, 2]
    rows, positions, _ = top_k_positions(values, 3)
    assert positions.reshape(3, 3).tolist() == [[33, 4, 9], [30, 3, 8], [6, 8, 5]]
    assert rows.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("width", [30, 700])
def test_nan_is_refused_naming_the_first_one_in_any_chunk(width):
    scores = np.random.default_rng(width).random((9, width))
    scores[6, width - 3] = np.nan  # not among the largest values of a row without NaN
    scores[7, 0] = np.nan
    y = sp.csr_matrix(np.eye(9, width))
    for chunk in (None, 1, 4):
        with pytest.raises(ValueError, match=rf"y_score is NaN at \(user 6, item {width - 3}\)"):
            ndcg(y, scores, discount=LogDiscount(2), chunk_users=chunk)
    with pytest.raises(ValueError, match=rf"y_score is NaN at \(user 6, item {width - 3}\)"):
        TopK.from_scores(scores, 2)
    with pytest.raises(ValueError, match=r"values is NaN at \(row 6, position"):
        top_k_positions(scores, 2)


@pytest.mark.parametrize("k", [1, 10, 100])
def test_wide_rows_rank_only_the_entries_above_the_group_maxima(monkeypatch, k):
    """Rows at least 8 (k+1) wide rank only the entries at or above the (k+1)-th largest of
    their group maxima: continuous rows, also with their largest values bunched in the last
    columns, never reach argpartition; rows with too few candidates do. The ranking equals
    the brute force either way."""
    rng = np.random.default_rng(k)
    # wider than the full-sort threshold (256); five columns beyond the whole groups
    width = max(24 * (k + 1), 300) + 5
    values = rng.normal(size=(40, width))
    values[10] = np.round(values[10])  # ties at the threshold
    values[11, k:] = -np.inf  # k candidates, fewer than k + 1: every entry is >= -inf
    values[12, ::7] = values[12].max()  # a tie for first place among width / 7 entries
    values[13] = np.sort(values[13])  # the largest values in the last columns
    fallback = []
    original = ranking._partitioned_top

    def counted(block, k):
        fallback.extend(int(np.flatnonzero((values == row).all(axis=1))[0]) for row in block)
        return original(block, k)

    monkeypatch.setattr(ranking, "_partitioned_top", counted)
    rows, positions, _ = top_k_positions(values, k)
    expected = brute_order(values, k)
    assert rows.tolist() == [u for u, o in enumerate(expected) for _ in o]
    assert positions.tolist() == [p for o in expected for p in o]
    assert 11 in fallback and set(fallback) <= {10, 11, 12}


def test_wide_rows_of_64_bit_integers_are_ranked_exactly():
    # Beyond 2**53 float64 would round these four into ties (found by review).
    values = np.zeros((1, 300), dtype=np.int64)
    values[0, [5, 100, 200, 7]] = 2**60 + np.arange(4)
    assert top_k_positions(values, 2)[1].tolist() == [7, 200]


def equal_nnz(rng, n_rows: int, width: int, stored: int) -> np.ndarray:
    """Tie-heavy scores with exactly ``stored`` candidates per row (-inf elsewhere)."""
    values = np.full((n_rows, width), -np.inf)
    for u in range(n_rows):
        values[u, rng.choice(width, stored, replace=False)] = rng.integers(0, 3, stored)
    return values


@pytest.mark.parametrize("k", [1, 4, 30, 400])
@pytest.mark.parametrize("fmt", ["dense", "csr", "csc", "unsorted"])
@pytest.mark.parametrize("layout", ["ragged", "equal"])
def test_from_scores_equals_brute_force(k, fmt, layout):
    rng = np.random.default_rng(k)
    if layout == "equal":
        values = equal_nnz(rng, 25, 320, 40)
    else:
        values = adversarial(rng, 25, 320)
    if fmt == "dense":
        scores = values
    elif fmt == "unsorted":  # a CSR matrix whose rows list their items in reverse
        csr = as_sparse(values, "csr")
        indptr = csr.indptr
        order = np.concatenate([np.arange(indptr[u + 1] - 1, indptr[u] - 1, -1) for u in range(25)])
        scores = sp.csr_matrix((csr.data[order], csr.indices[order], indptr), shape=csr.shape)
        assert not scores.has_sorted_indices
    else:
        scores = as_sparse(values, fmt)
    np.testing.assert_array_equal(TopK.from_scores(scores, k).items, brute_items(values, k))


def brute_ndcg(y, values, cutoff):
    """Per-user nDCG@cutoff by conftest's plain loops."""

    def delta(r):
        return 1 / math.log2(r + 1) if r <= cutoff else 0.0

    out = brute_force_dcg(y, values, delta)
    return np.array([out[u][0] / out[u][1] for u in sorted(out)])


@pytest.mark.parametrize("cutoff", [1, 3, 10, 300])
@pytest.mark.parametrize("form", ["dense", "csr", "csr-equal", "topk"])
def test_held_out_ranks_give_the_brute_force_ndcg(cutoff, form):
    rng = np.random.default_rng(cutoff)
    values = equal_nnz(rng, 30, 280, 35) if form == "csr-equal" else adversarial(rng, 30, 280)
    y = held_out(rng, values)
    scores = {
        "dense": values,
        "csr": as_sparse(values, "csr"),
        "csr-equal": as_sparse(values, "csr"),
        "topk": TopK.from_scores(values, cutoff),
    }[form]
    expected = brute_ndcg(y, values, cutoff)
    for chunk in (None, 2, 7):
        result = ndcg(y, scores, discount=LogDiscount(cutoff), chunk_users=chunk)
        np.testing.assert_allclose(result.per_user, expected, rtol=1e-12, atol=1e-15)


def test_recall_and_dcg_without_cutoff_rank_every_candidate():
    rng = np.random.default_rng(5)
    values = adversarial(rng, 20, 40)
    y = held_out(rng, values)
    out = brute_force_dcg(y, values, lambda r: 1 / math.log2(r + 1))
    result = dcg(y, as_sparse(values, "csr"), discount=LogDiscount())
    np.testing.assert_allclose(result.per_user, [out[u][0] for u in sorted(out)], rtol=1e-12)
    hits = {u: sum(y[u, i] for i in brute_order(values, 4)[u]) / y[u].sum() for u in sorted(out)}
    np.testing.assert_allclose(recall(y, values, k=4).per_user, list(hits.values()), rtol=1e-12)


@pytest.mark.parametrize("form", ["dense", "csr", "topk"])
def test_control_variate_totals_the_examination_of_the_ranked_items(form):
    # control_u = Σ_i δ(r_u(i)) w_ui e_ui − Σ_{r ≤ ranked_u} δ(r), ranked_u = min(cutoff,
    # the user's candidates): short rows rank fewer items than the cutoff.
    rng = np.random.default_rng(3)
    values = adversarial(rng, 20, 30)
    y = held_out(rng, values)
    shown = sp.csr_matrix((rng.random(values.shape) < 0.3) * rng.uniform(0.2, 1, values.shape))
    p = rng.uniform(0.1, 1.0, 30)
    scores = {
        "dense": values,
        "csr": as_sparse(values, "csr"),
        "topk": TopK.from_scores(values, 5),
    }[form]
    result = ips_dcg(y, scores, discount=LogDiscount(5), propensity=p, impressions=shown)
    e = shown.toarray()
    expected = []
    for u in result.user_ids:
        order = brute_order(values, 5)[u]
        delta = 1 / np.log2(np.arange(2, order.size + 2))
        expected.append(
            sum(d * e[u, i] / p[i] for d, i in zip(delta, order, strict=True)) - delta.sum()
        )
    np.testing.assert_allclose(result.control, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("form", ["csr", "topk"])
def test_huge_catalogues_search_64_bit_keys(form):
    # 8 users × 2**30 items: (row, item) keys of a chunk pass 2**31, beyond int32.
    rng = np.random.default_rng(4)
    columns = np.sort(rng.choice(2**30, 12, replace=False))
    values = rng.integers(0, 6, size=(8, 12)).astype(float)
    values[rng.random(values.shape) < 0.2] = -np.inf
    y = sp.csr_matrix(
        (rng.random(values.shape) < 0.4) * rng.integers(1, 4, values.shape) + np.eye(8, 12)
    )
    expected = brute_ndcg(y, values, 4)
    assert np.unique(expected).size > 4
    rows, cols = np.nonzero(values > -np.inf)
    huge = (8, 2**30)
    scores = sp.csr_matrix((values[rows, cols], (rows, columns[cols])), shape=huge)
    if form == "topk":
        top = brute_items(values, 4)
        scores = TopK(np.where(top >= 0, columns[top], -1))
    y_huge = sp.csr_matrix((y.data, columns[y.indices], y.indptr), shape=huge)
    result = ndcg(y_huge, scores, discount=LogDiscount(4))
    np.testing.assert_allclose(result.per_user, expected, rtol=1e-12, atol=1e-15)


def test_sparse_nan_is_found_and_infinities_are_not_mistaken_for_it():
    # +inf and -inf stored together sum to NaN without any NaN score.
    values = np.array([[np.inf, 1.0, -np.inf, 2.0], [3.0, -np.inf, np.inf, 0.5]])
    scores = sp.csr_matrix(np.where(values == 0, 0, values))
    np.testing.assert_array_equal(TopK.from_scores(scores, 4).items, brute_items(values, 4))
    scores[1, 3] = np.nan
    with pytest.raises(ValueError, match=r"y_score is NaN at \(user 1, item 3\)"):
        TopK.from_scores(scores, 2)


def unsorted_rows(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """The same CSR matrix with every row's entries stored in reverse item order."""
    indptr = matrix.indptr
    order = np.concatenate(
        [np.arange(indptr[u + 1] - 1, indptr[u] - 1, -1) for u in range(matrix.shape[0])]
    ).astype(np.int64)
    return sp.csr_matrix((matrix.data[order], matrix.indices[order], indptr), shape=matrix.shape)


def test_unsorted_rows_are_sorted_across_chunks_and_duplicates_named():
    # Row 0 stores 2**20 items, so the rows are sorted 4 at a time (rows_per_chunk).
    rng = np.random.default_rng(6)
    n_items = 2**20 + 7
    rows = [np.arange(2**20)] + [rng.choice(n_items, 30, replace=False) for _ in range(9)]
    canonical = sp.csr_matrix(
        (
            rng.integers(0, 5, sum(r.size for r in rows)).astype(float),
            (np.repeat(np.arange(10), [r.size for r in rows]), np.concatenate(rows)),
        ),
        shape=(10, n_items),
    )
    scores = unsorted_rows(canonical)
    assert not scores.has_sorted_indices
    np.testing.assert_array_equal(
        TopK.from_scores(scores, 12).items, TopK.from_scores(canonical, 12).items
    )
    # The same entry stored twice in rows 9 and 7 (in a later chunk): row 7 is named.
    extra = {7: rows[7][3], 9: rows[9][0]}
    columns = [np.append(r[::-1], [extra[u]] if u in extra else []) for u, r in enumerate(rows)]
    twice = sp.csr_matrix(
        (
            np.ones(sum(c.size for c in columns)),
            np.concatenate(columns).astype(np.int64),
            np.concatenate([[0], np.cumsum([c.size for c in columns])]),
        ),
        shape=scores.shape,
    )
    with pytest.raises(
        ValueError, match=rf"y_score stores \(user 7, item {rows[7][3]}\) more than once"
    ):
        TopK.from_scores(twice, 3)


def test_unsorted_rows_keep_64_bit_integer_scores_exact():
    # 2**53 + 1 and 2**53 are one float64: ranked as integers they are not tied.
    big = 2**53
    values = np.array([[big, big + 1, 5, big + 1], [-big - 1, 3, -big, 7]], dtype=np.int64)
    for row_order in (lambda m: m, unsorted_rows):
        scores = row_order(sp.csr_matrix(values))
        np.testing.assert_array_equal(
            TopK.from_scores(scores, 4).items, [[1, 3, 0, 2], [3, 1, 2, 0]]
        )


def test_a_repeated_entry_is_named_when_every_row_stores_as_many():
    scores = sp.csr_matrix(
        (np.arange(6.0), np.array([2, 0, 3, 3, 1, 0]), np.array([0, 2, 4, 6])), shape=(3, 4)
    )
    with pytest.raises(ValueError, match=r"y_score stores \(user 1, item 3\) more than once"):
        ndcg(sp.csr_matrix(np.eye(3, 4)), scores, discount=LogDiscount(2))


@pytest.mark.parametrize(
    "scores",
    [
        sp.csr_matrix((3, 4)),
        np.full((3, 4), -np.inf),
        TopK(np.full((3, 2), -1)),
        TopK(np.empty((3, 0), dtype=np.int64)),
    ],
    ids=["nothing-stored", "no-candidate", "empty-topk", "zero-depth-topk"],
)
def test_nothing_to_rank_gives_zero(scores):
    y = sp.csr_matrix(np.eye(3, 4))
    assert ndcg(y, scores, discount=LogDiscount(2)).per_user.tolist() == [0.0, 0.0, 0.0]
    assert dcg(y, scores, discount=LogDiscount()).per_user.tolist() == [0.0, 0.0, 0.0]
    if not isinstance(scores, TopK):
        assert TopK.from_scores(scores, 2).items.tolist() == [[-1, -1]] * 3


@pytest.mark.parametrize("shape", [(0, 4), (3, 0)])
def test_empty_score_matrices_give_empty_rankings(shape):
    for scores in (np.zeros(shape), sp.csr_matrix(shape)):
        assert TopK.from_scores(scores, 2).items.shape == (shape[0], min(2, shape[1]))


def test_stack_joins_rankings_row_by_row_and_checks_depths():
    from recpack_ope.metrics.ranking import TopK

    a = TopK.from_scores(np.array([[0.1, 0.9, 0.5], [1.0, 1.0, 0.0]]), 2)
    b = TopK.from_scores(np.array([[0.0, 0.0, 3.0]]), 2)
    stacked = TopK.stack([a, b])
    # by hand: row 0 ranks items 1, 2; row 1 ties 0 and 1 (lower index first); row 2: item 2, then 0
    np.testing.assert_array_equal(stacked.items, [[1, 2], [0, 1], [2, 0]])
    with pytest.raises(ValueError, match="same depth"):
        TopK.stack([a, TopK.from_scores(np.ones((1, 3)), 3)])
    with pytest.raises(TypeError, match="sequence of TopK"):
        TopK.stack([a.items])


def test_top_scored_gives_each_ranked_item_its_score():
    from recpack_ope.metrics.ranking import ScoreSource

    scores = sp.csr_matrix(np.array([[0.0, 0.7, 0.2, 0.9], [0.4, 0.0, 0.0, 0.0]]))
    source = ScoreSource(scores, scores.shape)
    items, ranked, counts = source.top_scored(np.arange(2), 3)
    assert counts.tolist() == [3, 1]
    assert items[0].tolist() == [3, 1, 2] and items[1, 0] == 0
    assert ranked[0].tolist() == [0.9, 0.7, 0.2] and ranked[1, 0] == 0.4
    assert (ranked[1, 1:] == -np.inf).all()  # past the row's one stored score
    with pytest.raises(ValueError, match="a TopK ranking has no scores"):
        ScoreSource(TopK(np.array([[0, 1]])), (1, 4)).top_scored(np.arange(1), 2)


# Widths on both sides of the full-sort threshold (256) so both selections run.


@pytest.mark.parametrize("batch", [1, 2, 5, 100])
@pytest.mark.parametrize("k", [1, 3, None])
def test_rank_in_batches_equals_brute_force(batch, k):
    rng = np.random.default_rng(batch)
    scores = rng.integers(0, 4, size=(7, 6)).astype(float)  # many ties: lower item first
    exclude = sp.csr_matrix(rng.random((7, 6)) < 0.3)
    keep = sp.csr_matrix(rng.random((7, 6)) < 0.3)
    users = np.array([6, 0, 3, 3, 1])
    ranked = ranking.rank_in_batches(
        lambda u: scores[u], users, k, 6, exclude=exclude, keep=keep, batch_users=batch
    )
    for row, u in enumerate(users):
        candidates = [
            i for i in range(6) if not exclude[u, i] or keep[u, i]
        ]  # brute force: sort by (-score, item)
        expected = sorted(candidates, key=lambda i: (-scores[u, i], i))[: k or 6]
        width = min(k or 6, 6)
        assert ranked.items[row].tolist() == expected + [-1] * (width - len(expected))
    empty = ranking.rank_in_batches(lambda u: scores[u], np.array([], int), None, 6)
    assert empty.items.shape == (0, 6)
    with pytest.raises(ValueError, match="score gave shape"):
        ranking.rank_in_batches(lambda u: scores[u, :5], users, 2, 6)
    with pytest.raises(ValueError, match="batch_users must be a positive integer, got 0"):
        ranking.rank_in_batches(lambda u: scores[u], users, 2, 6, batch_users=0)


def test_product_scores_check_the_product_against_one_user_and_fall_back():
    U = np.array([[1.0, 0.0], [0.5, 2.0], [0.0, 1.0]])
    V = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 3.0]])
    truth = U @ V
    calls = []

    def one_user(u):
        calls.append(u)
        return truth[u]

    scores = ranking.ProductScores(one_user, U, [V.T[:, :2], V])  # the first has wrong width
    np.testing.assert_array_equal(scores(np.array([2, 0])), truth[[2, 0]])
    assert scores.batched and calls == [2]  # one reference user per batch
    wrong = ranking.ProductScores(lambda u: truth[u] + 1.0, U, [V])
    np.testing.assert_array_equal(wrong(np.array([1, 2])), truth[[1, 2]] + 1.0)
    assert not wrong.batched  # the product does not reproduce the model: user by user
    plain = ranking.ProductScores(lambda u: truth[u])
    assert not plain.batched
    np.testing.assert_array_equal(plain(np.array([0])), truth[[0]])


def test_a_ranking_of_depth_zero_ranks_nothing_in_every_estimator():
    # A TopK without columns (a model asked for 0 items, or one over 0 items) shows no item:
    # every DCG term is 0 by definition, so every estimate and every ratio numerator is 0.
    y = sp.csr_matrix(np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
    empty = TopK(np.empty((2, 0), dtype=np.int64))
    p = np.array([0.5, 1.0, 0.25])
    assert ips_dcg(y, empty, discount=LogDiscount(2), propensity=p).per_user.tolist() == [0, 0]
    assert recall(y, empty, k=2).per_user.tolist() == [0.0, 0.0]
    from_nothing = TopK.from_scores(np.empty((2, 0)), 3)
    assert from_nothing.items.shape == (2, 0)
    y_no_items = sp.csr_matrix((2, 0))
    with pytest.raises(ValueError, match="y_true has no non-zero held-out rewards"):
        dcg(y_no_items, from_nothing, discount=LogDiscount(2))


def brute_held_out_ranks(scores: sp.csr_matrix, pattern: sp.csr_matrix, cutoff) -> list[int]:
    """Rank of every stored entry of ``pattern`` among its row's stored finite scores, sorted
    by (−score, item) in Python; 0 when unstored, -inf or past the cutoff."""
    ranks = []
    for u in range(pattern.shape[0]):
        row = scores.getrow(u)
        stored = {int(i): float(v) for i, v in zip(row.indices, row.data, strict=True)}
        order = sorted((i for i, v in stored.items() if v > -np.inf), key=lambda i: (-stored[i], i))
        place = {i: r + 1 for r, i in enumerate(order) if cutoff is None or r < cutoff}
        ranks += [
            place.get(int(i), 0) for i in pattern.indices[pattern.indptr[u] : pattern.indptr[u + 1]]
        ]
    return ranks


@pytest.mark.parametrize("cutoff", [1, 3, 10, 40, 500, None])
@pytest.mark.parametrize("width", [12, 150, 400])
@pytest.mark.parametrize("levels", [2, 5, 10**6])
def test_sparse_held_out_ranks_are_counted_as_brute_force_ranks_them(cutoff, width, levels):
    # Heavy ties (2 or 5 score levels), -inf entries, empty rows, rows shorter than the
    # cutoff and cutoffs past the widest row, on rows narrow and wide enough to be filtered.
    rng = np.random.default_rng([width, levels, cutoff or 0])
    n_users, n_items = 60, 3 * width
    dense = np.full((n_users, n_items), np.nan)
    for u in range(n_users):
        stored = rng.choice(n_items, rng.integers(0, width + 1), replace=False)
        dense[u, stored] = rng.integers(0, levels, stored.size) / levels
    dense[rng.random(dense.shape) < 0.03] = -np.inf
    dense[rng.random(n_users) < 0.1] = np.nan  # rows without scores
    rows, items = np.nonzero(~np.isnan(dense))
    scores = sp.csr_matrix((dense[rows, items], (rows, items)), shape=dense.shape)
    pattern = sp.csr_matrix((rng.random(dense.shape) < rng.choice([0.01, 0.3])).astype(float))
    users = np.flatnonzero(np.diff(pattern.indptr))
    expected = brute_held_out_ranks(scores, pattern, cutoff)
    for step in (1, 7, n_users):
        source = ranking.ScoreSource(scores, scores.shape)
        got, counts = source.held_out_ranks(pattern, users, cutoff, step)
        assert got.tolist() == expected
        finite = np.count_nonzero(dense > -np.inf, axis=1)[users]
        assert counts.tolist() == np.minimum(finite, cutoff or n_items).tolist()


def test_rows_of_tied_candidates_beyond_the_chunk_are_counted_over_the_rows(monkeypatch):
    # Every score equal: each row's candidates are the whole row, more pairs than a chunk;
    # row u holds items u and u + 3, ranked u + 1 and u + 4 (ties to the lower item).
    monkeypatch.setattr(ranking, "CHUNK_ELEMENTS", 10)
    scores = sp.csr_matrix(np.ones((4, 200)))
    pattern = sp.csr_matrix(np.eye(4, 200) + np.eye(4, 200, 3))
    expected = brute_held_out_ranks(scores, pattern, 5)
    got, _ = ranking.ScoreSource(scores, scores.shape).held_out_ranks(pattern, np.arange(4), 5, 4)
    assert got.tolist() == expected == [1, 4, 2, 5, 3, 0, 4, 0]


def test_sparse_nan_is_refused_by_held_out_estimators():
    scores = sp.csr_matrix(np.array([[0.5, 0.0, 2.0], [1.0, 3.0, 0.0]]))
    scores.data[3] = np.nan
    y = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))
    with pytest.raises(ValueError, match=r"y_score is NaN at \(user 1, item 1\)"):
        ndcg(y, scores, discount=LogDiscount(2))


def test_held_out_ranks_are_int32_and_a_stratum_reads_the_kept_ones():
    # Ranks fit in int32 (half the memory per held-out entry), also when a stratum (a part of
    # the entries) looks them up among those kept by shared_ranking.
    rng = np.random.default_rng(23)
    dense = np.round(rng.random((30, 50)), 1)  # ties
    dense[rng.random(dense.shape) < 0.5] = 0.0
    scores = sp.csr_matrix(dense)
    pattern = sp.csr_matrix((rng.random(dense.shape) < 0.2).astype(float))
    part = sp.csr_matrix(pattern.multiply(rng.random(dense.shape) < 0.5))
    with ranking.shared_ranking(scores):
        for held in (pattern, part):
            users = np.flatnonzero(np.diff(held.indptr))
            source = ranking.score_source(scores, scores.shape)
            got, _ = source.held_out_ranks(held, users, 7, 8)
            assert got.dtype == np.int32
            assert got.tolist() == brute_held_out_ranks(scores, held, 7)
        assert source._kept is not None


def test_a_matrix_made_canonical_after_a_first_evaluation_is_ranked_as_it_is_now():
    # scipy remembers whether the caller's matrix is canonical; rows sorted by scipy in between
    # are read as they are now, with ties to the lower item.
    dense = np.array([[0.5, 0.5, 0.0, 0.9], [0.2, 0.0, 0.2, 0.2]])
    canonical = sp.csr_matrix(dense)
    order = np.array([1, 0, 2, 4, 3, 5])  # row 0 lists items 1, 0, 3; row 1 items 2, 0, 3
    scores = sp.csr_matrix(
        (canonical.data[order], canonical.indices[order], canonical.indptr), shape=dense.shape
    )
    pattern = sp.csr_matrix(np.ones(dense.shape))
    expected = brute_held_out_ranks(canonical, pattern, 3)
    assert expected == [2, 3, 0, 1, 1, 0, 2, 3]
    for _ in range(2):
        source = ranking.ScoreSource(scores, scores.shape)
        assert source.held_out_ranks(pattern, np.arange(2), 3, 2)[0].tolist() == expected
        scores.sort_indices()
