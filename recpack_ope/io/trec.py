"""Reading trec_eval-format relevance judgements (qrels) and runs into matrices.

* qrels: ``query_id  subtopic  doc_id  grade`` per line. A grade ≤ 0 is not relevant; a document
  judged under several subtopics keeps its largest grade; queries without a relevant document
  are dropped (no preference is defined for them).
* run: ``query_id  iteration  doc_id  rank  score  [run_id]`` per line. As in trec_eval and the
  RPP reference implementation, the rank column is ignored: documents are ranked by score,
  ties by document id in reverse lexicographic order. Lines with a NaN score are skipped,
  queries absent from the qrels are ignored, and a query the run lacks has every relevant
  document omitted (worst case). Gzipped files are read transparently.

The run's name is its file name without ``input.`` and ``.gz``, as in the reference.
Reading uses pandas' C parser (the ``trec`` extra; from a clone: ``pip install ".[trec]"``).
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._validation import check_finite_number
from ..metrics.ranking import TopK

__all__ = ["TrecCollection", "read_trec", "run_name"]


def _compression(path: str) -> str | None:
    with open(path, "rb") as handle:
        return "gzip" if handle.read(2) == b"\x1f\x8b" else None


def _pandas():
    try:
        import pandas
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            'reading trec files needs pandas: in a clone of recpack-ope, pip install ".[trec]"', name="pandas"
        ) from None
    return pandas


def _read_columns(path: str, columns: list[int], names: list[str], what: str):
    """The given columns of a whitespace-separated file (a DataFrame); the last one parsed as a number."""
    pd = _pandas()
    if os.path.isdir(path):
        raise ValueError(f"{what} file {path!r} is a directory, not a file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} file {path!r} does not exist")
    compression = _compression(path)
    options = dict(sep=r"\s+", header=None, usecols=columns, na_filter=False,
                   compression=compression, engine="c")
    try:
        try:
            frame = pd.read_csv(path, dtype={c: str for c in columns[:-1]} | {columns[-1]: np.float64}, **options)
        except ValueError:
            # Not plain floats (a decimal comma, a typo): read as text for a precise message.
            frame = pd.read_csv(path, dtype=str, **options)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{what} file {path!r} is empty") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ValueError(
            f"{what} file {path!r} is a truncated or corrupt gzip file ({exc}); download or "
            "compress it again"
        ) from None
    except ValueError as exc:
        raise ValueError(f"{what} file {path!r} is not in trec format ({exc})") from None
    frame.columns = names
    missing = np.zeros(len(frame), dtype=bool)
    for name in names[:-1]:
        missing |= (frame[name] == "").to_numpy(dtype=bool, na_value=True)
    if missing.any():
        line = int(np.flatnonzero(missing)[0]) + 1
        raise ValueError(f"{what} file {path!r} has too few columns on line {line}")
    if frame[names[-1]].dtype != np.float64:
        frame[names[-1]] = _numbers(frame[names[-1]], path, what)
    return frame


def _numbers(values, path: str, what: str) -> np.ndarray:
    pd = _pandas()
    text = values.astype(str).str.replace(",", ".", regex=False)
    numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.isnan(numbers) & (text.str.lower() != "nan").to_numpy()
    if bad.any():
        line = int(np.flatnonzero(bad)[0]) + 1
        raise ValueError(f"{what} file {path!r} has a non-numeric value {values.iloc[line - 1]!r} on line {line}")
    return numbers


def _path(path, what: str) -> str:
    """A file path as str; anything else is refused naming what it should be."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"a {what} file path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fsdecode(path)


def run_name(path: str) -> str:
    """A run's name: its file name without ``input.`` and ``.gz`` (the reference's rule)."""
    return os.path.basename(path).replace("input.", "").replace(".gz", "")


@dataclass(frozen=True, eq=False)
class TrecCollection:
    """Qrels and runs on a shared query × document index.

    Attributes
    ----------
    query_ids : numpy.ndarray of str
        Queries with at least one relevant document, in qrels order (rows).
    doc_ids : numpy.ndarray of str
        Every document of the qrels and the runs (columns).
    qrels : scipy.sparse.csr_matrix
        Relevance grades (queries × documents), only grades > 0 stored.
    runs : dict of str to TopK
        Run name → its ranking of each query's documents.
    """

    query_ids: np.ndarray
    doc_ids: np.ndarray
    qrels: sp.csr_matrix
    runs: dict[str, TopK]


