"""librdkafka (confluent_kafka) as a tidemark client, driven by the tests of
services/clustertest/kafkaclients.

roundtrip BOOTSTRAP USER PASSWORD TOPIC SECONDS
    Logs in with SCRAM-SHA-512 over SASL_PLAINTEXT; produces a record and
    consumes it back, one after the other, for SECONDS; prints a JSON
    report. Then waits for a line on stdin (the user was deleted) and
    produces once more for up to 15 s, printing a second report.
produce BOOTSTRAP CLIENT_ID TOPIC COUNT SIZE
    Produces COUNT records of SIZE bytes as CLIENT_ID over PLAINTEXT and
    prints what librdkafka reported of throttles (throttle_cb, stats).
member BOOTSTRAP GROUP TOPIC CONFIG_JSON
    A group member subscribed to TOPIC, CONFIG_JSON (librdkafka settings)
    over its defaults; with enable.auto.commit false it commits each
    record it reads, synchronously. Prints one JSON line per event
    (assigned, revoked, assignment: what it holds after a change, record,
    commit error, error_cb) until stdin
    closes, then closes the consumer (leaving the group). An "assign"
    list in CONFIG_JSON assigns those partitions from their start instead
    of subscribing.
producer BOOTSTRAP TOPIC CONFIG_JSON
    Produces one record per stdin line ("PARTITION VALUE"), waits for its
    delivery and prints it as a JSON line, until stdin closes; a line
    "burst PARTITION COUNT PREFIX" produces COUNT records PREFIX-0... at
    once (pipelined, batched) and waits for them all; error_cb
    events are printed as they come.

LIBRDKAFKA_DEBUG, when set, is librdkafka's debug setting (to stderr).
"""
import json
import os
import sys
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition


class Seen:
    """What librdkafka told the application."""

    def __init__(self):
        self.errors = []  # error_cb: (code name, reason)
        self.delivery_errors = []
        self.consume_errors = []
        self.throttles = []  # throttle_cb: ms
        self.stats_throttle_max = 0  # brokers[*].throttle.max of the stats

    def error_cb(self, err):
        self.errors.append([err.name(), err.str()])

    def delivered(self, err, _msg):
        if err is not None:
            self.delivery_errors.append([err.name(), err.str()])

    def throttle_cb(self, ev):
        self.throttles.append(ev.throttle_time * 1000)

    def stats_cb(self, raw):
        for b in json.loads(raw).get("brokers", {}).values():
            self.stats_throttle_max = max(self.stats_throttle_max, b.get("throttle", {}).get("max", 0))

    def report(self, **extra):
        out = dict(errors=self.errors, delivery_errors=self.delivery_errors,
                   consume_errors=self.consume_errors, throttles=self.throttles,
                   stats_throttle_max=self.stats_throttle_max, **extra)
        print(json.dumps(out), flush=True)


def roundtrip(bootstrap, user, password, topic, seconds):
    seen = Seen()
    debug = {"debug": os.environ["LIBRDKAFKA_DEBUG"]} if os.environ.get("LIBRDKAFKA_DEBUG") else {}
    common = {**debug, "bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": user,
              "sasl.password": password, "error_cb": seen.error_cb}
    prod = Producer(dict(common, **{"acks": "all", "enable.idempotence": True,
                                     "linger.ms": 0, "message.timeout.ms": 10000}))
    cons = Consumer(dict(common, **{"group.id": "librdkafka-reauth", "enable.auto.commit": False,
                                     "fetch.wait.max.ms": 100}))
    cons.assign([TopicPartition(topic, 0, 0)])
    n, read = 0, 0
    end = time.time() + seconds
    while time.time() < end:
        prod.produce(topic, str(n).encode(), on_delivery=seen.delivered)
        if prod.flush(15) != 0:
            seen.delivery_errors.append(["flush", "record %d undelivered after 15 s" % n])
            break
        n += 1
        deadline = time.time() + 15
        while read < n and time.time() < deadline:
            msg = cons.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                seen.consume_errors.append([msg.error().name(), msg.error().str()])
                continue
            if msg.value() != str(read).encode():
                seen.consume_errors.append(["order", "read %r, want %d" % (msg.value(), read)])
            read += 1
        if read < n:
            seen.consume_errors.append(["timeout", "record %d not read within 15 s" % (n - 1)])
            break
        time.sleep(0.1)
    seen.report(produced=n, consumed=read)
    cons.close()

    sys.stdin.readline()  # the user is deleted now
    seen.errors, seen.delivery_errors = [], []
    # The connections logged in carry on until their sessions end; then
    # the next login is refused and a record stays undelivered.
    left, end = 0, time.time() + 20
    while left == 0 and time.time() < end:
        prod.produce(topic, b"after deletion", on_delivery=seen.delivered)
        left = prod.flush(3)
        time.sleep(0.1)
    end = time.time() + 5
    while not any(e[0] == "_AUTHENTICATION" for e in seen.errors) and time.time() < end:
        prod.poll(0.2)
    seen.report(undelivered=left)


