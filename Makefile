# tidemark — Kafka's partition replication protocol as gRPC microservices.
# `make help` lists the targets. Everything the build needs is installed by
# these files: the pinned generators come from tools/devtools (Go tool
# directives, kept out of go.work so they cannot move the services' versions).

SHELL        := /usr/bin/env bash
.SHELLFLAGS  := -eu -o pipefail -c
MODULES      := proto services gateway tools
BIN          := bin
TOOLBIN      := .bin
GO_TEST_FLAGS ?= -timeout 30m
# `make test` runs the end-to-end tier (`make e2e`) when a Docker engine
# answers; E2E=1 requires it (no engine is an error), E2E=0 skips it.
E2E          ?= auto
DOCKER_COMPOSE := $(shell if docker compose version >/dev/null 2>&1; then echo "docker compose"; elif command -v docker-compose >/dev/null 2>&1; then echo docker-compose; fi)

export PATH := $(CURDIR)/$(TOOLBIN):$(PATH)

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: ## build buf, the protoc plugins and grpcurl from tools/devtools into .bin/
	@mkdir -p $(TOOLBIN)
	cd tools/devtools && GOWORK=off go build -o ../../$(TOOLBIN)/ \
		github.com/bufbuild/buf/cmd/buf \
		google.golang.org/protobuf/cmd/protoc-gen-go \
		google.golang.org/grpc/cmd/protoc-gen-go-grpc \
		github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway \
		github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2 \
		github.com/fullstorydev/grpcurl/cmd/grpcurl

.PHONY: thirdparty
thirdparty: ## build etcd, etcdctl and Jaeger from their pinned modules into .bin/ (slow the first time: Jaeger ~10 min)
	@mkdir -p $(TOOLBIN)
	cd tools/thirdparty/etcd && GOWORK=off CGO_ENABLED=0 go build -trimpath -o ../../../$(TOOLBIN)/etcd go.etcd.io/etcd/server/v3
	cd tools/thirdparty/etcd && GOWORK=off CGO_ENABLED=0 go build -trimpath -o ../../../$(TOOLBIN)/etcdctl go.etcd.io/etcd/etcdctl/v3
	cd tools/thirdparty/jaeger && GOWORK=off CGO_ENABLED=0 go build -trimpath -o ../../../$(TOOLBIN)/jaeger github.com/jaegertracing/jaeger/cmd/jaeger

# Docker Compose v2, the `docker compose` CLI plugin, from its pinned module
# (tools/thirdparty/compose, kept out of go.work) into .bin/docker/cli-plugins/:
# with DOCKER_CONFIG=$PWD/.bin/docker the docker CLI finds it there, so
# `docker compose` works on a machine that has only docker-compose 1.x
# without touching ~/.docker. `make note-lab` builds it.
COMPOSE_PLUGIN_VERSION := v5.6.0
COMPOSE_PLUGIN         := $(TOOLBIN)/docker/cli-plugins/docker-compose

.PHONY: thirdparty-compose
thirdparty-compose: ## build the docker compose v2 CLI plugin from its pinned module into .bin/docker/cli-plugins/ (use with DOCKER_CONFIG=$PWD/.bin/docker)
	@mkdir -p $(dir $(COMPOSE_PLUGIN))
	cd tools/thirdparty/compose && GOWORK=off CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/docker/compose/v5/internal.Version=$(COMPOSE_PLUGIN_VERSION)" \
		-o ../../../$(COMPOSE_PLUGIN) github.com/docker/compose/v5/cmd

# NATS JetStream, the peer `make bench-compare` measures tidemark beside,
# from its own pinned module (tools/thirdparty/nats, kept out of go.work);
# built by `make test` (its harness test starts a cluster) and `make bench-compare`.
.PHONY: thirdparty-nats
thirdparty-nats: ## build nats-server and the nats CLI from their pinned module into .bin/
	@mkdir -p $(TOOLBIN)
	cd tools/thirdparty/nats && GOWORK=off CGO_ENABLED=0 go build -trimpath -o ../../../$(TOOLBIN)/nats-server github.com/nats-io/nats-server/v2
	cd tools/thirdparty/nats && GOWORK=off CGO_ENABLED=0 go build -trimpath -o ../../../$(TOOLBIN)/nats github.com/nats-io/natscli/nats

.PHONY: generate
generate: tools ## regenerate the protobuf, gRPC, gateway and OpenAPI code (offline)
	buf generate

