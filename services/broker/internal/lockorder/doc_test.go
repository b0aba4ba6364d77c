package lockorder

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestLockOrderDocumentMatchesTheCode reads the table of LOCKORDER.md: its
// rows must be exactly Ranks(), in order.
func TestLockOrderDocumentMatchesTheCode(t *testing.T) {
	doc, err := os.ReadFile("../../LOCKORDER.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| ([0-9]+) \| ([a-z ]+) \|`)
	var got []string
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		got = append(got, m[1]+" "+m[2])
	}
	var want []string
	for _, r := range Ranks() {
		want = append(want, strconv.Itoa(r.Rank)+" "+r.Name)
	}
	if len(got) != len(want) {
		t.Fatalf("LOCKORDER.md lists %d classes %q; the code has %d %q", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("LOCKORDER.md row %d is %q; the code says %q", i+1, got[i], want[i])
		}
	}
	for i := 1; i < len(want); i++ {
		if Ranks()[i].Rank < Ranks()[i-1].Rank {
			t.Errorf("Ranks() is not in order at %s", Ranks()[i].Name)
		}
	}
}