def produce(bootstrap, client_id, topic, count, size):
    seen = Seen()
    prod = Producer({"bootstrap.servers": bootstrap, "client.id": client_id,
                     "linger.ms": 0, "compression.type": "none", "acks": "all",
                     "statistics.interval.ms": 200, "stats_cb": seen.stats_cb,
                     "throttle_cb": seen.throttle_cb, "error_cb": seen.error_cb})
    start = time.time()
    for _ in range(count):
        prod.produce(topic, b"q" * size, on_delivery=seen.delivered)
        prod.flush(30)
    elapsed = time.time() - start
    time.sleep(0.5)  # one more statistics interval
    prod.poll(0)
    seen.report(elapsed=elapsed, bytes=count * size)


def emit(**ev):
    ev["t"] = time.time()
    print(json.dumps(ev), flush=True)


def stdin_closed():
    """An event set once stdin closes."""
    closed = threading.Event()

    def watch():
        for _ in sys.stdin:
            pass
        closed.set()
    threading.Thread(target=watch, daemon=True).start()
    return closed


def member(bootstrap, group, topic, conf_json):
    debug = {"debug": os.environ["LIBRDKAFKA_DEBUG"]} if os.environ.get("LIBRDKAFKA_DEBUG") else {}
    conf = {**debug, "bootstrap.servers": bootstrap, "group.id": group,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500, "topic.metadata.refresh.interval.ms": 2000,
            "fetch.wait.max.ms": 500,
            "error_cb": lambda err: emit(ev="error", code=err.name(), reason=err.str())}
    conf.update(json.loads(conf_json))
    assign = conf.pop("assign", None)
    auto = conf.get("enable.auto.commit", True) not in (False, "false")
    cons = Consumer(conf)

    def assigned(_c, parts):
        emit(ev="assigned", parts=[[p.topic, p.partition] for p in parts])

    def revoked(_c, parts):
        emit(ev="revoked", parts=[[p.topic, p.partition] for p in parts])
    if assign is None:
        cons.subscribe([topic], on_assign=assigned, on_revoke=revoked)
    else:
        cons.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in assign])
    closed = stdin_closed()
    held = None
    while not closed.is_set():
        msg = cons.poll(0.2)
        now = sorted([p.topic, p.partition] for p in cons.assignment())
        if now != held:
            held = now
            emit(ev="assignment", parts=held)
        if msg is None:
            continue
        if msg.error():
            emit(ev="consume_error", code=msg.error().name(), reason=msg.error().str())
            continue
        emit(ev="record", topic=msg.topic(), p=msg.partition(), o=msg.offset(), v=msg.value().decode())
        if not auto:
            try:
                cons.commit(message=msg, asynchronous=False)
            except KafkaException as e:
                emit(ev="commit_error", code=e.args[0].name(), reason=e.args[0].str(), p=msg.partition(), o=msg.offset())
    cons.close()
    emit(ev="closed")


def producer(bootstrap, topic, conf_json):
    debug = {"debug": os.environ["LIBRDKAFKA_DEBUG"]} if os.environ.get("LIBRDKAFKA_DEBUG") else {}
    conf = {**debug, "bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
            "error_cb": lambda err: emit(ev="error", code=err.name(), reason=err.str(), fatal=err.fatal())}
    conf.update(json.loads(conf_json))
    prod = Producer(conf)

    def delivered(err, msg):
        if err is not None:
            emit(ev="delivery_error", code=err.name(), reason=err.str(), v=msg.value().decode())
        else:
            emit(ev="delivered", p=msg.partition(), o=msg.offset(), v=msg.value().decode())
    for line in sys.stdin:
        words = line.split()
        if words[0] == "burst":  # burst PARTITION COUNT PREFIX: all at once
            for i in range(int(words[2])):
                prod.produce(topic, ("%s-%d" % (words[3], i)).encode(), partition=int(words[1]),
                             on_delivery=delivered)
            if prod.flush(60) != 0:
                emit(ev="undelivered", v=words[3])
            continue
        part, value = line.split(None, 1)
        prod.produce(topic, value.strip().encode(), partition=int(part), on_delivery=delivered)
        if prod.flush(60) != 0:
            emit(ev="undelivered", v=value.strip())
    prod.flush(10)
    emit(ev="closed")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "roundtrip":
        roundtrip(args[0], args[1], args[2], args[3], float(args[4]))
    elif mode == "produce":
        produce(args[0], args[1], args[2], int(args[3]), int(args[4]))
    elif mode == "member":
        member(args[0], args[1], args[2], args[3])
    elif mode == "producer":
        producer(args[0], args[1], args[2])
    else:
        sys.exit("unknown mode " + mode)
