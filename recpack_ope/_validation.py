"""Input checks shared by the estimators and propensity models.

Every message names the offending value and where it sits, so a user can find it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp


class NonNumericError(TypeError, ValueError):
    """Values that are not numbers (text, dates, arbitrary objects) where numbers are needed.

    A TypeError, since the values have the wrong type, and a ValueError like every other
    refused input, so callers that report refused inputs (``except ValueError``) catch it too.
    """


def as_csr(matrix, name: str, *, duplicates: str = "sum") -> sp.csr_matrix:
    """Canonical float64 CSR copy of a users×items matrix (dense, sparse or a pandas DataFrame).

    Parameters
    ----------
    matrix : scipy.sparse matrix or array, array_like or pandas.DataFrame
        A sparse matrix is checked structurally (:func:`check_sparse`) before any compiled
        code reads it. A DataFrame is aligned by its labels (:func:`real_array`).
    name : str
        The argument's name, for messages.
    duplicates : {"sum", "refuse"}
        What to do with a (row, column) stored more than once (a COO matrix, or a CSR matrix
        that is not canonical): ``"sum"`` adds them up, as scipy does (repeated clicks on an
        item become one graded reward), in float64 so small integer types cannot overflow;
        ``"refuse"`` raises, naming the first repeated entry (for probabilities, which must
        never be summed).

    Raises
    ------
    ValueError
        For a corrupt sparse structure, complex or non-numeric values, 64-bit integers beyond
        ±2**53 (which float64 would round), a shape that is not 2-D, or refused duplicates.
    """
    if duplicates not in ("sum", "refuse"):
        raise ValueError(f"duplicates must be 'sum' or 'refuse', got {duplicates!r}")
    if sp.issparse(matrix):
        checked = check_sparse(matrix, name)
        check_float_exact(checked.data, name, lambda k: _stored_position(checked, k))
        # float64 before any summing: duplicates of a small integer type would overflow.
        out = sp.csr_matrix(checked.astype(np.float64))
        stored = checked.nnz
    else:
        arr = real_array(matrix, name, axes=("user", "item"))
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D users×items matrix, got shape {arr.shape}")
        check_float_exact(
            arr, name, lambda k: _describe(np.unravel_index(k, arr.shape), ("user", "item"))
        )
        out = sp.csr_matrix(arr.astype(np.float64, copy=False))
        stored = out.nnz
    out.sum_duplicates()
    out.sort_indices()
    if duplicates == "refuse" and out.nnz < stored:
        u, i = first_duplicate(checked)
        raise ValueError(
            f"{name} stores (user {u}, item {i}) more than once; its values cannot be summed: "
            "give each entry once"
        )
    return out


def entry_position(matrix: sp.csr_matrix, k: int) -> tuple[int, int]:
    """(row, column) of the k-th stored entry of a CSR matrix."""
    row = int(np.searchsorted(matrix.indptr, k, side="right") - 1)
    return row, int(matrix.indices[k])


def check_rewards(
    y_true: sp.csr_matrix,
    name: str = "y_true",
    what: str = "rewards must be finite and >= 0",
    *,
    upper: float | None = None,
) -> None:
    """Rewards must be finite and non-negative (Jeunen et al. Eq. 10 needs ``c ≥ 0``) and, with
    ``upper``, at most ``upper``; the message names the matrix (``name``), the first offending
    value with its (user, item) and the rule (``what``)."""
    bad = ~np.isfinite(y_true.data) | (y_true.data < 0)
    if upper is not None:
        bad |= y_true.data > upper
    bad = np.flatnonzero(bad)
    if bad.size:
        u, i = entry_position(y_true, bad[0])
        raise ValueError(
            f"{name} has {'reward' if name == 'y_true' else 'value'} {float(y_true.data[bad[0]])} "
            f"at (user {u}, item {i}); {what}"
        )


def check_impressions(impressions, shape: tuple[int, int] | None = None) -> sp.csr_matrix:
    """``impressions`` as a canonical float64 CSR matrix, checked: ``e_ui`` is the probability
    that the user examined item i where the logging policy showed it, so every value is finite
    and in [0, 1] (a bool "shown" record counts as 0/1). ``shape`` is that of ``y_true``.

    Examples
    --------
    >>> check_impressions([[1.0, 0.5], [0, 0]]).nnz
    2
    >>> check_impressions([[2, 0]])
    Traceback (most recent call last):
    ...
    ValueError: impressions has value 2.0 at (user 0, item 0); impressions are examination \
