# tidemark — Kafka's partition replication protocol as gRPC microservices.
# `make help` lists the targets. Everything the build needs is installed by
# these files: the pinned generators come from tools/devtools (Go tool
# directives, kept out of go.work so they cannot move the services' versions).

SHELL        := /usr/bin/env bash
.SHELLFLAGS  := -eu -o pipefail -c
MODULES      := proto services gateway tools
BIN          := bin
TOOLBIN      := .bin
GO_TEST_FLAGS ?= -timeout 20m
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

.PHONY: build
build: ## static binaries into bin/: broker, controller, gateway, tidemark
	@mkdir -p $(BIN)
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o $(BIN)/ \
		tidemark.io/services/broker/cmd/broker \
		tidemark.io/services/controller/cmd/controller \
		tidemark.io/gateway/cmd/gateway \
		tidemark.io/tools/cmd/tidemark

.PHONY: test
test: ## run every module's tests (go test ./... stops at module boundaries)
	@for m in $(MODULES); do echo "== go test ($$m)"; (cd $$m && go test $(GO_TEST_FLAGS) ./...); done

.PHONY: bench
bench: ## run the benchmarks and print their figures side by side (about 2 minutes)
	@echo "== log store: append and catch-up read against raw file I/O on the same disk"
	cd services && go test -run '^$$' -bench 'AppendVsRawWrite|ReadVsRawRead' -benchtime 1s ./broker/internal/logstore/
	@echo "== replication: 3 brokers, RF 3, min.insync.replicas 2, acks=all (Go client)"
	cd services && go test -run '^$$' -bench 'SyncProducer' -benchtime 5000x ./clustertest/
	cd services && go test -run '^$$' -bench 'BatchingProducer' -benchtime 200000x ./clustertest/
	@echo "== resident memory while appending 2 GiB (flat = does not grow with the log)"
	cd services && TIDEMARK_BENCH_RSS=1 go test -run 'RSS' -v ./broker/internal/logstore/ | grep -E 'RSS|rss|ok|FAIL' 

.PHONY: run
run: build ## run the dev cluster (etcd, 2 controllers, 3 brokers, gateway) in the foreground
	$(BIN)/tidemark dev up

.PHONY: up
up: ## start the docker compose stack (deploy/)
	@echo "make up: the compose stack in deploy/ is not built yet (etcd, 2 controllers, 3 brokers, gateway, Jaeger)"; exit 1

.PHONY: down
down: ## stop the docker compose stack
	@echo "make down: the compose stack in deploy/ is not built yet"; exit 1

.PHONY: clean
clean: ## remove built binaries and dev-cluster data
	rm -rf $(BIN) .data
