package cli

import (
	"errors"
	"strings"
	"testing"

	adminv1 "tidemark.io/proto/gen/tidemark/admin/v1"
	commonv1 "tidemark.io/proto/gen/tidemark/common/v1"
	groupv1 "tidemark.io/proto/gen/tidemark/group/v1"
	"tidemark.io/services/client/assign"
)

func TestParseAssignment(t *testing.T) {
	got, err := parseAssignment("1:2:3,2:3:1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].GetPartition() != 0 || joinIDs(got[0].GetReplicas()) != "1,2,3" ||
		got[1].GetPartition() != 1 || joinIDs(got[1].GetReplicas()) != "2,3,1" {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"", "1:x", "1:1", "1:2,3", "1:-2", "1::2"} {
		_, err := parseAssignment(bad)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--replica-assignment") {
			t.Errorf("%q: err %v, want a usage error naming the flag", bad, err)
		}
	}
}

func TestParseConfigs(t *testing.T) {
	got, err := parseConfigs("--config", []string{"min.insync.replicas=2", "a=1,b=x=y", "cleanup.policy=compact,delete", "empty="})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"min.insync.replicas": "2", "a": "1", "b": "x=y", "cleanup.policy": "compact,delete", "empty": ""}
	if formatConfigs(got) != formatConfigs(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"novalue", "=1", ",a=1"} {
		if _, err := parseConfigs("--config", []string{bad}); err == nil || !strings.Contains(err.Error(), "--config") {
			t.Errorf("%q: err %v, want one naming --config", bad, err)
		}
	}
}

func TestDescribeLinesHaveKafkasShape(t *testing.T) {
	td := &adminv1.TopicDescription{Name: "orders", TopicId: "abc", ReplicationFactor: 3}
	if got, want := topicLine(td, 3, map[string]string{"retention.ms": "1", "min.insync.replicas": "2"}),
		"Topic: orders\tTopicId: abc\tPartitionCount: 3\tReplicationFactor: 3\tConfigs: min.insync.replicas=2,retention.ms=1"; got != want {
		t.Errorf("topic line\n got %q\nwant %q", got, want)
	}
	pd := &adminv1.PartitionDescription{Partition: 1, Leader: 2, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, Isr: []int32{2, 3}}
	if got, want := partitionLine("orders", pd), "\tTopic: orders\tPartition: 1\tLeader: 2\tReplicas: 1,2,3\tIsr: 2,3\tLeaderEpoch: 4"; got != want {
		t.Errorf("partition line\n got %q\nwant %q", got, want)
	}
	pd = &adminv1.PartitionDescription{Partition: 0, Leader: -1, LeaderEpoch: 7, Replicas: []int32{1, 2}, Isr: []int32{1}, OfflineReplicas: []int32{1, 2}}
	if got, want := partitionLine("t", pd), "\tTopic: t\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: 1\tLeaderEpoch: 7\tOffline: 1,2"; got != want {
		t.Errorf("offline partition line\n got %q\nwant %q", got, want)
	}
}

func TestElectionLines(t *testing.T) {
	cases := []struct {
		r      *adminv1.ElectLeadersResult
		want   string
		failed bool
	}{
		{&adminv1.ElectLeadersResult{Topic: "t", Partition: 0, Leader: 3, LeaderEpoch: 5},
			"Successfully completed leader election (PREFERRED) for partition t-0: leader 3, leader epoch 5", false},
		{&adminv1.ElectLeadersResult{Topic: "t", Partition: 1, Leader: 2, ErrorCode: commonv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED},
			"Valid replica already elected for partition t-1: leader 2", false},
		{&adminv1.ElectLeadersResult{Topic: "t", Partition: 2, Leader: -1, ErrorCode: commonv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE, ErrorMessage: "broker 3 is down"},
			"Error completing leader election (PREFERRED) for partition t-2: PREFERRED_LEADER_NOT_AVAILABLE: broker 3 is down", true},
	}
	for _, c := range cases {
		got, failed := electionLine("PREFERRED", c.r)
		if got != c.want || failed != c.failed {
			t.Errorf("got %q (failed %v), want %q (failed %v)", got, failed, c.want, c.failed)
		}
	}
}

