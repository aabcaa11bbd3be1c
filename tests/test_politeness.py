import random

import pytest

from crawler_lib.politeness import HostPoliteness, parse_retry_after


def host(**kw):
    defaults = dict(delay_s=2.0, max_concurrency=1, backoff_base_s=10.0, backoff_max_s=100.0,
                    rng=random.Random(1))
    defaults.update(kw)
    return HostPoliteness(**defaults)


def test_one_at_a_time_a_request_starts_a_delay_after_the_previous_one_ended():
    h = host()
    assert h.wait_s(0.0) == 0
    h.start(0.0)
    assert h.wait_s(0.5) is None            # one in flight, cap 1
    h.finish(0.5, 200)
    # From the end: a server that saw the request begin late (its own load) still sees a full delay.
    assert h.wait_s(0.5) == pytest.approx(2.0)
    with pytest.raises(RuntimeError):
        h.start(2.0)                        # granting early is refused, not silently allowed
    h.start(2.5)


def test_with_several_in_flight_starts_are_spaced_by_the_delay():
    h = host(max_concurrency=2)
    h.start(0.0)
    h.finish(0.5, 200)
    assert h.wait_s(0.5) == pytest.approx(1.5)
    h.start(2.0)


def test_concurrency_cap():
    h = host(delay_s=0.0, max_concurrency=2)
    h.start(0.0)
    h.start(0.0)
    assert h.wait_s(0.0) is None
    h.finish(0.1, 200)
    assert h.wait_s(0.1) == 0


def test_crawl_delay_never_shortens_default(cfg):
    assert HostPoliteness.from_config(cfg, crawl_delay_s=0.01).delay_s == cfg["politeness.default_delay_s"]
    assert HostPoliteness.from_config(cfg, crawl_delay_s=5).delay_s == 5


def test_retry_after_seconds_and_date():
    h = host()
    h.start(0.0)
    h.finish(1.0, 429, retry_after="30")
    assert h.ready_at() == pytest.approx(31.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412460.0) == pytest.approx(20.0)
    assert parse_retry_after("soon", 0.0) is None


def test_retry_after_is_honoured_beyond_the_backoff_cap_up_to_its_own():
    h = host()  # backoff_max_s=100: a host asking for a day is not retried every 100 s
    h.start(0.0)
    h.finish(0.0, 503, retry_after="7200")
    assert h.ready_at() == pytest.approx(7200.0)
    h.finish(0.0, 503, retry_after="999999")
    assert h.ready_at() == pytest.approx(86400.0)          # max_retry_after_s
    capped = host(max_retry_after_s=600.0)
    capped.finish(0.0, 429, retry_after="3600")
    assert capped.ready_at() == pytest.approx(600.0)


def test_a_deferred_host_waits_until_the_given_time_whatever_the_backoff_cap():
    h = host()
    h.defer_until(21600.0)
    assert h.wait_s(0.0) == pytest.approx(21600.0)


def test_a_cancelled_start_gives_the_slot_back_unchanged():
    h = host()
    h.start(0.0)
    h.finish(0.1, 200)
    h.start(2.1)
    h.cancel_start()
    assert (h.in_flight, h.next_allowed_at, h.last_start_at) == (0, pytest.approx(2.1), 0.0)


def test_exponential_backoff_with_jitter_grows_and_success_resets():
    h = host(delay_s=0.0)
    waits = []
    now = 0.0
    for _ in range(4):
        h.start(max(now, h.ready_at()))
        now = max(now, h.ready_at())
        h.finish(now, 503)
        waits.append(h.backoff_until - now)
    assert waits[0] >= 5 and waits[-1] > waits[0]
    assert all(w <= 100.0 for w in waits)
    h.start(h.ready_at())
    h.finish(h.ready_at(), 200)
    assert h.consecutive_failures == 0


