// Package kafkaclients tests the brokers' Kafka listener against real Kafka
// clients (franz-go, sarama, librdkafka through its Python binding and
// kcat) on an in-process cluster from package clustertest: produce, fetch,
// groups, admin requests, quotas, SASL and TLS, across the faults
// clustertest injects. It holds only tests and benchmarks, apart from
// clustertest's so that go test runs the two packages side by side.
package kafkaclients
