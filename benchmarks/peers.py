"""Celery and Dramatiq on fdbrecipes against the same on Redis, and the native worker.

``python benchmarks/peers.py [--jobs 3000] [--processes 4] [--threads 8]`` measures, in
one run, for each system:

* **enqueue**: one caller process sends ``--jobs`` no-op jobs, one call per job
  (Celery ``delay()``, Dramatiq ``send()``, ``Queue.push(db, ...)``): jobs per second;
  then, once the jobs are drained, from ``--senders`` threads of one caller process
  (as a web application's request threads send them: ``Queue.push(db)`` calls of
  several threads share transactions), as many jobs again;
* **drain**: with the jobs waiting, ``--processes`` worker processes of ``--threads``
  threads each start (Celery: ``celery worker -P threads -c 8`` per process;
  Dramatiq: ``dramatiq -p 4 -t 8``; native: ``fdbrecipes worker --processes 4
  --concurrency 8``) and run them: jobs per second from the first job's end to the last's
  (each job appends one byte to its process's file; the parent counts the bytes every
  10 ms).

Systems: Celery and Dramatiq on this transport/broker, on Redis with ``appendfsync
always`` (as durable as a FoundationDB commit) and on Redis with its default settings;
the native ``fdbrecipes worker``; the simplest code on the library (``bare``: the same
pushes; ``--processes`` processes each looping ``claim_many`` of 16, the jobs, one
``ack_many``); ``unshared``, as ``bare`` but each push as ``Queue.push(db)`` ran before
the threads of a process shared transactions (a transaction of its own with its
receipt, through ``jobs.ops.push_job``, which never shares: the threads enqueue's
baseline); and FoundationDB's 1-key commit from one client, the floor of a
one-call-per-job enqueue.  Redis (Debian's ``redis-server``: ``apt-get
install -y redis-server``) is started on free loopback ports and stopped afterwards;
FoundationDB is ``FDB_CLUSTER_FILE``'s cluster or a throwaway local server.  Needs the
``peers`` extra (``pip install -e '.[peers]'``).  Run it on a quiet machine: workers,
callers and servers share its cores.  Results: a table on stdout, ``--out`` JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

#: The module every worker and caller imports: one no-op job per framework.
APP = '''
import os, time
SYSTEM = os.environ["PEERS_SYSTEM"]
_fd = os.open(os.path.join(os.environ["PEERS_COUNT_DIR"], str(os.getpid())),
              os.O_WRONLY | os.O_CREAT | os.O_APPEND)

def tick():
    os.write(_fd, b"x")

if SYSTEM in ("celery-fdb", "dramatiq-fdb", "native", "bare", "unshared", "commit"):
    import fdb
    fdb.api_version(730)

FDB = {"cluster_file": os.environ.get("FDB_CLUSTER_FILE"),
       "directory": os.environ.get("PEERS_DIRECTORY", "peers")}

if SYSTEM.startswith("celery"):
    from celery import Celery
    if SYSTEM == "celery-fdb":
        app = Celery("peers_app", broker="fdbrecipes://")
        app.conf.broker_transport = "fdbrecipes.contrib.celery:Transport"
        app.conf.broker_transport_options = FDB
    else:
        app = Celery("peers_app", broker=os.environ["PEERS_REDIS"])
    app.conf.task_ignore_result = True

    @app.task
    def noop():
        tick()

    def send(n):
        for _ in range(n):
            noop.delay()

elif SYSTEM.startswith("dramatiq"):
    import dramatiq
    if SYSTEM == "dramatiq-fdb":
        from fdbrecipes.contrib.dramatiq import FdbBroker
        broker = FdbBroker(**FDB)
    else:
        from dramatiq.brokers.redis import RedisBroker
        broker = RedisBroker(url=os.environ["PEERS_REDIS"])
    dramatiq.set_broker(broker)

    @dramatiq.actor
    def noop():
        tick()

    def send(n):
        for _ in range(n):
            noop.send()

else:  # native, bare, unshared, and the 1-key commit
    from fdbrecipes import Queue
    from fdbrecipes._drivers.blocking import drive
    db = fdb.open(FDB["cluster_file"])
    jobs = Queue(fdb.directory.create_or_open(db, (FDB["directory"], "jobs")))

    def handle(job):
        tick()

    def send(n):
        if SYSTEM in ("native", "bare"):
            for _ in range(n):
                jobs.push(db, b"noop")
        elif SYSTEM == "unshared":  # Queue.push(db) before the threads shared
            for _ in range(n):
                drive(jobs.ops.push_job(db, b"noop"))
        else:
            space = fdb.Subspace(("peers-commit", os.getpid()))
            for i in range(n):
                db[space.pack((i,))] = b""
            db.clear_range(space.range().start, space.range().stop)

    def drain():
        """The simplest consumer: claim a batch under leases (among the 8 oldest),
        run it, ack it in one transaction; wait on the queue's watch when empty."""
        while True:
            leases = jobs.claim_many(db, 16, 30.0, spread=8)
            if not leases:
                jobs.wait(db, timeout=1.0)
                continue
            for lease in leases:
                handle(lease)
            jobs.ack_many(db, leases)

