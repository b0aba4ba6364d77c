#!/usr/bin/env python3
"""The learning note's three demos, played with confluent-kafka-python
(librdkafka) against the lab in deploy/note, asserting what the note says
happens:

  leader:  an idempotent acks=all producer writes while the partition
           leader's container is stopped (`compose stop kafkaN`): another
           replica leads, no write fails, the stopped broker rejoins the ISR
           once started, kafka-leader-election.sh (`compose exec -T`) hands
           leadership back, and the partition holds every write once;
  min-isr: with two of three brokers stopped, acks=all writes fail with
           NOT_ENOUGH_REPLICAS, and succeed once they are back;
  observe: the cluster and topic metadata the note's ISR watcher prints.

Every wait is bounded; the first failed expectation exits 1 with a message.
tools/e2e (TestNoteLabPythonDemos) runs it; by hand:

  /usr/bin/python3 note_lab_demos.py --compose "docker compose" --compose-dir deploy/note
"""

import argparse
import shlex
import subprocess
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

START = time.monotonic()


def say(msg):
    print(f"{time.monotonic() - START:7.2f}s  {msg}", flush=True)


def fail(msg):
    say("FAILED: " + msg)
    sys.exit(1)


class Lab:
    def __init__(self, args):
        self.bootstrap = args.bootstrap
        self.compose = shlex.split(args.compose) + (["-p", args.project] if args.project else [])
        self.compose_dir = args.compose_dir
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})

    def compose_run(self, *args, timeout=120):
        cmd = self.compose + list(args)
        say("$ " + " ".join(cmd))
        r = subprocess.run(cmd, cwd=self.compose_dir, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
        out = r.stdout.strip()
        if r.returncode != 0:
            fail(f"{' '.join(cmd)} exited {r.returncode}: {out}")
        return out

    def partition(self, topic, pid):
        md = self.admin.list_topics(topic=topic, timeout=10)
        t = md.topics[topic]
        if t.error is not None:
            raise RuntimeError(str(t.error))
        p = t.partitions[pid]
        return p.leader, list(p.replicas), list(p.isrs)

    def wait(self, what, cond, timeout):
        """Polls cond() (None or a false value: not yet) once a second."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                got = cond()
            except Exception as e:  # a broker going away: ask again
                got, last = None, f"error: {e}"
            if got:
                say(f"ok: {what}")
                return got
            if time.monotonic() > deadline:
                fail(f"not within {timeout}s: {what} (last seen: {last})")
            time.sleep(1)

    def watch(self, topic, pid, what, pred, timeout):
        state = {}

        def cond():
            leader, replicas, isr = self.partition(topic, pid)
            snap = (leader, tuple(isr))
            if snap != state.get("last"):
                say(f"{topic}-{pid}: leader {leader}, replicas {replicas}, ISR {isr}")
                state["last"] = snap
            return (leader, replicas, isr) if pred(leader, replicas, isr) else None
        return self.wait(what, cond, timeout)

    def create_topic(self, topic, partitions):
        fs = self.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=3,
                                                config={"min.insync.replicas": "2"})])
        for name, f in fs.items():
            try:
                f.result(30)
            except Exception as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    fail(f"create {name}: {e}")
        for pid in range(partitions):
            self.watch(topic, pid, f"{topic}-{pid} has a leader and its full ISR",
                       lambda l, r, i: l >= 0 and len(i) == 3, 60)


class Writer(threading.Thread):
    """An idempotent acks=all producer writing numbered records to one
    partition until stopped; delivery reports are counted."""

    def __init__(self, bootstrap, topic, pid):
        super().__init__(daemon=True)
        self.topic, self.pid = topic, pid
        self.p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                           "delivery.timeout.ms": 60000, "linger.ms": 5})
        self.stopping = threading.Event()
        self.acked, self.errors, self.sent = set(), [], 0

    def report(self, err, msg):
        if err is None:
            self.acked.add(msg.value().decode())
        else:
            self.errors.append(err.name())

    def run(self):
        while not self.stopping.is_set():
            self.p.produce(self.topic, value=f"r{self.sent}".encode(), partition=self.pid, on_delivery=self.report)
            self.sent += 1
            self.p.poll(0.02)
        self.p.flush(60)


def read_back(bootstrap, topic, pid, want):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "note-lab-read-back", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, pid, 0)])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(1)
            if m is None:
                continue
            if m.error():
                if m.error().code() != KafkaError._PARTITION_EOF:
                    fail(f"read back {topic}-{pid}: {m.error()}")
                continue
            got.append(m.value().decode())
    finally:
        c.close()
    return got


def leader_demo(lab, topic):
    say(f"== leader: stop the leader's container while an idempotent acks=all producer writes ({topic}-0)")
    lab.create_topic(topic, 3)
    old, _, _ = lab.partition(topic, 0)
    w = Writer(lab.bootstrap, topic, 0)
    w.start()
    lab.wait("the producer has writes acknowledged", lambda: len(w.acked) >= 20, 30)
    lab.compose_run("stop", f"kafka{old}")
    new, _, _ = lab.watch(topic, 0, f"a replica other than {old} leads",
                          lambda l, r, i: l >= 0 and l != old, 60)
    acked = len(w.acked)
    lab.wait("writes acknowledged by the new leader", lambda: len(w.acked) >= acked + 20, 60)
    lab.compose_run("start", f"kafka{old}")
    lab.watch(topic, 0, f"broker {old} back in the ISR", lambda l, r, i: old in i, 120)
    others = [b for b in (1, 2, 3) if b != old]
    out = lab.compose_run("exec", "-T", f"kafka{others[0]}", "/opt/kafka/bin/kafka-leader-election.sh",
                          "--bootstrap-server", f"kafka{others[1]}:19092", "--election-type", "preferred",
                          "--topic", topic, "--partition", "0")
    say(out)
    if f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" not in out:
        fail(f"kafka-leader-election.sh said: {out}")
    lab.watch(topic, 0, f"broker {old}, the preferred replica, leads again", lambda l, r, i: l == old, 60)
    w.stopping.set()
    w.join(90)
    say(f"producer: {w.sent} sent, {len(w.acked)} acknowledged, errors {w.errors}")
    if w.errors:
        fail(f"deliveries failed after the producer's retries: {w.errors[:5]}")
    if len(w.acked) != w.sent:
        fail(f"{w.sent - len(w.acked)} writes never reported")
    got = read_back(lab.bootstrap, topic, 0, len(w.acked))
    if len(got) != len(w.acked) or set(got) != w.acked:
        fail(f"read back {len(got)} records ({len(set(got))} distinct), {len(w.acked)} were acknowledged")
    say(f"ok: {topic}-0 holds every acknowledged record once ({len(got)})")


def produce_burst(p, topic, n):
    outcome = {"ok": 0, "errors": []}

    def report(err, msg):
        if err is None:
            outcome["ok"] += 1
        else:
            outcome["errors"].append(err.name())
    for i in range(n):
        p.produce(topic, value=f"b{i}".encode(), on_delivery=report)
    p.flush(60)
    return outcome


def min_isr_demo(lab, topic):
    say(f"== min-isr: acks=all with min.insync.replicas=2 and two of three brokers stopped ({topic})")
    lab.create_topic(topic, 1)
    leader, _, _ = lab.partition(topic, 0)
    p = Producer({"bootstrap.servers": lab.bootstrap, "acks": "all", "enable.idempotence": True,
                  "retries": 3, "delivery.timeout.ms": 15000, "request.timeout.ms": 5000})
    o = produce_burst(p, topic, 20)
    if o["ok"] != 20:
        fail(f"with the full ISR: {o}")
    say("ok: 20 of 20 written with the full ISR")
    stopped = [b for b in (1, 2, 3) if b != leader]
    for b in stopped:
        lab.compose_run("stop", f"kafka{b}")
    lab.watch(topic, 0, f"the ISR down to the leader, {leader}", lambda l, r, i: l == leader and i == [leader], 60)
    o = produce_burst(p, topic, 20)
    say(f"below min.insync.replicas: {o['ok']} written, errors {sorted(set(o['errors']))}")
    if o["ok"] != 0 or len(o["errors"]) != 20 or set(o["errors"]) != {"NOT_ENOUGH_REPLICAS"}:
        fail(f"want 20 NOT_ENOUGH_REPLICAS, got {o}")
    for b in stopped:
        lab.compose_run("start", f"kafka{b}")
    lab.watch(topic, 0, "the full ISR back", lambda l, r, i: len(i) == 3, 120)
    o = produce_burst(p, topic, 20)
    if o["ok"] != 20:
        fail(f"with the ISR back: {o}")
    say("ok: 20 of 20 written with the ISR back")


def observe(lab, topics):
    say("== observe: the metadata the note's ISR watcher prints")
    md = lab.admin.list_topics(timeout=10)
    brokers = sorted(md.brokers)
    say(f"cluster {md.cluster_id}, controller {md.controller_id}, brokers {brokers}")
    if not md.cluster_id or brokers != [1, 2, 3] or md.controller_id not in brokers:
        fail("want a cluster id, brokers [1, 2, 3] and one of them as controller")
    for topic in topics:
        for pid, p in sorted(md.topics[topic].partitions.items()):
            say(f"{topic}-{pid}: leader {p.leader}, replicas {list(p.replicas)}, ISR {list(p.isrs)}")
            if p.leader not in p.replicas or not set(p.isrs) <= set(p.replicas) or p.leader not in p.isrs:
                fail(f"{topic}-{pid}: the leader must be an assigned, in-sync replica")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", default="localhost:9092,localhost:9094,localhost:9096")
    ap.add_argument("--compose", default="docker compose", help="the compose command")
    ap.add_argument("--project", default="", help="the compose project (default: the directory's name)")
    ap.add_argument("--compose-dir", default="deploy/note")
    ap.add_argument("--suffix", default=str(int(time.time())), help="appended to the topics' names")
    args = ap.parse_args()
    lab = Lab(args)
    lab.wait("three brokers answer Metadata", lambda: sorted(lab.admin.list_topics(timeout=5).brokers) == [1, 2, 3], 90)
    leader_topic, min_isr_topic = f"note.leader.{args.suffix}", f"note.minisr.{args.suffix}"
    leader_demo(lab, leader_topic)
    min_isr_demo(lab, min_isr_topic)
    observe(lab, [leader_topic, min_isr_topic])
    say("all three demos behaved as the note says")


if __name__ == "__main__":
    main()
