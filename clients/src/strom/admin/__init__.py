"""Administration: ``Admin`` (synchronous, ``strom.Admin``) and its asyncio twin
(``strom.admin.aio.Admin``, ``strom.aio.Admin``): topics, configs, leaders, reassignments,
offsets and consumer groups, through the gateway and the partition leaders. ``config``
(``AdminConfig``) declares their options.
"""

from strom.admin.admin import Admin
from strom.admin.config import AdminConfig, AdminOptions

__all__ = ["Admin", "AdminConfig", "AdminOptions"]
