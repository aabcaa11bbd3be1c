"""The `crawler` command as an operator runs it: output lines, exit codes, one-line errors."""
import subprocess
import sys
from pathlib import Path

import pytest

CRAWLER = str(Path(sys.executable).with_name("crawler"))


def crawler(*args, timeout=120):
    return subprocess.run([CRAWLER, *args], capture_output=True, text=True, timeout=timeout)


def test_check_url():
    done = crawler("-D", "limits.max_query_params=1", "check-url", "HTTP://Example.com:80/a/../b#x",
                   "ftp://x.org/", "http://a.com/?a=1&b=2")
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["http://example.com/b", "rejected scheme_not_http ftp://x.org/",
                                        "rejected too_many_query_params http://a.com/?a=1&b=2"]


def test_check_robots(tmp_path):
    robots = tmp_path / "robots.txt"
    robots.write_text("User-agent: mybot\nDisallow: /private\nAllow: /private/ok\n\nUser-agent: *\nDisallow: /\n")
    done = crawler("check-robots", str(robots), "MyBot", "http://A.com/private/x", "http://a.com/private/ok/1",
                   "http://a.com/%7Ehome")
    assert done.returncode == 0
    assert done.stdout.splitlines() == ["disallowed http://a.com/private/x", "allowed http://a.com/private/ok/1",
                                        "allowed http://a.com/~home"]


@pytest.mark.parametrize("args, message", [
    (["stats", "--crawl-dir", "/nonexistent/crawl"], "error: crawl dir /nonexistent/crawl does not exist"),
    (["inject", "--crawl-dir", "/tmp/x", "/nonexistent/seeds.txt"], "error: cannot read seed file"),
    (["-D", "http.timout_s=3", "stats", "--crawl-dir", "/tmp"], "error: unknown config key 'http.timout_s'"),
    (["--conf", "/nonexistent.yaml", "check-url", "http://a.com/"], "error: cannot read config file"),
    (["frobnicate"], "error: crawler: argument COMMAND: invalid choice"),
    (["generate"], "error: crawler generate: the following arguments are required: --crawl-dir"),
    (["crawl", "--crawl-dir", "/tmp", "--cycles", "1", "--duration", "0"], "error: --duration must be more than 0"),
])
def test_bad_input_gives_one_line_error(args, message):
    done = crawler(*args)
    assert done.returncode != 0
    assert done.stderr.strip().startswith(message), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_core_library_imports_no_spark():
    code = ("import sys, importlib, pkgutil, crawler_lib; "
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(crawler_lib.__path__, 'crawler_lib.') "
            "if not m.name.startswith('crawler_lib.spark')]; "
            "import jobs.cli, jobs.checks; "
            "print([m for m in sys.modules if m.startswith(('pyspark', 'delta', 'py4j'))])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("step", ["generate", "fetch", "parse", "updatedb", "dedup"])
def test_an_empty_conf_means_the_defaults(step):
    """Schedulers (the Airflow DAG) always pass --conf, empty when the crawl has no config file."""
    import importlib

    from jobs.cli import COMMANDS
    module, name = COMMANDS[step]
    job = getattr(importlib.import_module(module), name)
    assert job.parser().parse_args(["--crawl-dir", "/c", "--conf", ""]).conf is None
    assert job.parser().parse_args(["--crawl-dir", "/c", "--conf", "/etc/c.yaml"]).conf == "/etc/c.yaml"


@pytest.mark.parametrize("verbose", [False, True])
def test_spark_and_jvm_output_go_to_a_log_file_named_in_one_line(tmp_path, verbose):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.example/\n")
    crawl = tmp_path / "crawl"
    done = crawler(*(["--verbose"] if verbose else []), "-D", "spark.progress_interval_s=0",  # tested on its own
                   "inject", "--crawl-dir", str(crawl), str(seeds), timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["injected 1 new URLs (0 known URLs with raised priority, 0 bad lines skipped)"]
    logs = list((crawl / "logs").glob("inject-*.log")) if (crawl / "logs").exists() else []
    if verbose:
        assert not logs and "log4j" in done.stderr
        return
    assert done.stderr.splitlines() == [f"inject: Spark's log: {logs[0]} (--verbose: on the console)"]
    assert "log4j" in logs[0].read_text()  # Spark's start-up lines, kept
