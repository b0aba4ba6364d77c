package kafkaapi

import (
	"context"
	"crypto/tls"
	"net"
	"strconv"
	"strings"

	"tidemark.io/services/broker/internal/metadata"
)

// Listener is one named Kafka listener (Kafka's listeners entry): the
// connections accepted on its socket are told every broker's address for
// this name, as Kafka answers Metadata, FindCoordinator and
// DescribeCluster with the endpoints of the listener a request arrived on.
type Listener struct {
	// Name is the listener's name (e.g. INTERNAL); "" is the address a
	// broker registered before listeners had names.
	Name string
	// TLS, when set, makes the listener TLS with client certificates; the
	// certificate's Common Name is the principal.
	TLS *tls.Config
	// SASL, when set, makes a connection authenticate (SaslHandshake,
	// SaslAuthenticate) before any other request; the SASL user is the
	// principal, on TLS (SASL_SSL) or not (SASL_PLAINTEXT).
	SASL bool
}

// EndpointName is the registration key (metastore.BrokerInfo.Endpoints) of
// a broker's first Kafka listener's advertised address: what brokers
// registered before listeners had names, and what such brokers still read
// during a rolling upgrade.
const EndpointName = "kafka"

// EndpointKey is the registration key of listener name's advertised
// address, e.g. "kafka.INTERNAL".
func EndpointKey(name string) string { return EndpointName + "." + name }

// Endpoint is broker b's address on listener name as Kafka clients are
// told it; ok is false when b has no such listener (Kafka leaves such a
// broker out). A registration without named listeners (one address, from
// before they had names) gives its one address on every listener: the
// address its clients have always used.
func Endpoint(b metadata.Broker, name string) (host string, port int32, ok bool) {
	addr, named := "", false
	if name != "" {
		addr, named = b.Endpoints[EndpointKey(name)]
	}
	if !named && (name == "" || !hasNamedListeners(b)) {
		addr = b.Endpoints[EndpointName]
	}
	if addr == "" {
		return "", 0, false
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return "", 0, false
	}
	return h, int32(n), true
}

func hasNamedListeners(b metadata.Broker) bool {
	for k := range b.Endpoints {
		if strings.HasPrefix(k, EndpointName+".") {
			return true
		}
	}
	return false
}

type listenerKey struct{}

// ListenerName is the name of the listener the Kafka request ctx answers
// arrived on ("" for the unnamed one).
func ListenerName(ctx context.Context) string {
	n, _ := ctx.Value(listenerKey{}).(string)
	return n
}

// WithListenerName is ctx for a request that arrived on listener name.
func WithListenerName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, listenerKey{}, name)
}
