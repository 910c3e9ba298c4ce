"""A leaderboard of several models on several metrics: values, intervals, the best model of each
metric, the models tied with it, pairwise tests after multiple-testing correction, and the
table a paper shows.

:func:`leaderboard` takes ``results[model][metric]``, one estimate per model and metric (an
:class:`~recpack_ope.inference.result.EstimateResult` or
:class:`~recpack_ope.inference.result.LoggedEstimate` from the core, a
:class:`~recpack_ope.inference.moments.SummaryEstimate` from the Spark engine), and for every
metric computes, on the estimates alone:

* the value and its Student-t interval at ``level``
  (:meth:`~recpack_ope.inference.result.PairedEstimate.confidence_interval`);
* the best model, the highest value (every metric of the registry is higher-is-better; the
  first model in ``results`` among equal values);
* every pair's two-sided paired test, :meth:`~recpack_ope.inference.result.PairedEstimate.compare`
  (Student's t over users on the difference of the per-user influence values: the paired
  t-test for plain means, the delta method for ratio metrics such as pnDCG), its p-values
  corrected over the metric's M(M − 1)/2 pairs by
  :func:`~recpack_ope.inference.significance.adjust_p_values` (Holm by default); model s is
  *significantly better* than t when the corrected p-value is below ``alpha`` and s has the
  higher value;
* the models *tied with the best*. With per-user values (in-memory estimates) this is Hsu's
  multiple comparisons with the best,
  :func:`~recpack_ope.inference.significance.tied_with_best` on
  :meth:`~recpack_ope.inference.systems.SystemScores.from_estimates`, as
  :func:`~recpack_ope.inference.summary.summary_rows` decides it: its family-wise error holds
  although the same data chose the best. Estimates from merged moments (Spark) carry no
  per-user values, which MCB's null distribution needs; there a model is tied when its
  corrected pairwise p-value against the best (above) is at least ``alpha``. Each metric's
  :attr:`MetricStanding.tied_by` says which test decided.

The exports follow the marking convention of comparison reports in information retrieval
(ranx's): every model gets a letter a, b, c, … in the order of ``results``, and a value's
superscript lists the letters of the models it is significantly better than; the best value of
each metric is in bold. Values are shown with :data:`SIGNIFICANT_DIGITS` significant digits
(not a fixed number of decimals, so that 0.0123 and 12.3 are shown alike).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._validation import check_fraction, check_positive_int, shown
from .result import PairedEstimate
from .significance import _LABEL, CORRECTIONS, adjust_p_values, tied_with_best
from .systems import SystemScores

if TYPE_CHECKING:
    import pandas

__all__ = [
    "SIGNIFICANT_DIGITS",
    "FORMATS",
    "significant",
    "MetricStanding",
    "Leaderboard",
    "leaderboard",
]

#: Significant digits of the exported values. Over 4,000 simulated users (the world of
#: docs/leaderboard.md) the standard errors of nDCG@10 and Recall@10 are 1.3–1.4 % of their
#: values (5 seeds): the third significant digit is already uncertain, a fourth would be noise.
SIGNIFICANT_DIGITS = 3
#: Formats of :meth:`Leaderboard.to` and :meth:`Leaderboard.export`.
FORMATS = ("latex", "markdown", "html", "json", "csv")
_TESTS = "two-sided paired t-tests"
_SUPERSCRIPT = "A superscript lists the models (by letter) a model is significantly better than"

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _latex(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def _markdown(text: str) -> str:
    return text.replace("|", r"\|")


def significant(value: float, digits: int = SIGNIFICANT_DIGITS) -> str:
    """``value`` rounded to ``digits`` significant digits, written with decimals only (no
    exponent) and with its trailing zeros, which are significant; an integer part longer than
    ``digits`` is kept whole.

    Examples
    --------
    >>> [significant(v) for v in (0.41234, 0.0981, 0.3, 12.345, 1234.5, 0.99961, -0.0412)]
    ['0.412', '0.0981', '0.300', '12.3', '1234', '1.00', '-0.0412']
    """
    digits = check_positive_int(digits, "digits")
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return f"{0:.{digits - 1}f}"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(digits - 1 - magnitude, 0)
    # Rounding can carry into a new leading digit (0.9996 → 1.000): one decimal fewer then.
    if decimals > 0 and abs(round(value, decimals)) >= 10 ** (magnitude + 1):
        decimals -= 1
    return f"{value:.{decimals}f}"


def _letter(i: int) -> str:
    """a, b, …, z, aa, ab, …: the label of the i-th model (0-based)."""
    text = ""
    i += 1
    while i:
        i, rest = divmod(i - 1, 26)
        text = chr(ord("a") + rest) + text
    return text


@dataclass(frozen=True, eq=False)
class MetricStanding:
    """One metric of a :class:`Leaderboard`: every model's value and interval, the best, the
    models tied with it and the corrected pairwise tests.

    Attributes
    ----------
    metric : str
        The metric, as keyed in ``results``.
    models : tuple of str
        Every model, in the order of ``results``.
    value : numpy.ndarray, shape (M,)
        The estimates, in the order of ``models``.
    interval : numpy.ndarray, shape (M, 2)
        Their confidence intervals at the leaderboard's ``level``.
    best : str
        The model with the highest value (the first of ``models`` among equal values;
        :attr:`best_models` has all of them).
    tied : tuple of str
        Models not significantly worse than the best, the best included, in model order.
    tied_by : str
        The test that decided ``tied`` and its level (module docstring).
    p_value : numpy.ndarray, shape (M, M)
        Corrected two-sided p-values of the paired tests of every pair (symmetric, 1 on the
        diagonal).
    better : numpy.ndarray of bool, shape (M, M)
        ``better[s, t]``: s is significantly better than t (corrected p-value below ``alpha``
        and the higher value).
    reliable : numpy.ndarray of bool, shape (M,)
        False where the estimate's weight diagnostics flag it (the criteria of a
        :class:`~recpack_ope.inference.diagnostics.ReliabilityWarning`); True for estimates
        without weights.
    """

    metric: str
    models: tuple[str, ...]
    value: np.ndarray
    interval: np.ndarray
    best: str
    tied: tuple[str, ...]
    tied_by: str
    p_value: np.ndarray
    better: np.ndarray
    reliable: np.ndarray

    @property
    def best_models(self) -> tuple[str, ...]:
        """Every model whose value equals the highest, in model order: ``best`` and the models
        exactly tied with it, which the tables all mark as best."""
        top = self.value.max()
        return tuple(m for m, v in zip(self.models, self.value, strict=True) if v == top)

    def better_than(self, model: str) -> tuple[str, ...]:
        """The models ``model`` is significantly better than, in model order."""
        row = self.better[self._index(model)]
        return tuple(m for m, b in zip(self.models, row, strict=True) if b)

    def _index(self, model: str) -> int:
        if model not in self.models:
            raise ValueError(f"model: no model {model!r}; the models are {list(self.models)}")
        return self.models.index(model)


def _metrics_of(results: Mapping) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The models and the metrics every one of them has, or the error naming what is off."""
    if not isinstance(results, Mapping) or not results:
        raise ValueError(
            "results must map model names to {metric: estimate} mappings, got "
            + ("an empty mapping" if isinstance(results, Mapping) else type(results).__name__)
        )
    models = tuple(results)
    first = models[0]
    for model in models:
        if not isinstance(model, str):
            raise ValueError(f"results: model names must be strings, got {shown(model)}")
        metrics = results[model]
        if not isinstance(metrics, Mapping) or not metrics:
            raise ValueError(
                f"results[{model!r}] must map metric names to estimates, got "
                + ("an empty mapping" if isinstance(metrics, Mapping) else type(metrics).__name__)
            )
        for metric, estimate in metrics.items():
            if not isinstance(metric, str):
                raise ValueError(
                    f"results[{model!r}]: metric names must be strings, got {shown(metric)}"
                )
            if not isinstance(estimate, PairedEstimate):
                raise TypeError(
                    f"results[{model!r}][{metric!r}] is a {type(estimate).__name__}, not an "
                    "estimate (EstimateResult, LoggedEstimate, SummaryEstimate, …)"
                )
    reference = tuple(results[first])
    for model in models[1:]:
        missing = [m for m in reference if m not in results[model]]
        if missing:
            raise ValueError(
                f"results: model {model!r} has no metric {missing[0]!r}, which {first!r} has; "
                "every model needs the same metrics"
            )
        extra = [m for m in results[model] if m not in results[first]]
        if extra:
            raise ValueError(
                f"results: model {first!r} has no metric {extra[0]!r}, which {model!r} has; "
                "every model needs the same metrics"
            )
    return models, reference


