"""The Open Bandit Dataset (Saito et al., NeurIPS 2021 Datasets and Benchmarks) as feed logs.

ZOZOTOWN, a fashion e-commerce site, showed three items at a time in three positions of a
banner; each logged row is one of those impressions: when, which item, in which position
(1..3), whether it was clicked, and the behaviour policy's probability of that item in that
position (``propensity_score``). Two behaviour policies ran side by side for a week: uniform
random (``"random"``) and Bernoulli Thompson sampling (``"bts"``), in three campaigns
(``"all"``, ``"men"``, ``"women"``) with 80, 34 and 46 items.

Sources, in order:

1. ``path``: the folder of the full data set, unpacked from
   https://research.zozo.com/data_release/open_bandit_dataset.zip (a download you make; the
   package never downloads it), holding ``random/`` and ``bts/``;
2. the 10,000-row samples shipped in the ``obp`` 0.4.1 wheel
   (``pip install --no-deps obp==0.4.1``), found on disk without importing ``obp``.

Each campaign's folder holds ``<campaign>.csv`` with the columns ``timestamp, item_id,
position, click, propensity_score, user_feature_0..3, user-item_affinity_*`` (an unnamed index
first), and ``item_context.csv``. The Thompson-sampling prior the ``bts`` policy started the
week with is ``obp/policy/conf/prior_bts.yaml`` in the same wheel (:func:`load_bts_prior`).
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..logged.feed_log import FeedLog

__all__ = [
    "BEHAVIORS",
    "CAMPAIGNS",
    "OPEN_BANDIT_URL",
    "OpenBanditLog",
    "load_open_bandit",
    "load_bts_prior",
    "open_bandit_sample_dir",
]

OPEN_BANDIT_URL = "https://research.zozo.com/data_release/open_bandit_dataset.zip"
BEHAVIORS = ("random", "bts")
CAMPAIGNS = ("all", "men", "women")
#: Columns a campaign's CSV must have (besides user features and affinities).
COLUMNS = ("timestamp", "item_id", "position", "click", "propensity_score")
_POSITIONS = 3
_INSTALL = "pip install --no-deps obp==0.4.1"


def _obp_folder() -> Path | None:
    """Where the ``obp`` package lies, without importing it (its pins conflict with ours)."""
    spec = importlib.util.find_spec("obp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def open_bandit_sample_dir() -> Path | None:
    """The folder of the samples inside the installed ``obp`` wheel (holding ``random/`` and
    ``bts/``), or None when ``obp`` is not installed.

    Examples
    --------
    >>> folder = open_bandit_sample_dir()
    >>> folder is None or (folder / "random" / "all" / "all.csv").exists()
    True
    """
    obp = _obp_folder()
    return None if obp is None else obp / "dataset" / "obd"


@dataclass(frozen=True, eq=False)
class OpenBanditLog:
    """One behaviour policy's log of one campaign.

    Attributes
    ----------
    log : FeedLog
        One session per impression (the row's index), context = session (both behaviour
        policies ignore the user), item = ``item_id``, rank = ``position``, reward = ``click``,
        ``position_propensity`` = ``propensity_score``.
    frame : pandas.DataFrame
        The CSV as read (its unnamed index dropped), rows in file order = session order.
    source : pathlib.Path
        The CSV file read.
    behavior, campaign : str
    n_items : int
        Items of the campaign (rows of its ``item_context.csv``, else the largest id + 1).
    display_sizes : numpy.ndarray
        Rows sharing each distinct timestamp, in timestamp order.
    rankings_reconstructable : bool
        Whether every timestamp holds positions 1..3 once each: only then could the three
        impressions of a display be put back together as one ranking.
    """

    log: FeedLog
    frame: object
    source: Path
    behavior: str
    campaign: str
    n_items: int
    display_sizes: np.ndarray
    rankings_reconstructable: bool

    @property
    def rankings_explanation(self) -> str:
        """Why the log does (not) hold whole rankings, with the measured timestamp counts.

        Examples
        --------
        >>> print(load_open_bandit("random", "men").rankings_explanation)
        ... # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
        10000 impressions share 9989 distinct timestamps (9978 of them hold a single row, the
        largest 2): the three positions of a display cannot be grouped back into one ranking, ...
        """
        sizes = self.display_sizes
        single = int(np.sum(sizes == 1))
        text = (
            f"{sizes.sum()} impressions share {sizes.size} distinct timestamps ({single} of them "
            f"hold a single row, the largest {sizes.max()})"
        )
        if self.rankings_reconstructable:
            return text + ": every timestamp holds positions 1..3, one ranking each"
        return (
            text + ": the three positions of a display cannot be grouped back into one ranking, "
            "so estimators of whole rankings or ranking prefixes do not apply"
        )


def _check_choice(value, name: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _root(path) -> Path:
    if path is not None:
        root = Path(path)
        if not root.is_dir():
            raise FileNotFoundError(
                f"path {str(root)!r} is not a folder; give the unpacked open_bandit_dataset "
                f"folder (holding random/ and bts/) from {OPEN_BANDIT_URL}"
            )
        return root
    root = open_bandit_sample_dir()
    if root is None:
        raise ModuleNotFoundError(
            f"the Open Bandit Dataset's sample comes with obp ({_INSTALL}); or pass path=, the "
            f"unpacked folder of {OPEN_BANDIT_URL}",
            name="obp",
        )
    return root


def load_open_bandit(
    behavior: str = "random", campaign: str = "all", *, path=None
) -> OpenBanditLog:
    """One behaviour policy's log of one campaign of the Open Bandit Dataset.

    Parameters
    ----------
    behavior : {"random", "bts"}
        Uniform random or Bernoulli Thompson sampling.
    campaign : {"all", "men", "women"}
    path : str or Path, optional
        The unpacked full data set (the folder holding ``random/`` and ``bts/``); default the
        10,000-row sample in the installed ``obp`` wheel.

    Returns
    -------
    OpenBanditLog

    Raises
    ------
    ValueError
        For an unknown behaviour or campaign, or a CSV without the columns of the data set or
        with positions outside 1..3.
    FileNotFoundError
        When the folder or the campaign's CSV does not exist.
    ModuleNotFoundError
        Without pandas, which reads the CSV, or with no path and no ``obp``.

    Examples
    --------
    With ``obp`` installed (its 10,000-row sample):

    >>> data = load_open_bandit("random", "all")
    >>> data.log.n_rows, data.n_items, data.rankings_reconstructable
    (10000, 80, False)
    """
    behavior = _check_choice(behavior, "behavior", BEHAVIORS)
    campaign = _check_choice(campaign, "campaign", CAMPAIGNS)
    folder = _root(path) / behavior / campaign
    source = folder / f"{campaign}.csv"
    if not source.is_file():
        raise FileNotFoundError(
            f"no {source}: the Open Bandit Dataset's folder holds "
            f"<behavior>/<campaign>/<campaign>.csv for behavior in {BEHAVIORS} and campaign in "
            f"{CAMPAIGNS}"
        )
    if importlib.util.find_spec("pandas") is None:
        raise ModuleNotFoundError(
            f"reading {source} needs pandas: pip install pandas", name="pandas"
        )
    import pandas as pd

    # round_trip: the propensities as written, not within an ulp (older pandas' fast parser).
    frame = pd.read_csv(source, index_col=0, float_precision="round_trip")
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{source}: missing columns {missing}; it has {list(frame.columns)[:8]}")
    position = frame["position"].to_numpy()
    bad = np.flatnonzero(~np.isin(position, np.arange(1, _POSITIONS + 1)))
    if bad.size:
        value = position[bad[0]]
        value = value.item() if isinstance(value, np.generic) else value
        raise ValueError(f"{source}: position of row {bad[0]} is {value!r}; positions are 1..3")
    items = folder / "item_context.csv"
    n_items = int(frame["item_id"].max()) + 1
    if items.is_file():
        with items.open() as handle:
            n_items = max(n_items, sum(1 for _ in handle) - 1)  # a header, then one row per item
    log = FeedLog.from_arrays(
        np.arange(len(frame)),
        frame["item_id"].to_numpy(),
        position,
        frame["click"].to_numpy(),
        position_propensity=frame["propensity_score"].to_numpy(),
        n_items=n_items,
    )
    _, first, sizes = np.unique(
        frame["timestamp"].to_numpy(), return_index=True, return_counts=True
    )
    sizes = sizes[np.argsort(first)]
    whole = _whole_displays(frame["timestamp"].to_numpy(), position)
    return OpenBanditLog(
        log=log,
        frame=frame,
        source=source,
        behavior=behavior,
        campaign=campaign,
        n_items=n_items,
        display_sizes=sizes,
        rankings_reconstructable=whole,
    )


def _whole_displays(timestamps: np.ndarray, position: np.ndarray) -> bool:
    """Whether every timestamp's rows show positions 1..3 once each."""
    _, group = np.unique(timestamps, return_inverse=True)
    group = group.ravel()
    counts = np.zeros((group.max() + 1, _POSITIONS), dtype=np.int64)
    np.add.at(counts, (group, position - 1), 1)
    return bool(np.all(counts == 1))


