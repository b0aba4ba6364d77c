package clustertest

import (
	"net"
	"testing"
)

// Each node's first start serves on the listener held since its port was
// picked (no window for another process to take the port); a restart
// binds the same address again.
func TestNodesStartOnTheirHeldListeners(t *testing.T) {
	c := Start(t, Options{Brokers: 1, Controllers: 1, Kafka: true})
	c.mu.Lock()
	left := len(c.held)
	c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d held listeners were never given to a node", left)
	}
	cfg := c.BrokerConfig(1)
	if got := c.Broker(1).Addr(); got != cfg.Listen {
		t.Fatalf("broker serves on %s, its port was held at %s", got, cfg.Listen)
	}
	if _, err := net.Listen("tcp", cfg.KafkaListen); err == nil {
		t.Fatalf("the Kafka listener's port %s is free: the broker did not take its held listener", cfg.KafkaListen)
	}
	c.CrashBroker(1)
	if got := c.StartBroker(1).Addr(); got != cfg.Listen {
		t.Fatalf("restarted broker serves on %s, want %s", got, cfg.Listen)
	}
}
