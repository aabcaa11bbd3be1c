"""CrawlDB statuses and fetch outcomes: every value the `status` and `outcome` columns may hold."""

# UrlState.status
UNFETCHED = "unfetched"
FETCHED = "fetched"
REDIRECT = "redirect"
GONE = "gone"                    # 404/410 (and other definitive 4xx) tombstone
RETRY = "retry"                  # transient failure, will be retried
FAILED = "failed"                # gave up after schedule.max_retries
ROBOTS_DENIED = "robots_denied"
BLOCKED = "blocked"              # refused by a URL filter, trap bound or the SSRF guard

URL_STATUSES = (UNFETCHED, FETCHED, REDIRECT, GONE, RETRY, FAILED, ROBOTS_DENIED, BLOCKED)

# FetchResult.outcome: what the fetcher observed (updatedb turns it into a status)
RESPONSE = "response"            # an HTTP response arrived; http_status says which
NETWORK_ERROR = "network_error"  # DNS, connect, reset, timeout
DENIED_BY_ROBOTS = "robots_denied"
REFUSED_ADDRESS = "blocked"      # SSRF guard refused the resolved address
NOT_ATTEMPTED = "not_attempted"  # no request sent (time budget, host backoff/dropped/deferred)
EXCLUDED = "excluded"            # matches exclusions.patterns (e.g. a takedown): never requested
HOST_DEFERRED = "host_deferred"  # the host answered 429/503 or could not be connected to: a host
                                 # backoff, and the URL back to the pool with its retry budget untouched

FETCH_OUTCOMES = (RESPONSE, NETWORK_ERROR, DENIED_BY_ROBOTS, REFUSED_ADDRESS, NOT_ATTEMPTED, EXCLUDED,
                  HOST_DEFERRED)

# Sources of a URL
SEED, LINK, REDIRECT_SOURCE, SITEMAP, OPERATOR = "seed", "link", "redirect", "sitemap", "operator"
