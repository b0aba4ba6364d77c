package kafkaapi

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is the versions of one API the listener accepts.
type VersionRange struct{ Min, Max int16 }

// handler answers one decoded request; a nil response sends nothing
// (acks=0 produce).
type handler func(ctx context.Context, rc *reqCtx, req kmsg.Request) kmsg.Response

type api struct {
	versions VersionRange
	handle   handler
}

// apis is what the listener advertises in ApiVersions, and nothing else: an
// API or version outside it is refused. The upper bounds stop where Kafka
// moves to topic ids in requests (Produce 13, DeleteTopics 6; Fetch 13's
// are served, KIP-516, so a fetch by a deleted topic's id is refused) or
// adds semantics tidemark does not have (ListOffsets 9's timestamp
// for tiered storage's pending uploads, InitProducerId 5's transactions v2, Metadata 13's top-level error).
func (s *Server) apis() map[int16]api {
	m := map[int16]api{
		int16(kmsg.ApiVersions):                  {VersionRange{0, 3}, s.handleApiVersions},
		int16(kmsg.Metadata):                     {VersionRange{1, 12}, s.handleMetadata},
		int16(kmsg.Produce):                      {VersionRange{3, 11}, s.handleProduce},
		int16(kmsg.Fetch):                        {VersionRange{4, 13}, s.handleFetch},
		int16(kmsg.ListOffsets):                  {VersionRange{1, 8}, s.handleListOffsets},
		int16(kmsg.OffsetForLeaderEpoch):         {VersionRange{2, 4}, s.handleOffsetForLeaderEpoch},
		int16(kmsg.InitProducerID):               {VersionRange{0, 4}, s.handleInitProducerID},
		int16(kmsg.CreateTopics):                 {VersionRange{2, 7}, s.handleCreateTopics},
		int16(kmsg.DeleteTopics):                 {VersionRange{1, 5}, s.handleDeleteTopics},
		int16(kmsg.CreatePartitions):             {VersionRange{0, 3}, s.handleCreatePartitions},
		int16(kmsg.DeleteRecords):                {VersionRange{0, 2}, s.handleDeleteRecords},
		int16(kmsg.DescribeConfigs):              {VersionRange{1, 4}, s.handleDescribeConfigs},
		int16(kmsg.IncrementalAlterConfigs):      {VersionRange{0, 1}, s.handleIncrementalAlterConfigs},
		int16(kmsg.AlterConfigs):                 {VersionRange{0, 2}, s.handleAlterConfigs},
		int16(kmsg.ElectLeaders):                 {VersionRange{0, 2}, s.handleElectLeaders},
		int16(kmsg.DescribeCluster):              {VersionRange{0, 1}, s.handleDescribeCluster},
		int16(kmsg.SASLHandshake):                {VersionRange{0, 1}, s.handleSASLAfterAuth},
		int16(kmsg.SASLAuthenticate):             {VersionRange{0, 2}, s.handleSASLAfterAuth},
		int16(kmsg.DescribeUserSCRAMCredentials): {VersionRange{0, 0}, s.handleDescribeUserSCRAMCredentials},
		int16(kmsg.AlterUserSCRAMCredentials):    {VersionRange{0, 0}, s.handleAlterUserSCRAMCredentials},
		int16(kmsg.DescribeClientQuotas):         {VersionRange{0, 1}, s.handleDescribeClientQuotas},
		int16(kmsg.AlterClientQuotas):            {VersionRange{0, 1}, s.handleAlterClientQuotas},
		// v1 adds allow_replication_factor_change (KIP-860), which tidemark's
		// controller does not check: every move may change the count.
		int16(kmsg.AlterPartitionAssignments):  {VersionRange{0, 0}, s.handleAlterPartitionReassignments},
		int16(kmsg.ListPartitionReassignments): {VersionRange{0, 0}, s.handleListPartitionReassignments},
		int16(kmsg.DescribeACLs):               {VersionRange{1, 3}, s.handleDescribeACLs},
		int16(kmsg.CreateACLs):                 {VersionRange{1, 3}, s.handleCreateACLs},
		int16(kmsg.DeleteACLs):                 {VersionRange{1, 3}, s.handleDeleteACLs},
	}
	if s.opts.LogDirs != nil {
		m[int16(kmsg.DescribeLogDirs)] = api{VersionRange{0, 3}, s.handleDescribeLogDirs}
	}
	if ext := s.opts.Extension; ext != nil {
		for key, vr := range ext.APIs() {
			if _, taken := m[key]; !taken {
				m[key] = api{vr, s.extensionHandler}
			}
		}
	}
	return m
}

func (s *Server) extensionHandler(ctx context.Context, rc *reqCtx, req kmsg.Request) kmsg.Response {
	return s.opts.Extension.Handle(ctx, rc.principal, req)
}

// handleApiVersions lists s.table. An unsupported ApiVersions version is
// answered at v0 with UNSUPPORTED_VERSION and the list (conn.go), as Kafka
// does, so the client can retry with a version both know.
func (s *Server) handleApiVersions(_ context.Context, _ *reqCtx, req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	s.fillApiVersions(resp)
	return resp
}

func (s *Server) fillApiVersions(resp *kmsg.ApiVersionsResponse) {
	keys := make([]int, 0, len(s.table))
	for k := range s.table {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	for _, k := range keys {
		a := s.table[int16(k)]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: int16(k), MinVersion: a.versions.Min, MaxVersion: a.versions.Max})
	}
}
