"""What a researcher reads from `recpack-ope demo`: the marks and insets of the scatter plots,
the model families, and the two lines under the table.

Expected values come from the table text, from scipy, or from brute-force loops over model
pairs, never from the functions under test.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from scipy import stats

from recpack_ope._plots import emptiest_corner, padded_limits, pyplot
from recpack_ope.studies.demo import (
    EASE_GRID,
    KNN_GRID,
    PICK_LABEL,
    REFERENCE,
    WINNER_LABEL,
    DemoConfig,
    DemoResult,
    MetricSummary,
    model_family,
    model_pool,
    run_demo,
    scatter_panel,
)

SMALL = DemoConfig(n_users=3000, n_items=300, backend="numpy")
UNWEIGHTED = ("DCG", "nDCG", "pnDCG")


@pytest.fixture(scope="module")
def result():
    return run_demo(SMALL, progress=False)


@pytest.fixture
def plt():
    plt = pyplot()
    yield plt
    plt.close("all")


def hand_result(online, values, reference=None) -> DemoResult:
    """A DemoResult over five or more hand-made models, summaries from scipy."""
    online = np.asarray(online, dtype=float)
    values = {k: np.asarray(v, dtype=float) for k, v in values.items()}
    if reference is not None:
        values[REFERENCE] = np.asarray(reference, dtype=float)
    models = ["random", "popularity", *(f"EASE(l2={k})" for k in range(online.size - 2))]
    best = int(np.argmax(online))
    summaries = [
        MetricSummary(
            metric=k,
            kendall=stats.kendalltau(online, v)[0],
            pearson=stats.pearsonr(online, v)[0],
            p_inversion=0.0,
            picks_winner=int(np.argmax(v)) == best,
            picked=models[int(np.argmax(v))],
            regret=0.0,
        )
        for k, v in values.items()
    ]
    widths = {k: np.zeros_like(v) for k, v in values.items()}
    return DemoResult(DemoConfig(), "numpy", models, online, values, widths, summaries)


def brute_inversions(online, v) -> set[tuple[int, int]]:
    return {
        (j, k)
        for j in range(online.size)
        for k in range(j + 1, online.size)
        if (online[j] - online[k]) * (v[j] - v[k]) < 0
    }


# --- families ---------------------------------------------------------------------------------


def test_every_demo_model_has_its_family():
    expected = {"random": "random", "popularity": "popularity"}
    expected |= {f"ItemKNN(k={k})": "ItemKNN" for k in KNN_GRID}
    expected |= {f"EASE(l2={l2:g})": "EASE" for l2 in EASE_GRID}
    _, pool = model_pool("numpy")  # the RecPack pool has the same names (test_recpack_models)
    names = [name for name, _ in pool]
    assert sorted(names) == sorted(expected)
    assert {name: model_family(name) for name in names} == expected


def test_unknown_model_name_is_named_in_the_error():
    with pytest.raises(ValueError, match=r"name must be a demo model.*got 'SVD\(k=8\)'"):
        model_family("SVD(k=8)")


# --- scatter plots ----------------------------------------------------------------------------


def table_marks(table: str, metrics) -> dict[str, str | None]:
    """Per metric, the model its row names as the pick, or None when it says "yes"."""
    marks = {}
    for metric in metrics:
        start = re.compile(re.escape(metric) + r"\s{2}")
        row = next(line for line in table.splitlines() if start.match(line))
        named = re.search(r"no \((.+)\)$", row)
        assert named or row.endswith("yes"), row
        marks[metric] = named.group(1) if named else None
    return marks


def marked_points(ax, label) -> set[tuple[float, float]]:
    return {
        (float(x), float(y))
        for line in ax.lines
        if line.get_label() == label
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    }


def plotted_points(ax) -> set[tuple[float, float]]:
    points = set()
    for line in ax.lines:
        xs, ys = np.atleast_1d(line.get_xdata()), np.atleast_1d(line.get_ydata())
        points |= {(float(x), float(y)) for x, y in zip(xs, ys, strict=True)}
    return points


def test_plots_mark_the_pick_the_table_names_and_the_online_winner(result, plt):
    winner = result.models[int(np.argmax(result.online))]
    marks = table_marks(result.table(), result.values)
    assert any(pick is not None for pick in marks.values())  # both cases occur
    for metric, pick in marks.items():
        pick = pick or winner
        fig, ax = plt.subplots()
        scatter_panel(result, metric, ax)
        (inset,) = ax.child_axes
        for label, model in ((PICK_LABEL, pick), (WINNER_LABEL, winner)):
            m = result.models.index(model)
            point = {(result.values[metric][m], result.online[m])}
            assert marked_points(inset, label) == point
            assert marked_points(ax, label) == (set() if model == "random" else point)
        plt.close(fig)


def test_random_model_only_in_the_inset_and_off_the_main_limits(result, plt):
    r = result.models.index("random")
    others = np.arange(len(result.models)) != r
    assert result.online[r] < result.online[others].min()  # random is the outlier online
    for metric, v in result.values.items():
        fig, ax = plt.subplots()
        scatter_panel(result, metric, ax)
        (inset,) = ax.child_axes
        assert (v[r], result.online[r]) not in plotted_points(ax)
        assert (v[r], result.online[r]) in plotted_points(inset)
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        assert result.online[r] < y0
        # the other models fill the main axes: inside, spanning at least 80 % of each axis
        assert x0 <= v[others].min() and v[others].max() <= x1
        assert y0 <= result.online[others].min() and result.online[others].max() <= y1
        assert np.ptp(v[others]) >= 0.8 * (x1 - x0)
        assert np.ptp(result.online[others]) >= 0.8 * (y1 - y0)
        plt.close(fig)


def test_inset_goes_to_the_emptiest_corner():
    # boxes of 0.3: upper left [0.02, 0.32] × [0.68, 0.98], lower right [0.68, 0.98] × [0.02, 0.32]
    rising = np.linspace(0.05, 0.95, 10)  # the diagonal crosses lower-left and upper-right
    assert emptiest_corner(rising, rising, 0.3) == pytest.approx((0.02, 0.68))
    falling = (np.array([0.1, 0.2, 0.5]), np.array([0.9, 0.8, 0.5]))  # two in the upper left
    assert emptiest_corner(*falling, 0.3) == pytest.approx((0.68, 0.02))
    with pytest.raises(ValueError, match="size must be in"):
        emptiest_corner(rising, rising, 1.0)


def test_padded_limits():
    assert padded_limits([3.0, 1.0, 2.0], pad=0.1) == pytest.approx((0.8, 3.2))
    assert padded_limits([5.0], pad=0.1) == pytest.approx((4.5, 5.5))
    with pytest.raises(ValueError, match="values must hold at least one finite number"):
        padded_limits([np.nan])


# --- the lines under the table ----------------------------------------------------------------


def test_last_line_counts_equal_brute_force(result):
    last = result.table().splitlines()[-1]
    found = {m: brute_inversions(result.online, result.values[m]) for m in UNWEIGHTED}
    union = set().union(*found.values())
    ref = result.values[REFERENCE]
    right = sum((result.online[j] - result.online[k]) * (ref[j] - ref[k]) > 0 for j, k in union)
    n_pairs = len(result.models) * (len(result.models) - 1) // 2
    counts = [len(found[m]) for m in UNWEIGHTED]
    if len(set(map(frozenset, found.values()))) == 1:
        assert last == (
            f"DCG, nDCG and pnDCG each invert the same {len(union)} of {n_pairs} model pairs; "
            f"{REFERENCE} orders {right} of them right."
        )
    else:
        shared = set.intersection(*found.values())
        numbers = re.match(
            r"DCG, nDCG and pnDCG invert (\d+), (\d+) and (\d+) of (\d+) model pairs: (\d+) "
            r"inverted by all, (\d+) by any.*; "
            r"IPS-DCG \(true p\) orders (\d+) of the (\d+) right\.$",
            last,
        )
        assert numbers, last
        assert [int(g) for g in numbers.groups()] == [
            *counts,
            n_pairs,
            len(shared),
            len(union),
            right,
            len(union),
        ]
        identical = found["DCG"] == found["pnDCG"]
        assert ("(DCG and pnDCG invert identical pairs)" in last) == identical


def test_last_line_on_hand_made_inversions():
    # online order 0 < 1 < 2 < 3 < 4; DCG and pnDCG swap models 3 and 4, nDCG also 0 and 1;
    # the reference orders both pairs right
    hand = hand_result(
        [1, 2, 3, 4, 5],
        {"DCG": [1, 2, 3, 5, 4], "nDCG": [2, 1, 3, 5, 4], "pnDCG": [10, 20, 30, 50, 40]},
        reference=[1, 2, 3, 4, 5],
    )
    assert hand.table().splitlines()[-1] == (
        "DCG, nDCG and pnDCG invert 1, 2 and 1 of 10 model pairs: 1 inverted by all, 2 by any "
        "(DCG and pnDCG invert identical pairs); IPS-DCG (true p) orders 2 of the 2 right."
    )
    same = hand_result(
        [1, 2, 3, 4, 5],
        {"DCG": [1, 2, 3, 5, 4], "nDCG": [1, 2, 3, 5, 4], "pnDCG": [1, 2, 3, 5, 4]},
        reference=[1, 2, 3, 5, 6],
    )
    assert same.inversion_note() == (
        "DCG, nDCG and pnDCG each invert the same 1 of 10 model pairs; "
        "IPS-DCG (true p) orders 1 of them right."
    )
    with pytest.raises(ValueError, match="metrics must name at least two"):
        same.inversion_note(("DCG",))


def test_kendall_pearson_line_names_the_model_that_drives_r():
    # model 0 has the lowest online reward but a huge offline value: it inverts 7 of 28 pairs
    # (τ = 0.5) and drags r below zero; without it both are 1
    online = np.arange(1.0, 9.0)
    outlier = np.array([100.0, 2, 3, 4, 5, 6, 7, 8])
    hand = hand_result(
        online, {"DCG": online, "nDCG": online, "pnDCG": online, "odd": outlier}, reference=online
    )
    tau, r = stats.kendalltau(online, outlier)[0], stats.pearsonr(online, outlier)[0]
    assert tau == pytest.approx(0.5)
    line = hand.table().splitlines()[-2]
    assert line == (
        f"Kendall vs Pearson: odd has τ 0.50 but r {r:.2f} because Pearson weighs each pair of "
        "models by how far apart their values are and the pairs with random, far from the rest, "
        "dominate (without it τ 1.00, r 1.00); Kendall counts every pair alike."
    )


def test_kendall_pearson_line_without_a_single_driver():
    # two far-apart clusters in order, neighbours swapped inside each: r stays near 1 while τ
    # loses 4 of 28 pairs; no model's removal changes τ
    online = np.array([1.0, 2, 3, 4, 10, 11, 12, 13])
    swapped = np.array([2.0, 1, 4, 3, 11, 10, 13, 12])
    hand = hand_result(
        online, {"DCG": online, "nDCG": online, "pnDCG": online, "odd": swapped}, reference=online
    )
    distance = {(j, k): abs(online[j] - online[k]) for j in range(8) for k in range(j + 1, 8)}
    median = np.median(list(distance.values()))
    inverted = brute_inversions(online, swapped)
    far = [p for p, d in distance.items() if d > median]
    close = [p for p, d in distance.items() if d <= median]
    share_far = sum(p in inverted for p in far) / len(far)
    share_close = sum(p in inverted for p in close) / len(close)
    r = stats.pearsonr(online, swapped)[0]
    assert hand.correlation_note() == (
        f"Kendall vs Pearson: odd has τ 0.71 but r {r:.2f} and no single model explains it: it "
        f"inverts {share_far:.0%} of the pairs far apart online and {share_close:.0%} of the "
        "close ones; Pearson weighs pairs by how far apart their values are, Kendall counts "
        "every pair alike."
    )
    agreeing = hand_result(
        online, {"DCG": online, "nDCG": online, "pnDCG": online}, reference=online
    )
    assert agreeing.correlation_note() == (
        "Kendall vs Pearson: τ and r differ by less than 0.2 for every metric."
    )


def test_kendall_pearson_line_on_the_demo(result):
    # the line explains the metric with the largest |τ − r| (scipy); the numbers it quotes for
    # the remaining models are scipy's on the pool without the model it names
    gaps = {
        m: abs(stats.kendalltau(result.online, v)[0] - stats.pearsonr(result.online, v)[0])
        for m, v in result.values.items()
    }
    metric = max(gaps, key=gaps.get)
    line = result.table().splitlines()[-2]
    assert "\n" not in line and line.startswith(f"Kendall vs Pearson: {metric} has τ")
    named = re.search(
        r"the pairs with (.+), far from the rest, dominate \(without it τ (\S+), r (\S+)\)", line
    )
    assert named, line
    m = result.models.index(named.group(1))
    rest_online = np.delete(result.online, m)
    rest = np.delete(result.values[metric], m)
    assert float(named.group(2)) == pytest.approx(stats.kendalltau(rest_online, rest)[0], abs=0.005)
    assert float(named.group(3)) == pytest.approx(stats.pearsonr(rest_online, rest)[0], abs=0.005)
