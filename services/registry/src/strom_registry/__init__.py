"""Strom schema registry: Confluent Schema Registry's REST API over the ``_schemas`` topic.

The domain (``model``, ``formats``, ``compatibility``, ``state``, ``registry``) is plain Python;
``schemas_log`` keeps it in the topic, ``election`` picks the one writer through etcd and
``http`` serves the REST API (docs/schema-registry.md).
"""
