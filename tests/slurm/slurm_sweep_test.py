#!/usr/bin/env python3
"""Issue 48, part 3: a sweep on a real Slurm cluster of one node, started by this test.

The test configures munged, slurmctld and slurmd in a temporary folder (its own munge key and
socket, its own slurm.conf through SLURM_CONF, free ports, state and spool folders inside the
temporary folder), then:

  1. makes the sweep serially (`kvlab sweep FILE --db serial.sqlite`): the reference;
  2. writes and submits it as an array of 8 parts (`kvlab sweep FILE --slurm A --parts 8
     --submit`), cancels part 7 with scancel while it runs (one item saved, the next one being
     made), checks that the merge (`kvlab runs import --sweep FILE --parts 8`) merges the rest and
     names part 7 as missing, resubmits part 7 (`sbatch --array=7 A/sweep.sbatch`), which resumes
     from its database, and checks that the merged database then holds exactly the runs of the
     serial sweep, metric for metric, and that merging again adds nothing;
  3. submits the sweep again into B and sets the node DOWN while parts run (the way slurmctld
     sees a node die: its jobs end NODE_FAIL), resumes the node so that the pending parts run,
     and checks that the merge holds every part that finished, with the serial numbers, and
     names exactly the parts that died before making all their items.

Every process the test starts is stopped at the end, also on failure (and the daemons die with
the test if it is killed). On failure the daemons' logs and the jobs' logs are printed.
Exit 77 (ctest: skipped) only when Slurm's or munge's programs are not installed
(apt-get install slurm-wlm munge; scripts/quickstart.sh installs them).

Usage: slurm_sweep_test.py KVLAB   (KVLAB_KEEP_SLURM_TMP=1 keeps the temporary folder)
"""
import ctypes
import glob
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback

SKIP = 77
NODE = "kvlab-node"
PARTS = 8
CANCELLED = 7
# Job slots of the node: two parts run at once, so that when the node goes down some parts
# have finished and some wait, whatever the number of cores.
NODE_CPUS = 2
DEADLINE_S = 240  # the whole test; ctest's TIMEOUT is larger so that teardown still runs
PROGRAMS = [
    "munged", "munge", "unmunge", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol",
    "scancel"
]
# Metrics that measure the process, not the method (times, resident memory): they differ between
# two runs of the same item.
MACHINE_METRICS = {"timings", "memory", "seconds"}

# Two sources times eight methods: items 0-7 on the small source (0.1 s each), 8-15 on the large
# one (0.6-1.5 s each), so part K (items K-1 and K+7) saves one run at once and then works on the
# next, which is when part CANCELLED (its item 14, FP8 E4M3, the slowest) is cancelled.
SWEEP = {
    "kind": "compression",
    "sources": ["synthetic:tiny", "synthetic:llama3-8b"],
    "context": 16384,
    "layers": 4,
    "methods": [
        {"method": "int8"},
        {"method": "int4"},
        {"method": "kivi", "bits": 2},
        {"method": "kivi", "bits": 4},
        {"method": "kvcomp", "rel_scale": 0.05, "codec": "huffman"},
        {"method": "kvcomp", "rel_scale": 0.1},
        {"method": "fp8-e4m3"},
        {"method": "fp8-e5m2"},
    ],
}


class Failure(Exception):
    pass


def need(condition, message):
    if not condition:
        raise Failure(message)


def log(message):
    print(f"[{time.monotonic() - START:6.1f} s] {message}", flush=True)


START = time.monotonic()


