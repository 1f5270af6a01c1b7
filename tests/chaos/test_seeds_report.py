"""``seeds.py`` reads the counts back from the tables the harnesses print (no cluster)."""

from __future__ import annotations

from seeds import parse_tables
from txn_chaos_harness import TxnChaosSettings, TxnOutcome, table


def test_the_counts_of_a_printed_table_are_read_back_and_tables_sum() -> None:
    results = {"aborted reads": 0, "pipeline records duplicated": 14478, "duplicates": 2}
    outcome = TxnOutcome(duplicates_explained=["input a: txn-out-1@1 ...; txn-out-1@9 ..."])
    printed = table(results, outcome, TxnChaosSettings(seed=7, duration_s=240))
    output = f"noise 12\n{printed}\nnoise after  3\n{printed}\n"
    assert parse_tables(output) == {
        "aborted reads": 0,
        "pipeline records duplicated": 2 * 14478,
        "duplicates": 4,
    }
