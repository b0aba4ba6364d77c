package kafkaapi

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
	"tidemark.io/services/topicconfig"
)

// Kafka's config resource types.
const (
	resourceTopic  = 2
	resourceBroker = 4
)

func configResource(typ int8, name string) (*adminv1.ConfigResource, error) {
	switch typ {
	case resourceTopic:
		return &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_TOPIC, Name: name}, nil
	case resourceBroker:
		return &adminv1.ConfigResource{Type: adminv1.ConfigResourceType_CONFIG_RESOURCE_TYPE_BROKER, Name: name}, nil
	}
	return nil, kerr.BadField(kerr.InvalidRequest, "resource_type", "%d is not a topic (2) or a broker (4)", typ)
}

func resourceKind(typ int8) string {
	switch typ {
	case resourceTopic:
		return "topic"
	case resourceBroker:
		return "broker"
	}
	return fmt.Sprintf("resource of type %d", typ)
}

// configSource is Kafka's DescribeConfigs source for tidemark's.
func configSource(s adminv1.ConfigSource) kmsg.ConfigSource {
	switch s {
	case adminv1.ConfigSource_CONFIG_SOURCE_TOPIC:
		return 1 // DYNAMIC_TOPIC_CONFIG
	case adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER:
		return 2 // DYNAMIC_BROKER_CONFIG
	case adminv1.ConfigSource_CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER:
		return 3 // DYNAMIC_DEFAULT_BROKER_CONFIG
	case adminv1.ConfigSource_CONFIG_SOURCE_STATIC_BROKER_CONFIG:
		return 4 // STATIC_BROKER_CONFIG
	case adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT:
		return 5 // DEFAULT_CONFIG
	}
	return -1
}

// configType is Kafka's type of a config (DescribeConfigs v3+), from the
// registry; UNKNOWN for a name it does not hold.
func configType(typ int8, name string) kmsg.ConfigType {
	scope := topicconfig.ScopeBroker
	if typ == resourceTopic {
		scope = topicconfig.ScopeTopic
	}
	d, _ := topicconfig.Lookup(scope, name)
	switch d.Type {
	case topicconfig.TypeBool:
		return 1 // BOOLEAN
	case topicconfig.TypeString:
		return 2 // STRING
	case topicconfig.TypeInt:
		return 3 // INT
	case topicconfig.TypeLong:
		return 5 // LONG
	case topicconfig.TypeDouble:
		return 6 // DOUBLE
	case topicconfig.TypeList:
		return 7 // LIST
	}
	return 0 // UNKNOWN
}