def die_with_parent():
    """For Popen's preexec_fn: the daemon gets SIGTERM when the test process dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """munged, slurmctld and slurmd of one node, all living in `root`."""

    def __init__(self, root):
        self.root = root
        self.conf = os.path.join(root, "slurm.conf")
        self.socket = os.path.join(root, "munge", "munge.socket")
        self.daemons = []  # (name, Popen)
        self.jobs = []  # ids of the jobs submitted, cancelled at the end
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        for var in [v for v in self.env if v.startswith("SLURM_") and v != "SLURM_CONF"]:
            del self.env[var]  # a test run inside a Slurm job talks to this cluster only

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def start_daemon(self, name, argv):
        out = open(self.path(f"{name}.out"), "wb")
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                   preexec_fn=die_with_parent)
        self.daemons.append((name, process))
        return process

    def start(self):
        user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
        os.makedirs(self.path("munge"), mode=0o700)
        key = self.path("munge", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.start_daemon("munged", [
            "munged", "--foreground", "--force", "--key-file", key, "--socket", self.socket,
            "--pid-file", self.path("munge", "munged.pid"), "--log-file",
            self.path("munge", "munged.log"), "--seed-file", self.path("munge", "munged.seed")])
        self.wait_for(lambda: self.munge_works(), 15, "munged to answer on its socket")

        for folder in ["state", "spool", "logs"]:
            os.makedirs(self.path(folder))
        with open(self.path("plugstack.conf"), "w"):
            pass  # no SPANK plugins from /etc/slurm
        host = socket.gethostname().split(".")[0]
        conf = f"""# Written by tests/slurm/slurm_sweep_test.py: one node on this machine.
