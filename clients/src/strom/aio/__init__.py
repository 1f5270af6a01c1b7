"""asyncio-native clients: the sync ``strom.Producer`` etc. are thin facades over these."""

from strom.admin.aio import Admin
from strom.consumer.aio import Consumer
from strom.eos.aio import TransactionalLoop
from strom.producer.aio import Producer
from strom.types import ConsumerGroupMetadata

__all__ = ["Admin", "Consumer", "ConsumerGroupMetadata", "Producer", "TransactionalLoop"]
