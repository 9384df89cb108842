"""Real cluster faults under load: a 5-process ``double`` cluster on this machine.

Every structure runs producers and consumers at once (``tests/cluster_loads.py``:
Queue claim/ack, high-contention pops, FairQueue, WeightTree pops, a Worker, asyncio
pops) while one fault strikes: a storage process is killed (for at least
:data:`STORAGE_OUTAGE` seconds: the cluster copies its data again), a log process is
killed, the master is killed (a recovery), a log process is paused (SIGSTOP) for
longer than failure detection, a storage process is excluded.  Then the fault is healed (the
process restarted, resumed or included) and the cluster waited for to be healthy.

Each run asserts: nothing lost, nothing taken twice (values are ids), counters exact
at the end (every size and stat says nothing is left, as nothing is; the Worker's job
records all ``succeeded``), and no structure's consumers went more than
:data:`KEEP_GOING` seconds without a take after the fault struck or was healed (the
longest wait is printed: how long the fault, or its healing, stopped them).  The fault
strikes once a quarter of the values is taken, as the third quarter starts being
pushed; the last quarter is pushed once it is healed, so consumers work through the
fault, its healing and after it.

The seed (``FDBRECIPES_FAULT_SEED``, else random) picks the target among the
processes holding the role and the weights; it is printed and in every failure
message.  ``FDBRECIPES_SOAK=1`` also runs the soak: every fault in turn, in random
order, for ``FDBRECIPES_SOAK_SECONDS`` (default 900).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from fdbrecipes.testing import ClusterRoles, LocalCluster
from tests.cluster_loads import Load, Phases, Progress, make_loads, summary

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("FDBRECIPES_FAULT_SEED", random.randrange(2**32)))
#: Values per structure and run.
TOTAL = 120
#: Seconds within which every consumer must take something after the fault strikes,
#: and after it is healed.  Measured on this machine (2 shared cores, 7.3.79, other
#: test suites running beside): commits stop for 3.5 to 5 s after a killed log or
#: master (a recovery), and for 17.5 to 18 s after a log is paused (until failure
#: detection ends its generation: a recovery without it).  In the soak (45 runs, roles
#: moved by earlier faults), a storage kill that also hit a log waited up to 13.3 s.
#: The margin (12 s over the pause) is for a loaded machine: failure detection runs
#: on timers, not on CPU.
KEEP_GOING = 30.0
#: Seconds a paused process stays paused: past FoundationDB's failure detection
#: (a 10 s pause made no recovery, the commits waited for it; 20 s did).
PAUSE = 20.0
#: Seconds a killed storage process stays dead at least: long enough for the cluster
#: to count it failed and start copying its data again (after 2 s:
#: :data:`tests.conftest.DOUBLE_KNOBS`), with the third quarter taken meanwhile.
STORAGE_OUTAGE = 8.0
#: Seconds a run may last at most, from its start to every value taken.
RUN_DEADLINE = 240.0
#: Seconds the cluster has to be healthy again after a fault is healed.
HEAL_DEADLINE = 180.0
#: The roles a process holding only the one a fault aims at must not hold (a
#: coordinator may be hit: two of three still make a quorum).
OTHERS = ("master", "cluster_controller", "commit_proxy", "grv_proxy", "resolver")


def pick(roles: ClusterRoles, role: str, rng: random.Random,
         *preferences: Tuple[str, ...]) -> str:
    """A process holding ``role``, chosen by ``rng`` among those holding none of the
    first of ``preferences`` that leaves any (then any holding ``role``): the fault
    hits that role alone where it can.  On a fresh cluster of
    :data:`tests.conftest.DOUBLE_CLASSES` it can; after many faults (the soak)
    FoundationDB may have moved every log onto the storage processes, and the
    report's ``target_roles`` then shows that a storage kill hit a log too."""
    for avoid in (*preferences, ()):
        found = roles.holding(role, without=avoid)
        if found:
            return rng.choice(found)
    raise AssertionError(f"no process holds {role}: {roles}")


#: Whom a storage fault, and a log fault, would rather not hit as well.
STORAGE_ALONE = (("log", *OTHERS), OTHERS)
LOG_ALONE = (("storage", *OTHERS), OTHERS)