.PHONY: check-generate
check-generate: generate ## fail when the committed generated code is stale
	@if [ -n "$$(git status --porcelain -- proto/gen gateway/openapi)" ]; then \
		echo "generated code is stale: run 'make generate' and commit"; \
		git status --porcelain -- proto/gen gateway/openapi; exit 1; fi
	@echo "generated code is up to date"

.PHONY: lint
lint: tools ## buf lint, go vet and gofmt on every module
	buf lint
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && go vet ./...); done
	@unformatted=$$(gofmt -l $(MODULES)); if [ -n "$$unformatted" ]; then \
		echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@echo "lint ok"

# Kafka's scripts the tidemark binary answers to by name
# (tools/internal/kafkascripts, whose test checks this list): the image
# links each one in /opt/kafka/bin, `make build` each one in bin/, so
# `PATH=$PWD/bin:$PATH kafka-topics.sh --bootstrap-server ...` runs on the host.
KAFKA_SCRIPTS   := kafka-acls.sh kafka-broker-api-versions.sh kafka-configs.sh kafka-console-consumer.sh kafka-console-producer.sh kafka-consumer-groups.sh kafka-delete-records.sh kafka-get-offsets.sh kafka-leader-election.sh kafka-reassign-partitions.sh kafka-topics.sh

.PHONY: build
build: ## static binaries into bin/: broker, controller, gateway, tidemark (and Kafka's script names linked to tidemark)
	@mkdir -p $(BIN)
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/ \
		tidemark.io/services/broker/cmd/broker \
		tidemark.io/services/controller/cmd/controller \
		tidemark.io/gateway/cmd/gateway \
		tidemark.io/tools/cmd/tidemark
	@for s in $(KAFKA_SCRIPTS); do ln -sfn tidemark $(BIN)/$$s; done

# ---- Tests ------------------------------------------------------------------
# Each tier runs `go test -json` over every module, keeps the events in
# .data/test/<tier>.json and prints them through tools/cmd/testreport:
# go test's usual `ok`/`FAIL` lines and every failing test's whole output,
# then `N passed, N failed, N skipped` and each skipped test with its reason.
# A test that needs a missing tool fails when CI is set (testenv), so under
# CI a skip can only be by design (-short, an opt-in tier).
TEST_LOGS    := .data/test
TESTREPORT   := $(TOOLBIN)/testreport

.PHONY: testreport
testreport:
	@mkdir -p $(TOOLBIN) $(TEST_LOGS)
	@go build -o $(TESTREPORT) ./tools/cmd/testreport

# go-test runs `go test -json $(1)` on every module's packages in one go (the
# workspace lets one go test span the modules, so one module's tests run while
# the next one builds) and reports as above; $(2) names the tier's log.
# $(3), optional, names packages to start first (they also stay in their
# module's pattern; go test runs each package once, in the order named).
define go-test
	@echo "== go test $(1) ($(MODULES))"
	@go test -json $(1) $(3) $(foreach m,$(MODULES),./$(m)/...) 2>&1 | tee $(TEST_LOGS)/$(2).json | $(TESTREPORT)
endef

# The full tier's slowest packages (measured: the cluster tests about 950 s,
# since split among clustertest, clustertest/quiet and clustertest/groups to
# run side by side, and kafkaclients 450 s, the scenarios 230 s, the CLI 145 s, the
# gateway and its console about 100 s each), started first: go test
# schedules packages in the order named, and the tier used to end on the
# scenarios alone, started last. It runs FULL_TIER_P test binaries at once:
# the cluster tests mostly wait (sessions, idle gaps, timeouts), so two
# cores take four. With three, the three largest cluster packages (about
# 7.5 minutes each) held every slot and the rest ran after them: 16
# minutes; with four, the rest runs beside them: 11 (measured uncached).
SLOW_TEST_PACKAGES := ./services/clustertest/ ./services/clustertest/quiet/ ./services/clustertest/kafkaclients/ ./services/clustertest/groups/ ./tools/internal/scenario/ ./tools/internal/cli/ ./gateway/ ./gateway/console/ ./tools/internal/smoke/ ./tools/internal/chaos/
FULL_TIER_P ?= 4
# The race tier's test binaries at once (go test's default is one per core):
# its cluster tests wait on timeouts as the full tier's do.
RACE_TIER_P ?= 3

