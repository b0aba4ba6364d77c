package controller

import (
	"crypto/tls"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdClient dials the metadata store with the configured endpoints, TLS
// and credentials. The client connects lazily; Campaign waits for it.
func (c Config) etcdClient() (*clientv3.Client, error) {
	var tlsCfg *tls.Config
	if c.EtcdCA != "" || c.EtcdCert != "" {
		info := transport.TLSInfo{CertFile: c.EtcdCert, KeyFile: c.EtcdKey, TrustedCAFile: c.EtcdCA}
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, fmt.Errorf("--etcd.tls.*: %w", err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.EtcdEndpoints,
		DialTimeout: 5 * time.Second,
		Username:    c.EtcdUsername,
		Password:    c.EtcdPassword,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("--etcd.endpoints %v: %w", c.EtcdEndpoints, err)
	}
	return cli, nil
}