def read_trec(
    qrels: str,
    runs: list[str],
    *,
    relevance_threshold: float | None = None,
    depth: int | None = None,
) -> TrecCollection:
    """Read a qrels file and run files (module docstring) into a :class:`TrecCollection`.

    Parameters
    ----------
    qrels : str or os.PathLike
        Path of the qrels file.
    runs : list of str or os.PathLike
        Paths of the run files, one system each (a list even for one run).
    relevance_threshold : float or None
        Binarise grades: relevant (1) when ``grade ≥ threshold``, else not relevant; None
        keeps the grades (the reference's ``--binary_relevance``).
    depth : int or None
        Keep only each query's top ``depth`` documents of every run (``--topk``).

    Raises
    ------
    ValueError
        For a single path given as ``runs``, an invalid ``depth`` or threshold, and files
        that are empty, truncated or corrupt gzip, not in trec format, or with a grade that
        is not finite (each naming the file and line).
    FileNotFoundError
        For a path that does not exist.
    """
    if isinstance(runs, (str, bytes, os.PathLike)):
        raise ValueError(
            f"runs must be a list of run file paths, got the single path {os.fsdecode(runs)!r}: "
            "pass [path] for one run"
        )
    try:
        runs = [_path(path, "run") for path in list(runs)]
    except TypeError as exc:
        raise TypeError(f"runs must be a list of run file paths: {exc}") from None
    qrels = _path(qrels, "qrels")
    if depth is not None and (
        isinstance(depth, (bool, np.bool_)) or not isinstance(depth, (int, float, np.integer, np.floating))
        or not np.isfinite(depth) or int(depth) != depth or depth < 1
    ):
        raise ValueError(f"depth must be a positive integer or None, got {depth!r}")
    if relevance_threshold is not None:
        relevance_threshold = check_finite_number(relevance_threshold, "relevance_threshold")
    pd = _pandas()
    judged = _read_columns(qrels, [0, 2, 3], ["query", "doc", "grade"], "qrels")
    odd = np.flatnonzero(~np.isfinite(judged["grade"].to_numpy()))
    if odd.size:
        raise ValueError(
            f"qrels file {qrels!r} has grade {judged['grade'].iloc[odd[0]]} on line {odd[0] + 1}; "
            "grades are finite numbers"
        )
    if relevance_threshold is not None:
        judged["grade"] = (judged["grade"].to_numpy() >= relevance_threshold).astype(np.float64)
    judged = judged[judged["grade"] > 0].groupby(["query", "doc"], sort=False, as_index=False)["grade"].max()
    if judged.empty:
        raise ValueError(f"qrels file {qrels!r} has no relevant (grade > 0) judgement")
    query_codes, query_ids = pd.factorize(judged["query"], sort=False)

    names, frames = [], []
    for path in runs:
        name = run_name(path)
        if name in names:
            raise ValueError(f"two run files are both named {name!r}: rename one ({path!r})")
        frame = _read_columns(path, [0, 2, 4], ["query", "doc", "score"], "run")
        q = query_ids.get_indexer(frame["query"])
        frame = frame.assign(q=q)[(q >= 0) & ~np.isnan(frame["score"].to_numpy())]
        names.append(name)
        frames.append(frame)

    # Sorted codes: ordering by code is ordering by document id, for trec_eval's tie rule.
    doc_codes, doc_ids = pd.factorize(
        pd.concat([judged["doc"], *[f["doc"] for f in frames]], ignore_index=True), sort=True
    )
    n_queries, n_docs = len(query_ids), len(doc_ids)
    matrix = sp.csr_matrix(
        (judged["grade"].to_numpy(), (query_codes, doc_codes[: len(judged)])), shape=(n_queries, n_docs)
    )
    rankings, offset = {}, len(judged)
    for name, frame, path in zip(names, frames, runs, strict=True):
        code = doc_codes[offset : offset + len(frame)]
        offset += len(frame)
        q = frame["q"].to_numpy()
        key = np.sort(q.astype(np.int64) * n_docs + code)
        if (key[1:] == key[:-1]).any():
            dup = key[1:][key[1:] == key[:-1]][0]
            raise ValueError(f"run {name!r} ({path}) lists document {doc_ids[dup % n_docs]!r} twice "
                             f"for query {query_ids[dup // n_docs]!r}")
        order = np.lexsort((-code, -frame["score"].to_numpy(), q))
        q, code = q[order], code[order]
        position = np.arange(q.size) - np.searchsorted(q, q)
        keep = position < (depth or np.inf)
        width = int(position[keep].max()) + 1 if keep.any() else 1
        items = np.full((n_queries, width), -1, dtype=np.int64)
        items[q[keep], position[keep]] = code[keep]
        rankings[name] = TopK(items)
    return TrecCollection(query_ids=np.asarray(query_ids, dtype=str), doc_ids=np.asarray(doc_ids, dtype=str),
                          qrels=matrix, runs=rankings)
