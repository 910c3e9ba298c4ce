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
Reading needs pandas (the ``trec`` extra; from a clone: ``pip install ".[trec]"``). When pyarrow
is installed, files with one space between fields (the usual layout) are parsed by its CSV reader;
any other file, and any file it refuses, goes through pandas' C parser, which also words the
error messages. Both parse numbers exactly as Python's ``float`` (the reference's parser).
"""

from __future__ import annotations

import codecs
import gzip
import io
import mmap
import os
import zlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._validation import check_finite_number
from ..metrics.ranking import TopK

__all__ = ["TrecCollection", "read_trec", "run_name"]


def _pandas():
    try:
        import pandas
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            'reading trec files needs pandas: in a clone of recpack-ope, pip install ".[trec]"',
            name="pandas",
        ) from None
    return pandas


def _pyarrow():
    """pyarrow with its CSV reader, or None when it is not installed."""
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.csv
    except ModuleNotFoundError:
        return None
    return pyarrow


@dataclass(frozen=True)
class _Columns:
    """Two text columns as codes into their distinct values, and one numeric column. The
    first column's codes may be one per stretch of equal consecutive lines (a run lists each
    query's lines together), ``stretches`` holding the line each stretch starts at."""

    keys: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    values: np.ndarray
    stretches: np.ndarray | None = None

    def per_line(self, codes: np.ndarray) -> np.ndarray:
        """Values given per code of the first column (its codes, or what they index), one per
        line."""
        if self.stretches is None:
            return codes
        return np.repeat(codes, np.diff(np.append(self.stretches, self.values.size)))


def _file_bytes(path: str, what: str):
    """The file's bytes, decompressed if gzipped; a plain file is memory-mapped, not copied."""
    if os.path.isdir(path):
        raise ValueError(f"{what} file {path!r} is a directory, not a file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{what} file {path!r} does not exist")
    with open(path, "rb") as handle:
        try:
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # an empty file, or a file system without mmap
            data = handle.read()
    if data[:2] != b"\x1f\x8b":
        return data
    try:
        return gzip.decompress(data)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ValueError(
            f"{what} file {path!r} is a truncated or corrupt gzip file ({exc}); download or "
            "compress it again"
        ) from None


def _single_spaced(data) -> bool:
    """Whether every field is separated by exactly one space, with no tab, quote, carriage
    return or NUL, and the text is valid UTF-8 (pandas before 3 decodes every column, pyarrow
    only the ones it reads): then splitting on single spaces reads what pandas' whitespace
    splitting reads."""
    if not len(data) or data[0] == 32 or data[-1] == 32:
        return False
    if any(data.find(c) >= 0 for c in (b"\t", b'"', b"\r", b"\x00")):
        return False
    # Two adjacent bytes both < 35 (space, newline, control characters, '!', '"') mean a double
    # space, a space next to a line break or an empty line. Blocks that stay in cache are
    # several times faster than whole-file temporaries.
    codes, block = np.frombuffer(data, dtype=np.uint8), 1 << 18
    for start in range(0, codes.size, block):
        low = codes[start : start + block + 1] < 35
        if (low[1:] & low[:-1]).any():
            return False
    if codes.max() > 127:
        try:
            codecs.utf_8_decode(data, "strict", True)
        except UnicodeDecodeError:
            return False
    return True


