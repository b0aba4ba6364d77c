package kafkascripts

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"tidemark.io/services/clustertest"
)

func runAPIVersions(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = BrokerAPIVersions(args, &out, &errw)
	return code, out.String(), errw.String()
}

// One block per live broker, in Kafka's layout, with the versions the
// Kafka listener serves, the newest both sides speak, and Kafka 3.7's
// client APIs it does not serve as UNSUPPORTED.
func TestBrokerAPIVersionsScript(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Brokers: 3, Kafka: true})
	addrs := c.KafkaAddrs()
	if err := c.StopBroker(3); err != nil {
		t.Fatal(err)
	}
	var out string
	c.WaitFor(20*time.Second, "Metadata without the stopped broker", func() bool {
		code, o, errOut := runAPIVersions("--bootstrap-server", addrs[0])
		if code != 0 {
			t.Fatalf("exit %d, stderr %q", code, errOut)
		}
		out = o
		return strings.Count(out, " -> (\n") == 2
	})
	blocks := strings.SplitAfter(out, "\n)\n")
	if len(blocks) != 3 || blocks[2] != "" {
		t.Fatalf("want two blocks, got:\n%s", out)
	}
	for i, block := range blocks[:2] {
		head := fmt.Sprintf("%s (id: %d rack: null) -> (\n", addrs[i], i+1)
		if !strings.HasPrefix(block, head) {
			t.Errorf("block %d starts %q, want %q", i, strings.SplitAfter(block, "\n")[0], head)
		}
		for _, line := range []string{
			"\tProduce(0): 3 to 11 [usable: 11],\n",
			"\tMetadata(3): 1 to 12 [usable: 12],\n",
			"\tLeaderAndIsr(4): UNSUPPORTED,\n",
			"\tApiVersions(18): 0 to 3 [usable: 3],\n",
			"\tInitProducerId(22): 0 to 4 [usable: 4],\n",
			"\tDeleteRecords(21): 0 to 2 [usable: 2],\n",
			"\tElectLeaders(43): 0 to 2 [usable: 2],\n",
			"\tDescribeCluster(60): 0 to 1 [usable: 1],\n",
			"\tListClientMetricsResources(74): UNSUPPORTED\n)\n",
		} {
			if !strings.Contains(block, line) {
				t.Errorf("block %d lacks %q:\n%s", i, line, block)
			}
		}
		if strings.Contains(block, "Vote(52)") {
			t.Errorf("block %d lists a controller-only API:\n%s", i, block)
		}
	}
}

func TestBrokerAPIVersionsScriptRefusesBadFlags(t *testing.T) {
	if code, _, errOut := runAPIVersions(); code != 1 || !strings.HasPrefix(errOut, "Missing required argument \"[bootstrap-server]\"\n") {
		t.Fatalf("no flags: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runAPIVersions("--bootstrap-server", "x:1", "--topic", "t"); code != 1 || !strings.HasPrefix(errOut, "topic is not a recognized option\n") {
		t.Fatalf("unknown flag: exit %d, stderr %q", code, errOut)
	}
}

func TestAPINamesAreKafkas(t *testing.T) {
	for key, want := range map[int16]string{0: "Produce", 4: "LeaderAndIsr", 17: "SaslHandshake", 22: "InitProducerId", 29: "DescribeAcls", 45: "AlterPartitionReassignments", 50: "DescribeUserScramCredentials", 67: "AllocateProducerIds", 74: "ListClientMetricsResources"} {
		if got := apiName(key); got != want {
			t.Errorf("key %d: %q, want %q", key, got, want)
		}
	}
}
