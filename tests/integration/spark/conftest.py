"""Fixtures of the Spark connector tests (defined in spark_testkit)."""

from spark_testkit import release_after_folder, spark, spark_cluster

__all__ = ["release_after_folder", "spark", "spark_cluster"]
