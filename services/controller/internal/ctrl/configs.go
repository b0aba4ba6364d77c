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
			resp.Results = append(resp.Results, a.describeConfig(r))
		}
		return nil
	})
	if err != nil {
		return nil, err // the loop may still be writing resp (call's ctx ended)
	}
	return resp, nil
}

func (a *Active) describeConfig(r *adminv1.ConfigResource) *adminv1.ConfigDescription {
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
		for _, e := range a.topicEntries(t, -1) {
			src := adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT
			switch {
			case e.Source == topicconfig.SourceTopic:
				src = adminv1.ConfigSource_CONFIG_SOURCE_TOPIC
			case e.Source == topicconfig.SourceBroker && e.Layer == 0:
				src = adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER
			}
			d, _ := topicconfig.Lookup(topicconfig.ScopeTopic, e.Name)
			out.Entries = append(out.Entries, &adminv1.ConfigEntry{Name: e.Name, Value: e.Value, Source: src, Dynamic: true, Doc: d.Doc})
		}
	case adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER:
		entity, err := brokerEntity(r.GetName())
		if err != nil {
			return fail(err)
		}
		type layer struct {
			m   map[string]string
			src adminv1.ConfigSource
		}
		var layers []layer
		if entity != metastore.DefaultBrokerEntity {
			layers = append(layers, layer{a.brokerConfigs[entity], adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER})
		}
		layers = append(layers,
			layer{a.brokerConfigs[metastore.DefaultBrokerEntity], adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER})
		if entity != metastore.DefaultBrokerEntity {
			// Under the dynamic layers, the broker's own startup flags as it
			// registered them (Kafka answers this from the broker itself).
			layers = append(layers, layer{a.brokerStatic(entity), adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG})
		}
		layers = append(layers, layer{a.d.Settings.StaticBroker, adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT})
		for _, d := range topicconfig.Definitions() {
			e := &adminv1.ConfigEntry{Name: d.BrokerName, Value: d.Default,
				Source: adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT, Dynamic: d.Dynamic, Doc: d.Doc}
			for _, l := range layers {
				if v, ok := l.m[d.BrokerName]; ok {
					e.Value, e.Source = v, l.src
					break
				}
			}
			out.Entries = append(out.Entries, e)
		}
	default:
		return fail(kerr.BadField(kerr.InvalidRequest, "type", "resource type must be TOPIC or BROKER"))
	}
	return out
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
	if next == nil {
		next = map[string]string{}
	}
	seen := map[string]bool{}
	for _, op := range r.GetOps() {
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
