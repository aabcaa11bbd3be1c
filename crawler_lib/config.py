"""Crawler configuration: documented defaults, a site file on top, `-D key=value` last.

`conf/default.yaml` is the single list of keys (shipped inside the package as
`crawler_lib/default.yaml`). Every key has a typed default; overrides are coerced to that type and
unknown keys are rejected, so a misspelt key is an error rather than a silent default.
"""
from __future__ import annotations

import ipaddress
import re
from importlib import resources
from typing import Any, Iterable, Mapping

import yaml

from crawler_lib import __version__

# Keys whose value is a free-form mapping (sub-keys are not validated against the defaults).
MAP_KEYS = frozenset({"spark.conf", "http.resolve"})


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message is one line for the operator."""


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if dotted in MAP_KEYS:
            flat[dotted] = dict(value or {})
        elif isinstance(value, Mapping):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _load_yaml(text: str, origin: str) -> dict[str, Any]:
    try:
        tree = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{origin}: not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(tree, Mapping):
        raise ConfigError(f"{origin}: top level must be a mapping of sections")
    return _flatten(tree)


def default_settings() -> dict[str, Any]:
    text = resources.files("crawler_lib").joinpath("default.yaml").read_text(encoding="utf-8")
    return _load_yaml(text, "default.yaml")


def _coerce(key: str, value: Any, default: Any) -> Any:
    """Coerce an override to the type of the key's default, or raise ConfigError."""
    try:
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "yes", "1", "on"):
                return True
            if text in ("false", "no", "0", "off"):
                return False
            raise ValueError
        if isinstance(default, int):
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if isinstance(default, float):
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if isinstance(default, list):
            if isinstance(value, str):
                value = [part.strip() for part in value.split(",") if part.strip()]
            if not isinstance(value, list):
                raise ValueError
            return [str(item) for item in value]
        if isinstance(default, dict):
            if not isinstance(value, Mapping):
                raise ValueError
            return dict(value)
        if value is None:
            return ""
        return str(value)
    except (TypeError, ValueError):
        kind = type(default).__name__
        raise ConfigError(f"config key {key}: expected {kind}, got {value!r}") from None


class Config(Mapping[str, Any]):
    """Flat, read-only, picklable settings keyed by dotted names (`http.timeout_s`)."""

    def __init__(self, values: Mapping[str, Any]):
        self._values = dict(values)

    @classmethod
    def load(cls, conf_file: str | None = None, overrides: Iterable[str] | Mapping[str, Any] = ()) -> "Config":
        values = default_settings()
        updates: list[tuple[str, Any, str]] = []
        if conf_file:
            try:
                with open(conf_file, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError as exc:
                raise ConfigError(f"cannot read config file {conf_file}: {exc.strerror}") from None
            updates += [(k, v, conf_file) for k, v in _load_yaml(text, conf_file).items()]
        if isinstance(overrides, Mapping):
            updates += [(k, v, "override") for k, v in overrides.items()]
        else:
            for item in overrides:
                key, sep, raw = item.partition("=")
                if not sep or not key.strip():
                    raise ConfigError(f"-D {item!r}: expected key=value")
                try:
                    parsed = yaml.safe_load(raw) if raw.strip() else raw
                except yaml.YAMLError:
                    parsed = raw
                updates.append((key.strip(), parsed, "-D"))
        for key, value, origin in updates:
            map_key = next((m for m in MAP_KEYS if key.startswith(m + ".")), None)
            if map_key:
                values[map_key] = {**values[map_key], key[len(map_key) + 1:]: value}
                continue
            if key not in values:
                raise ConfigError(f"unknown config key {key!r} (from {origin}); see conf/default.yaml")
            values[key] = _coerce(key, value, values[key])
        config = cls(values)
        config.validate()
        return config

    def validate(self) -> None:
        for key in ("http.timeout_s", "politeness.default_delay_s", "generate.lease_s", "continuous.apply_interval_s",
                    "continuous.segment_time_s"):
            if self[key] <= 0:
                raise ConfigError(f"config key {key}: must be > 0, got {self[key]}")
        if self["politeness.ip_delay_s"] < 0:
            raise ConfigError(f"config key politeness.ip_delay_s: must be >= 0, got {self['politeness.ip_delay_s']}")
        for key in ("politeness.max_concurrency_per_host", "politeness.ip_max_concurrency", "fetcher.max_connections",
                    "generate.top_n", "generate.max_per_host", "generate.screen_rounds",
                    "http.max_body_bytes", "continuous.fetches"):
            if self[key] < 1:
                raise ConfigError(f"config key {key}: must be >= 1, got {self[key]}")
        if self["fetcher.lease_margin_s"] < self["http.timeout_s"]:
            raise ConfigError(f"config key fetcher.lease_margin_s: must be >= http.timeout_s "
                              f"({self['http.timeout_s']:g}): a request started before the margin must end "
                              f"before the lease does, got {self['fetcher.lease_margin_s']:g}")
        needed = self["fetcher.time_limit_s"] + self["fetcher.lease_margin_s"]
        if self["generate.lease_s"] < needed:
            raise ConfigError(f"config key generate.lease_s: must be >= fetcher.time_limit_s + "
                              f"fetcher.lease_margin_s ({needed:g}) so a fetch never outlives its leases, "
                              f"got {self['generate.lease_s']:g}")
        if not 0 <= self["fetcher.warc_gzip_level"] <= 9:
            raise ConfigError(f"config key fetcher.warc_gzip_level: must be 0..9, got {self['fetcher.warc_gzip_level']}")
        if not 0 <= self["dedup.max_hamming_distance"] <= 16:
            raise ConfigError("config key dedup.max_hamming_distance: must be 0..16 (unrelated pages are ~32 bits "
                              f"apart), got {self['dedup.max_hamming_distance']}")
        if self["dedup.max_pages_per_key"] < 1:
            raise ConfigError("config key dedup.max_pages_per_key: must be >= 1")
        for pattern in self["exclusions.patterns"]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"config key exclusions.patterns: bad regular expression {pattern!r}: {exc}") from None
        for name, address in self["http.resolve"].items():
            try:
                ipaddress.ip_address(str(address))
            except ValueError:
                raise ConfigError(f"config key http.resolve: {name!r} must map to an IP address, got {address!r}") from None
        for cidr in self["security.allow_networks"]:
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ConfigError(f"config key security.allow_networks: not a CIDR block: {cidr!r}") from None

    @property
    def user_agent(self) -> str:
        return self["http.user_agent"] or (
            f"{self['http.agent_name']}/{__version__} (+{self['http.contact_url']})")

    def with_overrides(self, **dotted: Any) -> "Config":
        """A copy with some keys replaced (keys use '__' for '.'); used by tests and jobs."""
        values = dict(self._values)
        for name, value in dotted.items():
            key = name.replace("__", ".")
            if key not in values:
                raise ConfigError(f"unknown config key {key!r}")
            values[key] = _coerce(key, value, values[key])
        return Config(values)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Config({self._values!r})"
