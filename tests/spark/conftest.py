"""One local Spark session for every Spark test (loopback, UI off, 16 shuffle partitions)."""

import pytest


@pytest.fixture(scope="session")
def spark():
    from recpack_ope.spark import local_session

    session = local_session(2, shuffle_partitions=16)
    yield session
    session.stop()
