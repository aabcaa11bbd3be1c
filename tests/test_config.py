import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from crawler_lib.config import Config, ConfigError, default_settings

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_match_design_contract():
    cfg = Config.load()
    assert cfg["http.timeout_s"] == 30
    assert cfg["http.max_body_bytes"] == 2097152
    assert cfg["http.max_redirects"] == 5
    assert cfg["politeness.default_delay_s"] == 1.0
    assert cfg["politeness.max_concurrency_per_host"] == 1
    assert cfg["politeness.max_crawl_delay_s"] == 60
    assert cfg["robots.cache_ttl_s"] == 21600
    assert cfg["security.allow_networks"] == []
    assert cfg["schedule.min_interval_s"] == 86400 and cfg["schedule.max_interval_s"] == 30 * 86400
    assert cfg.user_agent.startswith(cfg["http.agent_name"] + "/")


def test_site_file_then_defines(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("http:\n  timeout_s: 5\npoliteness:\n  default_delay_s: 2\n")
    cfg = Config.load(str(site), ["http.timeout_s=7", "security.allow_networks=127.0.0.0/8,10.0.0.0/8"])
    assert cfg["http.timeout_s"] == 7.0
    assert cfg["politeness.default_delay_s"] == 2.0
    assert cfg["security.allow_networks"] == ["127.0.0.0/8", "10.0.0.0/8"]


def test_spark_conf_is_a_free_map():
    cfg = Config.load(overrides=["spark.conf.spark.executor.memory=4g"])
    assert cfg["spark.conf"] == {"spark.executor.memory": "4g"}


@pytest.mark.parametrize("override, message", [
    (["http.timout_s=3"], "unknown config key 'http.timout_s'"),
    (["http.timeout_s=fast"], "expected float"),
    (["politeness.max_concurrency_per_host=1.5"], "expected int"),
    (["politeness.max_concurrency_per_host=0"], "must be >= 1"),
    (["security.allow_networks=not-a-cidr"], "not a CIDR block"),
    (["nonsense"], "expected key=value"),
    (["http.resolve.docs.example=not-an-address"], "'docs.example' must map to an IP address"),
    (["politeness.ip_max_concurrency=0"], "must be >= 1"),
    (["politeness.ip_delay_s=-1"], "must be >= 0"),
])
def test_bad_overrides_are_one_line_errors(override, message):
    with pytest.raises(ConfigError) as err:
        Config.load(overrides=override)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_key_in_site_file(tmp_path):
    site = tmp_path / "site.yaml"
    site.write_text("fetcher:\n  partitons: 3\n")
    with pytest.raises(ConfigError, match="unknown config key 'fetcher.partitons'"):
        Config.load(str(site))


def test_every_default_key_is_read_by_the_code_and_vice_versa():
    """conf/default.yaml and the code list the same keys (like nutch-default.xml)."""
    sources = "\n".join(p.read_text() for d in ("crawler_lib", "jobs") for p in (ROOT / d).rglob("*.py"))
    used = set(re.findall(r"""(?:cfg|self)\[\s*["']([a-z_]+\.[a-z_.]+)["']\s*\]""", sources))
    defaults = set(default_settings())
    assert used - defaults == set(), "code reads keys missing from conf/default.yaml"
    assert defaults - used == set(), "conf/default.yaml documents keys the code never reads"


def test_the_built_wheel_ships_conf_default_yaml(tmp_path):
    """What spark-submit --py-files and Databricks install is the wheel: it must carry the defaults
    byte for byte (crawler_lib/default.yaml is a symlink that the build has to follow)."""
    source = tmp_path / "src"  # a copy, symlinks kept: the build writes build/ beside its sources
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        source.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    for name in ("crawler_lib", "jobs", "conf"):
        shutil.copytree(ROOT / name, source / name, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("sparkcrawler-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.read("crawler_lib/default.yaml")
    assert shipped == (ROOT / "conf" / "default.yaml").read_bytes()


def test_jars_given_in_spark_conf_are_added_to_deltas():
    from crawler_lib.spark.session import delta_jars, session_settings

    cfg = Config.load(overrides=["spark.conf.spark.jars=/opt/jars/hadoop-aws.jar,/opt/jars/s3.jar"])
    jars = session_settings(cfg)["spark.jars"].split(",")
    assert jars[-2:] == ["/opt/jars/hadoop-aws.jar", "/opt/jars/s3.jar"]
    assert [j for j in jars if "delta-spark" in j] == [j for j in delta_jars() if "delta-spark" in j] != []


def test_a_local_jvm_gets_a_quarter_of_the_memory_and_a_given_heap_wins(monkeypatch, tmp_path):
    from crawler_lib.spark import session

    assert session.local_driver_memory(16 * 2**30) == "4096m"
    assert session.local_driver_memory(2 * 2**30) == "1024m"  # never below Spark's own default
    limit = tmp_path / "memory.max"
    limit.write_text("2147483648\n")
    monkeypatch.setattr(session, "CGROUP_MEMORY_LIMITS", (str(tmp_path / "absent"), str(limit)))
    monkeypatch.delenv("MASTER", raising=False)
    assert session.available_memory_bytes() <= 2 * 2**30  # a container's limit counts
    assert session.session_settings(Config.load(overrides=["spark.master=local[2]"]))["spark.driver.memory"] == "1024m"
    limit.write_text("max\n")
    monkeypatch.setenv("MASTER", "local[2]")
    assert session.session_settings(Config.load())["spark.driver.memory"] == session.local_driver_memory(
        os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    assert session.session_settings(Config.load(overrides=["spark.conf.spark.driver.memory=3g"]))[
        "spark.driver.memory"] == "3g"
    monkeypatch.setenv("MASTER", "spark://127.0.0.1:7077")
    assert "spark.driver.memory" not in session.session_settings(Config.load())  # the cluster's launcher decides
