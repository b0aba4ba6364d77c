package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker/internal/group"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/broker/internal/kafkagroups"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/kerr"
)

// kafkaSocket is one named Kafka listener and its bound socket.
type kafkaSocket struct {
	KafkaListenerSpec
	lis net.Listener
}

// advertised is the address this listener's clients are told to dial.
func (s kafkaSocket) advertised() string {
	if s.Advertised != "" {
		return s.Advertised
	}
	return s.lis.Addr().String()
}

// bindKafka binds every Kafka listener's socket (or takes the one given).
func (b *Broker) bindKafka() error {
	specs, err := b.cfg.KafkaListenerSpecs()
	if err != nil {
		return err
	}
	for _, spec := range specs {
		given, flagName := b.cfg.KafkaNamedListeners[spec.Name], "--kafka.listeners "+spec.Name
		if len(b.cfg.KafkaListeners) == 0 {
			given, flagName = b.cfg.KafkaListener, "--kafka.listen"
		}
		lis, err := listen(given, spec.Listen)
		if err != nil {
			return fmt.Errorf("%s %s: %w", flagName, spec.Listen, err)
		}
		b.kafkaSockets = append(b.kafkaSockets, kafkaSocket{KafkaListenerSpec: spec, lis: lis})
	}
	return nil
}

func (b *Broker) closeKafkaSockets() {
	for _, s := range b.kafkaSockets {
		_ = s.lis.Close()
	}
}

// startKafka serves Kafka's wire protocol beside gRPC: the same handlers
// behind it (api), the same authorizer, the same certificates (on the SSL
// listeners).
func (b *Broker) startKafka(api *grpcapi.Broker, az *authz.Authorizer) error {
	var tlsCfg *tls.Config
	if b.cfg.TLS.Enabled() {
		var err error
		if tlsCfg, err = b.cfg.TLS.Server(); err != nil {
			return err
		}
	}
	sasl := kafkaapi.SASLOptions{Mechanisms: b.cfg.SASLMechanisms, Timeout: b.cfg.SASLTimeout, MaxReauth: b.cfg.SASLMaxReauth}
	if len(b.cfg.Etcd.Endpoints) > 0 {
		sasl.Credentials = b.users.Lookup // without etcd there are no users
	}
	limits := b.cfg.KafkaLimits
	limits.MaxConnectionsPerIP = b.cfg.Limits.MaxConnectionsPerIP
	limits.MaxConnectionsPerIPOverrides = b.cfg.Limits.MaxConnectionsPerIPOverrides
	b.kafka = kafkaapi.New(kafkaapi.Options{
		BrokerID: b.cfg.ID, Broker: api, Replication: &grpcapi.Replication{RM: b.rm}, RM: b.rm,
		Admin: b.controllerAdmin, Authorizer: az, Limits: limits, Logger: b.log, Registry: b.tel.Registry,
		SASL:               sasl,
		LogDirs:            b.kafkaLogDirs,
		CreateOffsetsTopic: groupHost{b: b}.CreateOffsetsTopic,
		Extension:          &kafkagroups.Groups{Service: &group.Service{C: b.groups}, Authorizer: az, KafkaEndpoint: b.kafkaEndpoint},
	})
	for _, sock := range b.kafkaSockets {
		l := kafkaapi.Listener{Name: sock.Name, SASL: sock.Protocol == ProtocolSASLPlaintext || sock.Protocol == ProtocolSASLSSL}
		switch {
		case sock.Protocol == ProtocolSSL:
			l.TLS = tlsCfg
		case sock.Protocol == ProtocolSASLSSL:
			// The SASL user is the principal: clients need no
			// certificate (Kafka's ssl.client.auth=none for SASL_SSL).
			l.TLS = tlsCfg.Clone()
			l.TLS.ClientAuth = tls.NoClientCert
		case sock.Protocol == ProtocolPlaintext && b.cfg.TLS.Enabled():
			b.log.Warn("Kafka listener is PLAINTEXT while authorization is on: its clients have no identity and are refused",
				"listener", sock.Name, "listen", sock.Listen)
		}
		go func() {
			// Kafka clients are served once the broker knows the cluster,
			// as a KRaft broker opens its client listeners only after its
			// first metadata catch-up: before that a Metadata answer would
			// list no brokers and no leaders. Connections made meanwhile
			// wait in the accept queue.
			if len(b.cfg.Etcd.Endpoints) > 0 {
				select {
				case <-b.meta.Ready():
				case <-b.draining.Done():
					_ = sock.lis.Close()
					return
				}
			}
			if err := b.kafka.ServeListener(l, sock.lis); err != nil {
				select {
				case b.done <- fmt.Errorf("--kafka listener %s: %w", sock.Name, err):
				default: // another listener's failure is already reported
				}
			}
		}()
	}
	return nil
}