func TestWriteCluster(t *testing.T) {
	var b strings.Builder
	err := writeCluster(&b, &adminv1.DescribeClusterResponse{
		ClusterId: "cid", Controller: &commonv1.Node{Id: 2, Address: "h:2"}, ControllerEpoch: 7,
		Controllers: []*adminv1.ControllerInfo{{Node: &commonv1.Node{Id: 1, Address: "h:1"}}, {Node: &commonv1.Node{Id: 2, Address: "h:2"}, Active: true}},
		Brokers: []*adminv1.BrokerInfo{
			{Node: &commonv1.Node{Id: 1, Address: "b:1", Rack: "r1"}, Alive: true, BrokerEpoch: 12, LeaderCount: 2, ReplicaCount: 3,
				OfflineLogDirs: []*adminv1.OfflineLogDir{{Path: "/disk2", Replicas: 1, Error: "log dir /disk2 is offline: no space left on device"}}},
			{Node: &commonv1.Node{Id: 2, Address: "b:2"}, Alive: true, ShuttingDown: true, BrokerEpoch: 13},
			{Node: &commonv1.Node{Id: 3}, ReplicaCount: 3},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `ClusterId: cid
ActiveController: 2 (h:2)	ControllerEpoch: 7

CONTROLLER  ADDRESS  ROLE
1           h:1      standby
2           h:2      active

BROKER  ADDRESS  RACK  STATE          EPOCH  LEADERS  REPLICAS
1       b:1      r1    alive          12     2        3
2       b:2      -     shutting-down  13     0        0
3       -        -     offline        -      0        3

BROKER  OFFLINE LOG DIR  REPLICAS  ERROR
1       /disk2           1         log dir /disk2 is offline: no space left on device
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestGroupTablesHaveKafkasColumns(t *testing.T) {
	var b strings.Builder
	lag := &groupv1.DescribeGroupLagResponse{GroupId: "g", Partitions: []*groupv1.PartitionLag{
		{Topic: "t", Partition: 0, CommittedOffset: 5, HighWatermark: 9, LogEndOffset: 9, Lag: 4, MemberId: "m-1", ClientHost: "/127.0.0.1", ClientId: "c"},
		{Topic: "t", Partition: 1, CommittedOffset: -1, HighWatermark: 3, LogEndOffset: 3, Lag: -1},
	}}
	if err := writeGroupOffsets(&b, "g", lag); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	if f := strings.Fields(got[0]); strings.Join(f, " ") != "GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID" {
		t.Fatalf("header %q", got[0])
	}
	if f := strings.Fields(got[1]); strings.Join(f, " ") != "g t 0 5 9 4 m-1 /127.0.0.1 c" {
		t.Fatalf("row %q", got[1])
	}
	if f := strings.Fields(got[2]); strings.Join(f, " ") != "g t 1 - 3 - - - -" {
		t.Fatalf("row without a commit or owner %q", got[2])
	}

	d := &groupv1.DescribedGroup{GroupId: "g", GroupState: "Stable", ProtocolType: "consumer", ProtocolName: "range",
		Coordinator: &commonv1.Node{Id: 2, Address: "127.0.0.1:9093"},
		Members: []*groupv1.DescribedGroupMember{{MemberId: "m-1", ClientId: "c", ClientHost: "/127.0.0.1",
			MemberAssignment: assign.Assignment{Partitions: []assign.TopicPartitions{{Topic: "t", Partitions: []int32{0, 1}}}}.Encode()}}}
	b.Reset()
	if err := writeGroupMembers(&b, d, true); err != nil {
		t.Fatal(err)
	}
	got = strings.Split(strings.TrimSpace(b.String()), "\n")
	if f := strings.Join(strings.Fields(got[1]), " "); f != "g m-1 - /127.0.0.1 c 2 t(0,1)" {
		t.Fatalf("members row %q", f)
	}
	b.Reset()
	if err := writeGroupState(&b, d); err != nil {
		t.Fatal(err)
	}
	got = strings.Split(strings.TrimSpace(b.String()), "\n")
	if h := strings.Join(strings.Fields(got[0]), " "); h != "GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS" {
		t.Fatalf("state header %q", h)
	}
	if f := strings.Join(strings.Fields(got[1]), " "); f != "g 127.0.0.1:9093 (2) range Stable 1" {
		t.Fatalf("state row %q", f)
	}
}