def _standing(
    metric: str,
    estimates: dict[str, PairedEstimate],
    level: float,
    alpha: float,
    correction: str,
) -> MetricStanding:
    """Values, intervals, corrected pairwise tests and the tied set of one metric."""
    models = tuple(estimates)
    m = len(models)
    value = np.array([e.value for e in estimates.values()])
    interval = np.array([e.confidence_interval(level) for e in estimates.values()]).reshape(m, 2)
    upper = np.triu_indices(m, 1)
    raw = []
    for s, t in zip(*upper, strict=True):
        try:
            comparison = estimates[models[s]].compare(estimates[models[t]], level)
        except ValueError as error:
            raise ValueError(
                f"results: metric {metric!r} of models {models[s]!r} and {models[t]!r} cannot be "
                f"paired ({error}); evaluate every model of a metric on the same users"
            ) from error
        raw.append(comparison.p_value)
    p_value = np.ones((m, m))
    p_value[upper] = adjust_p_values(np.array(raw, dtype=float), correction)
    p_value.T[upper] = p_value[upper]
    better = (p_value < alpha) & (value[:, None] > value[None, :])
    best = int(np.argmax(value))
    if m == 1:
        tied, tied_by = models, "one model only"
    elif all(hasattr(e, "per_user") for e in estimates.values()):
        found = tied_with_best(SystemScores.from_estimates(estimates, name=metric), alpha=alpha)
        tied = tuple(name for name in models if name in found.tied)
        tied_by = found.label
    else:
        tied = tuple(name for i, name in enumerate(models) if p_value[best, i] >= alpha)
        tied_by = (
            f"paired t-tests against the best, {_LABEL[correction]} over all pairs, α={alpha:g}"
        )
    return MetricStanding(
        metric=metric,
        models=models,
        value=value,
        interval=interval,
        best=models[best],
        tied=tied,
        tied_by=tied_by,
        p_value=p_value,
        better=better,
        reliable=np.array(
            [getattr(getattr(e, "diagnostics", None), "reliable", True) for e in estimates.values()]
        ),
    )


