"""A Spark standalone cluster on loopback: a master and N workers on 127.0.0.1, as real processes.

It exists to run the job exactly as on a cluster (``spark-submit --master spark://...``),
with separate executor JVMs that can be killed, without a second machine. Every daemon is
started in its own process group (the worker's executor JVMs and Python workers are its
children), so killing a worker's group kills that worker the way a lost machine would.
The process ids go to a state file, so ``down`` stops exactly what ``up`` started.

    das cluster up --workers 2      # prints the master URL
    das cluster down

Nothing listens beyond 127.0.0.1: the daemons get ``--host 127.0.0.1`` and
``SPARK_LOCAL_IP=127.0.0.1``, which is also where Spark binds its web UIs.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pyspark

from das.errors import UserError

HOST = "127.0.0.1"
DEFAULT_STATE = Path("out/cluster")
STATE_FILE = "cluster.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True)
class Worker:
    port: int
    webui_port: int
    pid: int = 0


@dataclass(frozen=True)
class Cluster:
    """One running loopback cluster: what ``down`` needs to stop it, and how to reach it."""

    state_dir: str
    master_port: int
    master_webui_port: int
    cores: int
    memory: str
    master_pid: int = 0
    workers: tuple[Worker, ...] = field(default_factory=tuple)

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui(self) -> str:
        return f"http://{HOST}:{self.master_webui_port}"


def spark_home() -> Path:
    """The pip pyspark package folder: it ships spark-class and the jars."""
    return Path(pyspark.__file__).resolve().parent


def daemon_env(cluster: Cluster) -> dict[str, str]:
    """Environment of the daemons (and of executors, which inherit it)."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=HOST,  # also the bind address of every web UI
        SPARK_MASTER_HOST=HOST,
        SPARK_NO_DAEMONIZE="1",
        # executors must run the interpreter the package and numpy/scipy are installed in
        PYSPARK_PYTHON=sys.executable,
        # the master's REST submission server would listen on a fixed port (6066): off
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
    )
    # The driver's gateway variables must not leak into daemons started from a driver.
    for name in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(name, None)
    return env


