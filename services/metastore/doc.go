// Package metastore keeps tidemark's cluster metadata in etcd, in the shape
// Kafka's ZooKeeper-mode controller kept it in ZooKeeper.
//
// Every key lives under one prefix (default /tidemark) and every value is
// JSON, so `etcdctl get --prefix /tidemark` is readable:
//
//	<p>/controller                                   lease-bound; the active controller
//	<p>/controller_epoch                             integer; its ModRevision fences controller writes
//	<p>/brokers/ids/<id>                             lease-bound; broker epoch = CreateRevision
//	<p>/brokers/topics/<topic>                       replica assignment and topic id
//	<p>/brokers/topics/<topic>/partitions/<n>/state  leader, leader epoch, ISR, controller and partition epochs
//	<p>/config/topics/<topic>                        topic config overrides
//	<p>/config/brokers/<id> and /<default>           broker config overrides
//	<p>/admin/delete_topics/<topic>                  pending topic deletions
//	<p>/producer_id_block                            next free producer id
//	<p>/controllers/<id>                             lease-bound; a running controller process
//	<p>/cluster/id                                   the cluster id, written once
//
// Controllers elect themselves with Store.Campaign, which returns a Session.
// Every metadata write a controller makes goes through its Session and is
// fenced: it commits only while the session's controller epoch is still the
// current one and its lease still holds the controller key. A superseded
// controller gets a *ControllerMovedError (errors.Is ErrControllerMoved, kerr
// code NOT_CONTROLLER) and must step down.
//
// Brokers register with Store.RegisterBroker; the key's CreateRevision is the
// broker epoch, so a bounced broker always comes back with a larger one.
//
// Errors carry kerr codes where Kafka has one (TOPIC_ALREADY_EXISTS,
// INVALID_UPDATE_VERSION, DUPLICATE_BROKER_REGISTRATION, ...). etcd and
// context errors are returned wrapped as they are.
package metastore