@dataclass(frozen=True, eq=False)
class Leaderboard:
    r"""Several models on several metrics (module docstring); built by :func:`leaderboard`.

    Attributes
    ----------
    models : tuple of str
        The models, in the order of ``results``; the i-th gets the i-th letter a, b, c, …
    metrics : tuple of str
        The metrics, in the order of the first model's mapping.
    standings : tuple of MetricStanding
        One per metric, in the order of ``metrics``; ``board[metric]`` gives one.
    level : float
        Confidence level of the intervals.
    alpha : float
        Significance level of the pairwise tests and of the tied set.
    correction : str
        Multiple-testing correction over each metric's pairs
        (:data:`~recpack_ope.inference.significance.CORRECTIONS`).

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.inference import EstimateResult, leaderboard
    >>> def result(name, values):
    ...     return EstimateResult(name, np.array(values), (1,), np.arange(6), 0)
    >>> board = leaderboard({
    ...     "EASE": {"DCG": result("DCG", [3, 4, 3, 5, 4, 4]),
    ...              "Recall": result("Recall", [0.5, 0.6, 0.4, 0.7, 0.6, 0.5])},
    ...     "kNN": {"DCG": result("DCG", [3, 3, 4, 4, 4, 5]),
    ...             "Recall": result("Recall", [0.5, 0.5, 0.6, 0.6, 0.5, 0.7])},
    ...     "pop": {"DCG": result("DCG", [1, 2, 1, 2, 1, 2]),
    ...             "Recall": result("Recall", [0.2, 0.2, 0.1, 0.2, 0.1, 0.3])},
    ... })
    >>> board["Recall"].best, board["Recall"].tied, board["Recall"].better_than("kNN")
    ('kNN', ('EASE', 'kNN'), ('pop',))

    EASE and kNN have exactly the same DCG (23/6): both are bold.

    >>> board["DCG"].best, board["DCG"].best_models
    ('EASE', ('EASE', 'kNN'))
    >>> print(board.to_markdown())  # doctest: +NORMALIZE_WHITESPACE
    | # | model | DCG | Recall |
    |---|---|---|---|
    | a | EASE | **3.83**^c | 0.550^c |
    | b | kNN | **3.83**^c | **0.567**^c |
    | c | pop | 1.50 | 0.183 |
    <BLANKLINE>
    Bold: the best model(s) of each metric, every one with the highest value. ^xy:
    significantly better than models x and y (two-sided paired t-tests over users,
    Holm-corrected over each metric's 3 pairs, p < 0.05).
    >>> print(board.to_latex())  # doctest: +NORMALIZE_WHITESPACE
    \begin{table}[t]
    \centering
    \caption{Bold: the best model(s) of each metric, every one with the highest value. A
    superscript lists the models (by letter) a model is significantly better than (two-sided
    paired t-tests over users, Holm-corrected over each metric's 3 pairs, $p < 0.05$).}
    \label{tab:leaderboard}
    \begin{tabular}{llll}
    \toprule
    \# & Model & DCG & Recall \\
    \midrule
    a & EASE & \textbf{3.83}\textsuperscript{c} & 0.550\textsuperscript{c} \\
    b & kNN & \textbf{3.83}\textsuperscript{c} & \textbf{0.567}\textsuperscript{c} \\
    c & pop & 1.50 & 0.183 \\
    \bottomrule
    \end{tabular}
    \end{table}
    >>> board.to("pdf")
    Traceback (most recent call last):
    ...
    ValueError: format must be one of ('latex', 'markdown', 'html', 'json', 'csv'), got 'pdf'
    """

    models: tuple[str, ...]
    metrics: tuple[str, ...]
    standings: tuple[MetricStanding, ...]
    level: float
    alpha: float
    correction: str

    def __getitem__(self, metric: str) -> MetricStanding:
        return self.standings[self._metric_index(metric)]

    def _metric_index(self, metric) -> int:
        if metric not in self.metrics:
            raise ValueError(f"metric: no metric {metric!r}; the metrics are {list(self.metrics)}")
        return self.metrics.index(metric)

    @property
    def letters(self) -> dict[str, str]:
        """Each model's letter, as the tables mark them."""
        return {model: _letter(i) for i, model in enumerate(self.models)}

    def _records(self) -> list[dict]:
        rows = []
        for i, model in enumerate(self.models):
            for standing in self.standings:
                rows.append(
                    {
                        "model": model,
                        "metric": standing.metric,
                        "value": float(standing.value[i]),
                        "ci_low": float(standing.interval[i, 0]),
                        "ci_high": float(standing.interval[i, 1]),
                        "best": model in standing.best_models,
                        "tied_with_best": model in standing.tied,
                        "better_than": standing.better_than(model),
                        "reliable": bool(standing.reliable[i]),
                    }
                )
        return rows

    def to_pandas(self) -> pandas.DataFrame:
        """The tidy table: one row per model and metric.

        Returns
        -------
        pandas.DataFrame
            Columns ``model``, ``metric``, ``value``, ``ci_low``, ``ci_high`` (the interval at
            :attr:`level`), ``best`` (True for every model with the highest value),
            ``tied_with_best``, ``better_than`` (the tuple of models this one is
            significantly better than) and ``reliable``
            (:attr:`MetricStanding.reliable`), models in order, each with its metrics in order.
        """
        try:
            import pandas as pd
        except ModuleNotFoundError:
            raise ModuleNotFoundError(
                'Leaderboard.to_pandas needs pandas: pip install "pandas>=1.5"'
            ) from None
        return pd.DataFrame(self._records())

    def _cells(self, digits: int, bold: str, mark: str, escape, dagger: str) -> list[list[str]]:
        """Rows ``[letter, model, value per metric]``: the best in ``bold``, ``dagger`` after
        an estimate its weights flag as unreliable, the letters of the models a value is
        significantly better than in ``mark``."""
        letters = self.letters
        rows = []
        for i, model in enumerate(self.models):
            row = [letters[model], escape(model)]
            for standing in self.standings:
                text = significant(float(standing.value[i]), digits)
                if model in standing.best_models:
                    text = bold.format(text)
                if not standing.reliable[i]:
                    text += dagger
                beaten = standing.better_than(model)
                if beaten:
                    separator = "," if len(self.models) > 26 else ""
                    text += mark.format(separator.join(letters[b] for b in beaten))
                row.append(text)
            rows.append(row)
        return rows

    def _legend(self, superscript: str, p: str, dagger: str) -> str:
        """What the marks mean: bold, the superscripts (with several models; ``p`` formats the
        significance level) and the daggers (when an estimate has one)."""
        if any(len(s.best_models) > 1 for s in self.standings):
            text = "Bold: the best model(s) of each metric, every one with the highest value."
        else:
            text = "Bold: the best model of each metric."
        pairs = len(self.models) * (len(self.models) - 1) // 2
        if pairs:
            text += (
                f" {superscript} ({_TESTS} over users, {_LABEL[self.correction]}-corrected over "
                f"each metric's {pairs} pair{'s' if pairs != 1 else ''}, {p.format(self.alpha)})."
            )
        if any(not s.reliable.all() for s in self.standings):
            text += (
                f" {dagger}: the weights' diagnostics flag the estimate as unreliable (a few "
                "interactions or users carry it)."
            )
        return text

    def to_markdown(self, digits: int = SIGNIFICANT_DIGITS) -> str:
        """A Markdown table, one row per model and one column per metric, and a line saying
        what the marks mean.

        Parameters
        ----------
        digits : int
            Significant digits of the values.

        Returns
        -------
        str
            ``**value**`` for the best of each metric; ``^bc`` after a value: the model is
            significantly better than models b and c.

        """
        head = "| # | model | " + " | ".join(_markdown(m) for m in self.metrics) + " |"
        lines = [head, "|---|---|" + "---|" * len(self.metrics)]
        for row in self._cells(digits, "**{}**", "^{}", _markdown, "†"):
            lines.append("| " + " | ".join(row) + " |")
        legend = self._legend("^xy: significantly better than models x and y", "p < {:g}", "†")
        return "\n".join(lines) + "\n\n" + legend

    def to_latex(self, digits: int = SIGNIFICANT_DIGITS, label: str = "tab:leaderboard") -> str:
        """A booktabs table (``\\toprule``, ``\\midrule``, ``\\bottomrule``) in a ``table``
        float whose caption says what the marks mean; needs ``\\usepackage{booktabs}``.

        Parameters
        ----------
        digits : int
            Significant digits of the values.
        label : str
            The table's ``\\label``.

        Returns
        -------
        str
            One row per model (its letter, its name), one column per metric; the best of each
            metric in ``\\textbf``, and after a value ``\\textsuperscript{bc}``: the model is
            significantly better than models b and c.

        """
        caption = self._legend(_SUPERSCRIPT, "$p < {:g}$", r"\dag")
        lines = [
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{caption}}}",
            rf"\label{{{label}}}",
            rf"\begin{{tabular}}{{ll{'l' * len(self.metrics)}}}",
            r"\toprule",
            r"\# & Model & " + " & ".join(_latex(m) for m in self.metrics) + r" \\",
            r"\midrule",
        ]
        marks = (r"\textbf{{{}}}", r"\textsuperscript{{{}}}", _latex, r"\dag")
        for row in self._cells(digits, *marks):
            lines.append(" & ".join(row) + r" \\")
        lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(lines)

    def to_html(self, digits: int = SIGNIFICANT_DIGITS) -> str:
        """An HTML table with a caption saying what the marks mean: the best of each metric in
        ``<b>``, the letters of the models a value is significantly better than in ``<sup>``.
        """
        # imported on use: start-up time (docs/performance.md)
        import html

        caption = html.escape(self._legend(_SUPERSCRIPT, "p < {:g}", "†"))
        head = "".join(f"<th>{html.escape(m)}</th>" for m in self.metrics)
        lines = [
            "<table>",
            f"<caption>{caption}</caption>",
            f"<thead><tr><th>#</th><th>model</th>{head}</tr></thead>",
            "<tbody>",
        ]
        for row in self._cells(digits, "<b>{}</b>", "<sup>{}</sup>", html.escape, "†"):
            lines.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
        lines += ["</tbody>", "</table>"]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return self.to_html()

    def to_json(self) -> str:
        """Every number of the leaderboard as JSON: the settings, the tidy rows of
        :meth:`to_pandas` (``better_than`` a list) and, per metric, the test that decided the
        tied set and the corrected p-value of every ordered pair of models.
        """
        rows = [dict(row, better_than=list(row["better_than"])) for row in self._records()]
        document = {
            "level": self.level,
            "alpha": self.alpha,
            "correction": self.correction,
            "models": list(self.models),
            "metrics": list(self.metrics),
            "rows": rows,
            "tied_by": {s.metric: s.tied_by for s in self.standings},
            "p_values": {
                s.metric: {
                    a: {b: float(s.p_value[i, j]) for j, b in enumerate(s.models) if j != i}
                    for i, a in enumerate(s.models)
                }
                for s in self.standings
            },
        }
        return json.dumps(document, indent=2, ensure_ascii=False)

    def to_csv(self) -> str:
        """The tidy rows of :meth:`to_pandas` as CSV, ``better_than`` joined by ``;``."""
        out = io.StringIO()
        rows = self._records()
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow(dict(row, better_than=";".join(row["better_than"])))
        return out.getvalue()

    def to(self, format: str) -> str:
        """The leaderboard as text in ``format``, one of :data:`FORMATS`: ``"latex"``
        (:meth:`to_latex`), ``"markdown"``, ``"html"``, ``"json"`` or ``"csv"``.
        """
        if not isinstance(format, str) or format not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {shown(format)}")
        return getattr(self, f"to_{format}")()

    def export(self, format: str, path=None) -> str:
        """:meth:`to` ``format``, also written to the file ``path`` (UTF-8) when given."""
        text = self.to(format)
        if path is not None:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text if text.endswith("\n") else text + "\n")
        return text

    def plot_forest(self, metric: str | None = None, ax=None):
        """Every model's estimate with its interval, one panel per metric: the best in red
        with its name in bold, the models tied with it in orange, the others in blue.

        Parameters
        ----------
        metric : str, optional
            Draw this metric only; all of them by default.
        ax : matplotlib Axes or sequence of Axes, optional
            Where to draw: one Axes per panel; a new figure by default.

        Returns
        -------
        matplotlib.axes.Axes or list of Axes
            The Axes of ``metric``, or with ``metric=None`` one per metric.
        """
        from .._plots import axes

        wanted = self.metrics if metric is None else (self.metrics[self._metric_index(metric)],)
        if ax is None:
            panels = axes(
                None,
                "Leaderboard.plot_forest",
                ncols=len(wanted),
                squeeze=False,
                figsize=(3.4 * len(wanted) + 1.0, 0.4 * len(self.models) + 2.0),
            )[0]
        else:
            panels = [ax] if metric is not None or len(wanted) == 1 else list(ax)
            if len(panels) != len(wanted):
                raise ValueError(
                    f"ax must hold one Axes per metric ({len(wanted)}), got {len(panels)}"
                )
        for panel, name in zip(panels, wanted, strict=True):
            self._forest_panel(panel, self[name])
        panels[0].figure.tight_layout()
        return panels[0] if metric is not None else list(panels)

    def _forest_panel(self, ax, standing: MetricStanding) -> None:
        m = len(self.models)
        kinds = {
            "best": ("C3", "best"),
            "tied": ("C1", f"tied with the best ({standing.tied_by})"),
            "other": ("C0", "significantly below the best"),
        }
        shown_kinds = set()
        for i, model in enumerate(self.models):
            kind = (
                "best"
                if model in standing.best_models
                else "tied"
                if model in standing.tied
                else "other"
            )
            color, label = kinds[kind]
            value = standing.value[i]
            low, high = standing.interval[i]
            ax.errorbar(
                value,
                m - 1 - i,
                xerr=[[value - low], [high - value]],
                fmt="o",
                color=color,
                capsize=3,
                label=None if kind in shown_kinds else label,
            )
            shown_kinds.add(kind)
        ax.set_yticks(range(m - 1, -1, -1), list(self.models))
        for tick, model in zip(ax.get_yticklabels(), self.models, strict=True):
            if model in standing.best_models:
                tick.set_fontweight("bold")
        ax.set_ylim(-0.7, m - 0.3)
        ax.set_title(standing.metric, fontsize=10)
        ax.set_xlabel(f"value ({self.level:.0%} interval)")
        # Below the axes, where it hides no interval.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), frameon=False)

    def plot_significance(self, metric: str, ax=None):
        """The corrected p-values of every pair of models on ``metric`` as a heatmap, each cell
        labelled with its p-value, a star on the pairs significant at ``alpha``.

        Parameters
        ----------
        metric : str
            The metric whose pairwise tests to draw.
        ax : matplotlib Axes, optional
            Where to draw; a new figure by default.

        Returns
        -------
        matplotlib.axes.Axes
        """
        from .._plots import axes

        standing = self[metric]
        m = len(self.models)
        ax = axes(ax, "Leaderboard.plot_significance", figsize=(2.6 + 0.9 * m, 1.6 + 0.8 * m))
        shown_p = standing.p_value.copy()
        np.fill_diagonal(shown_p, np.nan)
        image = ax.imshow(shown_p, vmin=0.0, vmax=1.0, cmap="Blues_r")
        significant_pair = standing.p_value < self.alpha
        for s in range(m):
            for t in range(m):
                if s == t:
                    continue
                star = significant_pair[s, t]
                ax.text(
                    t,
                    s,
                    f"{standing.p_value[s, t]:.2g}" + ("*" if star else ""),
                    ha="center",
                    va="center",
                    fontsize=8,
                    fontweight="bold" if star else "normal",
                    color="white" if standing.p_value[s, t] < 0.5 else "black",
                )
        ax.set_xticks(range(m), list(self.models), rotation=45, ha="right")
        ax.set_yticks(range(m), list(self.models))
        ax.set_title(
            f"{standing.metric}\n{_LABEL[self.correction]}-corrected p, * below {self.alpha:g}",
            fontsize=9,
        )
        ax.figure.colorbar(image, ax=ax, label="corrected p-value")
        ax.figure.tight_layout()
        return ax


