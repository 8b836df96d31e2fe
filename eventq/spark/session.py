"""A SparkSession for eventq's Spark jobs, set up to run offline and quietly.

- Spark's Kafka connector comes from ``kafka/lib/spark`` (fetched once by ``make deps``
  with Maven, ``kafka/spark-pom.xml``) and is passed with ``spark.jars``: nothing is
  downloaded when a job starts (no ``spark.jars.packages``). The connector's version
  must be pyspark's and its Scala suffix the Scala version of pyspark's jars.
- Local mode by default (``local[2]``); any master URL runs on a cluster (the executors
  then need eventq installed, like any PySpark library).
- Python workers run this interpreter (``PYSPARK_PYTHON``); locally Spark binds to
  127.0.0.1 only (``SPARK_LOCAL_IP`` and the driver's addresses); Java is 17; logs at WARN.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
LOCAL_SHUFFLE_PARTITIONS = 4
JAVA_MAJOR = 17
CONNECTOR = "spark-sql-kafka-0-10"
# The jars kafka/spark-pom.xml copies (pyspark ships the rest of the connector's tree).
REQUIRED_JARS = (CONNECTOR, "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")


def default_jars_dir() -> Path:
    """``kafka/lib/spark`` of the eventq checkout this package runs from."""
    return Path(__file__).resolve().parents[2] / "kafka" / "lib" / "spark"


class SparkSetupError(RuntimeError):
    """Spark cannot start as eventq needs it; the message says what to do."""


@dataclass(frozen=True)
class SparkOptions:
    master: str = DEFAULT_MASTER
    jars_dir: Path | None = None  # None: default_jars_dir()
    app_name: str = "eventq"
    driver_memory: str = "2g"  # local mode: the driver is the executor too
    shuffle_partitions: int | None = None  # None: 4 locally, Spark's default on a cluster
    log_level: str = "WARN"

    @property
    def is_local(self) -> bool:
        return self.master.startswith("local")


def _pyspark() -> tuple[str, Path]:
    """(version, package directory) of the installed pyspark; SparkSetupError without."""
    try:
        import pyspark
    except ImportError:
        raise SparkSetupError(
            "pyspark is not installed: run `make deps` "
            "(or `.venv/bin/pip install -e '.[spark]'`)"
        ) from None
    return pyspark.__version__, Path(pyspark.__file__).parent


def pyspark_versions() -> tuple[str, str]:
    """(Spark version, Scala binary version) of the installed pyspark."""
    version, package = _pyspark()
    jars = package / "jars"
    scala = None
    for jar in jars.glob("scala-library-*.jar"):
        match = re.fullmatch(r"scala-library-(\d+\.\d+)\.\d+\.jar", jar.name)
        if match:
            scala = match.group(1)
    if scala is None:
        raise SparkSetupError(f"cannot tell the Scala version of pyspark's jars in {jars}")
    return version, scala


def connector_jars(jars_dir: Path | None = None) -> list[Path]:
    """The jars to pass with ``spark.jars``; SparkSetupError if missing or mismatched."""
    directory = jars_dir or default_jars_dir()
    version, scala = pyspark_versions()
    wanted = f"{CONNECTOR}_{scala}-{version}.jar"
    jars = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    names = [jar.name for jar in jars]
    connectors = [name for name in names if name.startswith(CONNECTOR + "_")]
    if not connectors:
        raise SparkSetupError(
            f"Spark's Kafka connector ({wanted}) is missing from {directory}: "
            "run `make deps` (it fetches it once with Maven, kafka/spark-pom.xml)"
        )
    if wanted not in connectors:
        raise SparkSetupError(
            f"{directory} holds {', '.join(connectors)} but pyspark is {version} "
            f"(Scala {scala}): set spark.version in kafka/spark-pom.xml to {version}, "
            f"remove {directory} and run `make deps`"
        )
    missing = [
        prefix for prefix in REQUIRED_JARS if not any(n.startswith(prefix) for n in names)
    ]
    if missing:
        raise SparkSetupError(
            f"{directory} lacks {', '.join(missing)}: remove {directory} and run `make deps`"
        )
    return jars


def _java_major(java: str) -> int | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def java_home() -> str:
    """A Java 17 home: JAVA_HOME if it is 17, else the `java` on PATH, else a JDK 17 in
    /usr/lib/jvm. SparkSetupError when there is none."""
    candidates: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent.parent)
    candidates += sorted(Path("/usr/lib/jvm").glob(f"*{JAVA_MAJOR}*"))
    seen = []
    for home in candidates:
        java = home / "bin" / "java"
        if java.exists():
            major = _java_major(str(java))
            seen.append(f"{home} ({major})")
            if major == JAVA_MAJOR:
                return str(home)
    raise SparkSetupError(
        f"Spark needs Java {JAVA_MAJOR}; found {', '.join(seen) or 'no Java'}: "
        "install openjdk-17-jre-headless and set JAVA_HOME to it"
    )


_LOG4J2 = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.hadoop.name = org.apache.hadoop.util.NativeCodeLoader
logger.hadoop.level = error
logger.kafka.name = org.apache.kafka
logger.kafka.level = error
"""


def _log4j_config(level: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"eventq-spark-log4j2-{level.lower()}.properties"
    text = _LOG4J2.format(level=level.lower())
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def spark_session(options: SparkOptions | None = None) -> tuple[SparkSession, bool]:
    """The active SparkSession if there is one, else a new one built from ``options``.

    Returns ``(spark, created)``: stop the session only if ``created``.
    """
    options = options or SparkOptions()
    version, _ = _pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    jars = connector_jars(options.jars_dir)
    os.environ["JAVA_HOME"] = java_home()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if options.is_local:
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    log4j = _log4j_config(options.log_level)
    builder = (
        SparkSession.builder.master(options.master)
        .appName(options.app_name)
        .config("spark.jars", ",".join(str(jar) for jar in jars))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.python.worker.reuse", "true")
    )
    shuffle = options.shuffle_partitions
    if options.is_local:
        builder = (
            builder.config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.memory", options.driver_memory)
            .config("spark.ui.enabled", "false")
        )
        shuffle = shuffle or LOCAL_SHUFFLE_PARTITIONS
    if shuffle:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle))
    try:
        spark = builder.getOrCreate()
    except Exception as error:  # py4j / launcher errors
        raise SparkSetupError(f"Spark did not start ({options.master}): {error}") from error
    spark.sparkContext.setLogLevel(options.log_level)
    assert version == spark.version, (version, spark.version)
    return spark, True