.PHONY: test-unit
test-unit: testreport ## the fast tier: every module with -race -short (no etcd/Jaeger/grpcurl builds, no Docker)
	$(call go-test,-p $(RACE_TIER_P) -race -short $(GO_TEST_FLAGS),unit)

# The lock-order invariant mode (services/broker/LOCKORDER.md): the broker's
# mutexes check every acquisition against the ones their goroutine holds.
# A few focused tests keep it to about half a minute.
LOCKCHECK_BROKER_TESTS := TestAcksAllCommitsOnEveryReplica|TestPartitionedFollowerLeavesAndRejoinsISR|TestKIP101DivergenceOnlyWithHighWatermarkTruncation|TestRetentionOnLeaderMovesReplicaLogStart|TestIdempotentRetryOverTheWire|TestStaleControllerEpochIsRefused|TestRestartedBrokerWithoutMetadataAnswersRetriably|TestLeaderCrashLosesNoAckedWrite

.PHONY: test-lockcheck
test-lockcheck: testreport ## the broker's lock order checked (-tags lockcheck) over its replica, log store and a few whole-broker tests
	@echo "== go test -tags lockcheck (broker lock order)"
	@{ rc=0; go test -json -tags lockcheck -count=1 ./services/broker/internal/lockorder/ ./services/broker/internal/replica/ ./services/broker/internal/group/ ./services/broker/internal/logdirs/ || rc=1; \
	   go test -json -tags lockcheck -count=1 ./services/broker/internal/logstore/ || rc=1; \
	   go test -json -tags lockcheck -count=1 -run '^($(LOCKCHECK_BROKER_TESTS))$$' ./services/broker/ || rc=1; exit $$rc; } 2>&1 | \
	   tee $(TEST_LOGS)/lockcheck.json | $(TESTREPORT)

.PHONY: test
test: tools thirdparty thirdparty-nats testreport ## every module's tests (the skipped ones listed at the end), the lock-order mode, then `make e2e` when a Docker engine answers
	$(call go-test,-p $(FULL_TIER_P) $(GO_TEST_FLAGS),test,$(SLOW_TEST_PACKAGES))
	@$(MAKE) --no-print-directory test-lockcheck
	@case "$(E2E)" in \
	0) echo "== e2e skipped (E2E=0)";; \
	1) $(MAKE) --no-print-directory e2e;; \
	*) if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory e2e; \
	   else echo "== e2e skipped: no Docker engine answers 'docker info' (E2E=1 makes that an error)"; fi;; \
	esac

# ---- Seeded nemesis runs ------------------------------------------------------
# `make chaos SEEDS=200` runs the in-process quiet nemesis
# (services/clustertest TestNemesisWithQuietMoments) once per seed, seeds
# CHAOS_FIRST_SEED.. one after another, CHAOS_SECONDS of faults each, every
# fault kind included (TIDEMARK_CHAOS_ALL=1: also those that find defects
# still open), and stops starting new seeds once CHAOS_BUDGET seconds have
# passed. It prints each failing seed with the line that replays it; each
# seed's log is kept in .data/chaos/. `make test` runs one short seed.
SEEDS            ?= 20
CHAOS_FIRST_SEED ?= 1
CHAOS_SECONDS    ?= 6
CHAOS_BUDGET     ?= 3600

.PHONY: chaos
chaos: chaos-inprocess chaos-procs ## seeded nemesis runs, in-process then separate processes: SEEDS seeds each (CHAOS_BUDGET seconds at most per kind), printing each failing seed

# The separate-process nemesis (tools/internal/chaos, `tidemark chaos run`):
# SEEDS runs, seeds CHAOS_FIRST_SEED.., CHAOS_PROCS_SECONDS of faults each,
# against a dev cluster of real processes on free ports and a temporary data
# dir of its own (never make run's), no new run started once CHAOS_BUDGET
# seconds have passed. A failing run prints its seed, the command that
# replays it and the data dir it kept (node logs, history.json).
CHAOS_PROCS_SECONDS ?= 60

.PHONY: chaos-procs
chaos-procs: build ## the separate-process nemesis for SEEDS seeds (CHAOS_PROCS_SECONDS of faults each, CHAOS_BUDGET seconds at most)
	$(BIN)/tidemark chaos run --runs $(SEEDS) --seed $(CHAOS_FIRST_SEED) --seconds $(CHAOS_PROCS_SECONDS) --budget $(CHAOS_BUDGET)s --bin-dir $(BIN)

