// Package kafkaapi serves Kafka's binary protocol on a broker's own port, so
// Kafka's clients and tools (kcat, franz-go, sarama, librdkafka, the shell
// scripts) work against tidemark unmodified. It is a second front door to
// the broker: each handler decodes the Kafka request with franz-go's kmsg,
// asks the same broker internals the gRPC handlers use (grpcapi.Broker, the
// replica manager, the active controller's AdminService), and encodes the
// answer. The files are one job each: server.go (listener, limits), conn.go
// (framing and per-connection ordering), header.go (request and response
// headers), versions.go (the advertised versions, ApiVersions), auth.go
// (principals and ACLs), errors.go (kerr to Kafka codes), and one handler
// file per API group.
package kafkaapi
