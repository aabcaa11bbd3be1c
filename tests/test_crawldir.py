"""Listings of the crawl dir see what was written behind the driver's back (Spark tasks), on a file
system that caches listings for the life of its instance, as s3fs, gcsfs and adlfs do."""
import fsspec
import pytest
from fsspec.implementations.local import LocalFileSystem

from crawler_lib.crawldir import CrawlDir, warc_pointer
from crawler_lib.journal import FetchJournal


class ListingCacheFileSystem(LocalFileSystem):
    """A local file system that answers `ls` and `exists` from a listings cache until it is
    invalidated, the way s3fs answers from its `dircache`."""

    protocol = "listingcache"
    root_marker = "/"

    def ls(self, path, detail=False, **kwargs):
        path = self._strip_protocol(path)
        if path not in self.dircache:
            self.dircache[path] = super().ls(path, detail=True, **kwargs)
        entries = self.dircache[path]
        return entries if detail else [e["name"] for e in entries]

    def exists(self, path, **kwargs):
        """From the parent's listing (cached by this very call), as s3fs answers for a prefix."""
        path = self._strip_protocol(path)
        parent = path.rsplit("/", 1)[0] or "/"
        if parent not in self.dircache and not super().exists(parent):
            return False
        return any(e["name"] == path for e in self.ls(parent, detail=True))

    def invalidate_cache(self, path=None):
        if path is None:
            self.dircache.clear()
        else:
            path = self._strip_protocol(path)
            for key in [k for k in self.dircache if k == path or k.startswith(path.rstrip("/") + "/")
                        or path.startswith(k.rstrip("/") + "/")]:
                del self.dircache[key]


@pytest.fixture
def cached_root(tmp_path):
    fsspec.register_implementation("listingcache", ListingCacheFileSystem, clobber=True)
    (tmp_path / "crawl" / "segments" / "20261201000000-aaaaaa").mkdir(parents=True)
    return f"listingcache://{tmp_path}/crawl"


def test_the_stand_in_really_caches_listings(cached_root, tmp_path):
    fs = fsspec.filesystem("listingcache")
    segments = f"{tmp_path}/crawl/segments"
    assert len(fs.ls(segments)) == 1
    (tmp_path / "crawl" / "segments" / "20261201000001-bbbbbb").mkdir()
    assert len(fs.ls(segments)) == 1  # stale, as s3fs would be


def test_a_segment_written_behind_the_drivers_back_is_found(cached_root, tmp_path):
    crawl = CrawlDir(cached_root)
    assert crawl.segment_ids() == ["20261201000000-aaaaaa"]
    (tmp_path / "crawl" / "segments" / "20261201000001-bbbbbb").mkdir()  # a Spark task wrote it
    assert crawl.resolve_segment(None) == "20261201000001-bbbbbb"


def test_a_retry_in_the_same_worker_reads_the_dead_attempts_journal(cached_root, tmp_path):
    journal = tmp_path / "crawl" / "segments" / "20261201000000-aaaaaa" / "journal"
    journal.mkdir()
    directory = f"{cached_root}/segments/20261201000000-aaaaaa/journal/part-00000"
    assert FetchJournal(directory, "2-1-retry").replay().empty  # listed once: nothing there yet
    (journal / "part-00000").mkdir()
    (journal / "part-00000" / "1-0-dead.jsonl").write_text('{"k":"url","url":"http://a.example/"}\n')
    assert list(FetchJournal(directory, "2-1-retry").replay().outcomes) == ["http://a.example/"]


@pytest.mark.parametrize("written, root", [
    ("/data/crawl/warc/seg-00000-ab-0.warc.gz", "/elsewhere/copy"),
    ("s3a://bucket/crawl/warc/seg-00000-ab-0.warc.gz", "s3a://other/moved/"),
    ("demo-crawl/warc/seg-00000-ab-0.warc.gz", "gs://archive/crawl"),
])
def test_warc_pointers_are_relative_to_the_crawl_dir_and_resolve_under_any_root(written, root):
    pointer = warc_pointer(written)
    assert pointer == "warc/seg-00000-ab-0.warc.gz"
    assert CrawlDir(root).resolve(pointer) == root.rstrip("/") + "/warc/seg-00000-ab-0.warc.gz"


@pytest.mark.parametrize("stored", ["/data/crawl/warc/a.warc.gz", "s3a://bucket/crawl/warc/a.warc.gz"])
def test_pointers_stored_as_full_paths_by_earlier_crawls_resolve_as_they_are(stored):
    assert CrawlDir("/moved").resolve(stored) == stored
