package ctrl

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	"tidemark.io/services/metastore"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// DescribeConfigs lists every setting of each resource with its effective
// value and where it comes from (Kafka's precedence, topicconfig.Describe).
func (a *Active) DescribeConfigs(ctx context.Context, req *adminv1.DescribeConfigsRequest) (*adminv1.DescribeConfigsResponse, error) {
	resp := &adminv1.DescribeConfigsResponse{}
	err := a.call(ctx, func() error {
		for _, r := range req.GetResources() {
			forBroker := int32(-1)
			if req.ForBroker != nil && req.GetForBroker() >= 0 {
				forBroker = req.GetForBroker()
			}
			resp.Results = append(resp.Results, a.describeConfig(r, forBroker))
		}
		return nil
	})
	if err != nil {
		return nil, err // the loop may still be writing resp (call's ctx ended)
	}
	return resp, nil
}

// describeConfig describes one resource; a topic as forBroker resolves it
// (-1: the controller's view).
func (a *Active) describeConfig(r *adminv1.ConfigResource, forBroker int32) *adminv1.ConfigDescription {
	out := &adminv1.ConfigDescription{Resource: r}
	fail := func(err error) *adminv1.ConfigDescription {
		ke := kerr.As(err)
		out.ErrorCode, out.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
		return out
	}
	switch r.GetType() {
	case adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC:
		t := a.topics[r.GetName()]
		if t == nil {
			return fail(kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", r.GetName()))
		}
		overrides, brokerLayers := a.validLayers(t, forBroker)
		// The layers as dynLayers orders them: for a broker, its dynamic
		// override, the cluster-wide default, its static flags, the
		// controller's settings; for the controller, the middle two.
		srcs := []adminv1.ConfigSource{adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER, adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT}
		if forBroker >= 0 {
			srcs = []adminv1.ConfigSource{adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER, adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER,
				adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG, adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT}
		}
		layers := []synonymLayer{{overrides, adminv1.ConfigSource_CONFIG_SOURCE_TOPIC, true}}
		for i, l := range brokerLayers {
			layers = append(layers, synonymLayer{l, srcs[i], false})
		}
		for _, e := range a.topicEntries(t, forBroker) {
			d, _ := topicconfig.Lookup(topicconfig.ScopeTopic, e.Name)
			syn := synonyms(d, layers)
			// The entry is its first synonym (the same precedence as
			// topicconfig.Describe's).
			out.Entries = append(out.Entries, &adminv1.ConfigEntry{Name: e.Name, Value: e.Value, Source: syn[0].GetSource(), Dynamic: true, Doc: d.Doc,
				Synonyms: syn})
		}
	case adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER:
		entity, err := brokerEntity(r.GetName())
		if err != nil {
			return fail(err)
		}
		var layers []synonymLayer
		if entity != metastore.DefaultBrokerEntity {
			layers = append(layers, synonymLayer{a.brokerConfigs[entity], adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER, false})
		}
		layers = append(layers,
			synonymLayer{a.brokerConfigs[metastore.DefaultBrokerEntity], adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER, false})
		if entity != metastore.DefaultBrokerEntity {
			// Under the dynamic layers, the broker's own startup flags as it
			// registered them (Kafka answers this from the broker itself).
			layers = append(layers, synonymLayer{a.brokerStatic(entity), adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG, false})
		}
		layers = append(layers, synonymLayer{a.d.Settings.StaticBroker, adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT, false})
		for _, d := range topicconfig.Definitions() {
			syn := synonyms(d, layers)
			// The last synonym is always the default, so there is a first.
			out.Entries = append(out.Entries, &adminv1.ConfigEntry{Name: d.BrokerName, Value: syn[0].GetValue(),
				Source: syn[0].GetSource(), Dynamic: d.Dynamic, Doc: d.Doc, Synonyms: syn})
		}
	default:
		return fail(kerr.BadField(kerr.InvalidRequest, "type", "resource type must be TOPIC or BROKER"))
	}
	return out
}

// synonymLayer is one layer of configs a describe reads, and the source it
// reports; topic says its keys are topic-level ones (retention.ms), not
// broker-level (log.retention.ms).
type synonymLayer struct {
	m     map[string]string
	src   adminv1.ConfigSource
	topic bool
}

// synonyms lists every layer that sets d, highest precedence first, ending
// with the default (Kafka's DescribeConfigs synonyms, ConfigHelper's order).
// A layer reported as the default (the controller's static settings) stands
// for the registry default under it, which is then left out: Kafka lists
// one DEFAULT_CONFIG.
func synonyms(d topicconfig.Def, layers []synonymLayer) []*adminv1.ConfigSynonym {
	var out []*adminv1.ConfigSynonym
	for _, l := range layers {
		name := d.BrokerName
		if l.topic {
			if !d.TopicLevel {
				continue
			}
			name = d.Name
		}
		if v, ok := l.m[name]; ok {
			out = append(out, &adminv1.ConfigSynonym{Name: name, Value: v, Source: l.src})
			if l.src == adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT {
				return out
			}
		}
	}
	return append(out, &adminv1.ConfigSynonym{Name: d.BrokerName, Value: d.Default, Source: adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT})
}

// brokerEntity maps a broker resource name to its config entity: "" is the
// cluster-wide default, otherwise a broker id.
func brokerEntity(name string) (string, error) {
	if name == "" {
		return metastore.DefaultBrokerEntity, nil
	}
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil || n < 0 {
		return "", kerr.BadField(kerr.InvalidRequest, "name", "%q is not a broker id (empty names the cluster-wide default)", name)
	}
	return metastore.BrokerEntity(int32(n)), nil
}

// brokerStatic is a broker's static settings from its live registration, or
// from its last one while it is down; nil for a broker never registered
// under this controller.
func (c *core) brokerStatic(entity string) map[string]string {
	id, err := strconv.ParseInt(entity, 10, 32)
	if err != nil {
		return nil
	}
	return c.seen[int32(id)].StaticConfigs
}

// AlterConfigs changes topic overrides and dynamic broker configs (the core
// decides: alterConfigs).
func (a *Active) AlterConfigs(ctx context.Context, req *adminv1.AlterConfigsRequest) (*adminv1.AlterConfigsResponse, error) {
	var resp *adminv1.AlterConfigsResponse
	err := a.call(ctx, func() error {
		err := errNoOutcome
		a.step(evAlterConfigs{req: req, reply: answerTo(&resp, &err)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// alterConfigs alters the request's resources one after the other. Each is
// validated whole, written (an awaited fenced write), and takes effect at
// once: brokers get the new effective configs, and enabling unclean leader
// election runs the offline elections it now allows (F20).
func (c *core) alterConfigs(req *adminv1.AlterConfigsRequest, reply replyFunc) {
	resp := &adminv1.AlterConfigsResponse{}
	rs := req.GetResources()
	// A resource named twice is refused in every copy, as Kafka's
	// ConfigAdminManager does: which copy should win is not the broker's
	// guess to make.
	named := map[string]int{}
	for _, r := range rs {
		named[r.GetResource().GetType().String()+"/"+r.GetResource().GetName()]++
	}
	var next func(i int)
	next = func(i int) {
		if i == len(rs) {
			c.answer(reply, resp, nil)
			return
		}
		res := &adminv1.AlterConfigsResult{Resource: rs[i].GetResource()}
		resp.Results = append(resp.Results, res)
		if named[rs[i].GetResource().GetType().String()+"/"+rs[i].GetResource().GetName()] > 1 {
			res.ErrorCode = commonv1.ErrorCode(kerr.InvalidRequest)
			res.ErrorMessage = fmt.Sprintf("%s %q is named more than once in the request: each resource must appear at most once",
				rs[i].GetResource().GetType(), rs[i].GetResource().GetName())
			next(i + 1)
			return
		}
		c.alterConfig(rs[i], req.GetValidateOnly(), func(err error) {
			if c.stopping() {
				c.answer(reply, nil, c.notControllerFor(err))
				return
			}
			if err != nil {
				ke := kerr.As(err)
				res.ErrorCode, res.ErrorMessage = commonv1.ErrorCode(ke.Code), ke.Message
			}
			next(i + 1)
		})
	}
	next(0)
}

// alterConfig validates one resource's ops against its current configs,
// writes the result (effPutConfig) and makes it effective; then gets the
// refusal or the write's error.
func (c *core) alterConfig(r *adminv1.AlterConfigsResource, validateOnly bool, then func(error)) {
	next, t, entity, err := c.nextConfig(r)
	if err != nil {
		then(err)
		return
	}
	cur, name := c.brokerConfigs[entity], ""
	if t != nil {
		cur, name = t.config, t.name
	}
	if validateOnly || maps.Equal(next, cur) {
		then(nil)
		return
	}
	c.await(effPutConfig{topic: name, entity: entity, cfg: next}, "alter configs", func(ev event) {
		r := ev.(evMetaWriteResult)
		if r.err != nil {
			c.refusedOrFatal("alter configs", r.err, r.resigning)
			then(r.err)
			return
		}
		done := func() { then(nil) }
		if t != nil {
			c.topicConfigChanged(t.name, next, done)
		} else {
			c.brokerConfigChanged(entity, next, done)
		}
	})
}

// nextConfig is a resource's configs after its ops, validated: the topic
// altered, or the broker config entity.
func (c *core) nextConfig(r *adminv1.AlterConfigsResource) (map[string]string, *topic, string, error) {
	res := r.GetResource()
	var scope topicconfig.Scope
	var cur map[string]string
	var t *topic
	var entity string
	switch res.GetType() {
	case adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC:
		if t = c.topics[res.GetName()]; t == nil {
			return nil, nil, "", kerr.New(kerr.UnknownTopicOrPartition, "topic %q does not exist", res.GetName())
		}
		scope, cur = topicconfig.ScopeTopic, t.config
	case adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER:
		var err error
		if entity, err = brokerEntity(res.GetName()); err != nil {
			return nil, nil, "", err
		}
		scope, cur = topicconfig.ScopeBrokerDynamic, c.brokerConfigs[entity]
	default:
		return nil, nil, "", kerr.BadField(kerr.InvalidRequest, "type", "resource type must be TOPIC or BROKER")
	}
	next := maps.Clone(cur)
	if next == nil || r.GetReplace() {
		// A whole set replaces every key (Kafka's AlterConfigs).
		next = map[string]string{}
	}
	seen := map[string]bool{}
	for _, op := range r.GetOps() {
		if r.GetReplace() && op.GetOp() != adminv1.ConfigOpType_CONFIG_OP_TYPE_SET {
			return nil, nil, "", kerr.BadField(kerr.InvalidRequest, "op", "config %q: a whole set (replace) holds only SET ops", op.GetName())
		}
		if seen[op.GetName()] {
			return nil, nil, "", kerr.BadField(kerr.InvalidRequest, op.GetName(), "config %q is named more than once in one resource", op.GetName())
		}
		seen[op.GetName()] = true
		switch op.GetOp() {
		case adminv1.ConfigOpType_CONFIG_OP_TYPE_SET:
			if err := topicconfig.Validate(scope, op.GetName(), op.GetValue()); err != nil {
				return nil, nil, "", err
			}
			next[op.GetName()] = op.GetValue()
		case adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE:
			if _, ok := topicconfig.Lookup(scope, op.GetName()); !ok {
				return nil, nil, "", kerr.BadField(kerr.InvalidConfig, op.GetName(), "unknown %s config", scope)
			}
			delete(next, op.GetName())
		default:
			return nil, nil, "", kerr.BadField(kerr.InvalidRequest, "op", "config %q: op must be SET or DELETE", op.GetName())
		}
	}
	if t != nil {
		// The overrides together, over the broker layers (Kafka's
		// LogConfig.validateValues: min.compaction.lag.ms <=
		// max.compaction.lag.ms). Keys already invalid in etcd are left
		// out, as the pushes leave them out.
		topic, layers, _ := topicconfig.WithoutInvalid(next, c.dynLayers(-1))
		if err := topicconfig.ValidateTopic(topic, layers...); err != nil {
			return nil, nil, "", err
		}
	}
	if t == nil {
		// The broker layers together must still resolve (e.g.
		// replica.fetch.wait.max.ms <= replica.lag.time.max.ms).
		layers := maps.Clone(c.brokerConfigs)
		layers[entity] = next
		check := []map[string]string{layers[metastore.DefaultBrokerEntity], c.staticBroker}
		if entity != metastore.DefaultBrokerEntity {
			check = []map[string]string{next, layers[metastore.DefaultBrokerEntity], c.brokerStatic(entity), c.staticBroker}
		}
		if _, err := topicconfig.ResolveBroker(check...); err != nil {
			return nil, nil, "", err
		}
	}
	return next, t, entity, nil
}
