package kafkaapi

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count what the listener sees, by Kafka API name.
type metrics struct {
	requests *prometheus.CounterVec // api
	closed   *prometheus.CounterVec // reason: protocol, idle, refused, handler, auth, auth_timeout, reauth, session_expired
	sasl     *prometheus.CounterVec // mechanism, result: success, failure, unsupported
	reauth   *prometheus.CounterVec // mechanism, result: success, failure, unsupported
	open     prometheus.Gauge
	queued   prometheus.Gauge // answer bytes built and not yet written
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_kafka_requests_total",
			Help: "Kafka wire protocol requests decoded, by API.",
		}, []string{"api"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_kafka_connections_closed_total",
			Help: "Kafka connections the broker closed: protocol (a frame Kafka closes for), idle (connections.max.idle), refused (max.connections.per.ip), handler (an answer that could not tell the client: a failed acks=0 write, no metadata to describe all topics), auth (a failed SASL login or a request before it), auth_timeout (no SASL login or re-authentication within its deadline), reauth (a failed SASL re-authentication), session_expired (a request other than a re-authentication after the SASL session expired, connections.max.reauth.ms).",
		}, []string{"reason"}),
		sasl: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_kafka_sasl_authentications_total",
			Help: "Kafka SASL logins, by mechanism and result: success, failure (unknown user, wrong password, malformed exchange), unsupported (a mechanism not enabled).",
		}, []string{"mechanism", "result"}),
		reauth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tidemark_kafka_sasl_reauthentications_total",
			Help: "Kafka SASL re-authentications of connections logged in already (connections.max.reauth.ms), by mechanism and result: success, failure (unknown or deleted user, changed password, another user or mechanism than the login's, malformed exchange), unsupported (a mechanism not enabled).",
		}, []string{"mechanism", "result"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tidemark_kafka_connections",
			Help: "Open Kafka wire protocol connections.",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tidemark_kafka_queued_answer_bytes",
			Help: "Bytes of Kafka answers built and not yet written, over all connections; a connection at kafka.max.queued.answer.bytes is read no further until its client reads.",
		}),
	}
	if reg == nil {
		return m
	}
	m.requests = register(reg, m.requests)
	m.closed = register(reg, m.closed)
	m.sasl = register(reg, m.sasl)
	m.reauth = register(reg, m.reauth)
	m.open = register(reg, m.open)
	m.queued = register(reg, m.queued)
	return m
}

// authCounter counts logins, or re-authentications when re is set.
func (m *metrics) authCounter(re bool) *prometheus.CounterVec {
	if re {
		return m.reauth
	}
	return m.sasl
}

// register registers c, or returns the collector already registered under
// its name (a broker restarted in the same process).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
