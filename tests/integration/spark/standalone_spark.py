"""A real Spark standalone cluster on this machine: a master and two workers, each worker on
its own loopback address (127.0.0.2, 127.0.0.3) so that Spark sees two hosts. Spark never
starts a speculative copy of a task on a host that already runs an attempt of it, so
speculation and the loss of an executor to another host need two hosts; ``local[N]`` is one."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyspark
from strom_testkit import free_port

SPARK_HOME = Path(pyspark.__file__).parent
WORKER_HOSTS = ("127.0.0.2", "127.0.0.3")


@dataclass
class StandaloneSpark:
    """A running master and its workers; ``master_url`` is what a driver passes to
    ``SparkSession.builder.master``."""

    master_url: str
    work_dir: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """The environment of a driver (and of the daemons): this interpreter everywhere."""
        return {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOG_DIR": str(self.work_dir / "logs"),
            "SPARK_WORKER_DIR": str(self.work_dir / "work"),
        }


def _daemon(cluster: StandaloneSpark, name: str, args: list[str], host: str) -> None:
    log = cluster.work_dir / f"{name}.log"
    with log.open("wb") as out:
        cluster.processes.append(
            subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), *args],
                env={**cluster.env(), "SPARK_LOCAL_IP": host},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own group: its executors die with it
            )
        )


def _wait_for_workers(log: Path, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if len(re.findall(r"Registering worker ", text)) >= count:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{count} Spark workers did not register in {timeout_s:.0f} s (see {log})")


@contextmanager
def standalone_spark(work_dir: Path, timeout_s: float = 180.0) -> Iterator[StandaloneSpark]:
    """Start a master on 127.0.0.1 and one single-core worker per WORKER_HOSTS address; stop
    every process (and its executors) on exit, failure included."""
    port = free_port()
    cluster = StandaloneSpark(f"spark://127.0.0.1:{port}", work_dir)
    try:
        _daemon(
            cluster,
            "master",
            ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", "0"],
            "127.0.0.1",
        )  # fmt: skip
        for i, host in enumerate(WORKER_HOSTS):
            _daemon(
                cluster,
                f"worker-{i}",
                ["org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1",
                 "--memory", "1g", "--webui-port", "0", cluster.master_url],
                host,
            )  # fmt: skip
        _wait_for_workers(work_dir / "master.log", len(WORKER_HOSTS), timeout_s)
        yield cluster
    finally:
        for process in cluster.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in cluster.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