def _arrow_codes(
    pa, column, *, repeated: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Codes and distinct values of a string column, and None; with ``repeated``, a value
    repeated on consecutive lines (a run's query id) is hashed once per stretch, and the
    codes are the stretches' with the lines where they start."""
    column, n = column.combine_chunks(), len(column)
    starts = None
    if repeated and n > 1:
        changed = pa.compute.not_equal(column.slice(1), column.slice(0, n - 1))
        starts = np.flatnonzero(np.r_[True, changed.to_numpy(zero_copy_only=False)])
        column = column.take(starts)
    encoded = column.dictionary_encode()
    codes, values = encoded.indices.to_numpy(), encoded.dictionary
    # to_numpy builds the str objects much faster than to_pylist on pyarrow < 20.
    return codes, values.to_numpy(zero_copy_only=False).astype(object, copy=False), starts


def _arrow_columns(pa, data, columns: list[int], threads: bool = True) -> _Columns | None:
    """The columns parsed by pyarrow (on its threads, or on the calling thread only), or None
    when pandas should read the file: fields not single-spaced, a line pyarrow refuses, a
    value that is not a finite number (NaN scores are skipped and non-finite grades refused
    with pandas' line numbers)."""
    if not _single_spaced(data):
        return None
    names = [f"f{c}" for c in columns]
    try:
        table = pa.csv.read_csv(
            pa.py_buffer(data),
            read_options=pa.csv.ReadOptions(autogenerate_column_names=True, use_threads=threads),
            parse_options=pa.csv.ParseOptions(delimiter=" ", quote_char=False),
            convert_options=pa.csv.ConvertOptions(
                include_columns=names,
                null_values=[],
                strings_can_be_null=False,
                column_types={names[0]: pa.string(), names[1]: pa.string(), names[2]: pa.float64()},
                check_utf8=False,  # _single_spaced has checked the whole text
            ),
        )
    except pa.ArrowException:
        return None
    values = table.column(names[2]).to_numpy()
    if not np.isfinite(values).all():
        return None
    query, query_values, stretches = _arrow_codes(pa, table.column(names[0]), repeated=True)
    doc, doc_values, _ = _arrow_codes(pa, table.column(names[1]))
    return _Columns(
        keys=((query, query_values), (doc, doc_values)), values=values, stretches=stretches
    )


def _read_columns(path: str, columns: list[int], what: str, threads: bool = True) -> _Columns:
    """The given columns of a whitespace-separated file: two text columns (as codes) and a
    number, with pyarrow when it can parse the file, else pandas. ``threads=False`` when
    other files are being read at the same time."""
    data = _file_bytes(path, what)
    pa = _pyarrow()
    parsed = None if pa is None else _arrow_columns(pa, data, columns, threads)
    return parsed if parsed is not None else _pandas_columns(data, path, columns, what)


def _pandas_columns(data, path: str, columns: list[int], what: str) -> _Columns:
    """The columns as pandas' C parser reads them, with the messages for malformed files."""
    pd = _pandas()
    names = ["first", "second", "value"]
    options = dict(sep=r"\s+", header=None, usecols=columns, na_filter=False, engine="c")
    if int(pd.__version__.split(".")[0]) < 3:
        options["float_precision"] = "round_trip"  # pandas 3 parses exactly by default
    try:
        try:
            frame = pd.read_csv(
                io.BytesIO(data),
                dtype={c: str for c in columns[:-1]} | {columns[-1]: np.float64},
                **options,
            )
        except ValueError:
            # Not plain floats (a decimal comma, a typo): read as text for a precise message.
            frame = pd.read_csv(io.BytesIO(data), dtype=str, **options)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{what} file {path!r} is empty") from None
    except ValueError as exc:
        raise ValueError(f"{what} file {path!r} is not in trec format ({exc})") from None
    frame.columns = names
    missing = np.zeros(len(frame), dtype=bool)
    for name in names[:-1]:
        missing |= (frame[name] == "").to_numpy(dtype=bool, na_value=True)
    if missing.any():
        line = int(np.flatnonzero(missing)[0]) + 1
        raise ValueError(f"{what} file {path!r} has too few columns on line {line}")
    values = frame["value"]
    values = values.to_numpy() if values.dtype == np.float64 else _numbers(values, path, what)
    keys = []
    for name in names[:-1]:
        codes, uniques = pd.factorize(frame[name])
        keys.append((codes, np.asarray(uniques, dtype=object)))
    return _Columns(keys=tuple(keys), values=values)


def _numbers(values, path: str, what: str) -> np.ndarray:
    pd = _pandas()
    text = values.astype(str).str.replace(",", ".", regex=False)
    numbers = pd.to_numeric(text, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.isnan(numbers) & (text.str.lower() != "nan").to_numpy()
    if bad.any():
        line = int(np.flatnonzero(bad)[0]) + 1
        raise ValueError(
            f"{what} file {path!r} has a non-numeric value {values.iloc[line - 1]!r} on line {line}"
        )
    return numbers


def _path(path, what: str) -> str:
    """A file path as str; anything else is refused naming what it should be."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(
            f"a {what} file path must be a str or os.PathLike, got {type(path).__name__}"
        )
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
        isinstance(depth, (bool, np.bool_))
        or not isinstance(depth, (int, float, np.integer, np.floating))
        or not np.isfinite(depth)
        or int(depth) != depth
        or depth < 1
    ):
        raise ValueError(f"depth must be a positive integer or None, got {depth!r}")
    depth = None if depth is None else int(depth)
    if relevance_threshold is not None:
        relevance_threshold = check_finite_number(relevance_threshold, "relevance_threshold")
    _pandas()  # before any file is read, naming what to install
    names = [run_name(path) for path in runs]
    for k, name in enumerate(names):
        if name in names[:k]:
            raise ValueError(f"two run files are both named {name!r}: rename one ({runs[k]!r})")
    # Files are read in parallel, one per thread: pyarrow's parser and most numpy work release
    # the GIL, and whole files overlap better than the blocks of one file. The runs' parsing
    # overlaps the qrels' reading, which is queued first, so a run waiting for the qrels'
    # queries never blocks the pool. A second pass ranks the runs, in parallel too, once the
    # collection's document codes are known.
    workers = max(1, min(len(runs) + 1, os.cpu_count() or 1))
    # imported on use: start-up time (docs/performance.md)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        try:
            return _collection(pool, workers, qrels, runs, names, relevance_threshold, depth)
        except BaseException:
            pool.shutdown(
                cancel_futures=True
            )  # a bad file is reported without reading the files queued
            raise


def _collection(
    pool,
    workers: int,
    qrels: str,
    runs: list[str],
    names: list[str],
    relevance_threshold: float | None,
    depth: int | None,
) -> TrecCollection:
    """:func:`read_trec` on a pool of ``workers`` threads (arguments checked)."""
    judgements = pool.submit(_qrels_lines, qrels, relevance_threshold, threads=workers == 1)

    def read_run(path: str, name: str) -> _Lines:
        return _run_lines(path, name, judgements, threads=workers == 1)

    lines_by_run = pool.map(read_run, runs, names)
    judged, query_ids = judgements.result()  # the qrels' errors come first
    lines_by_run = list(lines_by_run)

    # The collection's documents, sorted: ordering by code is ordering by document id, as
    # trec_eval's tie rule needs. Each file's distinct documents are coded, not its lines.
    parts = [judged.doc_values, *(lines.doc_values for lines in lines_by_run)]
    doc_codes, doc_ids = _pandas().factorize(np.concatenate(parts), sort=True)
    # 32-bit codes halve the traffic of the per-line arrays that follow.
    doc_codes = doc_codes.astype(np.int32 if len(doc_ids) < np.iinfo(np.int32).max else np.int64)
    starts = np.cumsum([0, *(part.size for part in parts)])
    # A document judged under several subtopics keeps its largest grade.
    matrix = pool.submit(
        lambda: _max_duplicates(
            sp.coo_matrix(
                (judged.value, (judged.query, doc_codes[judged.doc])),
                shape=(len(query_ids), len(doc_ids)),
            )
        )
    )

    def ranking(lines: _Lines, start: int, stop: int) -> TopK:
        items = _ranked_items(
            lines.query, doc_codes[start:stop][lines.doc], lines.value, len(query_ids)
        )
        return TopK._trusted(items[:, :depth])

    ranked = pool.map(ranking, lines_by_run, starts[1:-1], starts[2:])
    del lines_by_run  # each run's lines are then freed on its thread once ranked
    rankings = dict(zip(names, ranked, strict=True))
    return TrecCollection(
        query_ids=np.asarray(query_ids, dtype=str),
        doc_ids=np.asarray(doc_ids, dtype=str),
        qrels=matrix.result(),
        runs=rankings,
    )


def _qrels_lines(
    path: str, relevance_threshold: float | None, threads: bool
) -> tuple[_Lines, np.ndarray]:
    """The relevant judgements of a qrels file, their queries numbered in order of their
    first relevant judgement (rows of the matrix), and those queries' ids."""
    columns = _read_columns(path, [0, 2, 3], "qrels", threads)
    (query, query_values), (doc, doc_values) = columns.keys
    query, grade = columns.per_line(query), columns.values
    odd = np.flatnonzero(~np.isfinite(grade))
    if odd.size:
        raise ValueError(
            f"qrels file {path!r} has grade {grade[odd[0]]} on line {odd[0] + 1}; grades are "
            "finite numbers"
        )
    if relevance_threshold is not None:
        grade = (grade >= relevance_threshold).astype(np.float64)
    relevant = grade > 0
    if not relevant.any():
        raise ValueError(f"qrels file {path!r} has no relevant (grade > 0) judgement")
    query, doc, grade = query[relevant], doc[relevant], grade[relevant]
    row, order = _pandas().factorize(query)
    return _Lines(row, *_compact(doc, doc_values), grade), query_values[order]


@dataclass(frozen=True)
class _Lines:
    """The lines of a file that count: query row, document code into ``doc_values`` (the
    distinct documents of these lines), and the grade or score."""

    query: np.ndarray
    doc: np.ndarray
    doc_values: np.ndarray
    value: np.ndarray


def _compact(doc: np.ndarray, doc_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes into the values that ``doc`` uses, and those values."""
    used = np.flatnonzero(np.bincount(doc, minlength=len(doc_values)))
    if used.size == len(doc_values):
        return doc, doc_values
    code = np.full(len(doc_values), -1, dtype=np.int64)
    code[used] = np.arange(used.size)
    return code[doc], doc_values[used]


def _run_lines(path: str, name: str, judgements, threads: bool) -> _Lines:
    """A run's lines of queries of the qrels (rows: positions in the query ids of
    ``judgements``, a future of :func:`_qrels_lines`) with a score (not NaN). A document
    listed twice for a query is refused, below any depth too."""
    columns = _read_columns(path, [0, 2, 4], "run", threads)
    query_ids = judgements.result()[1]
    (query, query_values), (doc, doc_values) = columns.keys
    # A dict, not a pandas Index: pandas 3 converts both sides to Arrow strings first, which
    # costs more than the lookup.
    rows = dict(zip(query_ids.tolist(), range(len(query_ids)), strict=True))
    row_of_query = np.fromiter(
        (rows.get(value, -1) for value in query_values.tolist()), np.int32, len(query_values)
    )
    score = columns.values
    row = columns.per_line(row_of_query.take(query))
    if row_of_query.min() >= 0 and not np.isnan(score).any():
        lines = _Lines(row, doc, doc_values, score)  # every line counts, so every document is used
    else:
        keep = (row >= 0) & ~np.isnan(score)
        lines = _Lines(row[keep], *_compact(doc[keep], doc_values), score[keep])
    query, doc = lines.query, lines.doc
    starts = _stretches(query)
    if not _together(query, starts):
        order = np.argsort(query, kind="stable")
        query, doc = query[order], doc[order]
        starts = _stretches(query)
    _refuse_repeats(
        _padded(query, doc, starts, len(query_ids), doc.dtype), name, path, doc_values, query_ids
    )
    return lines


def _refuse_repeats(
    items: np.ndarray, name: str, path: str, doc_ids: np.ndarray, query_ids: np.ndarray
) -> None:
    """Refuse rows (queries) that list a document (code) twice, naming the first such pair by
    (row, document id)."""
    ordered = np.sort(items, axis=1)
    repeated = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)
    if repeated.any():
        row = np.flatnonzero(repeated.any(axis=1))[0]
        doc = min(str(doc_ids[code]) for code in ordered[row, 1:][repeated[row]])
        raise ValueError(
            f"run {name!r} ({path}) lists document {doc!r} twice for query {str(query_ids[row])!r}"
        )


def _max_duplicates(matrix: sp.coo_matrix) -> sp.csr_matrix:
    """CSR matrix keeping the largest of duplicate (row, column) entries (not their sum)."""
    order = np.lexsort((matrix.data, matrix.col, matrix.row))
    row, col, data = matrix.row[order], matrix.col[order], matrix.data[order]
    last = np.r_[(row[1:] != row[:-1]) | (col[1:] != col[:-1]), True]
    return sp.csr_matrix((data[last], (row[last], col[last])), shape=matrix.shape)


def _stretches(query: np.ndarray) -> np.ndarray:
    """Where each stretch of lines of one query starts."""
    return np.flatnonzero(np.r_[query.size > 0, query[1:] != query[:-1]])


def _together(query: np.ndarray, starts: np.ndarray) -> bool:
    """Whether each query's lines are in one stretch."""
    firsts = np.sort(query[starts])
    return not (firsts[1:] == firsts[:-1]).any()


def _padded(
    query: np.ndarray, code: np.ndarray, starts: np.ndarray, n_queries: int, dtype
) -> np.ndarray:
    """Codes of lines grouped by query (``starts`` of their stretches) as rows, in line order,
    padded with -1 (queries × longest list)."""
    if query.size == 0:
        return np.full((n_queries, 1), -1, dtype=dtype)
    lengths = np.diff(np.append(starts, query.size))
    rows = np.full((n_queries, lengths.max()), -1, dtype=dtype)
    if (lengths == lengths[0]).all():  # as many documents for every query (a run's depth)
        rows[query[starts]] = code.reshape(starts.size, lengths[0])
    else:
        position = np.arange(query.size) - np.repeat(starts, lengths)
        rows.ravel()[query.astype(np.int64) * rows.shape[1] + position] = code
    return rows


def _ranked_items(
    query: np.ndarray, code: np.ndarray, score: np.ndarray, n_queries: int
) -> np.ndarray:
    """Each query's documents by decreasing score, ties by decreasing code (trec_eval's rule),
    as 64-bit rows padded with -1 (queries × longest list)."""
    starts, changed = _stretches(query), query[1:] != query[:-1]
    if _together(query, starts) and ((score[1:] <= score[:-1]) | changed).all():
        # The usual layout (each query's lines together, by decreasing score): only stretches
        # of tied scores may need reordering, by decreasing code.
        tied = ~changed & (score[1:] == score[:-1])
        if (tied & (code[1:] > code[:-1])).any():
            # Sorting (stretch, −code) keys keeps every row in its stretch, hence its query;
            # 32-bit keys sort about twice as fast.
            width = int(code.max()) + 1
            dtype = np.int32 if (code.size + 1) * width < np.iinfo(np.int32).max else np.int64
            shift = np.cumsum(np.r_[True, ~tied], dtype=dtype) * dtype(width)
            code = shift - np.sort(shift - code.astype(dtype, copy=False))
    else:
        order = np.lexsort((-code, -score, query))
        query, code = query[order], code[order]
        starts = _stretches(query)
    return _padded(query, code, starts, n_queries, np.int64)
