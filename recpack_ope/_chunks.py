"""One memory budget for every chunked loop over users (or samples)."""

# Dense elements per chunk (rows × width): a few hundred MB of temporaries at most, whatever
# the number of users.
CHUNK_ELEMENTS = 1 << 22


def rows_per_chunk(width: int) -> int:
    """Rows per chunk so that ``rows × width`` stays near :data:`CHUNK_ELEMENTS`."""
    return max(1, CHUNK_ELEMENTS // max(int(width), 1))
