"""EtcdProcess: a real etcd on free loopback ports, used with python3-etcd3, always cleaned up."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import etcd3
import pytest

from strom_server.etcd.process import EtcdProcess, EtcdStartError, etcd_is_healthy

pytestmark = pytest.mark.timeout(60)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its /proc status says so.
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def test_start_put_get_stop() -> None:
    etcd = EtcdProcess()
    try:
        etcd.start()
        assert etcd.port > 0 and etcd.peer_port > 0 and etcd.port != etcd.peer_port
        assert etcd_is_healthy(etcd.client_url)
        client = etcd3.client(etcd.host, etcd.port, timeout=5)
        try:
            client.put("/strom/test/key", "value")
            value, _meta = client.get("/strom/test/key")
            assert value == b"value"
        finally:
            client.close()
        pid, data_dir = etcd.pid, etcd.data_dir
        assert pid is not None and data_dir.is_dir()
    finally:
        etcd.stop()
    assert not _alive(pid)
    assert not data_dir.exists()  # the temporary directory is gone
    assert not etcd_is_healthy(etcd.client_url, timeout_s=0.2)
    assert etcd.stop() is None  # a second stop is harmless


def test_given_data_dir_is_kept(tmp_path: Path) -> None:
    with EtcdProcess(tmp_path / "etcd") as etcd:
        assert etcd.endpoint == f"127.0.0.1:{etcd.port}"
    assert (tmp_path / "etcd" / "member").is_dir()
    assert (tmp_path / "strom-etcd.log").exists()


def test_failed_start_cleans_up_and_reports_the_output(tmp_path: Path) -> None:
    fake = tmp_path / "fake-etcd"
    fake.write_text("#!/bin/sh\necho 'fake etcd: cannot start' >&2\nexit 3\n")
    fake.chmod(0o755)
    temp_root = Path(tempfile.gettempdir())
    before = set(temp_root.glob("strom-etcd-*"))
    etcd = EtcdProcess(binary=fake)
    with pytest.raises(EtcdStartError, match=r"exited with code 3(.|\n)*cannot start"):
        etcd.start(timeout_s=10)
    assert etcd.pid is None  # nothing left running
    assert set(temp_root.glob("strom-etcd-*")) == before  # its temporary directory is gone


def test_an_exception_inside_the_block_still_stops_etcd() -> None:
    pid = None
    with pytest.raises(RuntimeError, match="test failure"), EtcdProcess() as etcd:
        pid = etcd.pid
        raise RuntimeError("test failure")
    assert pid is not None and not _alive(pid)
