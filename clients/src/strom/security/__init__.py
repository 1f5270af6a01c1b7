"""Client-side security: Kafka's ACL model, SCRAM, security options, secure channels."""

from strom.security.channels import (
    AUTHORIZATION_KEY,
    ChannelSecurity,
    TokenSource,
    default_security,
    set_default_security,
)
from strom.security.config import (
    SecurityConfig,
    command_config_options,
    properties_to_options,
    read_properties,
)

__all__ = [
    "AUTHORIZATION_KEY",
    "ChannelSecurity",
    "SecurityConfig",
    "TokenSource",
    "command_config_options",
    "default_security",
    "properties_to_options",
    "read_properties",
    "set_default_security",
]
