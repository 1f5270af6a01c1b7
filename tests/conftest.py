"""Shared pytest configuration for the Strom suite."""
