"""The job on a real Spark standalone cluster on loopback: same output as local, and faults.

One master and two workers (1 core each) run for the whole module, started and stopped by
``das.cluster.standalone``; before each test both workers are alive. The job is launched the way a
user launches it, by ``spark-submit --master spark://...``, and its faults are real ones:
SIGKILL of a worker's process group (worker JVM, executor JVM, Python workers) or of the
driver's (spark-submit, its JVM and the Python driver).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from das.cluster import standalone
from tests.conftest import ROOT
from tests.helpers import demo_job_args, file_stamps, job_env, topdown_command

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.slow]
#: Spark names part files part-NNNNN-<job UUID>-c000...; the UUID is random per write job.
JOB_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@pytest.fixture(scope="module")
def cluster_state(tmp_path_factory):
    """A 2-worker loopback cluster for the module; its state file always has the live pids."""
    state = tmp_path_factory.mktemp("cluster")
    ports = free_ports(6)
    standalone.start_cluster(
        2,
        state,
        master_port=ports[0],
        master_webui_port=ports[1],
        worker_ports=ports[2:4],
        worker_webui_ports=ports[4:6],
        cores=1,
        memory="1536m",
    )
    try:
        yield state
    finally:
        standalone.stop_cluster(standalone.load_state(state))


@pytest.fixture
def cluster(cluster_state) -> standalone.Cluster:
    """The module's cluster with both workers alive (a test may have killed one)."""
    current = standalone.load_state(cluster_state)
    alive = standalone.alive_worker_ports(current)
    for index, worker in enumerate(current.workers):
        if worker.port not in alive:
            current = standalone.restart_worker(current, index)
    return current