ClusterName=kvlabtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={self.path("state")}
SlurmdSpoolDir={self.path("spool")}
SlurmctldPidFile={self.path("slurmctld.pid")}
SlurmdPidFile={self.path("slurmd.pid")}
SlurmctldLogFile={self.path("logs", "slurmctld.log")}
SlurmdLogFile={self.path("logs", "slurmd.log")}
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={self.path("plugstack.conf")}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=1
JobRequeue=0
MinJobAge=600
KillWait=2
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={NODE_CPUS} State=UNKNOWN
PartitionName=test Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""
        with open(self.conf, "w") as f:
            f.write(conf)
        self.start_daemon("slurmctld", ["slurmctld", "-D", "-i"])
        self.start_daemon("slurmd", ["slurmd", "-D", "-N", NODE])
        self.wait_for(lambda: self.node_state() == "idle", 30, f"node {NODE} to be idle")

    def munge_works(self):
        self.check_daemons()
        cred = subprocess.run(["munge", "-n", "-S", self.socket], capture_output=True)
        if cred.returncode != 0:
            return False
        return subprocess.run(["unmunge", "-S", self.socket], input=cred.stdout,
                              capture_output=True).returncode == 0

    def check_daemons(self):
        for name, process in self.daemons:
            need(process.poll() is None, f"{name} exited with status {process.returncode}")

    def wait_for(self, condition, seconds, what):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if condition():
                return
            time.sleep(0.1)
        raise Failure(f"timed out after {seconds} s waiting for {what}")

    def run(self, argv, expect=0, **kwargs):
        self.check_daemons()
        r = subprocess.run(argv, capture_output=True, text=True, env=self.env, **kwargs)
        if expect is not None and r.returncode != expect:
            raise Failure(f"'{' '.join(argv)}' exited {r.returncode} (expected {expect}):\n"
                          f"{r.stdout}{r.stderr}")
        return r

    def node_state(self):
        r = self.run(["sinfo", "-h", "-n", NODE, "-o", "%T"], expect=None)
        return r.stdout.strip().rstrip("*~#$@+") if r.returncode == 0 else ""

    def task_states(self, job):
        """{array task id: state} of every task of the array job, pending ones included."""
        r = self.run(["squeue", "-h", "-r", "-j", job, "--states=all", "-o", "%K %T"])
        states = {}
        for line in r.stdout.splitlines():
            task, state = line.split()
            states[int(task)] = state
        return states

    def wait_job(self, job, tasks, seconds):
        active = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"}

        def finished():
            states = self.task_states(job)
            return len(states) == tasks and not active & set(states.values())

        self.wait_for(finished, seconds, f"job {job} to finish")
        return self.task_states(job)

    def sbatch(self, argv):
        job = self.run(["sbatch", "--parsable"] + argv).stdout.strip().split(";")[0]
        self.jobs.append(job)
        return job

    def stop(self):
        for job in self.jobs:
            subprocess.run(["scancel", job], capture_output=True, env=self.env, timeout=10)
        if self.jobs:
            time.sleep(1)
        for name, process in reversed(self.daemons):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        # Job steps outlive slurmd; they carry SLURM_CONF=<this cluster's file> in their
        # environment, which names them and nothing else.
        mark = f"SLURM_CONF={self.conf}".encode()
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mark in f.read().split(b"\0") and int(pid) != os.getpid():
                        os.kill(int(pid), signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass

    def dump_logs(self):
        for path in [self.path("logs", "slurmctld.log"), self.path("logs", "slurmd.log"),
                     self.path("munge", "munged.log"), self.path("slurmctld.out"),
                     self.path("slurmd.out"), self.path("munged.out")]:
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    text = f.read()
                print(f"---- {path} (last 60 lines)\n" + "\n".join(text.splitlines()[-60:]))


def runs_by_uid(db):
    """{uid: (kind, source, method, label, params, metrics but MACHINE_METRICS)} of a database."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        rows = c.execute("SELECT uid, kind, source, method, label, params_json, metrics_json FROM runs")
        out = {}
        for uid, kind, source, method, label, params, metrics in rows:
            need(uid not in out, f"{db}: uid {uid} twice")
            m = {k: v for k, v in json.loads(metrics).items() if k not in MACHINE_METRICS}
            out[uid] = (kind, source, method, label, json.loads(params), m)
        return out


def run_count(db):
    if not os.path.exists(db):
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return c.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0  # created but not yet migrated


def same_runs(merged, serial, where):
    """Every run of `merged` is the serial run of its item, field for field."""
    for uid, run in merged.items():
        need(uid in serial, f"{where}: run {uid} is no item of the serial sweep")
        if run != serial[uid]:
            raise Failure(f"{where}: run {uid} differs from the serial one:\n"
                          f"  array:  {run}\n  serial: {serial[uid]}")


class Sweep:
    def __init__(self, kvlab, cluster, root):
        self.kvlab = kvlab
        self.cluster = cluster
        self.root = root
        self.file = os.path.join(root, "sweep.json")
        with open(self.file, "w") as f:
            json.dump(SWEEP, f, indent=2)

    def kvlab_run(self, args, expect=0):
        return self.cluster.run([self.kvlab] + args, expect=expect)

    def submit(self, name):
        r = self.kvlab_run(["sweep", self.file, "--slurm", os.path.join(self.root, name),
                            "--parts", str(PARTS), "--submit", "--json"])
        out = json.loads(r.stdout)
        need(out["parts"] == PARTS, f"--slurm wrote {out['parts']} parts, not {PARTS}")
        self.cluster.jobs.append(out["job_id"])
        return out["job_id"]

    def part_db(self, name, part):
        return os.path.join(self.root, name, "parts", f"part-{part}.sqlite")

    def merge(self, name, expect):
        # As the shell's parts/part-*.sqlite would: a part that never started has no file.
        dbs = sorted(glob.glob(os.path.join(self.root, name, "parts", "part-*.sqlite")))
        r = self.kvlab_run(["runs", "import", "--sweep", self.file, "--parts", str(PARTS)] + dbs +
                           ["--db", os.path.join(self.root, name, "all.sqlite"), "--json"],
                           expect=expect)
        try:
            return json.loads(r.stdout), r.stderr
        except json.JSONDecodeError:
            raise Failure(f"the merge printed no JSON:\n{r.stdout}{r.stderr}")


def cancel_and_resume(sweep, cluster, serial):
    """A part cancelled mid-run is named by the merge; resubmitted, it resumes."""
    job = sweep.submit("A")
    log(f"array A submitted: job {job}")
    part, db = CANCELLED, sweep.part_db("A", CANCELLED)

    def part_mid_run():
        states = cluster.task_states(job)
        if states.get(part) not in ("RUNNING", "PENDING", "CONFIGURING", None):
            raise Failure(f"part {part} ended ({states.get(part)}) before it could be "
                          f"cancelled mid-run; make its second item slower")
        return states.get(part) == "RUNNING" and run_count(db) >= 1

    cluster.wait_for(part_mid_run, 60, f"part {part} to save its first run")
    cluster.run(["scancel", f"{job}_{part}"])
    cancelled_with = run_count(db)
    log(f"part {part} cancelled with {cancelled_with} of its 2 runs saved")
    states = cluster.wait_job(job, PARTS, 90)
    need(states[part] == "CANCELLED", f"part {part} ended {states[part]}, not CANCELLED")
    others = {k: s for k, s in states.items() if k != part}
    need(set(others.values()) == {"COMPLETED"}, f"the other parts ended {others}")
    need(run_count(db) == cancelled_with == 1,
         f"part {part} holds {run_count(db)} runs after the cancel, {cancelled_with} at it; "
         f"expected 1 (it was cancelled while making its second item)")

    out, err = sweep.merge("A", expect=1)
    need(out["sweep"]["missing_parts"] == [part],
         f"the merge names parts {out['sweep']['missing_parts']} as missing, not [{part}]")
    need(f"part {part} of {PARTS}" in err, f"the merge's message does not name part {part}:\n{err}")
    log(f"merge without part {part}: {out['imported']} runs, says: {err.strip()}")

    again = cluster.sbatch([f"--array={part}", os.path.join(sweep.root, "A", "sweep.sbatch")])
    states = cluster.wait_job(again, 1, 60)
    need(states == {part: "COMPLETED"}, f"the resubmitted part ended {states}")
    with open(os.path.join(sweep.root, "A", "logs", f"part-{part}.log")) as f:
        part_log = f.read()
    need("1 made, 1 in the database already" in part_log,
         f"the resubmitted part did not resume from its database:\n{part_log}")

    out, err = sweep.merge("A", expect=0)
    need(out["imported"] == 1 and out["sweep"]["missing_items"] == [],
         f"the second merge: {json.dumps(out)}\n{err}")
    out, err = sweep.merge("A", expect=0)
    need(out["imported"] == 0, f"merging again imported {out['imported']} runs")
    merged = runs_by_uid(os.path.join(sweep.root, "A", "all.sqlite"))
    need(merged.keys() == serial.keys(),
         f"the merged database holds {len(merged)} runs, the serial one {len(serial)}; "
         f"only merged: {sorted(merged.keys() - serial.keys())}, "
         f"only serial: {sorted(serial.keys() - merged.keys())}")
    same_runs(merged, serial, "array A")
    log(f"array A merged: the {len(merged)} runs of the serial sweep, the same numbers")


def node_dies(sweep, cluster, serial):
    """Parts whose node goes down are named by the merge; the others are merged."""
    job = sweep.submit("B")
    log(f"array B submitted: job {job}")

    def late_part_mid_run():
        states = cluster.task_states(job)
        return any(k >= 3 and s == "RUNNING" and run_count(sweep.part_db("B", k)) >= 1
                   for k, s in states.items())

    cluster.wait_for(late_part_mid_run, 90, "a part after the second to save its first run")
    cluster.run(["scontrol", "update", f"nodename={NODE}", "state=down", "reason=kvlab-test"])
    log(f"node {NODE} set down")

    def killed():
        states = cluster.task_states(job)
        return "RUNNING" not in states.values() and "COMPLETING" not in states.values()

    cluster.wait_for(killed, 30, "the parts on the dead node to end")
    died = sorted(k for k, s in cluster.task_states(job).items() if s == "NODE_FAIL")
    need(died, f"no part ended NODE_FAIL: {cluster.task_states(job)}")
    cluster.run(["scontrol", "update", f"nodename={NODE}", "state=resume"])
    log(f"parts {died} died with the node; node resumed")
    states = cluster.wait_job(job, PARTS, 90)
    survived = sorted(k for k, s in states.items() if s == "COMPLETED")
    need(sorted(died + survived) == list(range(1, PARTS + 1)),
         f"parts ended {states}; expected {died} NODE_FAIL and the others COMPLETED")

    # A part can die with its work done (between its last save and its exit): the merge names
    # the parts that lack items, which are the ones that died mid-run.
    lacking = [k for k in died if run_count(sweep.part_db("B", k)) < 2]
    need(lacking, f"parts {died} died, but each holds its two runs")
    for k in survived:
        need(run_count(sweep.part_db("B", k)) == 2, f"part {k} completed without its two runs")
    out, err = sweep.merge("B", expect=1)
    need(out["sweep"]["missing_parts"] == lacking,
         f"the merge names parts {out['sweep']['missing_parts']} missing; parts {died} died, "
         f"{lacking} of them before making both their items")
    for k in lacking:
        need(f"part {k} of {PARTS}" in err, f"the merge's message does not name part {k}:\n{err}")
    merged = runs_by_uid(os.path.join(sweep.root, "B", "all.sqlite"))
    missing = {m["uid"] for m in out["sweep"]["missing_items"]}
    need(merged.keys() | missing == serial.keys() and not merged.keys() & missing,
         "the merged runs and the missing items are not the sweep's items")
    same_runs(merged, serial, "array B")
    log(f"array B merged: {len(merged)} runs; the merge names parts {lacking}: {err.strip()}")


def past_deadline(*_):
    raise Failure(f"the test ran past its {DEADLINE_S} s")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    kvlab = os.path.abspath(sys.argv[1])
    absent = [p for p in PROGRAMS if shutil.which(p) is None]
    if absent:
        print(f"skipped: Slurm or munge is not installed ({', '.join(absent)} not on PATH); "
              f"apt-get install slurm-wlm munge")
        return SKIP
    # Short: munge's socket path must fit a sockaddr_un.
    root = tempfile.mkdtemp(prefix="kvlab-slurm-")
    cluster = Cluster(root)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("killed (SIGTERM)"))
    signal.signal(signal.SIGALRM, past_deadline)
    signal.alarm(DEADLINE_S)
    try:
        cluster.start()
        log(f"Slurm is up in {root}: node {NODE}, {NODE_CPUS} job slots")
        sweep = Sweep(kvlab, cluster, root)
        serial_db = os.path.join(root, "serial.sqlite")
        sweep.kvlab_run(["sweep", sweep.file, "--db", serial_db])
        serial = runs_by_uid(serial_db)
        need(len(serial) == len(SWEEP["sources"]) * len(SWEEP["methods"]),
             f"the serial sweep made {len(serial)} runs")
        log(f"serial sweep: {len(serial)} runs")
        cancel_and_resume(sweep, cluster, serial)
        node_dies(sweep, cluster, serial)
        log("passed")
        return 0
    except Exception as e:  # a Failure says what went wrong; anything else, where
        print(f"FAILED: {e}" if isinstance(e, Failure) else f"FAILED:\n{traceback.format_exc()}",
              flush=True)
        cluster.dump_logs()
        for name in ["A", "B"]:
            logs = os.path.join(root, name, "logs")
            for entry in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
                with open(os.path.join(logs, entry), errors="replace") as f:
                    print(f"---- {name}/logs/{entry}\n{f.read()}")
        return 1
    finally:
        signal.alarm(0)
        cluster.stop()
        if os.environ.get("KVLAB_KEEP_SLURM_TMP") == "1":
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