def test_crawl_delay_learnt_after_a_request_applies_to_that_gap():
    h = host(delay_s=1.0, base_delay_s=1.0)
    h.start(10.0)          # robots.txt itself, under the default delay
    h.finish(10.2, 200)
    h.adopt_crawl_delay(3.0)
    assert h.ready_at() == pytest.approx(13.2)  # one at a time: from its end too, as `finish` would have
    two = host(delay_s=1.0, base_delay_s=1.0, max_concurrency=2)
    two.start(10.0)
    two.finish(10.2, 200)
    two.adopt_crawl_delay(3.0)
    assert two.ready_at() == pytest.approx(13.0)  # between starts only
    h.adopt_crawl_delay(0.5)  # a shorter Crawl-delay never shortens the base delay
    assert h.delay_s == 1.0


def test_crawl_delay_learnt_after_a_late_request_counts_from_when_it_left():
    h = host(delay_s=1.0, base_delay_s=1.0)
    h.start(10.0)
    h.sent(10.02)          # the first connection took 20 ms: the host saw robots.txt asked at 10.02
    h.finish(10.4, 200)
    h.adopt_crawl_delay(2.0)
    assert h.ready_at() == pytest.approx(12.4)  # and one at a time, from its end
    two = host(delay_s=1.0, base_delay_s=1.0, max_concurrency=2)
    two.start(10.0)
    two.sent(10.02)
    two.finish(10.4, 200)
    two.adopt_crawl_delay(2.0)
    assert two.ready_at() == pytest.approx(12.02)


CFG = {"politeness.default_delay_s": 1.0, "politeness.max_concurrency_per_host": 2,
       "politeness.backoff_base_s": 10.0, "politeness.backoff_max_s": 100.0, "politeness.jitter_margin_s": 0.005,
       "politeness.max_retry_after_s": 86400.0}


def test_every_gap_carries_the_jitter_margin():
    h = HostPoliteness.from_config(CFG)
    h.start(0.0)
    assert h.ready_at() == pytest.approx(1.005)
    h.sent(0.1)  # written to the socket late: a full delay + margin from then
    assert h.ready_at() == pytest.approx(1.105)


@pytest.mark.parametrize("policy_delay, crawl_delay, expected", [
    (None, None, 1.0), (5.0, None, 5.0), (0.2, None, 0.2), (0.2, 3.0, 3.0), (5.0, 3.0, 5.0)])
def test_a_host_policy_delay_replaces_the_default_but_never_beats_crawl_delay(policy_delay, crawl_delay, expected):
    h = HostPoliteness.from_config(CFG, policy_delay_s=policy_delay)
    h.adopt_crawl_delay(crawl_delay)
    assert h.delay_s == expected


@pytest.mark.parametrize("policy, expected", [(None, 2), (1, 1), (8, 2)])
def test_a_host_policy_concurrency_stays_under_the_global_cap(policy, expected):
    assert HostPoliteness.from_config(CFG, policy_max_concurrency=policy).max_concurrency == expected


def test_a_late_send_pushes_the_next_start():
    h = host(delay_s=1.0, max_concurrency=2)
    h.start(0.0)
    h.sent(0.05)           # the request left 50 ms after its slot was granted
    h.finish(0.2, 200)
    assert h.ready_at() == pytest.approx(1.05)


def test_a_worker_waking_past_its_hosts_deadline_is_refused_not_spun():
    """The loop was busy past the host's deadline while its next start was due before it: the gate
    refuses the slot at once (it took and gave back a free connection forever, never yielding)."""
    import asyncio
    from collections import deque

    from crawler_lib.hostqueue import HostQueue, SlotGate
    calls = []

    def clock():  # bounded: a gate that spins fails here instead of hanging the test
        calls.append(1)
        if len(calls) > 1000:
            raise RuntimeError("the gate spun")
        return 150.0

    host = HostQueue("http://a.test", deque(), HostPoliteness(delay_s=1.0, next_allowed_at=50.0), deadline=100.0)
    assert asyncio.run(SlotGate(clock, max_connections=4).acquire(host)) == "time_limit"
