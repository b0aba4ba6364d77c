package broker

import (
	"context"
	"crypto/tls"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/broker/internal/group"
	"tidemark.io/services/broker/internal/grpcapi"
	"tidemark.io/services/broker/internal/kafkaapi"
	"tidemark.io/services/broker/internal/kafkagroups"
	"tidemark.io/services/platform/authz"
	"tidemark.io/services/platform/kerr"
)

// startKafka serves Kafka's wire protocol beside gRPC: the same handlers
// behind it (api), the same authorizer, the same certificates.
func (b *Broker) startKafka(api *grpcapi.Broker, az *authz.Authorizer) error {
	var tlsCfg *tls.Config
	if b.cfg.TLS.Enabled() {
		var err error
		if tlsCfg, err = b.cfg.TLS.Server(); err != nil {
			return err
		}
	}
	limits := b.cfg.KafkaLimits
	limits.MaxConnectionsPerIP = b.cfg.Limits.MaxConnectionsPerIP
	limits.MaxConnectionsPerIPOverrides = b.cfg.Limits.MaxConnectionsPerIPOverrides
	b.kafka = kafkaapi.New(kafkaapi.Options{
		BrokerID: b.cfg.ID, Broker: api, Replication: &grpcapi.Replication{RM: b.rm}, RM: b.rm,
		Admin: b.controllerAdmin, Authorizer: az, TLS: tlsCfg, Limits: limits, Logger: b.log, Registry: b.tel.Registry,
		LogDirs:            b.kafkaLogDirs,
		CreateOffsetsTopic: groupHost{b: b}.CreateOffsetsTopic,
		Extension:          &kafkagroups.Groups{Service: &group.Service{C: b.groups}, Authorizer: az, KafkaEndpoint: b.kafkaEndpoint},
	})
	go func() {
		// Kafka clients are served once the broker knows the cluster, as
		// a KRaft broker opens its client listeners only after its first
		// metadata catch-up: before that a Metadata answer would list no
		// brokers and no leaders. Connections made meanwhile wait in the
		// accept queue.
		if len(b.cfg.Etcd.Endpoints) > 0 {
			select {
			case <-b.meta.Ready():
			case <-b.draining.Done():
				_ = b.kafkaLis.Close()
				return
			}
		}
		if err := b.kafka.Serve(b.kafkaLis); err != nil {
			b.done <- err
		}
	}()
	return nil
}

// kafkaEndpoint is broker id's Kafka listener address, from the metadata
// Kafka clients get in Metadata.
func (b *Broker) kafkaEndpoint(id int32) (string, int32, bool) {
	br, ok := b.rm.Meta().Broker(id)
	if !ok {
		return "", 0, false
	}
	return kafkaapi.KafkaEndpoint(br)
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

// KafkaAddr is the bound Kafka listener address, or "" without one.
func (b *Broker) KafkaAddr() string {
	if b.kafkaLis == nil {
		return ""
	}
	return b.kafkaLis.Addr().String()
}

// KafkaAdvertised is the Kafka address clients are told to dial.
func (b *Broker) KafkaAdvertised() string {
	if b.cfg.KafkaAdvertised != "" {
		return b.cfg.KafkaAdvertised
	}
	return b.KafkaAddr()
}

// endpoints are the named listeners registered beside the gRPC address.
func (b *Broker) endpoints() map[string]string {
	if a := b.KafkaAdvertised(); a != "" {
		return map[string]string{kafkaapi.EndpointName: a}
	}
	return nil
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