probabilities: finite and in [0, 1]
    """
    shown = as_csr(impressions, "impressions")
    if shape is not None and shown.shape != tuple(shape):
        raise ValueError(f"impressions has shape {shown.shape} but y_true has {tuple(shape)}")
    check_rewards(
        shown,
        "impressions",
        "impressions are examination probabilities: finite and in [0, 1]",
        upper=1.0,
    )
    return shown


def check_propensities(
    values: np.ndarray, describe: Callable[[int], str], name: str = "propensity"
) -> None:
    """Propensities are probabilities of exposure: finite and in (0, 1].

    ``describe(k)`` names the k-th value for the error message, e.g. ``"item 17"``; ``name``
    is the argument that holds them, named in the message unless it is ``propensity``.

    Examples
    --------
    >>> check_propensities(np.array([0.5, np.nan]), lambda k: f"item {k}", "stratify_by")
    Traceback (most recent call last):
    ...
    ValueError: stratify_by: propensity nan of item 1 lies outside (0, 1]; ...
    """
    bad = ~np.isfinite(values) | (values <= 0) | (values > 1)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        prefix = "" if name == "propensity" else f"{name}: "
        raise ValueError(
            f"{prefix}propensity {float(values[k])} of {describe(k)} lies outside (0, 1]; "
            "propensities are exposure probabilities"
        )


def check_positive_int(value, name: str, *, allow_none: bool = False) -> int | None:
    """``value`` as an int >= 1 (or None where allowed); the message names the parameter."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        options = " or None" if allow_none else ""
        raise ValueError(f"{name} must be a positive integer{options}, got {shown(value)}")
    return int(value)


def check_clip(clip, *, allow_auto: bool = False) -> float | str:
    """Clipping threshold m of ``w = min(m, 1/p)`` (Jeunen et al. §6.2).

    None means no clipping (m = ∞, returned as ``inf``); ``"auto"``, where the estimator can
    select m from the data, is returned as is. Anything else must be a finite number >= 1:
    inverse propensities ``1/p`` are at least 1, so an m below 1 would clip every weight to m
    and only rescale the metric by m (m = 1 is the unweighted metric).

    Examples
    --------
    >>> check_clip(None), check_clip(1), check_clip("auto", allow_auto=True)
    (inf, 1.0, 'auto')
    >>> check_clip(0.5)
    Traceback (most recent call last):
    ...
    ValueError: clip = 0.5 is below 1: ...
    """
    options = "a finite number >= 1, None for no clipping" + (' or "auto"' if allow_auto else "")
    if clip is None:
        return np.inf
    if isinstance(clip, str) and allow_auto and clip == "auto":
        return clip
    if isinstance(clip, (bool, str)) or not isinstance(clip, (int, float, np.integer, np.floating)):
        raise ValueError(f"clip must be {options}, got {shown(clip)}")
    m = float(clip)
    if not (np.isfinite(m) and m > 0):
        raise ValueError(f"clip must be {options}, got {shown(clip)}")
    if m < 1:
        raise ValueError(
            f"clip = {shown(clip)} is below 1: inverse propensities 1/p are at least 1, so it "
            f"would clip every weight to {shown(clip)} and only rescale the metric by it; give "
            "clip >= 1 (1 is the unweighted metric), None for no clipping"
            + (' or "auto"' if allow_auto else "")
        )
    return m


# Largest magnitude up to which float64 represents every integer exactly.
EXACT_INTEGER_LIMIT = 2**53
_COMPRESSED = {
    "csr": ("row", "column"),
    "csc": ("column", "row"),
    "bsr": ("block row", "block column"),
}