def labelled(estimates: Mapping[str, Mapping[str, PairedEstimate]]) -> dict:
    """``estimates[model][key]`` keyed by each estimate's own name (``"IPS-DCG@10"``) instead
    of ``key`` (the registry's ``"ips_dcg"``), for a leaderboard whose columns read as the
    estimates print."""
    return {model: {e.name: e for e in by_key.values()} for model, by_key in estimates.items()}


def leaderboard_of(
    metrics, results_of: Callable[[str], Mapping[str, PairedEstimate]], **options
) -> Leaderboard:
    """:func:`leaderboard` of the ``metrics`` a framework's run holds, ``results_of(metric)``
    giving model → estimate (the adapters' ``metric_results``); ``options`` are
    :func:`leaderboard`'s. ``metrics`` must be a list of names."""
    if isinstance(metrics, str) or not all(isinstance(m, str) for m in metrics):
        raise TypeError(f"metrics must be a list of metric names or None, got {shown(metrics)}")
    found = {metric: results_of(metric) for metric in metrics}
    models = next(iter(found.values()), {})
    return leaderboard({m: {k: found[k][m] for k in metrics} for m in models}, **options)


def leaderboard(
    results: Mapping[str, Mapping[str, PairedEstimate]],
    level: float = 0.95,
    alpha: float = 0.05,
    correction: str = "holm",
) -> Leaderboard:
    """The leaderboard of several models on several metrics (module docstring).

    Parameters
    ----------
    results : mapping of str to mapping of str to PairedEstimate
        ``results[model][metric]``: every model's estimate of every metric, all models with
        the same metrics, every metric's estimates over the same users (for Spark's
        summaries: from one pass).
    level : float
        Confidence level of the intervals, in (0, 1).
    alpha : float
        Significance level of the pairwise tests and of the tied set, in (0, 1).
    correction : {"holm", "bonferroni", "bh", "none"}
        Correction of each metric's pairwise p-values over its M(M − 1)/2 pairs
        (:func:`~recpack_ope.inference.significance.adjust_p_values`).

    Returns
    -------
    Leaderboard

    Examples
    --------
    >>> import numpy as np
    >>> from recpack_ope.inference import EstimateResult, leaderboard
    >>> def result(values):
    ...     return EstimateResult("DCG@10", np.array(values), (1,), np.arange(4), 0)
    >>> board = leaderboard({"a": {"DCG@10": result([0.5, 1.0, 0.0, 1.0])},
    ...                      "b": {"DCG@10": result([1.0, 1.0, 1.0, 0.5])}})
    >>> board["DCG@10"].best, board["DCG@10"].tied, board["DCG@10"].tied_by
    ('b', ('a', 'b'), "Hsu's MCB, α=0.05")
    """
    level = check_fraction(level, "level")
    alpha = check_fraction(alpha, "alpha")
    if not isinstance(correction, str) or correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {shown(correction)}")
    models, metrics = _metrics_of(results)
    standings = tuple(
        _standing(
            metric,
            {model: results[model][metric] for model in models},
            level,
            alpha,
            correction,
        )
        for metric in metrics
    )
    return Leaderboard(models, metrics, standings, level, alpha, correction)