@dataclass
class Fault:
    """A fault: which process it hits (one holding ``role``, avoiding as
    :func:`pick` does), what it does to it (``strike``: a LocalCluster method), how it
    is healed, and when: ``lasts`` seconds after it struck at least, and, if
    ``until_going``, once every consumer took something after it (a pause ends at
    its length, whatever the consumers do)."""

    name: str
    role: str
    avoid: Tuple[Tuple[str, ...], ...]
    strike: Callable[[LocalCluster, str], Any]
    heal: Callable[[LocalCluster, str], Any]
    lasts: float = 0.0
    until_going: bool = True

    def hit(self, cluster: LocalCluster, roles: ClusterRoles, rng: random.Random) -> str:
        """Strike a process chosen by ``rng``; its address."""
        target = pick(roles, self.role, rng, *self.avoid)
        self.strike(cluster, target)
        return target


FAULTS = {
    "kill-storage": Fault("kill-storage", "storage", STORAGE_ALONE, LocalCluster.kill,
                          LocalCluster.restart, lasts=STORAGE_OUTAGE),
    "kill-log": Fault("kill-log", "log", LOG_ALONE, LocalCluster.kill, LocalCluster.restart),
    "kill-master": Fault("kill-master", "master", (), LocalCluster.kill,
                         LocalCluster.restart),
    "pause-log": Fault("pause-log", "log", LOG_ALONE, LocalCluster.pause, LocalCluster.resume,
                       lasts=PAUSE, until_going=False),
    "exclude-storage": Fault("exclude-storage", "storage", STORAGE_ALONE, LocalCluster.exclude,
                             LocalCluster.include),
}


@dataclass
class Report:
    """What one run did, printed for the record."""

    seed: int
    fault: str
    target: str = ""
    target_roles: List[str] = field(default_factory=list)
    roles_before: Dict[str, Any] = field(default_factory=dict)
    generations: Tuple[int, int] = (0, 0)
    before_heal: Dict[str, Any] = field(default_factory=dict)
    keep_going: Dict[str, Optional[float]] = field(default_factory=dict)
    seconds: Dict[str, float] = field(default_factory=dict)
    loads: Dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return "cluster-fault " + json.dumps(self.__dict__, default=str, sort_keys=True)


def describe(roles: ClusterRoles) -> Dict[str, Any]:
    return dict(master=roles.master, cluster_controller=roles.cluster_controller,
                logs=roles.logs, storage=roles.storage, generation=roles.generation)


def all_took_since(loads: List[Load], moment: float) -> Callable[[], bool]:
    def check() -> bool:
        return all(load.longest_wait(moment) is not None or load.done() for load in loads)
    return check


