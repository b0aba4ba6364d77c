package kafkaapi

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/kerr"
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
	gresp, err := cli.DescribeConfigs(fctx, &adminv1.DescribeConfigsRequest{Resources: []*adminv1.ConfigResource{res}})
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
	type resourceID struct {
		typ  kmsg.ConfigResourceType
		name string
	}
	named := map[resourceID]int{}
	for _, r := range req.Resources {
		named[resourceID{r.ResourceType, r.ResourceName}]++
	}
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		if named[resourceID{r.ResourceType, r.ResourceName}] > 1 {
			err := kerr.New(kerr.InvalidRequest, "%s %q appears more than once in the request: each resource must appear at most once", resourceKind(int8(r.ResourceType)), r.ResourceName)
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