@dataclass
class Job:
    """A spark-submit process in its own process group, its output collected line by line."""

    process: subprocess.Popen
    ui_port: int
    lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        with self.process.stdout:
            for line in self.process.stdout:
                self.lines.append(line)

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def seen(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def wait_for(self, found: Callable[[], object], what: str, timeout: float = 300) -> object:
        """Poll ``found`` until it returns something truthy; fail if the job ends first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = found()
            if value:
                return value
            if self.process.poll() is not None:
                self._reader.join(5)
                pytest.fail(f"the job ended before {what}:\n{self.log}")
            time.sleep(0.1)
        pytest.fail(f"timed out waiting for {what}:\n{self.log}")

    def finish(self, timeout: float = 600) -> int:
        code = self.process.wait(timeout)
        self._reader.join(10)
        return code

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)  # spark-submit, its JVM, the Python driver
        self.finish()


def _submit(master: str, input_dir: Path, output: Path, *args: str) -> Job:
    """``spark-submit jobs/topdown.py`` as a user runs it, on ``master``: the shared demo job
    (tests/helpers.py: 2 shuffle partitions, one task per executor core), ``args`` appended."""
    ui_port = free_ports(1)[0]
    command = [
        *topdown_command(master, "spark.executor.memory=1g", f"spark.ui.port={ui_port}"),
        *demo_job_args(input_dir, output),
        *args,
    ]
    process = subprocess.Popen(
        command,
        env=job_env(),
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return Job(process, ui_port)


def parquet_digest(path: Path) -> str:
    """SHA-256 of a Parquet file's bytes, with one documented exception in the footer.

    parquet-java collects each column chunk's encodings in a HashSet of enum constants
    and writes them in its iteration order, which follows the JVM's identity hash codes: two
    JVMs writing the same data can list e.g. (PLAIN_DICTIONARY, BIT_PACKED) in either
    order (apache/parquet-java#3215, unfixed in the 1.17 that Spark ships). So every byte
    before the footer (all data and dictionary pages) must be equal, and the footer must be
    equal field by field with each encodings list taken as a set.
    """
    data = path.read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    metadata = pq.ParquetFile(path).metadata
    summary = metadata.to_dict()
    for group in summary["row_groups"]:
        for column in group["columns"]:
            column["encodings"] = sorted(column["encodings"])
    digest = hashlib.sha256(data[: -8 - footer])
    digest.update(json.dumps(summary, sort_keys=True, default=str).encode())
    digest.update(repr(sorted((metadata.metadata or {}).items())).encode())
    digest.update(str(metadata.schema).split("\n", 1)[1].encode())  # line 1: an object address
    return digest.hexdigest()


def data_files(directory: Path) -> list[tuple[str, str]]:
    """Every file under ``directory`` as (relative path, digest of its bytes), sorted.

    What "byte-identical" means here: the same files, by relative path, with the same bytes,
    except (1) the job UUID Spark puts in part file names (random per write) is blanked
    out of the path, and (2) Parquet footers are compared as in ``parquet_digest``. The
    hidden .crc files are checksums of those same bytes and are left out.
    """
    return sorted(
        (
            JOB_UUID.sub("UUID", p.relative_to(directory).as_posix()),
            parquet_digest(p) if p.suffix == ".parquet" else hashlib.sha256(p.read_bytes()).hexdigest(),
        )
        for p in directory.rglob("*")
        if p.is_file() and not p.name.endswith(".crc")
    )


@pytest.fixture
def submit() -> Iterator[Callable[..., Job]]:
    """``_submit``, and at the end of the test a SIGKILL to every job it started that still
    runs: a test that fails mid-job would otherwise leave a driver waiting for executors of
    a cluster that is gone."""
    jobs: list[Job] = []

    def start(master: str, input_dir: Path, output: Path, *args: str) -> Job:
        jobs.append(_submit(master, input_dir, output, *args))
        return jobs[-1]

    yield start
    for job in jobs:
        if job.process.poll() is None:
            job.kill()


def _json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def busy_workers(cluster: standalone.Cluster, job: Job, phase: str) -> list[int]:
    """Workers running a task of a Spark job described as ``phase`` (the driver's REST API)."""
    base = f"http://127.0.0.1:{job.ui_port}/api/v1/applications"
    try:
        apps = _json(base)
        if not apps:
            return []
        app = apps[0]["id"]
        running = _json(f"{base}/{app}/jobs?status=running")
        if not any(j.get("description") == phase for j in running):
            return []
        busy = {
            e["id"] for e in _json(f"{base}/{app}/executors") if e["id"] != "driver" and e["activeTasks"]
        }
        found = []
        for index, worker in enumerate(cluster.workers):
            state = _json(f"http://127.0.0.1:{worker.webui_port}/json/")
            if {str(e["id"]) for e in state["executors"] if e["appid"] == app} & busy:
                found.append(index)
        return found
    except (OSError, ValueError):  # the driver's UI is not up yet ("Spark is starting up")
        return []


def _lose_a_worker(cluster, job: Job, phase: str, done: Path) -> standalone.Cluster:
    """SIGKILL the worker running a task of ``phase`` (``done``, its _SUCCESS file, not yet
    written: the kill hits a running stage), then restart it, as a healing cluster would."""
    index = job.wait_for(lambda: busy_workers(cluster, job, phase), f"a task of {phase}")[0]
    standalone.kill_worker(cluster, index)
    assert not done.exists(), f"{phase} finished before the kill"
    return standalone.restart_worker(cluster, index)


def test_lost_workers_and_a_killed_driver_do_not_change_the_output(
    cluster, submit, demo_input, demo_run, tmp_path
):
    """A worker lost in the measurement, the driver killed in the tract level, the run
    resumed and another worker lost in the block level: the cluster still writes the bytes
    of demo_run (tests/conftest.py, the same job undisturbed in one local session).

    In test mode a resume that drew the noise again would draw the same, so the NMF's
    files must also be the ones the first driver wrote (their modification times); a
    production-mode kill and resume is tests/system/test_job.py's.
    """
    output = tmp_path / "run"
    job = submit(cluster.url, demo_input, output)
    cluster = _lose_a_worker(cluster, job, "measure", output / "nmf" / "_SUCCESS")
    job.wait_for(lambda: job.seen("solve tract: started"), "the tract level")
    time.sleep(1)
    job.kill()
    assert (output / "levels" / "county" / "_SUCCESS").exists()
    assert not (output / "levels" / "tract" / "_SUCCESS").exists(), "tract finished first"
    assert not (output / "certificate.json").exists()
    nmf_stamps = file_stamps(output / "nmf")

    resumed = submit(cluster.url, demo_input, output, "--resume")
    _lose_a_worker(cluster, resumed, "solve block", output / "levels" / "block" / "_SUCCESS")
    assert resumed.finish() == 0, resumed.log  # finished and validated
    assert resumed.seen("reusing the noisy measurements"), resumed.log
    assert file_stamps(output / "nmf") == nmf_stamps  # noise never redrawn
    # each driver saw its executor go (Spark logs "Lost executor N on HOST: worker lost")
    for run in (job, resumed):
        assert len(set(re.findall(r"Lost executor (\d+) on", run.log))) == 1, run.log
    certificate = json.loads((output / "certificate.json").read_text())
    reused = {lv["level"]: lv["reused"] for lv in certificate["postprocessing"]["levels"]}
    assert reused == {
        "us": True, "state": True, "county": True,
        "tract": False, "block_group": False, "block": False,
    }  # fmt: skip
    for part in ("mdf", "nmf"):
        files = data_files(output / part)
        assert any(name.endswith(".parquet") for name, _ in files)
        assert files == data_files(demo_run / part), part
