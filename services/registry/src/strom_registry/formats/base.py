"""What every schema format provides."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from strom_registry.model import SchemaType

__all__ = ["ParsedSchema", "ResolvedReference"]


@dataclass(frozen=True)
class ResolvedReference:
    """A reference's name and the text of the schema it names (same type as the referrer)."""

    name: str
    text: str


class ParsedSchema(ABC):
    """A parsed schema: its canonical text (its identity) and the compatibility rule."""

    schema_type: SchemaType

    def __init__(self, canonical: str) -> None:
        self.canonical = canonical

    @abstractmethod
    def read_problems(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema (empty: it can)."""