// handleDescribeConfigs forwards DescribeConfigs, one resource at a time
// so a bad or refused one does not fail the others, and keeps only the
// names asked for.
func (s *Server) handleDescribeConfigs(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		err := s.describeConfigs(ctx, req, r, &rr)
		if err != nil {
			rr.ErrorCode, rr.ErrorMessage, rr.Configs = code(err), message(err), nil
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func (s *Server) describeConfigs(ctx context.Context, req *kmsg.DescribeConfigsRequest, r kmsg.DescribeConfigsRequestResource, rr *kmsg.DescribeConfigsResponseResource) error {
	res, err := configResource(int8(r.ResourceType), r.ResourceName)
	if err != nil {
		return err
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err != nil {
		return err
	}
	defer cancel()
	// A topic as this broker resolves it: Kafka answers from the broker
	// asked, with its own dynamic and static layers.
	self := s.opts.BrokerID
	gresp, err := cli.DescribeConfigs(fctx, &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{res}, ForBroker: &self})
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range r.ConfigNames {
		want[n] = true
	}
	for _, d := range gresp.GetResults() {
		if d.GetErrorCode() != 0 {
			return kerr.New(kerr.Code(d.GetErrorCode()), "%s", d.GetErrorMessage())
		}
		for _, e := range d.GetEntries() {
			if r.ConfigNames != nil && !want[e.GetName()] {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			v := e.GetValue()
			c.Name, c.Value, c.Source = e.GetName(), &v, configSource(e.GetSource())
			c.ReadOnly = !e.GetDynamic()
			c.IsDefault = e.GetSource() == adminv1.ConfigSource_CONFIG_SOURCE_DEFAULT
			if req.IncludeDocumentation && e.GetDoc() != "" {
				doc := e.GetDoc()
				c.Documentation = &doc
			}
			if req.IncludeSynonyms {
				for _, syn := range e.GetSynonyms() {
					ks := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
					sv := syn.GetValue()
					ks.Name, ks.Value, ks.Source = syn.GetName(), &sv, configSource(syn.GetSource())
					c.ConfigSynonyms = append(c.ConfigSynonyms, ks)
				}
			}
			c.ConfigType = configType(int8(r.ResourceType), e.GetName())
			rr.Configs = append(rr.Configs, c)
		}
	}
	return nil
}

// handleIncrementalAlterConfigs forwards SET and DELETE operations; APPEND
// and SUBTRACT (list configs) are refused with INVALID_REQUEST: tidemark's
// configs hold single values. As in Kafka, a resource named twice in one
// request is refused wherever it appears, and so is a resource naming a
// key twice or a SET without a value (all INVALID_REQUEST): each resource
// is forwarded alone, so a duplicate would be applied twice, in an order
// the client cannot rely on.
func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	repeated := repeatedKeys(req.Resources, func(r *kmsg.IncrementalAlterConfigsRequestResource) configResourceID {
		return configResourceID{r.ResourceType, r.ResourceName}
	})
	for i, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if repeated[i] {
			err := repeatedResource(r.ResourceType, r.ResourceName)
			rr.ErrorCode, rr.ErrorMessage = code(err), message(err)
		} else if err := s.alterConfigs(ctx, req.ValidateOnly, r); err != nil {
			rr.ErrorCode, rr.ErrorMessage = code(err), message(err)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func (s *Server) alterConfigs(ctx context.Context, validateOnly bool, r kmsg.IncrementalAlterConfigsRequestResource) error {
	res, err := configResource(int8(r.ResourceType), r.ResourceName)
	if err != nil {
		return err
	}
	ar := &adminv1.AlterConfigsResource{Resource: res}
	seen := make(map[string]bool, len(r.Configs))
	for _, c := range r.Configs {
		if seen[c.Name] {
			return kerr.BadField(kerr.InvalidRequest, c.Name, "duplicate key: a resource may name each config once")
		}
		seen[c.Name] = true
		op := &adminv1.ConfigOp{Name: c.Name}
		switch c.Op {
		case 0:
			op.Op = adminv1.ConfigOpType_CONFIG_OP_TYPE_SET
			if c.Value == nil {
				// Not the empty string: a null SET is refused, as Kafka
				// does (DELETE removes a key).
				return kerr.BadField(kerr.InvalidRequest, c.Name, "null value: SET needs a value")
			}
			op.Value = *c.Value
		case 1:
			op.Op = adminv1.ConfigOpType_CONFIG_OP_TYPE_DELETE
		default:
			return kerr.BadField(kerr.InvalidRequest, "op", "%s: only SET (0) and DELETE (1) are supported, got %d", c.Name, c.Op)
		}
		ar.Ops = append(ar.Ops, op)
	}
	return s.forwardAlterConfigs(ctx, validateOnly, ar)
}

// configResourceID names a config resource within one request.
type configResourceID struct {
	typ  kmsg.ConfigResourceType
	name string
}

// repeatedResource refuses a resource named more than once in a request.
func repeatedResource(typ kmsg.ConfigResourceType, name string) error {
	return kerr.New(kerr.InvalidRequest, "%s %q appears more than once in the request: each resource must appear at most once", resourceKind(int8(typ)), name)
}

// forwardAlterConfigs sends one resource's alteration to the controller,
// which authorizes it (AlterConfigs on the topic or the cluster).
func (s *Server) forwardAlterConfigs(ctx context.Context, validateOnly bool, ar *adminv1.AlterConfigsResource) error {
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err != nil {
		return err
	}
	defer cancel()
	gresp, err := cli.AlterConfigs(fctx, &adminv1.AlterConfigsRequest{Resources: []*adminv1.AlterConfigsResource{ar}, ValidateOnly: validateOnly})
	if err != nil {
		return err
	}
	for _, x := range gresp.GetResults() {
		if x.GetErrorCode() != 0 {
			return kerr.New(kerr.Code(x.GetErrorCode()), "%s", x.GetErrorMessage())
		}
	}
	return nil
}

// handleAlterConfigs serves Kafka's legacy AlterConfigs (API 33): each
// resource's configs are its whole set of dynamic configs, and every one it
// does not name is removed. The set is forwarded as one replacing
// alteration, so the removal and the new values are one write at the
// controller, authorized as IncrementalAlterConfigs. A null value leaves
// its key out of the set, as Kafka's controller does; a resource named
// twice, or a key named twice in one resource, is refused (INVALID_REQUEST).
func (s *Server) handleAlterConfigs(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	repeated := repeatedKeys(req.Resources, func(r *kmsg.AlterConfigsRequestResource) configResourceID {
		return configResourceID{r.ResourceType, r.ResourceName}
	})
	for i, r := range req.Resources {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		var err error
		if repeated[i] {
			err = repeatedResource(r.ResourceType, r.ResourceName)
		} else {
			err = s.replaceConfigs(ctx, req.ValidateOnly, r)
		}
		if err != nil {
			rr.ErrorCode, rr.ErrorMessage = code(err), message(err)
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}

func (s *Server) replaceConfigs(ctx context.Context, validateOnly bool, r kmsg.AlterConfigsRequestResource) error {
	res, err := configResource(int8(r.ResourceType), r.ResourceName)
	if err != nil {
		return err
	}
	ar := &adminv1.AlterConfigsResource{Resource: res, Replace: true}
	seen := make(map[string]bool, len(r.Configs))
	for _, c := range r.Configs {
		if seen[c.Name] {
			return kerr.BadField(kerr.InvalidRequest, c.Name, "duplicate key: a resource may name each config once")
		}
		seen[c.Name] = true
		if c.Value == nil {
			continue
		}
		ar.Ops = append(ar.Ops, &adminv1.ConfigOp{Name: c.Name, Value: *c.Value, Op: adminv1.ConfigOpType_CONFIG_OP_TYPE_SET})
	}
	return s.forwardAlterConfigs(ctx, validateOnly, ar)
}
