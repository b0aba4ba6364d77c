// Package groups tests consumer groups on an in-process cluster from
// package clustertest: the group coordinator over the group API, the Go
// client's group consumer (rebalances, commits, crashes and restarts of
// members), ListGroups, and consumers of a topic deleted and created
// again. It holds only tests, apart from clustertest's so that go test
// runs the packages side by side.
package groups
