"""Topic configs and their cluster-wide broker defaults: describe (with sources) and
incremental alter (validated by name, type and range through ``strom.topic_config``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from strom.errors import (
    ConfigurationError,
    InvalidConfigError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)
from strom.topic_config import TopicConfig
from strom_controller.keys import KeyLayout, TopicRecord, encode
from strom_controller.managers.result import ControllerResult
from strom_controller.metadata_cache import MetadataCache
from strom_controller.model import AlterConfigOp, ConfigResourceRef, ConfigValue
from strom_server.etcd.store import Compare, Put

__all__ = ["ConfigManager", "describe_topic_configs"]

_KNOWN = frozenset(TopicConfig().to_props())
_LIST_CONFIGS = frozenset(
    {
        "cleanup.policy",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
    }
)


def _effective(broker_config: Mapping[str, str], overrides: Mapping[str, str]) -> dict[str, str]:
    try:
        return TopicConfig.from_props({**broker_config, **overrides}).to_props()
    except ConfigurationError:
        # A stored value no longer valid must not hide the others: fall back to defaults.
        return {**TopicConfig().to_props(), **broker_config, **overrides}


def describe_topic_configs(
    broker_config: Mapping[str, str],
    overrides: Mapping[str, str],
    names: Iterable[str] = (),
) -> list[ConfigValue]:
    """Every topic config (or only ``names``) with its value and source."""
    wanted = set(names)
    out = []
    for name, value in sorted(_effective(broker_config, overrides).items()):
        if wanted and name not in wanted:
            continue
        if name in overrides:
            source = "TOPIC"
        elif name in broker_config:
            source = "BROKER_DEFAULT"
        else:
            source = "DEFAULT"
        out.append(ConfigValue(name, value, source))
    return out


def _apply_ops(
    base: Mapping[str, str], effective: Mapping[str, str], ops: Iterable[AlterConfigOp]
) -> dict[str, str]:
    result = dict(base)
    for op in ops:
        if op.name not in _KNOWN:
            raise InvalidConfigError(f"unknown topic config '{op.name}'")
        if op.op == "set":
            result[op.name] = op.value
        elif op.op == "delete":
            result.pop(op.name, None)
        elif op.op in ("append", "subtract"):
            if op.name not in _LIST_CONFIGS:
                raise InvalidConfigError(f"'{op.name}' is not a list: {op.op.upper()} needs one")
            current = result.get(op.name, effective.get(op.name, ""))
            items = [i for i in current.split(",") if i]
            given = [i.strip() for i in op.value.split(",") if i.strip()]
            if op.op == "append":
                items += [i for i in given if i not in items]
            else:
                items = [i for i in items if i not in given]
            result[op.name] = ",".join(items)
        else:
            raise InvalidRequestError(f"unknown config operation {op.op!r}")
    return result


class ConfigManager:
    """DescribeConfigs and IncrementalAlterConfigs for topics and the cluster-wide defaults."""

    def __init__(self, keys: KeyLayout, static_broker_configs: Mapping[str, str]) -> None:
        self.keys = keys
        #: Read-only controller settings shown under the broker resource.
        self.static_broker_configs = dict(static_broker_configs)

    def describe(self, cache: MetadataCache, resource: ConfigResourceRef) -> list[ConfigValue]:
        wanted = set(resource.config_names)
        if resource.type == "topic":
            record = cache.topics.get(resource.name)
            if record is None:
                raise UnknownTopicOrPartitionError(f"topic '{resource.name}' does not exist")
            return describe_topic_configs(cache.broker_config, record.configs, wanted)
        if resource.type == "broker":
            self._check_broker_name(resource.name)
            entries = [
                ConfigValue(n, v, "BROKER_DEFAULT")
                for n, v in sorted(cache.broker_config.items())
                if not wanted or n in wanted
            ]
            entries += [
                ConfigValue(n, v, "DEFAULT", read_only=True)
                for n, v in sorted(self.static_broker_configs.items())
                if not wanted or n in wanted
            ]
            return entries
        raise InvalidRequestError(f"unsupported config resource type {resource.type!r}")

    def alter(
        self,
        cache: MetadataCache,
        resource: ConfigResourceRef,
        ops: Iterable[AlterConfigOp],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[None]:
        ops = list(ops)
        if resource.type == "topic":
            record = cache.topics.get(resource.name)
            if record is None:
                raise UnknownTopicOrPartitionError(f"topic '{resource.name}' does not exist")
            effective = _effective(cache.broker_config, record.configs)
            overrides = _apply_ops(record.configs, effective, ops)
            self._validate({**cache.broker_config, **overrides})
            if validate_only:
                return ControllerResult()
            updated = TopicRecord(record.topic_id, dict(record.partitions), overrides)
            key = self.keys.topic(resource.name)
            return ControllerResult([Put(key, updated.to_json())], None, [Compare.exists(key)])
        if resource.type == "broker":
            self._check_broker_name(resource.name)
            read_only = [op.name for op in ops if op.name in self.static_broker_configs]
            if read_only:
                raise InvalidConfigError(f"read-only controller setting(s): {read_only}")
            defaults = _apply_ops(cache.broker_config, TopicConfig().to_props(), ops)
            self._validate(defaults)
            if validate_only:
                return ControllerResult()
            return ControllerResult([Put(self.keys.broker_config, encode(defaults))])
        raise InvalidRequestError(f"unsupported config resource type {resource.type!r}")

    @staticmethod
    def _validate(props: Mapping[str, str]) -> None:
        try:
            TopicConfig.from_props(props)
        except ConfigurationError as exc:
            raise InvalidConfigError(str(exc)) from None

    @staticmethod
    def _check_broker_name(name: str) -> None:
        if name and not name.isdigit():
            raise InvalidRequestError(f"broker resource name must be empty or an id, got {name!r}")
