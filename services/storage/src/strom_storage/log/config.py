"""Per-partition log configuration: the topic configs of ``strom.topic_config``.

A partition log honours its topic's ``TopicConfig`` (Kafka's names and defaults), called
``LogConfig`` inside the storage engine. Usage::

    config = LogConfig()                                   # Kafka's defaults
    config = LogConfig.from_props({"segment.bytes": "1048576", "cleanup.policy": "compact"})
    bigger = config.merged({"retention.bytes": "10000000"})
"""

from strom.topic_config import LONG_MAX
from strom.topic_config import TopicConfig as LogConfig

__all__ = ["LONG_MAX", "LogConfig"]