.PHONY: chaos-inprocess
chaos-inprocess: ## the in-process quiet nemesis for SEEDS seeds (see chaos)
	@mkdir -p .data/chaos
	cd services && go test -c -o ../.data/chaos/clustertest.test ./clustertest/
	@failed=""; start=$$(date +%s); last=$$(( $(CHAOS_FIRST_SEED) + $(SEEDS) - 1 )); \
	for seed in $$(seq $(CHAOS_FIRST_SEED) $$last); do \
	  if [ $$(( $$(date +%s) - start )) -ge $(CHAOS_BUDGET) ]; then \
	    echo "== CHAOS_BUDGET of $(CHAOS_BUDGET)s spent: stopped before seed $$seed"; break; fi; \
	  log=$(CURDIR)/.data/chaos/seed-$$seed.log; \
	  if (cd services/clustertest && TIDEMARK_CHAOS_SEED=$$seed TIDEMARK_CHAOS_SECONDS=$(CHAOS_SECONDS) TIDEMARK_CHAOS_ALL=1 \
	      $(CURDIR)/.data/chaos/clustertest.test -test.run '^TestNemesisWithQuietMoments$$' -test.count=1 -test.v -test.timeout 5m) >$$log 2>&1; then \
	    echo "seed $$seed ok"; \
	  else \
	    echo "seed $$seed FAILED: replay with TIDEMARK_CHAOS_SEED=$$seed TIDEMARK_CHAOS_SECONDS=$(CHAOS_SECONDS) TIDEMARK_CHAOS_ALL=1 (log $$log)"; \
	    failed="$$failed $$seed"; \
	  fi; \
	done; \
	if [ -n "$$failed" ]; then echo "== failing seeds:$$failed"; exit 1; fi; \
	echo "== every seed passed"

.PHONY: bench
bench: ## benchmarks for regressions: in-process (brokers, controller and client in one process), group commits and scale on a dev cluster (about 7 minutes)
	@echo "== log store: append and catch-up read against raw file I/O on the same disk"
	cd services && go test -run '^$$' -bench 'AppendVsRawWrite|ReadVsRawRead|FollowerAppendPageCache' -benchtime 3s ./broker/internal/logstore/
	@echo "== fsync: whether a busy GOMAXPROCS-1 process runs on while a checkpoint's fsync waits behind writeback (plain fsync against aiofsync's parked one)"
	cd services && go test -run '^$$' -bench 'OthersDuringFsync' -benchtime 20x ./broker/internal/aiofsync/
	@echo "== removing a segment: whether a busy GOMAXPROCS-1 process runs on while a removal frees a 16 MiB file's blocks (plain unlink against parkedfs's io_uring one)"
	cd services && go test -run '^$$' -bench 'OthersDuringRemove' -benchtime 20x ./broker/internal/parkedfs/
	@echo "== wire codec: encoding and decoding fetch answers on reused buffers against gRPC's own codec"
	cd services && go test -run '^$$' -bench 'Marshal|Unmarshal' -benchtime 20000x ./platform/wirecodec/
	@echo "== gRPC answer budget: one charged call over loopback with no budget and with the default (max.queued.answer.bytes.per.connection)"
	cd services && go test -run '^$$' -bench 'AnswerBudget' -benchtime 3s ./platform/grpcserver/
	@echo "== replication: 3 brokers, RF 3, min.insync.replicas 2, acks=all (Go client)"
	cd services && go test -run '^$$' -bench 'SyncProducer' -benchtime 5000x ./clustertest/
	cd services && go test -run '^$$' -bench 'BatchingProducer|TracingOverhead' -benchtime 200000x ./clustertest/
	@echo "== consumer groups: 10 members committing, one acks=all write to __consumer_offsets per commit"
	cd services && go test -run '^$$' -bench 'GroupCommits' -benchtime 5000x ./clustertest/
	@echo "== the same through the Go client's GroupConsumer (CommitSync: coordinator lookup, retries)"
	cd services && go test -run '^$$' -bench 'GroupConsumerCommits' -benchtime 5000x ./clustertest/
	@echo "== the same on a dev cluster of separate processes (mutual TLS), through tidemark perf commit"
	cd tools && TIDEMARK_BENCH_DEVCLUSTER=1 go test -count=1 -run 'GroupCommitsOnTheDevCluster' -v ./internal/scenario/ | grep -E 'dev cluster, 10 members|ok|FAIL'
	@echo "== scale on a dev cluster of separate processes: a 2,000-partition topic, RSS per idle replica, leader and controller failover at 10,000 partitions RF 3 (about 3 minutes)"
	cd tools && TIDEMARK_BENCH_SCALE=1 go test -count=1 -run 'ScaleOnTheDevCluster' -v ./internal/scenario/ | grep -E 'scale:|ok|FAIL|not within|is offline'
	@echo "== the Kafka front door against the gRPC one: franz-go vs the Go client, same shapes (kafka/grpc >= 0.8)"
	cd services && go test -run '^$$' -bench 'KafkaFrontDoor/sync' -benchtime 3000x ./clustertest/kafkaclients/
	cd services && go test -run '^$$' -bench 'KafkaFrontDoor/batched' -benchtime 100000x ./clustertest/kafkaclients/
	@echo "== replication throttle: a reassignment's copy rate against a 256 KiB/s throttle (follower and leader side)"
	cd services && go test -run '^$$' -bench 'ReplicationThrottle' -benchtime 1x ./clustertest/ | grep -E 'B/s|ok|FAIL'
	@echo "== an UpdateMetadata that changes no config, per hosted replica (resolved configs cached by version)"
	cd services && go test -run '^$$' -bench 'UpdateMetadataWithoutConfigChange' -benchtime 50x ./broker/internal/replica/
	@echo "== broker progress reports to the controller, bytes per report: every replica each time (full) vs what changed (delta; amortized counts the full report every 30 s), idle vs one partition taking writes"
	cd services && go test -run '^$$' -bench 'ProgressReportBytes' -benchtime 120x ./broker/ | grep -E 'B/report|ok|FAIL'
	@echo "== the console: bytes per page per update, whole snapshot against patch (one partition's HW moved)"
	cd gateway && go test -run '^$$' -bench 'ConsoleUpdateBytes' -benchtime 20x ./console/
	@echo "== resident memory while appending 2 GiB (flat = does not grow with the log)"
	cd services && TIDEMARK_BENCH_RSS=1 go test -run 'RSS' -v ./broker/internal/logstore/ | grep -E 'RSS|rss|ok|FAIL' 

