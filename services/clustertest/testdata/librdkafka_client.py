"""librdkafka (confluent_kafka) as a tidemark client, driven by clustertest.

roundtrip BOOTSTRAP USER PASSWORD TOPIC SECONDS
    Logs in with SCRAM-SHA-512 over SASL_PLAINTEXT; produces a record and
    consumes it back, one after the other, for SECONDS; prints a JSON
    report. Then waits for a line on stdin (the user was deleted) and
    produces once more for up to 15 s, printing a second report.
produce BOOTSTRAP CLIENT_ID TOPIC COUNT SIZE
    Produces COUNT records of SIZE bytes as CLIENT_ID over PLAINTEXT and
    prints what librdkafka reported of throttles (throttle_cb, stats).

LIBRDKAFKA_DEBUG, when set, is librdkafka's debug setting (to stderr).
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


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


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "roundtrip":
        roundtrip(args[0], args[1], args[2], args[3], float(args[4]))
    elif mode == "produce":
        produce(args[0], args[1], args[2], int(args[3]), int(args[4]))
    else:
        sys.exit("unknown mode " + mode)