def quarter_taken(loads: List[Load]) -> Callable[[], bool]:
    def check() -> bool:
        return all(load.count() >= load.total // 4 for load in loads)
    return check


def all_done(loads: List[Load]) -> Callable[[], bool]:
    def check() -> bool:
        return all(load.done() for load in loads)
    return check


def state_now(cluster: LocalCluster) -> Dict[str, Any]:
    """The cluster's generation and the state of its data (``healing`` once it has
    counted a storage process failed), for the report; empty if status does not
    answer within 5 s."""
    try:
        status = cluster.status(timeout=5.0)
    except RuntimeError:
        return {}
    cluster_part = status.get("cluster", {})
    return dict(generation=cluster_part.get("generation"),
                data=cluster_part.get("data", {}).get("state", {}).get("name"))


def settle(cluster: LocalCluster) -> ClusterRoles:
    """Wait until the cluster is healthy and every storage-class process serves
    storage again (a restarted or included process gets its storage server back
    seconds after the cluster is healthy), so the next run finds the roles it aims
    at."""
    deadline = time.monotonic() + HEAL_DEADLINE
    while True:
        roles = cluster.wait_healthy(max(1.0, deadline - time.monotonic()))
        if all("storage" in roles.of(p.address) for p in cluster.processes
               if p.process_class == "storage") or time.monotonic() > deadline:
            return roles
        time.sleep(0.5)  # the cluster recruits on its own: poll it, with a deadline


def run_fault(cluster: LocalCluster, db: Any, space: Any, fault: Fault, seed: int) -> Report:
    """Run every load through ``fault`` (see the module docstring); the report."""
    rng = random.Random(seed)
    report = Report(seed, fault.name)
    progress, phases = Progress(), Phases()
    loads = make_loads(db, space, TOTAL, seed, progress)
    threads = [t for load in loads for t in load.threads(phases)]
    began = time.monotonic()
    healed = False
    for t in threads:
        t.start()
    try:
        assert progress.wait_for(quarter_taken(loads), RUN_DEADLINE), \
            f"seed {seed}: the loads did not start: {summary(loads)}"
        report.seconds["warm"] = time.monotonic() - began
        roles = cluster.roles()
        report.roles_before = describe(roles)
        phases.struck.set()  # the third quarter is pushed through the fault
        struck = time.monotonic()
        report.target = fault.hit(cluster, roles, rng)
        report.target_roles = sorted(roles.of(report.target))
        report.seconds["strike"] = time.monotonic() - struck
        # the fault's length is the fault itself (a pause, a storage process down):
        # nothing waits on it
        time.sleep(max(0.0, struck + fault.lasts - time.monotonic()))
        if fault.until_going:  # healed once the loads went on without the process
            progress.wait_for(all_took_since(loads, struck),
                              max(0.0, struck + KEEP_GOING - time.monotonic()))
            report.before_heal = state_now(cluster)
        # (not during a pause: status waits seconds for a paused coordinator, which
        # would lengthen the pause; consumers going again within it show the recovery)
        fault.heal(cluster, report.target)
        healed = True
        heal_at = time.monotonic()
        report.seconds["heal"] = heal_at - struck
        phases.healed.set()  # the last quarter is pushed after it
        assert progress.wait_for(all_done(loads), max(1.0, began + RUN_DEADLINE
                                                      - time.monotonic())), \
            f"seed {seed}: not every value was taken in time: {summary(loads)}"
        report.keep_going = {load.name: load.longest_wait(struck, heal_at)
                             for load in loads}
    finally:
        phases.end()
        for t in threads:
            t.join(timeout=60)
        if not healed and report.target:
            fault.heal(cluster, report.target)
    report.seconds["run"] = time.monotonic() - began
    after = settle(cluster)
    report.generations = (roles.generation, after.generation)
    report.seconds["healthy_again"] = time.monotonic() - began - report.seconds["run"]
    report.loads = summary(loads)
    print(report.line(), flush=True)
    assert not any(t.is_alive() for t in threads), f"seed {seed}: a thread did not end"
    problems = [p for load in loads for p in load.problems()]
    assert not problems, f"seed {seed}, {fault.name} on {report.target}: {problems}"
    slow = {name: s for name, s in report.keep_going.items() if s is None or s > KEEP_GOING}
    assert not slow, (f"seed {seed}, {fault.name} on {report.target}: consumers waited "
                      f"more than {KEEP_GOING} s for a take after the fault or its healing: "
                      f"{slow}")
    return report


@pytest.fixture
def space(double_db: Any) -> Any:
    import uuid

    import fdb

    subspace = fdb.Subspace(("fdbrecipes-test", "faults", uuid.uuid4().hex))
    yield subspace
    r = subspace.range()
    double_db.clear_range(r.start, r.stop)


@pytest.mark.parametrize("name", list(FAULTS))
def test_every_structure_keeps_its_promises_through_a_fault(
        name: str, double_cluster: LocalCluster, double_db: Any, space: Any) -> None:
    print(f"seed {SEED} (FDBRECIPES_FAULT_SEED={SEED} replays its choices)", flush=True)
    run_fault(double_cluster, double_db, space, FAULTS[name], SEED)


@pytest.mark.soak
@pytest.mark.slow
def test_soak_every_fault_in_random_order(double_cluster: LocalCluster, double_db: Any,
                                          space: Any) -> None:
    """Every fault in turn, in a random order, for FDBRECIPES_SOAK_SECONDS."""
    seconds = float(os.environ.get("FDBRECIPES_SOAK_SECONDS", "900"))
    rng = random.Random(SEED)
    ends = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < ends:
        names = list(FAULTS)
        rng.shuffle(names)
        for name in names:
            run_fault(double_cluster, double_db, space[runs], FAULTS[name], rng.randrange(2**32))
            runs += 1
    print(f"soak: {runs} runs in {seconds:.0f} s, seed {SEED}", flush=True)