# `make bench-compare` measures what users run: separate processes, beside
# NATS JetStream, one system after the other in the same run (about 15
# minutes, about 5 more for the failover runs' 20 kills and 4 more for the
# synchronous shapes on one CPU; not part of `make test`). BENCH_SCALE
# multiplies the record counts.
BENCH_SCALE ?= 1
# BENCH_KILLS is how many times the failover run kills the leader on each system.
BENCH_KILLS ?= 20

.PHONY: bench-compare
bench-compare: build ## tidemark's dev cluster and a 3-node NATS JetStream cluster side by side, each shape's runs alternating between them: figures and ratios into .data/bench/ and README
	@if [ ! -x $(TOOLBIN)/nats-server ] || [ ! -x $(TOOLBIN)/nats ]; then $(MAKE) --no-print-directory thirdparty-nats; fi
	$(BIN)/tidemark bench compare --bin-dir $(BIN) --nats-bin-dir $(TOOLBIN) --out-dir .data/bench --scale $(BENCH_SCALE) --kills $(BENCH_KILLS) $(if $(and $(filter 1,$(BENCH_SCALE)),$(filter 20,$(BENCH_KILLS))),--readme README.md,)

.PHONY: run
run: build ## run the dev cluster (etcd, 2 controllers, 3 brokers, gateway) in the foreground; JAEGER=1 adds Jaeger
	@if [ "$(JAEGER)" = "1" ] && [ ! -x $(TOOLBIN)/jaeger ]; then $(MAKE) --no-print-directory thirdparty; fi
	$(BIN)/tidemark dev up