def shown(value) -> str:
    """``repr`` of a value for messages, numpy scalars as plain Python numbers (numpy 2 would
    print ``np.int64(3)``)."""
    return repr(value.item() if isinstance(value, np.generic) else value)


def check_key_space(shape: tuple[int, int], name: str) -> None:
    """Stored entries are addressed by the int64 key ``row · n_columns + column``; the shape
    must keep every key below 2**63."""
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2-D users×items matrix, got shape {shape}")
    if int(shape[0]) * int(shape[1]) >= 2**63:
        raise ValueError(
            f"{name} has shape {tuple(shape)}: n_users × n_items must stay below 2**63, the "
            "range of the int64 keys that address its entries"
        )


def _index_array(values, name: str, what: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(
            f"{name} is a corrupt sparse matrix: its {what} array must be 1-D integers, got "
            f"dtype {arr.dtype} and shape {arr.shape}"
        )
    return arr


def first_outside(index: np.ndarray, bound: int) -> int | None:
    """The position of the first entry of ``index`` outside ``0..bound − 1``, or None."""
    outside = np.flatnonzero((index < 0) | (index >= bound))
    return int(outside[0]) if outside.size else None


def _check_range(index: np.ndarray, bound: int, name: str, what: str, where) -> None:
    """Every ``index`` in ``[0, bound)``; ``where(k)`` names the k-th stored entry."""
    if not index.size or (index.min() >= 0 and index.max() < bound):
        return
    k = first_outside(index, bound)
    if k is not None:
        raise ValueError(
            f"{name} is a corrupt sparse matrix: stored entry {k}{where(k)} has {what} index "
            f"{int(index[k])}, outside 0..{bound - 1}"
        )


def check_sparse(matrix, name: str):
    """A scipy sparse matrix (or array) whose structure is checked before compiled code reads it.

    CSR, CSC and BSR: ``indptr`` has one entry per row (column, block row) plus one, starts at
    0, never decreases and ends at the number of stored entries, which ``indices`` and ``data``
    both hold; every index lies within the shape. COO: ``row``, ``col`` and ``data`` have one
    entry each per stored value, every coordinate within the shape. Other formats (LIL, DOK,
    DIA) are converted to COO by scipy's Python code and checked as COO. Values must be real
    numbers (bool, integer or float). Vectorised, O(stored entries + rows).

    Parameters
    ----------
    matrix : scipy.sparse matrix or array
        Any scipy sparse format.
    name : str
        The argument's name, for messages.

    Returns
    -------
    scipy.sparse matrix
        ``matrix`` itself (CSR, CSC, BSR, COO) or its COO conversion; never a copy of a
        checked format, so the caller's buffers stay untouched.

    Raises
    ------
    ValueError
        Naming the inconsistent array, or the stored entry and its out-of-range index.
    """
    check_key_space(matrix.shape, name)
    if matrix.format not in (*_COMPRESSED, "coo"):
        fmt = matrix.format.upper()
        try:
            matrix = matrix.tocoo()
        except (ValueError, IndexError, TypeError) as error:
            raise ValueError(f"{name} is a corrupt {fmt} matrix: {error}") from None
    n_rows, n_cols = (int(n) for n in matrix.shape)
    data = np.asarray(matrix.data)
    if matrix.format == "coo":
        row = _index_array(matrix.row, name, "row")
        col = _index_array(matrix.col, name, "col")
        if not (row.size == col.size == data.shape[0]) or data.ndim != 1:
            raise ValueError(
                f"{name} is a corrupt COO matrix: row, col and data must have one entry per "
                f"stored value, got {row.size}, {col.size} and {data.shape[0]}"
            )
        _check_range(row, n_rows, name, "row", lambda k: "")
        _check_range(col, n_cols, name, "column", lambda k: f" (row {int(row[k])})")
    else:
        major_name, minor_name = _COMPRESSED[matrix.format]
        major, minor = (n_rows, n_cols) if matrix.format != "csc" else (n_cols, n_rows)
        block = (1, 1)
        if matrix.format == "bsr":
            block = tuple(int(b) for b in matrix.blocksize)
            major, minor = n_rows // block[0], n_cols // block[1]
        indptr = _index_array(matrix.indptr, name, "indptr")
        indices = _index_array(matrix.indices, name, "indices")
        if indptr.size != major + 1:
            raise ValueError(
                f"{name} is a corrupt {matrix.format.upper()} matrix: indptr has {indptr.size} "
                f"entries, expected one per {major_name} plus one ({major + 1})"
            )
        if indptr[0] != 0:
            raise ValueError(
                f"{name} is a corrupt {matrix.format.upper()} matrix: indptr starts at "
                f"{int(indptr[0])}, not 0"
            )
        falls = np.flatnonzero(np.diff(indptr) < 0)
        if falls.size:
            j = int(falls[0])
            raise ValueError(
                f"{name} is a corrupt {matrix.format.upper()} matrix: indptr decreases at "
                f"{major_name} {j} ({int(indptr[j])} → {int(indptr[j + 1])})"
            )
        expected_data = (indices.size, *block) if matrix.format == "bsr" else (indices.size,)
        if not (int(indptr[-1]) == indices.size and data.shape == expected_data):
            raise ValueError(
                f"{name} is a corrupt {matrix.format.upper()} matrix: indptr ends at "
                f"{int(indptr[-1])} stored entries but indices has {indices.size} and data has "
                f"shape {data.shape}; they must agree"
            )

        def where(k: int) -> str:
            return f" ({major_name} {int(np.searchsorted(indptr, k, side='right') - 1)})"

        _check_range(indices, minor, name, minor_name, where)
    _check_real_dtype(data, name)
    return matrix


def _check_real_dtype(values: np.ndarray, name: str) -> None:
    """Stored values of a sparse matrix must be real numbers."""
    if values.dtype.kind == "c":
        bad = np.flatnonzero(values.imag.ravel() != 0)
        detail = f"; stored value {bad[0]} is {values.ravel()[bad[0]]}" if bad.size else ""
        raise ValueError(f"{name} has complex dtype {values.dtype}{detail}: give real numbers")
    if values.dtype.kind not in "biuf":
        raise NonNumericError(f"{name} must hold real numbers, got dtype {values.dtype}")


def _stored_position(matrix, k: int) -> str:
    """Where the k-th stored value of a checked sparse matrix sits, for messages."""
    if matrix.format == "coo":
        return f"(user {int(matrix.row[k])}, item {int(matrix.col[k])})"
    if matrix.format == "csr":
        return "(user {}, item {})".format(*entry_position(matrix, k))
    return f"stored entry {k} of the {matrix.format.upper()} matrix"


def first_duplicate(matrix) -> tuple[int, int] | None:
    """(row, column) of the first entry that a sparse matrix checked by :func:`check_sparse`
    stores more than once, None when every entry is stored once. O(n log n) in the stored
    entries; callers skip it for canonical CSR input."""
    coo = matrix.tocoo()
    keys = np.sort(coo.row.astype(np.int64) * coo.shape[1] + coo.col)
    repeated = np.flatnonzero(keys[1:] == keys[:-1])
    if not repeated.size:
        return None
    first = int(keys[repeated[0]])
    return first // coo.shape[1], first % coo.shape[1]


def _describe(position: tuple, axes: tuple[str, ...] | None) -> str:
    if not position:
        return "a 0-d position (a single value, not an array)"
    if axes is None or len(axes) != len(position):
        return (
            f"position {tuple(int(p) for p in position)}"
            if len(position) > 1
            else f"position {int(position[0])}"
        )
    return "(" + ", ".join(f"{a} {int(p)}" for a, p in zip(axes, position, strict=True)) + ")"


def check_float_exact(values: np.ndarray, name: str, describe: Callable[[int], str]) -> None:
    """64-bit integers beyond ±2**53 would be rounded by float64 (2**53 + 1 becomes 2**53):
    refused, naming the first one (``describe(k)`` names the k-th flattened value)."""
    if values.dtype.kind not in "iu" or values.dtype.itemsize < 8 or values.size == 0:
        return
    flat = values.ravel()
    bad = np.flatnonzero((flat > EXACT_INTEGER_LIMIT) | (flat < -EXACT_INTEGER_LIMIT))
    if bad.size:
        k = int(bad[0])
        raise ValueError(
            f"{name} has integer {int(flat[k])} at {describe(k)}, beyond ±2**53 where float64 "
            "cannot represent every integer: rescale the values"
        )


def _is_pandas(values, kind: str) -> bool:
    """Duck-typed pandas check, so the core never imports pandas."""
    module = type(values).__module__ or ""
    return module.startswith("pandas") and hasattr(values, kind)


def _positional_labels(labels, name: str, axis: str, what: str) -> np.ndarray | None:
    """The order that sorts integer labels 0..n−1 into place (None when already in place);
    refuses labels that are not a permutation of the positions."""
    lab = np.asarray(labels)
    n = lab.size
    if lab.dtype.kind in "iu":
        if np.array_equal(lab, np.arange(n)):
            return None
        order = np.argsort(lab, kind="stable")
        ranked = lab[order]
        if np.array_equal(ranked, np.arange(n)):
            return order
        repeated = ranked[1:][ranked[1:] == ranked[:-1]]
        offending = repeated[0] if repeated.size else ranked[(ranked < 0) | (ranked >= n)][0]
        detail = "appears twice" if repeated.size else f"is outside 0..{n - 1}"
    else:
        offending, detail = lab[0] if n else None, f"is not an integer {what} index"
    raise ValueError(
        f"{name} is a DataFrame whose {axis} labels must be the {what} indices 0..{n - 1}: "
        f"label {shown(offending)} {detail}. Label the {axis} by {what} index, or pass "
        ".to_numpy() to use positions"
    )


def real_array(values, name: str, *, axes: tuple[str, ...] | None = None) -> np.ndarray:
    """``values`` as a numpy array of real numbers (not copied when it already is one).

    A pandas DataFrame is a users×items matrix aligned by its labels: its index and columns
    must be the user and item indices 0..n−1 in any order (they are sorted into place);
    other labels, or a repeated label, are refused rather than used by position. Missing
    values (NaN, None, ``pd.NA``) in a DataFrame or Series are refused with their labels.
    Complex values are refused with their position (``axes`` name the dimensions, e.g.
    ``("user", "item")``, a ValueError); non-numeric dtypes (text, dates) with the dtype, and
    text or other non-numbers in an object array with their position, by a
    :class:`NonNumericError` (a TypeError and a ValueError). Text is never parsed: ``"0.9"``
    is refused, not read as 0.9. Integer and bool arrays keep their dtype (bools count as
    0 and 1: a click matrix of bools, or bool scores ranking True above False); object arrays
    of numbers become float64.

    Examples
    --------
    >>> real_array([[True, False]], "y_true").dtype
    dtype('bool')
    >>> real_array(np.array([["0.9", "0.1"]], dtype=object), "y_score", axes=("user", "item"))
    Traceback (most recent call last):
    ...
    recpack_ope._validation.NonNumericError: y_score has non-numeric value '0.9' (text) at \
(user 0, item 0); y_score has dtype object and must hold numbers: convert the text to numbers \
first
    """
    if _is_pandas(values, "columns"):
        missing = np.asarray(values.isna())
        if missing.any():
            r, c = np.argwhere(missing)[0]
            raise ValueError(
                f"{name} has a missing value at (index {shown(values.index[r])}, column "
                f"{shown(values.columns[c])}); fill or drop it"
            )
        rows = _positional_labels(values.index, name, "index", axes[0] if axes else "row")
        cols = _positional_labels(values.columns, name, "column", axes[1] if axes else "column")
        arr = values.to_numpy()
        arr = arr if rows is None else arr[rows]
        arr = arr if cols is None else arr[:, cols]
    elif _is_pandas(values, "index"):
        missing = np.asarray(values.isna())
        if missing.any():
            k = int(np.flatnonzero(missing)[0])
            raise ValueError(
                f"{name} has a missing value at label {shown(values.index[k])}; fill or drop it"
            )
        arr = values.to_numpy()
    else:
        try:
            arr = np.asarray(values)
        except ValueError as error:  # e.g. rows of different lengths
            raise ValueError(f"{name} is not a rectangular array: {error}") from None
    if arr.dtype.kind == "c":
        bad = np.flatnonzero(arr.imag.ravel() != 0)
        k = int(bad[0]) if bad.size else 0
        at = _describe(np.unravel_index(k, arr.shape), axes) if arr.size else "no position"
        raise ValueError(
            f"{name} has complex dtype {arr.dtype} (value {arr.ravel()[k] if arr.size else ''} at "
            f"{at}): give real numbers"
        )
    if arr.dtype.kind in "biuf":
        return arr
    if arr.dtype.kind == "O":
        for k, v in enumerate(arr.ravel()):
            if v is None and arr.ndim:  # astype would make it NaN; a bare None is no array
                raise ValueError(
                    f"{name} has a missing value (None) at "
                    f"{_describe(np.unravel_index(k, arr.shape), axes)}; fill or drop it"
                )
            # float("0.9") would succeed: text is refused, not parsed.
            if isinstance(v, (str, bytes)):
                raise NonNumericError(
                    f"{name} has non-numeric value {v!r} (text) at "
                    f"{_describe(np.unravel_index(k, arr.shape), axes)}; {name} has dtype "
                    "object and must hold numbers: convert the text to numbers first"
                )
        try:
            return arr.astype(np.float64)
        except (TypeError, ValueError):
            pass
        for k, v in enumerate(arr.ravel()):  # error path only: find the value to name
            try:
                float(v)
            except (TypeError, ValueError):
                raise NonNumericError(
                    f"{name} has non-numeric value {v!r} at "
                    f"{_describe(np.unravel_index(k, arr.shape), axes)} (dtype object)"
                ) from None
    raise NonNumericError(f"{name} must hold real numbers, got dtype {arr.dtype}")


def check_bool(value, name: str) -> bool:
    """``value`` as a bool; anything but True/False (e.g. ``"no"``, which is truthy) is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {shown(value)}")
    return bool(value)


def check_fraction(value, name: str, *, include_one: bool = False) -> float:
    """A real number in (0, 1) — or (0, 1] with ``include_one`` — such as a significance or
    confidence level; strings, bools and NaN are refused with the argument named."""
    interval = "(0, 1]" if include_one else "(0, 1)"
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"{name} must be a number in {interval}, got {shown(value)}")
    v = float(value)
    if not (0.0 < v < 1.0 or (include_one and v == 1.0)):
        raise ValueError(f"{name} must lie in {interval}, got {shown(value)}")
    return v


def check_seed(seed, name: str = "seed"):
    """A seed for ``numpy.random.default_rng``: None, an integer >= 0 or a Generator."""
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(
            f"{name} must be None, an integer >= 0 or a numpy Generator, got {shown(seed)}"
        )
    return int(seed)


def item_values(values, name: str, n_items: int | None = None) -> np.ndarray:
    """Per-item ``values`` as a numpy array of real numbers (:func:`real_array`); a pandas
    Series is indexed by item and aligned by its labels.

    The Series' labels must be the item indices ``0..n_items−1`` (up to the largest label
    when ``n_items`` is None), in any order: they are sorted into place. A label that is not
    an integer, is repeated or lies outside the items, and an item without a value, are
    refused with the label named rather than used by position. O(n log n) only when the
    labels are not already ``0..n−1`` in order.
    """
    if _is_pandas(values, "index") and not _is_pandas(values, "columns"):
        labels = np.asarray(values.index)
        if labels.size and labels.dtype.kind not in "iu":
            raise ValueError(
                f"{name} is a pandas Series indexed by labels such as {values.index[0]!r}, not "
                "by item indices: map the ids to item indices 0..n−1, or pass .to_numpy() to "
                "use positions"
            )
        n = n_items
        if n is None:
            n = max(labels.size, int(labels.max()) + 1) if labels.size else 0
        if not (labels.size == n and np.array_equal(labels, np.arange(n))):
            order = np.argsort(labels, kind="stable")
            ranked = labels[order]
            repeated = ranked[1:][ranked[1:] == ranked[:-1]]
            if repeated.size:
                raise ValueError(
                    f"{name} has item {int(repeated[0])} more than once; give one value per item"
                )
            outside = ranked[(ranked < 0) | (ranked >= n)]
            if outside.size:
                raise ValueError(
                    f"{name} has item {int(outside[0])}, outside the {n} items 0..{n - 1}"
                )
            gap = np.flatnonzero(ranked != np.arange(ranked.size))
            if ranked.size < n:
                missing = int(gap[0]) if gap.size else ranked.size
                raise ValueError(f"{name} has no value for item {missing}; give one value per item")
            values = values.iloc[order]
    return real_array(values, name)


def check_finite_number(
    value, name: str, *, minimum: float | None = None, above: float | None = None
) -> float:
    """``value`` as a finite float, ``>= minimum`` or ``> above`` when given (a tolerance, a
    temperature, a log-odds); strings, bools, complex numbers, arrays, None, NaN and infinity
    are refused with the argument named."""
    bound = (
        f" >= {minimum:g}" if minimum is not None else f" > {above:g}" if above is not None else ""
    )
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"{name} must be a finite real number{bound}, got {value!r}")
    v = float(value)
    if above is not None and not (np.isfinite(v) and v > above):
        raise ValueError(f"{name} must be finite and{bound}, got {value!r}")
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if minimum is not None and v < minimum:
        raise ValueError(f"{name} must be{bound}, got {value!r}")
    return v


def check_choice(value, choices: tuple[str, ...], name: str) -> str:
    """``value`` if it is one of the strings ``choices``, else a ValueError naming them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be {' or '.join(map(repr, choices))}, got {shown(value)}")
    return value


