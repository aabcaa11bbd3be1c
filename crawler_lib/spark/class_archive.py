"""A class-data-sharing archive for the local Spark JVM (the JDK's AppCDS, JEP 350): the JVM maps the
classes Spark, Delta and Hadoop load from one file instead of reading, parsing and verifying them
from jars at every start. Class loading was ~17% of a small cycle's JVM samples (BENCHMARKS.md).

The first launch for a given Java and Spark installation records the archive as its JVM exits
(`-XX:ArchiveClassesAtExit`, into a `.partial` file; one recorder at a time, marked by a `.recording`
file). A later launch checks the partial file with `java -version` (a truncated archive crashes the
JVM instead of being refused) and renames it into place; from then on every launch maps it. A JVM
whose class path does not match the archive's ignores it; the JVM's CDS messages are off either way.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Iterable, Optional

log = logging.getLogger("crawler.spark")

QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
SETTLED_S = 120.0  # a partial archive written to this recently may still be being written
RECORDING_STALE_S = 86400.0  # a recorder whose process cannot be checked stops blocking others after this
UNUSED_S = 7 * 86400.0  # another installation's archive (another virtualenv, an older JDK) unused this long goes


def java_binary() -> Optional[str]:
    """The `java` spark-submit runs (its spark-class script: $JAVA_HOME/bin/java, else the PATH's)."""
    home = os.environ.get("JAVA_HOME")
    return os.path.join(home, "bin", "java") if home else shutil.which("java")


def installation_key(java: str, class_path: Iterable[str]) -> str:
    """Changes whenever the JVM or the classes it would load could: the JDK, PySpark's Spark, jars."""
    import pyspark

    binary = os.path.realpath(java)
    parts = [binary, str(os.stat(binary).st_mtime_ns), pyspark.__version__, os.path.dirname(pyspark.__file__),
             os.environ.get("SPARK_HOME", ""), *class_path]
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def is_usable(java: str, archive: Path) -> bool:
    """The JVM starts with the archive mapped, or refuses it cleanly (not a crash)."""
    try:
        done = subprocess.run([java, f"-XX:SharedArchiveFile={archive}", *QUIET.split(), "-XX:ErrorFile=/dev/null",
                               "-XX:-CreateCoredumpOnCrash", "-version"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _install_settled_partial(java: str, directory: Path, key: str, final: Path) -> bool:
    now = time.time()
    for partial in sorted(directory.glob(f"{key}.*.partial")):
        try:
            if now - partial.stat().st_mtime < SETTLED_S:
                continue
            if is_usable(java, partial):
                os.replace(partial, final)
                (directory / f"{key}.recording").unlink(missing_ok=True)
                log.info("JVM class archive installed: %s", final)
                return True
            partial.unlink()
            marker = directory / f"{key}.recording"
            if marker.read_text(encoding="utf-8").endswith(f"\n{partial}"):  # its recorder is done: record anew
                marker.unlink()
        except FileNotFoundError:  # another launch took it first
            if final.exists():
                return True
    return False


def _tidy(directory: Path, key: str) -> None:
    """Once the archive is in place: other installations' archives unused for a week, and this one's
    partial archives of a second recorder, go."""
    now = time.time()
    for other in directory.iterdir():
        age = now - other.stat().st_mtime
        if (not other.name.startswith(key + ".") and age > UNUSED_S) or (
                other.name.startswith(key + ".") and other.name.endswith(".partial") and age > SETTLED_S):
            other.unlink(missing_ok=True)


def _recorder_gone(marker: Path) -> bool:
    """The launch that took the marker recorded nothing: it is a day old, or its process has ended
    (killed before its JVM wrote the archive) and no archive of it is being written."""
    age = time.time() - marker.stat().st_mtime
    if age > RECORDING_STALE_S:
        return True
    try:
        pid, partial = marker.read_text(encoding="utf-8").split("\n", 1)
        os.kill(int(pid), 0)
        return False
    except ProcessLookupError:
        return age > SETTLED_S and not Path(partial).exists()
    except (PermissionError, ValueError):
        return False


def _start_recording(directory: Path, key: str) -> Optional[str]:
    marker = directory / f"{key}.recording"
    try:
        if not _recorder_gone(marker):
            return None  # another JVM records it
        marker.unlink()
    except FileNotFoundError:
        pass
    try:
        with open(marker, "x", encoding="utf-8") as handle:
            partial = directory / f"{key}.{uuid.uuid4().hex[:8]}.partial"
            handle.write(f"{os.getpid()}\n{partial}")
    except FileExistsError:
        return None
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET}"


def java_options(directory: str, class_path: Iterable[str]) -> str:
    """Options for a local Spark JVM about to launch: map the archive, or record it as the JVM exits,
    or '' (no `java` found, no writable directory, another JVM recording)."""
    java = java_binary()
    if not directory or not java:
        return ""
    try:
        folder = Path(directory).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        key = installation_key(java, class_path)
        final = folder / f"{key}.jsa"
        if final.exists() or _install_settled_partial(java, folder, key, final):
            os.utime(final)  # its last use, for _tidy elsewhere
            _tidy(folder, key)
            return f"-XX:SharedArchiveFile={final} {QUIET}"
        return _start_recording(folder, key) or ""
    except OSError as error:  # a cache, never a reason not to start
        log.warning("JVM class archive unavailable in %s: %s", directory, error)
        return ""