# ---- The docker compose stack (deploy/) -----------------------------------
# Images are built here FROM scratch from static binaries: tidemark's from
# bin/, etcd's and Jaeger's from the pinned modules `make thirdparty` builds
# into .bin/. `make up UPSTREAM_IMAGES=1` runs the official etcd and Jaeger
# images instead (for machines that can pull them).
COMPOSE_FILES   := $(CURDIR)/deploy/compose.yml
TIDEMARK_IMAGE  ?= tidemark/tidemark:local
UPSTREAM_IMAGES ?=
# The stack runs with TLS and authentication on; PLAINTEXT=1 adds the
# override that turns them off (make up PLAINTEXT=1, make e2e PLAINTEXT=1).
PLAINTEXT       ?=
ifeq ($(PLAINTEXT),1)
COMPOSE_FILES   := $(COMPOSE_FILES):$(CURDIR)/deploy/compose.plaintext.yml
endif
ifeq ($(UPSTREAM_IMAGES),1)
ETCD_IMAGE      ?= gcr.io/etcd-development/etcd:v3.7.3
JAEGER_IMAGE    ?= jaegertracing/jaeger:2.13.0
COMPOSE_FILES   := $(COMPOSE_FILES):$(CURDIR)/deploy/compose.upstream.yml
else
ETCD_IMAGE      ?= tidemark/etcd:v3.7.3
JAEGER_IMAGE    ?= tidemark/jaeger:v1.76.0
endif
IMAGE_CONTEXT   := $(TOOLBIN)/images
# The compose stack's per-service pki volumes (deploy/compose.yml): the
# image has a folder owned by the services' user for each to mount on.
PKI_EXPORTS     := controller-1 controller-2 broker-1 broker-2 broker-3 gateway etcd etcd-init jaeger
COMPOSE_ENV     := COMPOSE_FILE=$(COMPOSE_FILES) TIDEMARK_IMAGE=$(TIDEMARK_IMAGE) ETCD_IMAGE=$(ETCD_IMAGE) JAEGER_IMAGE=$(JAEGER_IMAGE)
E2E_PROJECT     ?= tidemark-e2e
E2E_TIMEOUT     ?= 15m

.PHONY: compose-check
compose-check:
	@if [ -z "$(DOCKER_COMPOSE)" ]; then echo "neither 'docker compose' nor 'docker-compose' is installed"; exit 1; fi
	@docker info >/dev/null 2>&1 || { echo "no Docker engine answers 'docker info'"; exit 1; }

.PHONY: images
images: build compose-check ## build the stack's images FROM scratch: tidemark (bin/), etcd and Jaeger (.bin/)
	@rm -rf $(IMAGE_CONTEXT) && mkdir -p $(IMAGE_CONTEXT)/tidemark/owned $(addprefix $(IMAGE_CONTEXT)/tidemark/export/,$(PKI_EXPORTS))
	@for f in broker controller gateway tidemark; do ln -f $(BIN)/$$f $(IMAGE_CONTEXT)/tidemark/ 2>/dev/null || cp -f $(BIN)/$$f $(IMAGE_CONTEXT)/tidemark/; done
	@mkdir -p $(IMAGE_CONTEXT)/tidemark/kafka-bin && for s in $(KAFKA_SCRIPTS); do ln -s /usr/local/bin/tidemark $(IMAGE_CONTEXT)/tidemark/kafka-bin/$$s; done
	docker build -q -t $(TIDEMARK_IMAGE) -f deploy/tidemark.Dockerfile $(IMAGE_CONTEXT)/tidemark
ifneq ($(UPSTREAM_IMAGES),1)
	@if [ ! -x $(TOOLBIN)/etcd ] || [ ! -x $(TOOLBIN)/etcdctl ] || [ ! -x $(TOOLBIN)/jaeger ]; then $(MAKE) --no-print-directory thirdparty; fi
	@mkdir -p $(IMAGE_CONTEXT)/etcd/owned $(IMAGE_CONTEXT)/jaeger/owned
	@for f in etcd etcdctl; do ln -f $(TOOLBIN)/$$f $(IMAGE_CONTEXT)/etcd/ 2>/dev/null || cp -f $(TOOLBIN)/$$f $(IMAGE_CONTEXT)/etcd/; done
	@ln -f $(TOOLBIN)/jaeger $(IMAGE_CONTEXT)/jaeger/ 2>/dev/null || cp -f $(TOOLBIN)/jaeger $(IMAGE_CONTEXT)/jaeger/
	@ln -f $(BIN)/tidemark $(IMAGE_CONTEXT)/jaeger/ 2>/dev/null || cp -f $(BIN)/tidemark $(IMAGE_CONTEXT)/jaeger/
	docker build -q -t $(ETCD_IMAGE) -f deploy/etcd.Dockerfile $(IMAGE_CONTEXT)/etcd
	docker build -q -t $(JAEGER_IMAGE) -f deploy/jaeger.Dockerfile $(IMAGE_CONTEXT)/jaeger