if __name__ == "__main__":
    import sys, threading
    if sys.argv[1] == "drain":
        drain()
    n, senders = int(sys.argv[1]), int(sys.argv[2])
    threads = [threading.Thread(target=send, args=(n // senders,)) for _ in range(senders)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(time.perf_counter() - start)
'''

SYSTEMS = ["celery-fdb", "celery-redis-always", "celery-redis-default", "dramatiq-fdb",
           "dramatiq-redis-always", "dramatiq-redis-default", "native", "bare", "unshared",
           "commit"]


class Row(NamedTuple):
    system: str
    enqueue: Optional[float]  # jobs per second, one caller
    drain: Optional[float]    # jobs per second, the workers
    cpu: Optional[float] = None     # ms of CPU per job drained: the workers' processes
    server: Optional[float] = None  # ms of CPU per job drained: the server's
    threads: Optional[float] = None  # jobs per second, one caller's --senders threads


def median(values: List[float]) -> Optional[float]:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def summary(rows: List[Row]) -> Row:
    """The medians of one system's rounds."""
    return Row(rows[0].system, *(median([v for v in values if v is not None])
                                 for values in list(zip(*rows))[1:]))


def spread(values: List[Optional[float]]) -> str:
    found = [v for v in values if v]
    return f"{min(found):,.0f}-{max(found):,.0f}" if found else "-"


#: Clock ticks per second of /proc's CPU times.
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Proc(NamedTuple):
    parent: int
    cpu: float  # seconds, user and system, its own and its reaped children's
    command: str


def processes() -> Dict[int, Proc]:
    """Every process of the machine (Linux /proc): its parent, CPU and command line."""
    found: Dict[int, Proc] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (state) on
        found[int(entry.name)] = Proc(int(fields[1]),
                                      sum(int(x) for x in fields[11:15]) / TICK, command)
    return found


def tree_cpu(found: Dict[int, Proc], roots: List[int]) -> float:
    """CPU seconds of ``roots`` and every process descending from them."""
    children: Dict[int, List[int]] = {}
    for pid, proc in found.items():
        children.setdefault(proc.parent, []).append(pid)
    total, todo, seen = 0.0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in found:
            continue
        seen.add(pid)
        total += found[pid].cpu
        todo.extend(children.get(pid, ()))
    return total


def server_cpu(found: Dict[int, Proc], server: Optional[Tuple[str, str]]) -> Optional[float]:
    """CPU seconds of the server processes ``server`` names (a program and a string
    of its command line), None if there is none on this machine."""
    if server is None:
        return None
    program, needle = server
    pids = [pid for pid, proc in found.items()
            if program in proc.command.split(" ")[0] and needle in proc.command]
    return sum(found[pid].cpu for pid in pids) if pids else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def redis_server(durable: bool, workdir: Path) -> Iterator[str]:
    """A ``redis-server`` on a free loopback port (``appendfsync always`` if
    ``durable``, else Debian's defaults), its URL; stopped on exit."""
    program = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.path.exists(program):
        raise SystemExit("redis-server not found: apt-get install -y redis-server")
    port = free_port()
    data = workdir / f"redis-{port}"
    data.mkdir()
    args = [program, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
            "--daemonize", "no"]
    if durable:
        args += ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), \
                    socket.create_connection(("127.0.0.1", port), 1) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"redis-server on port {port} did not start")
            time.sleep(0.05)  # polling a starting server, with a deadline
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


class Run:
    """One system's measurement: its environment, its counter files, its workers."""

    def __init__(self, system: str, workdir: Path, env: Dict[str, str], args: Any) -> None:
        self.system = system
        self.args = args
        self.counts = workdir / f"counts-{system}"
        self.counts.mkdir()
        self.env = {**env, "PEERS_SYSTEM": system.split("-redis")[0] + (
            "-redis" if "-redis" in system else ""), "PEERS_COUNT_DIR": str(self.counts),
            "PEERS_DIRECTORY": f"peers-{uuid.uuid4().hex[:12]}"}
        self.workdir = workdir

    def enqueue(self, senders: int = 1) -> float:
        """Seconds one caller took to send the jobs, from ``senders`` threads."""
        done = subprocess.run([sys.executable, "peers_app.py", str(self.args.jobs),
                               str(senders)],
                              cwd=self.workdir, env=self.env, capture_output=True, text=True,
                              timeout=1800)
        if done.returncode != 0:
            raise SystemExit(f"{self.system}: enqueue failed:\n{done.stderr[-3000:]}")
        return float(done.stdout.strip().splitlines()[-1])

    def worker_commands(self) -> List[List[str]]:
        p, t = self.args.processes, self.args.threads
        if self.system.startswith("celery"):
            return [[sys.executable, "-m", "celery", "-A", "peers_app", "worker", "-P",
                     "threads", "-c", str(t), "-n", f"w{i}@%h", "--without-mingle",
                     "--without-gossip", "-l", "WARNING"] for i in range(p)]
        if self.system.startswith("dramatiq"):
            return [[sys.executable, "-m", "dramatiq", "peers_app", "-p", str(p), "-t", str(t)]]
        if self.system in ("bare", "unshared"):
            return [[sys.executable, "peers_app.py", "drain"] for _ in range(p)]
        return [[sys.executable, "-m", "fdbrecipes", "worker", "peers_app:handle",
                 "--directory", f"{self.env['PEERS_DIRECTORY']}/jobs", "--kind", "queue",
                 "--processes", str(p), "--concurrency", str(t), "--log-level", "WARNING",
                 *self.args.native_option]]

    def done(self) -> int:
        return sum(f.stat().st_size for f in self.counts.iterdir())

    def server(self) -> Tuple[str, str]:
        """The server's program and a string of its command line."""
        if "-redis-" in self.system:
            return ("redis-server", ":" + self.env["PEERS_REDIS"].rsplit(":", 1)[1].split("/")[0])
        return ("fdbserver", self.env["FDB_CLUSTER_FILE"])

    def drain(self) -> Tuple[float, float, Optional[float]]:
        """Jobs per second from the first job's end to the last's; the CPU per job
        meanwhile (ms): of the workers' processes, and of the server's (None: not on
        this machine)."""
        procs = [subprocess.Popen(cmd, cwd=self.workdir, env=self.env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True) for cmd in self.worker_commands()]
        roots = [p.pid for p in procs]
        try:
            deadline = time.monotonic() + 600
            first = None
            while True:
                n = self.done()
                now = time.perf_counter()
                if n and first is None:
                    found = processes()
                    first = (now, n, tree_cpu(found, roots), server_cpu(found, self.server()))
                if n >= self.args.jobs:
                    break
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise SystemExit(f"{self.system}: {n} of {self.args.jobs} jobs ran")
                time.sleep(0.01)  # the sampling period of the count
            found = processes()
            assert first is not None
            jobs = n - first[1]
            workers = (tree_cpu(found, roots) - first[2]) * 1000 / jobs
            served = server_cpu(found, self.server())
            return (jobs / (now - first[0]), workers, None if served is None or first[3] is None
                    else (served - first[3]) * 1000 / jobs)
        finally:
            self.stop(procs)

    def stop(self, procs: List[Any]) -> None:
        """Kill the workers.  The native supervisor first gets SIGTERM and up to 60 s:
        its children run in sessions of their own, which a SIGKILL of its group would
        leave running (and taking CPU from the next rows)."""
        if self.system == "native":
            for p in procs:
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=60)
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=60)


def measure(system: str, workdir: Path, env: Dict[str, str], args: Any) -> Row:
    run = Run(system, workdir, env, args)
    seconds = run.enqueue()
    enqueue = args.jobs / seconds
    drain, cpu, server = (None, None, None) if system == "commit" else run.drain()
    threads = args.jobs // args.senders * args.senders / run.enqueue(args.senders)
    return Row(system, enqueue, drain, cpu, server, threads)


def ratio(a: Optional[float], b: Optional[float]) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def table(rounds: Dict[str, List[Row]]) -> str:
    """Medians over the rounds, their ratios, then each system's range."""
    rows = {name: summary(found) for name, found in rounds.items()}
    lines = [f"{'system':<24}{'enqueue/s':>11}{'drain/s':>10}   enqueue x always/default"
             "   drain x always/default"
             f"{'threads/s':>11}   threads x always/default"]
    for name, row in rows.items():
        base = name.split("-")[0]
        always = rows.get(f"{base}-redis-always") if base in ("celery", "dramatiq") \
            else rows.get("dramatiq-redis-always")
        default = rows.get(f"{base}-redis-default") if base in ("celery", "dramatiq") \
            else rows.get("dramatiq-redis-default")
        enq = f"{row.enqueue:,.0f}" if row.enqueue else "-"
        dr = f"{row.drain:,.0f}" if row.drain else "-"
        lines.append(
            f"{name:<24}{enq:>11}{dr:>10}   "
            f"{ratio(row.enqueue, always and always.enqueue):>6} / "
            f"{ratio(row.enqueue, default and default.enqueue):<6}"
            f"{'':>10}{ratio(row.drain, always and always.drain):>6} / "
            f"{ratio(row.drain, default and default.drain):<6}"
            f"{f'{row.threads:,.0f}' if row.threads else '-':>11}   "
            f"{ratio(row.threads, always and always.threads):>6} / "
            f"{ratio(row.threads, default and default.threads):<6}")
    lines.append("(medians; native, bare and commit rows: ratios to Dramatiq on Redis; "
                 "threads: the enqueue from one caller's --senders threads)")
    lines.append(f"{'ranges over the rounds':<24}{'enqueue/s':>16}{'drain/s':>16}"
                 f"{'CPU ms/job: workers':>22}{'server':>10}")
    for name, found in rounds.items():
        cpu, server = rows[name].cpu, rows[name].server
        lines.append(f"{name:<24}{spread([r.enqueue for r in found]):>16}"
                     f"{spread([r.drain for r in found]):>16}"
                     f"{'-' if cpu is None else f'{cpu:.3f}':>22}"
                     f"{'-' if server is None else f'{server:.3f}':>10}")
    lines.append("(CPU: medians over the rounds of the CPU time the workers' processes and "
                 "the server spent per job drained)")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--senders", type=int, default=16,
                        help="threads of the caller of the second enqueue (default 16)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="measure every system this many times, in turn (medians)")
    parser.add_argument("--only", default=",".join(SYSTEMS),
                        help="comma-separated systems: " + ", ".join(SYSTEMS))
    parser.add_argument("--native-option", action="append", default=[], metavar="ARG",
                        help="one more argument of the native worker's command line "
                        "(repeat: --native-option=--prefetch --native-option=32)")
    parser.add_argument("--out", default="bench-results/peers.json")
    args = parser.parse_args(argv)
    chosen = [s for s in args.only.split(",") if s]
    unknown = set(chosen) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems: {', '.join(sorted(unknown))}")
    from fdbrecipes.testing import local_cluster

    load = os.getloadavg()
    print(f"load average {load[0]:.2f} on {os.cpu_count()} cores", file=sys.stderr)
    rounds: Dict[str, List[Row]] = {system: [] for system in chosen}
    with tempfile.TemporaryDirectory(prefix="fdbrecipes-peers-") as tmp, \
            local_cluster() as cluster_file:
        workdir = Path(tmp)
        base_env = {**os.environ, "FDB_CLUSTER_FILE": cluster_file}
        inherited = os.environ.get("PYTHONPATH")  # kept after the app's: a checkout to measure
        for r in range(args.rounds):
            for system in chosen:
                print(f"round {r + 1}: {system} ...", file=sys.stderr)
                run_dir = workdir / f"round-{r}"
                run_dir.mkdir(exist_ok=True)
                (run_dir / "peers_app.py").write_text(textwrap.dedent(APP))
                env = {**base_env, "PYTHONPATH": os.pathsep.join(
                    [str(run_dir)] + ([inherited] if inherited else []))}
                if "-redis-" in system:
                    with redis_server(system.endswith("always"), run_dir) as url:
                        row = measure(system, run_dir, {**env, "PEERS_REDIS": url}, args)
                else:
                    row = measure(system, run_dir, env, args)
                rounds[system].append(row)
                print(f"  {row}", file=sys.stderr)
    ended = os.getloadavg()
    print(table(rounds))
    print(f"load average (1, 5, 15 min) {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} when the "
          f"run began, {ended[0]:.2f} {ended[1]:.2f} {ended[2]:.2f} when it ended")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": vars(args), "load": load, "load_at_end": ended,
                               "rounds": {
        name: [r._asdict() for r in found] for name, found in rounds.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