def load_bts_prior(campaign: str = "all", *, path=None) -> tuple[np.ndarray, np.ndarray]:
    """The Beta prior ``(α, β)`` per item with which the ``bts`` policy started the week.

    Parameters
    ----------
    campaign : {"all", "men", "women"}
    path : str or Path, optional
        A ``prior_bts.yaml`` (campaign → ``alpha``/``beta`` lists); default the one in the
        installed ``obp`` wheel. Read without PyYAML: the file is a two-level map of lists.

    Returns
    -------
    (alpha, beta) : numpy.ndarray, shape (n_items,)

    Raises
    ------
    ValueError
        For an unknown campaign, or a file without that campaign's alpha and beta lists of
        equal length.
    FileNotFoundError
        When the file does not exist.
    ModuleNotFoundError
        With no path and no ``obp``.

    Examples
    --------
    >>> alpha, beta = load_bts_prior("men")
    >>> alpha.size, beta.size
    (34, 34)
    """
    campaign = _check_choice(campaign, "campaign", CAMPAIGNS)
    if path is None:
        obp = _obp_folder()
        if obp is None:
            raise ModuleNotFoundError(
                f"prior_bts.yaml comes with obp ({_INSTALL}); or pass path=", name="obp"
            )
        path = obp / "policy" / "conf" / "prior_bts.yaml"
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no file {str(path)!r} (the prior_bts.yaml of obp)")
    prior = _read_lists(path.read_text())
    lists = prior.get(campaign, {})
    if "alpha" not in lists or "beta" not in lists:
        raise ValueError(
            f"{path}: no alpha and beta lists for campaign {campaign!r}; it has {sorted(prior)}"
        )
    alpha, beta = np.array(lists["alpha"]), np.array(lists["beta"])
    if alpha.size != beta.size or alpha.size == 0:
        raise ValueError(
            f"{path}: campaign {campaign!r} has {alpha.size} alphas and {beta.size} betas"
        )
    return alpha, beta


_ENTRY = re.compile(r"^(?P<indent> *)(?:(?P<key>[\w-]+):|- (?P<value>\S+))\s*(?:#.*)?$")


def _read_lists(text: str) -> dict[str, dict[str, list[float]]]:
    """``key: / key: / - number`` YAML (two levels of keys over lists of numbers)."""
    out: dict[str, dict[str, list[float]]] = {}
    top = inner = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _ENTRY.match(line)
        if match is None:
            raise ValueError(f"line {number} of the prior is not 'key:' or '- number': {line!r}")
        if match["key"] is not None and not match["indent"]:
            top, inner = match["key"], None
            out[top] = {}
        elif match["key"] is not None and top is not None:
            inner = match["key"]
            out[top][inner] = []
        elif match["value"] is not None and inner is not None:
            try:
                out[top][inner].append(float(match["value"]))
            except ValueError:
                raise ValueError(
                    f"line {number} of the prior: {match['value']!r} is not a number"
                ) from None
        else:
            raise ValueError(f"line {number} of the prior has no key above it: {line!r}")
    return out