// kafkaEndpoint is broker id's address on the named Kafka listener, from
// the metadata Kafka clients get in Metadata.
func (b *Broker) kafkaEndpoint(listener string, id int32) (string, int32, bool) {
	br, ok := b.rm.Meta().Broker(id)
	if !ok {
		return "", 0, false
	}
	return kafkaapi.Endpoint(br, listener)
}

// controllerAdmin is the active controller's AdminService, over this
// broker's own connection to it (the one producer id blocks use).
func (b *Broker) controllerAdmin(context.Context) (adminv1.AdminServiceClient, error) {
	ctrl := b.meta.Controller()
	if ctrl == nil || ctrl.GetAddress() == "" {
		return nil, kerr.New(kerr.NotController, "no active controller known to this broker yet")
	}
	conn, err := b.peers.Controller(ctrl.GetAddress())
	if err != nil {
		return nil, kerr.New(kerr.NotController, "reaching the active controller %s: %v", ctrl.GetAddress(), err)
	}
	return adminv1.NewAdminServiceClient(conn), nil
}

// KafkaAddr is the bound address of the first Kafka listener, or "" without
// one.
func (b *Broker) KafkaAddr() string {
	if len(b.kafkaSockets) == 0 {
		return ""
	}
	return b.kafkaSockets[0].lis.Addr().String()
}

// KafkaAdvertised is the address clients of the first Kafka listener are
// told to dial.
func (b *Broker) KafkaAdvertised() string {
	if len(b.kafkaSockets) == 0 {
		return ""
	}
	return b.kafkaSockets[0].advertised()
}

// kafkaListenersLog names each Kafka listener's bound and advertised
// address, for the start line.
func (b *Broker) kafkaListenersLog() string {
	var parts []string
	for _, s := range b.kafkaSockets {
		parts = append(parts, fmt.Sprintf("%s://%s (%s, advertised %s)", s.Name, s.lis.Addr(), s.Protocol, s.advertised()))
	}
	return strings.Join(parts, ",")
}

// endpoints are the named listeners registered beside the gRPC address:
// each Kafka listener's advertised address under its name, and the first
// one's also under the name brokers registered before listeners had names,
// which such brokers read during a rolling upgrade.
func (b *Broker) endpoints() map[string]string {
	if len(b.kafkaSockets) == 0 {
		return nil
	}
	out := map[string]string{kafkaapi.EndpointName: b.KafkaAdvertised()}
	for _, s := range b.kafkaSockets {
		out[kafkaapi.EndpointKey(s.Name)] = s.advertised()
	}
	return out
}

// kafkaLogDirs describes this broker's log dirs for DescribeLogDirs.
func (b *Broker) kafkaLogDirs() []kafkaapi.LogDir {
	var out []kafkaapi.LogDir
	for _, d := range b.logs.Describe() {
		kd := kafkaapi.LogDir{Path: d.Dir, Err: d.Err}
		for _, l := range d.Logs {
			kd.Logs = append(kd.Logs, kafkaapi.LogDirPartition{Topic: l.Topic, Partition: l.Partition, Bytes: l.Bytes})
		}
		out = append(out, kd)
	}
	return out
}
