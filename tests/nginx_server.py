"""A real nginx (Debian's package) serving static sites on loopback, with its own access log as witness.

Each site is one `server` on a loopback address (127.0.0.x) and one shared port, configured as a
stock nginx is: gzip on for text/plain, text/html and XML, and `limit_req` per server as a politeness
witness (a request closer than the site's delay is answered 429 and logged REJECTED). Sites given a
`name` are virtual hosts: several may share one address, and `ip_rate_per_minute` then adds a
`limit_req` per address over all of them.
The access log gives each request's start as `$msec - $request_time`. Started and stopped by the
test that uses it.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tests.helpers import free_port

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
LOG_FORMAT = ('$msec $request_time $server_addr $host $status $limit_req_status "$request_method" "$request_uri" '
              '"$sent_http_content_encoding"')


@dataclass
class Site:
    address: str                      # loopback address of the server, e.g. 127.0.0.2
    files: dict[str, bytes]           # path -> body (static files under the site's root)
    rate_per_minute: int              # limit_req: at most one request per 60/rate seconds
    extra: str = ""                   # more nginx directives inside the server block
    name: str = ""                    # server_name of a virtual host (default: the address)

    @property
    def host(self) -> str:
        return self.name or self.address


@dataclass
class Entry:
    start: float
    end: float
    address: str
    host: str
    status: int
    limit_req: str
    path: str
    content_encoding: str


@dataclass
class Nginx:
    root: Path
    sites: list[Site]
    port: int = 0
    ip_rate_per_minute: int = 0       # limit_req per address shared by virtual hosts (0: none)
    process: Optional[subprocess.Popen] = field(default=None, repr=False)

    def url(self, site: Site, path: str = "/") -> str:
        return f"http://{site.host}:{self.port}{path}"

    def __enter__(self) -> "Nginx":
        self.port = self.port or free_port()
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        servers = []
        shared = {a for a in (s.address for s in self.sites) if sum(s.address == a for s in self.sites) > 1}
        if shared and self.ip_rate_per_minute:
            servers.append(f"\n    limit_req_zone $server_addr zone=per_ip:1m rate={self.ip_rate_per_minute}r/m;")
        for index, site in enumerate(self.sites):
            per_ip = "limit_req zone=per_ip;" if site.address in shared and self.ip_rate_per_minute else ""
            docroot = self.root / f"site{index}"
            for path, body in site.files.items():
                target = docroot / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(body)
            servers.append(f"""
    limit_req_zone $server_name zone=site{index}:1m rate={site.rate_per_minute}r/m;
    server {{
        listen {site.address}:{self.port};
        server_name {site.host};
        root {docroot};
        index index.html;
        limit_req zone=site{index};
        {per_ip}
        limit_req_status 429;
        {site.extra}
    }}""")
        os.chmod(self.root, 0o755)
        (self.root / "nginx.conf").write_text(f"""
worker_processes 1;
error_log {self.root}/logs/error.log warn;
pid {self.root}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    types {{ text/html html; text/plain txt; application/xml xml; }}
    default_type application/octet-stream;
    log_format witness '{LOG_FORMAT}';
    access_log {self.root}/logs/access.log witness;
    gzip on;
    gzip_min_length 20;
    gzip_types text/plain application/xml;
    client_body_temp_path {self.root}/tmp/body;
    proxy_temp_path {self.root}/tmp/proxy;
    fastcgi_temp_path {self.root}/tmp/fastcgi;
    uwsgi_temp_path {self.root}/tmp/uwsgi;
    scgi_temp_path {self.root}/tmp/scgi;
{"".join(servers)}
}}
""")
        (self.root / "tmp").mkdir(exist_ok=True)
        user = ["-g", "daemon off; user root;"] if os.geteuid() == 0 else ["-g", "daemon off;"]
        self.process = subprocess.Popen([NGINX, "-p", str(self.root), "-c", str(self.root / "nginx.conf"), *user],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"nginx exited: {self.process.stderr.read().decode(errors='replace')[:500]}")
            try:
                socket.create_connection((self.sites[0].address, self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.__exit__()
        raise RuntimeError("nginx did not start listening within 15 s")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: finish requests, flush logs
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def log(self) -> list[Entry]:
        entries = []
        for line in (self.root / "logs" / "access.log").read_text().splitlines():
            msec, request_time, address, host, status, limit_req, _method, path, encoding = line.split(" ", 8)
            end = float(msec)
            entries.append(Entry(end - float(request_time), end, address, host, int(status), limit_req,
                                 path.strip('"'), encoding.strip('"')))
        return sorted(entries, key=lambda e: e.start)