def check_model(value, method: str, name: str, what: str) -> None:
    """Refuse ``value`` unless it is None or has a callable ``method`` (``fit``, ``score``):
    a TypeError saying that ``name`` must be ``what`` and naming the type given."""
    if value is not None and not callable(getattr(value, method, None)):
        raise TypeError(f"{name} must be {what} or None, got {type(value).__name__}")


def check_held_out_size(size, name: str, *, allow_zero: bool = False):
    """A held-out share of ratings as a train/test splitter reads it: a fraction in (0, 1), or
    a number of ratings (an integer >= 1); 0 too with ``allow_zero``. Splitters would read 0
    as every rating and 1.5 as a count: those, bools, strings and NaN are refused."""
    whole = isinstance(size, (int, np.integer)) and not isinstance(size, (bool, np.bool_))
    real = isinstance(size, (float, np.floating))
    if (whole and size >= 1 - allow_zero) or (real and (0 < size < 1 or allow_zero and size == 0)):
        return size
    raise ValueError(
        f"{name} must be a fraction of the ratings in {'[' if allow_zero else '('}0, 1) "
        f"or a number of ratings (an integer >= {1 - allow_zero}), got {shown(size)}"
    )


def check_random_state(seed, name: str = "seed", framework: str = "Cornac"):
    """A seed for ``numpy.random.RandomState`` (legacy seeding, e.g. Cornac's): None, an
    integer in 0..2**32 − 1 or a RandomState."""
    whole = isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_))
    if seed is None or isinstance(seed, np.random.RandomState) or (whole and 0 <= seed < 2**32):
        return seed
    raise ValueError(
        f"{name} must be None, an integer in 0..2**32 − 1 or a numpy RandomState "
        f"({framework}'s), got {shown(seed)}"
    )


def check_index_vector(values, name: str, n: int, what: str, owner: str) -> np.ndarray:
    """A 1-D array of integer indices in 0..n−1 as int64, e.g. a framework's user indices;
    ``what`` names them ("Cornac user") and ``owner`` their range ("the eval method's users")."""
    values = np.asarray(values)
    if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
        raise ValueError(
            f"{name} must be a 1-D array of {what} indices, got dtype {values.dtype} and shape "
            f"{values.shape}"
        )
    k = first_outside(values, n)
    if k is not None:
        raise ValueError(
            f"{name} has {what.split()[-1]} index {int(values[k])} at position {k}, outside "
            f"{owner} 0..{n - 1}"
        )
    return values.astype(np.int64)