def _spawn(cluster: Cluster, args: list[str], log_name: str) -> int:
    """Start a daemon in a new session (its own process group), output to its log file.

    posix_spawn rather than subprocess.Popen: the daemons outlive this call (and, for
    ``make cluster-up``, this process), so there is no Popen object to keep or wait on.
    """
    logs = Path(cluster.state_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    program = str(spark_home() / "bin" / "spark-class")
    return os.posix_spawn(
        program,
        [program, *args],
        daemon_env(cluster),
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(logs / log_name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsid=True,  # own process group: the worker's executors die with it
    )


def _start_worker(cluster: Cluster, index: int) -> int:
    worker = cluster.workers[index]
    work_dir = Path(cluster.state_dir) / f"worker-{index}"
    work_dir.mkdir(parents=True, exist_ok=True)
    return _spawn(
        cluster,
        [
            WORKER_CLASS,
            cluster.url,
            "--host", HOST,
            "--port", str(worker.port),
            "--webui-port", str(worker.webui_port),
            "--cores", str(cluster.cores),
            "--memory", cluster.memory,
            "--work-dir", str(work_dir.resolve()),
        ],
        f"worker-{index}.log",
    )  # fmt: skip


def master_status(cluster: Cluster, timeout: float = 2.0) -> dict | None:
    """The master's JSON status page, or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"{cluster.webui}/json/", timeout=timeout) as response:
            return json.load(response)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def alive_worker_ports(cluster: Cluster) -> set[int]:
    """Ports of the workers the master lists as ALIVE (none while it does not answer)."""
    return _alive_ports(master_status(cluster) or {})


def _alive_ports(status: dict) -> set[int]:
    return {w["port"] for w in status.get("workers", []) if w.get("state") == "ALIVE"}


def wait_registered(cluster: Cluster, timeout: float = 90.0) -> None:
    """Block until every worker of ``cluster`` is registered and ALIVE at the master."""
    wanted = {w.port for w in cluster.workers}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if wanted <= alive_worker_ports(cluster):
            return
        for pid in (cluster.master_pid, *(w.pid for w in cluster.workers)):
            if not _alive(pid):
                raise UserError(
                    f"a cluster daemon (pid {pid}) exited while starting; see the logs in "
                    f"{cluster.state_dir}/logs/"
                )
        time.sleep(0.5)
    raise UserError(
        f"workers on ports {sorted(wanted - alive_worker_ports(cluster))} did not register "
        f"with {cluster.url} within {timeout:.0f}s; see {cluster.state_dir}/logs/"
    )


def start_cluster(
    workers: int = 2,
    state_dir: str | Path = DEFAULT_STATE,
    master_port: int = 7077,
    master_webui_port: int = 8080,
    worker_ports: Sequence[int] | None = None,
    worker_webui_ports: Sequence[int] | None = None,
    cores: int = 1,
    memory: str = "2g",
    timeout: float = 90.0,
) -> Cluster:
    """Start a master and ``workers`` workers, wait until all are registered, save the state.

    Worker ports default to master_port + 1 + i, their web UIs to master_webui_port + 1 + i.
    """
    state = Path(state_dir)
    if (state / STATE_FILE).exists():
        raise UserError(
            f"{state / STATE_FILE} exists: a cluster is already up (stop it with "
            "`make cluster-down`, or delete the file if its processes are gone)"
        )
    if workers < 1:
        raise UserError(f"a cluster needs at least one worker, got {workers}")
    ports = list(worker_ports or [master_port + 1 + i for i in range(workers)])
    webuis = list(worker_webui_ports or [master_webui_port + 1 + i for i in range(workers)])
    if len(ports) != workers or len(webuis) != workers:
        raise UserError(f"give {workers} worker ports and {workers} worker web UI ports")
    cluster = Cluster(
        state_dir=str(state.resolve()),
        master_port=master_port,
        master_webui_port=master_webui_port,
        cores=cores,
        memory=memory,
        workers=tuple(Worker(p, w) for p, w in zip(ports, webuis, strict=True)),
    )
    master = _spawn(
        cluster,
        [MASTER_CLASS, "--host", HOST, "--port", str(master_port),
         "--webui-port", str(master_webui_port)],
        "master.log",
    )  # fmt: skip
    cluster = replace(cluster, master_pid=master)
    save_state(cluster)  # from here on, `down` can stop whatever was started
    try:
        for index in range(workers):
            cluster = _with_worker_pid(cluster, index, _start_worker(cluster, index))
            save_state(cluster)
        wait_registered(cluster, timeout)
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def _with_worker_pid(cluster: Cluster, index: int, pid: int) -> Cluster:
    workers = list(cluster.workers)
    workers[index] = replace(workers[index], pid=pid)
    return replace(cluster, workers=tuple(workers))


def kill_worker(cluster: Cluster, index: int) -> None:
    """SIGKILL worker ``index`` with its executor JVMs and Python workers: a lost machine."""
    _kill_group(cluster.workers[index].pid)


def restart_worker(cluster: Cluster, index: int, timeout: float = 90.0) -> Cluster:
    """Start worker ``index`` again on its ports (killing what is left of it) and wait for it."""
    _kill_group(cluster.workers[index].pid)
    deadline = time.monotonic() + timeout
    # The master drops a worker when its connection closes; a new one on the same address
    # is refused until then (and exits), so wait for a status page that no longer lists it:
    # a page that does not answer in time says nothing.
    while (status := master_status(cluster)) is None or cluster.workers[index].port in (
        _alive_ports(status)
    ):
        if time.monotonic() > deadline:
            raise UserError(f"the master still lists worker {index} as alive after its kill")
        time.sleep(0.2)
    cluster = _with_worker_pid(cluster, index, _start_worker(cluster, index))
    save_state(cluster)
    wait_registered(cluster, timeout)
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    """Stop the workers (with their executors), then the master, and remove the state file."""
    leaders = [p for p in (*(w.pid for w in cluster.workers), cluster.master_pid) if _alive(p)]
    for pid in leaders:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while any(_alive(p) for p in leaders) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in leaders:  # whatever is left of each group (an executor whose worker is gone)
        _signal_group(pid, signal.SIGKILL)
    with contextlib.suppress(FileNotFoundError):
        (Path(cluster.state_dir) / STATE_FILE).unlink()


def _ours(pid: int) -> bool:
    """A pid from the state file is still one of our daemons (pids get reused).

    A daemon reads an empty command line for a moment while it execs (``env`` execs bash,
    spark-class execs java), as a zombie does; only a zombie's stays empty, so read again.
    """
    for _ in range(100):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            zombie = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            return False
        if cmdline or zombie:
            return b"org.apache.spark.deploy" in cmdline
        time.sleep(0.01)
    return False


def _alive(pid: int) -> bool:
    """Daemon ``pid`` is running: a child of this process that has not exited (it is reaped
    here when it has), or a daemon another process started (``das cluster up`` before
    ``down``) that is still a Spark daemon."""
    if pid <= 0:
        return False
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return _ours(pid)
    return waited == 0


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _kill_group(pid: int) -> None:
    """SIGKILL the process group led by daemon ``pid`` (it and every child it started)."""
    if not _alive(pid):
        return
    _signal_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def save_state(cluster: Cluster) -> None:
    path = Path(cluster.state_dir) / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(asdict(cluster), indent=2) + "\n")
    os.replace(tmp, path)


def load_state(state_dir: str | Path = DEFAULT_STATE) -> Cluster:
    path = Path(state_dir) / STATE_FILE
    if not path.exists():
        raise UserError(f"no cluster state at {path}: is a cluster up (`make cluster-up`)?")
    data = json.loads(path.read_text())
    data["workers"] = tuple(Worker(**w) for w in data["workers"])
    return Cluster(**data)
