package kafkaapi

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	"tidemark.io/services/platform/scram"
)

// Kafka's ScramMechanism type bytes in the SCRAM admin APIs.
var scramMechanismTypes = map[int8]string{1: scram.SHA256, 2: scram.SHA512}

func mechanismName(t int8) string {
	if m, ok := scramMechanismTypes[t]; ok {
		return m
	}
	return fmt.Sprintf("mechanism type %d", t) // refused by the controller as unknown
}

func mechanismType(name string) int8 {
	for t, m := range scramMechanismTypes {
		if m == name {
			return t
		}
	}
	return 0
}

// handleDescribeUserSCRAMCredentials forwards DescribeUserScramCredentials
// to the active controller (authorized there: Describe on Cluster).
func (s *Server) handleDescribeUserSCRAMCredentials(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	greq := &adminv1.DescribeUserScramCredentialsRequest{}
	for _, u := range req.Users {
		greq.Users = append(greq.Users, u.Name)
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err == nil {
		defer cancel()
		var gresp *adminv1.DescribeUserScramCredentialsResponse
		if gresp, err = cli.DescribeUserScramCredentials(fctx, greq); err == nil {
			for _, r := range gresp.GetResults() {
				kr := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
				kr.User, kr.ErrorCode, kr.ErrorMessage = r.GetUser(), protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
				for _, c := range r.GetCredentials() {
					ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					ci.Mechanism, ci.Iterations = mechanismType(c.GetMechanism()), c.GetIterations()
					kr.CredentialInfos = append(kr.CredentialInfos, ci)
				}
				resp.Results = append(resp.Results, kr)
			}
			return resp
		}
	}
	resp.ErrorCode, resp.ErrorMessage = code(err), message(err)
	return resp
}

// handleAlterUserSCRAMCredentials forwards AlterUserScramCredentials to the
// active controller (authorized there: Alter on Cluster). The salted
// password travels to the controller, which keeps only the keys derived
// from it.
func (s *Server) handleAlterUserSCRAMCredentials(ctx context.Context, _ *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	greq := &adminv1.AlterUserScramCredentialsRequest{}
	for _, d := range req.Deletions {
		greq.Deletions = append(greq.Deletions, &adminv1.ScramCredentialDeletion{User: d.Name, Mechanism: mechanismName(d.Mechanism)})
	}
	for _, u := range req.Upsertions {
		greq.Upsertions = append(greq.Upsertions, &adminv1.ScramCredentialUpsertion{User: u.Name, Mechanism: mechanismName(u.Mechanism),
			Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	cli, fctx, cancel, err := s.admin(ctx, 0)
	if err == nil {
		defer cancel()
		var gresp *adminv1.AlterUserScramCredentialsResponse
		if gresp, err = cli.AlterUserScramCredentials(fctx, greq); err == nil {
			for _, r := range gresp.GetResults() {
				kr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				kr.User, kr.ErrorCode, kr.ErrorMessage = r.GetUser(), protoCode(r.GetErrorCode()), optMessage(r.GetErrorMessage())
				resp.Results = append(resp.Results, kr)
			}
			return resp
		}
	}
	// The request failed whole (not authorized, no controller): every
	// user named gets its error, as the answer has no top-level one.
	seen := map[string]bool{}
	add := func(user string) {
		if !seen[user] {
			seen[user] = true
			kr := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			kr.User, kr.ErrorCode, kr.ErrorMessage = user, code(err), message(err)
			resp.Results = append(resp.Results, kr)
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	return resp
}
