"""Administration: ``Admin`` (synchronous, ``strom.Admin``) and its asyncio twin
(``strom.admin.aio.Admin``, ``strom.aio.Admin``): topics, configs, leaders, reassignments,
offsets and consumer groups, through the gateway and the partition leaders.
"""

from strom.admin.admin import Admin

__all__ = ["Admin"]
