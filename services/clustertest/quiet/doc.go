// Package quiet tests an in-process cluster from package clustertest
// across quiet moments: faults met while brokers, topics, groups or
// clients sit idle or between bursts (restarts and crashes in a row,
// controller and etcd outages, retention and compaction on idle topics,
// idle groups and their coordinators, the Go client's producer and
// consumer after a pause). It holds only tests, apart from clustertest's
// so that go test runs the two packages side by side.
package quiet
