"""The Airflow DAGs, loaded by Airflow's own DagBag (runs in .venv-airflow: `make test-dags`)."""
from pathlib import Path

import pytest

pytest.importorskip("airflow.sdk")
pytest.importorskip("airflow.providers.apache.spark")

import jinja2  # noqa: E402  (Airflow's template engine)
from airflow.models.dagbag import DagBag  # noqa: E402
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
STEPS = ["generate", "fetch", "parse", "updatedb", "dedup"]


@pytest.fixture(scope="module")
def bag():
    bag = DagBag(dag_folder=str(ROOT / "dags"), include_examples=False)
    assert bag.import_errors == {}
    assert sorted(bag.dags) == ["crawl_continuous", "crawl_cycle", "crawl_session"]
    return bag


@pytest.fixture(scope="module")
def dag(bag):
    return bag.dags["crawl_cycle"]


def test_one_cycle_in_step_order_without_overlap(dag):
    assert [t.task_id for t in dag.topological_sort()] == STEPS
    for before, after in zip(STEPS, STEPS[1:]):
        assert dag.get_task(before).downstream_task_ids == {after}
    assert dag.max_active_runs == 1 and dag.catchup is False
    assert set(dag.params) == {"crawl_dir", "conf", "top_n"}


def test_every_step_is_a_retried_spark_submit_of_its_job(dag):
    for step in STEPS:
        task = dag.get_task(step)
        assert isinstance(task, SparkSubmitOperator)
        assert Path(task.application) == ROOT / "jobs" / f"{step}.py" and Path(task.application).is_file()
        assert task.retries >= 1
        assert task.conf["spark.speculation"] == "false"
        assert "io.delta:delta-spark_2.13" in task.packages


@pytest.mark.parametrize("conf", ["", "/etc/crawler.yaml"])
def test_arguments_render_to_the_job_command_line(dag, conf):
    params = {"crawl_dir": "s3a://bucket/crawl", "conf": conf, "top_n": 5000}
    for step in STEPS:
        argv = [jinja2.Template(a).render(params=params) for a in dag.get_task(step).application_args]
        expected = ["--crawl-dir", "s3a://bucket/crawl"] + (["--top-n", "5000"] if step == "generate" else [])
        assert argv == expected + ["--conf", conf]


def test_extra_jars_for_object_storage_come_from_the_environment(monkeypatch):
    jars = "/opt/jars/org.apache.hadoop_hadoop-aws-3.4.1.jar,/opt/jars/software.amazon.awssdk_s3-2.57.8.jar"
    monkeypatch.setenv("CRAWLER_SPARK_JARS", jars)
    dag = DagBag(dag_folder=str(ROOT / "dags"), include_examples=False).dags["crawl_cycle"]
    assert {dag.get_task(step).jars for step in STEPS} == {jars}


@pytest.mark.parametrize("dag_id, mode, extra", [
    ("crawl_session", ["--cycles", "1000"], {"max_cycles": 1000}),
    ("crawl_continuous", ["--continuous"], {}),
])
def test_a_bounded_crawl_runs_until_its_duration_then_dedups_without_overlap(bag, dag_id, mode, extra):
    session = bag.dags[dag_id]
    assert [t.task_id for t in session.topological_sort()] == ["crawl", "dedup"]
    assert session.max_active_runs == 1 and session.catchup is False
    params = {"crawl_dir": "s3a://bucket/crawl", "conf": "", "top_n": 5000, "duration_s": 3300, **extra}
    assert set(session.params) == set(params)
    crawl = session.get_task("crawl")
    assert isinstance(crawl, SparkSubmitOperator) and crawl.retries >= 1
    assert Path(crawl.application) == ROOT / "jobs" / "crawl.py"
    assert crawl.execution_timeout.total_seconds() > 3300  # the crawl stops itself first
    argv = [jinja2.Template(a).render(params=params) for a in crawl.application_args]
    assert argv == ["--crawl-dir", "s3a://bucket/crawl", *mode, "--duration", "3300",
                    "--top-n", "5000", "--conf", ""]
    dedup = [jinja2.Template(a).render(params=params) for a in session.get_task("dedup").application_args]
    assert dedup == ["--crawl-dir", "s3a://bucket/crawl", "--conf", ""]
