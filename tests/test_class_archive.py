"""The local JVM's class archive: recorded once, checked before use, shared by later launches (a
real `java` records and maps small archives; no Spark)."""
import os
import subprocess
import time

import pytest

from crawler_lib.spark import class_archive

JAVA = class_archive.java_binary()
pytestmark = pytest.mark.skipif(JAVA is None, reason="no java (Debian package: openjdk-17-jre-headless)")
CLASS_PATH = ["/jars/delta-spark.jar"]


def java_with(options: str) -> subprocess.CompletedProcess:
    return subprocess.run([JAVA, *options.split(), "-version"], capture_output=True, timeout=60)


def settle(path):
    old = time.time() - class_archive.SETTLED_S - 1
    os.utime(path, (old, old))


def test_no_directory_no_archive():
    assert class_archive.java_options("", CLASS_PATH) == ""


def test_the_first_launch_records_the_next_installs_and_every_later_one_maps_it(tmp_path):
    recording = class_archive.java_options(str(tmp_path), CLASS_PATH)
    assert recording.startswith("-XX:ArchiveClassesAtExit=") and recording.endswith(class_archive.QUIET)
    assert class_archive.java_options(str(tmp_path), CLASS_PATH) == ""  # one recorder at a time
    done = java_with(recording)
    assert done.returncode == 0 and b"cds" not in done.stdout + done.stderr  # quiet
    partial, = tmp_path.glob("*.partial")
    assert class_archive.java_options(str(tmp_path), CLASS_PATH) == ""  # it may still be being written
    settle(partial)
    mapping = class_archive.java_options(str(tmp_path), CLASS_PATH)
    archive, = tmp_path.glob("*.jsa")
    assert mapping == f"-XX:SharedArchiveFile={archive} {class_archive.QUIET}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [archive.name]
    assert java_with(mapping).returncode == 0
    assert class_archive.java_options(str(tmp_path), CLASS_PATH) == mapping
    assert class_archive.java_options(str(tmp_path), ["/jars/delta-spark-4.jar"]).startswith(
        "-XX:ArchiveClassesAtExit=")  # other jars: another archive


def test_a_truncated_archive_is_removed_and_recorded_anew(tmp_path):
    recording = class_archive.java_options(str(tmp_path), CLASS_PATH)
    java_with(recording)
    partial, = tmp_path.glob("*.partial")
    partial.chmod(0o644)
    partial.write_bytes(partial.read_bytes()[:50000])  # the JVM was killed while writing it
    settle(partial)
    assert not class_archive.is_usable(JAVA, partial)
    again = class_archive.java_options(str(tmp_path), CLASS_PATH)
    assert again.startswith("-XX:ArchiveClassesAtExit=") and str(partial) not in again  # recorded anew
    assert list(tmp_path.glob("*.partial")) == [] and list(tmp_path.glob("*.jsa")) == []
    assert list(tmp_path.glob("hs_err*")) == [] and not any(p.name.startswith("hs_err") for p in os.scandir("."))


def test_a_recorder_killed_before_its_jvm_wrote_the_archive_stops_blocking_others(tmp_path):
    class_archive.java_options(str(tmp_path), CLASS_PATH)
    marker, = tmp_path.glob("*.recording")
    assert class_archive.java_options(str(tmp_path), CLASS_PATH) == ""  # its process (this one) lives
    ended = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    marker.write_text(ended.stdout.strip() + "\n" + marker.read_text().split("\n", 1)[1])
    assert class_archive.java_options(str(tmp_path), CLASS_PATH) == ""  # its JVM may still be writing
    settle(marker)
    assert class_archive.java_options(str(tmp_path), CLASS_PATH).startswith("-XX:ArchiveClassesAtExit=")


def test_a_recorder_alive_for_a_day_without_an_archive_stops_blocking_others(tmp_path):
    class_archive.java_options(str(tmp_path), CLASS_PATH)
    marker, = tmp_path.glob("*.recording")
    old = time.time() - class_archive.RECORDING_STALE_S - 1
    os.utime(marker, (old, old))
    assert class_archive.java_options(str(tmp_path), CLASS_PATH).startswith("-XX:ArchiveClassesAtExit=")


def test_a_second_recorders_archive_goes_once_one_is_in_place(tmp_path):
    first = class_archive.java_options(str(tmp_path), CLASS_PATH)
    (tmp_path / next(tmp_path.glob("*.recording")).name).unlink()  # as if two launches raced
    second = class_archive.java_options(str(tmp_path), CLASS_PATH)
    java_with(first)
    java_with(second)
    for partial in tmp_path.glob("*.partial"):
        settle(partial)
    mapping = class_archive.java_options(str(tmp_path), CLASS_PATH)
    assert mapping.startswith("-XX:SharedArchiveFile=")
    class_archive.java_options(str(tmp_path), CLASS_PATH)
    assert [p.suffix for p in tmp_path.iterdir()] == [".jsa"]


def test_an_unwritable_directory_means_no_archive_not_a_failure(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert class_archive.java_options(str(blocked / "jvm"), CLASS_PATH) == ""