endif
	@rm -rf $(IMAGE_CONTEXT)

.PHONY: up
up: images ## build binaries and images, start the compose stack with TLS and auth on (project tidemark; PLAINTEXT=1 without; ports in README)
	$(COMPOSE_ENV) $(DOCKER_COMPOSE) -p tidemark up -d --remove-orphans
	@$(COMPOSE_ENV) $(DOCKER_COMPOSE) -p tidemark ps

.PHONY: down
down: compose-check ## stop the compose stack (project tidemark); `make down WIPE=1` also removes its volumes
	$(COMPOSE_ENV) $(DOCKER_COMPOSE) -p tidemark down --remove-orphans $(if $(filter 1,$(WIPE)),-v,)

.PHONY: e2e
e2e: images testreport ## the failure playbooks and security checks against a secure stack of their own (project tidemark-e2e; PLAINTEXT=1)
	@rc=0; \
	(cd tools && $(COMPOSE_ENV) TIDEMARK_E2E=1 TIDEMARK_E2E_COMPOSE="$(DOCKER_COMPOSE)" TIDEMARK_E2E_PLAINTEXT=$(PLAINTEXT) TIDEMARK_E2E_PROJECT=$(E2E_PROJECT) \
		TIDEMARK_E2E_LOG_DIR=$(CURDIR)/.data/e2e-logs \
		go test -json -count=1 -timeout $(E2E_TIMEOUT) ./e2e/ 2>&1 | tee $(CURDIR)/$(TEST_LOGS)/e2e.json | $(CURDIR)/$(TESTREPORT) -v) || rc=$$?; \
	$(COMPOSE_ENV) $(DOCKER_COMPOSE) -p $(E2E_PROJECT) down -v --remove-orphans -t 5 >/dev/null 2>&1 || true; \
	exit $$rc

# ---- The learning note's lab (deploy/note) -----------------------------------
# kafka1..kafka3 on localhost:9092/9094/9096 in plain text, published on
# 127.0.0.1 only, as the compose project `note` (the directory's name, which
# is what `docker compose stop kafka1` run in deploy/note acts on), with the
# images `make images` builds and the compose plugin above. The note's
# Python demos then run as written (README, "The note's Python demos").
NOTE_DIR     := deploy/note
NOTE_COMPOSE := DOCKER_CONFIG=$(CURDIR)/$(TOOLBIN)/docker TIDEMARK_IMAGE=$(TIDEMARK_IMAGE) ETCD_IMAGE=$(ETCD_IMAGE) docker compose

.PHONY: note-lab
note-lab: images ## the learning note's lab: kafka1..3 on localhost:9092/9094/9096, plain text on loopback (deploy/note, project note), then how to run the note's demos
	@if [ ! -x $(COMPOSE_PLUGIN) ]; then $(MAKE) --no-print-directory thirdparty-compose; fi
	cd $(NOTE_DIR) && $(NOTE_COMPOSE) up -d --wait
	@echo
	@echo "The lab is up: bootstrap localhost:9092,localhost:9094,localhost:9096 (plain text, loopback only);"
	@echo "inside its compose network, kafka1:19092,kafka2:19092,kafka3:19092."
	@echo "Run the note's demos from this directory with Debian's python3-confluent-kafka:"
	@echo "  DOCKER_CONFIG=$(CURDIR)/$(TOOLBIN)/docker /usr/bin/python3 kill_leader_demo.py --compose-dir $(NOTE_DIR)"
	@echo "  DOCKER_CONFIG=$(CURDIR)/$(TOOLBIN)/docker /usr/bin/python3 min_isr_demo.py --compose-dir $(NOTE_DIR)"
	@echo "  /usr/bin/python3 observe_isr.py --topic learn.09.killdemo"
	@echo "make note-lab-down removes the lab and its volumes."

.PHONY: note-lab-down
note-lab-down: ## stop the learning note's lab and remove its volumes
	@if [ ! -x $(COMPOSE_PLUGIN) ]; then $(MAKE) --no-print-directory thirdparty-compose; fi
	cd $(NOTE_DIR) && $(NOTE_COMPOSE) down -v --remove-orphans

.PHONY: clean
clean: ## remove built binaries and dev-cluster data
	rm -rf $(BIN) .data
