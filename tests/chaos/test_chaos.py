"""The fault harness (chaos_harness.py): a short run in every test run, a long one in
``make chaos`` (marked slow). Both print the seed and the table; every count must be 0."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos_harness import ChaosSettings, chaos_run, seed_from_env
from txn_chaos_harness import TxnChaosSettings, txn_chaos_run

pytestmark = pytest.mark.integration


def _run(tmp_path: Path, duration_s: float) -> None:
    settings = ChaosSettings(seed=seed_from_env(), duration_s=duration_s)
    results, outcome = chaos_run(tmp_path, settings)
    assert outcome.faults, "the nemesis injected no fault"
    assert len(outcome.acked) > 0, "no record was acknowledged"
    violations = {name: count for name, count in results.items() if count}
    assert not violations, f"seed {settings.seed}: {violations}"


@pytest.mark.timeout(900)
def test_chaos_short(tmp_path: Path) -> None:
    """About two minutes (CI)."""
    _run(tmp_path, float(os.environ.get("STROM_CHAOS_SHORT_SECONDS", "75")))


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_chaos_long(tmp_path: Path) -> None:
    """``make chaos``: 10 minutes unless STROM_CHAOS_SECONDS says otherwise."""
    _run(tmp_path, float(os.environ.get("STROM_CHAOS_SECONDS", "600")))


def _run_transactional(tmp_path: Path, duration_s: float) -> None:
    settings = TxnChaosSettings(seed=seed_from_env(), duration_s=duration_s)
    results, outcome = txn_chaos_run(tmp_path, settings)
    assert outcome.faults, "the nemesis injected no fault"
    committed = [ids for ids, fate in outcome.transactions.values() if fate == "committed"]
    assert committed, "no transaction committed"
    assert outcome.aborted_in_log > 0, "no aborted record reached the log: nothing to hide"
    assert outcome.input_acked, "the pipeline's input got no record"
    violations = {name: count for name, count in results.items() if count}
    assert not violations, f"seed {settings.seed}: {violations}"


@pytest.mark.timeout(900)
def test_txn_chaos_short(tmp_path: Path) -> None:
    """Transactions under faults, about two minutes (CI)."""
    _run_transactional(tmp_path, float(os.environ.get("STROM_CHAOS_SHORT_SECONDS", "60")))


@pytest.mark.slow
@pytest.mark.timeout(0)
def test_txn_chaos_long(tmp_path: Path) -> None:
    """``make chaos``: 10 minutes unless STROM_CHAOS_SECONDS says otherwise."""
    _run_transactional(tmp_path, float(os.environ.get("STROM_CHAOS_SECONDS", "600")))
