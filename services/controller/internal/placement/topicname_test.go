package placement

import (
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestCheckCollision(t *testing.T) {
	existing := []string{"a_b", "c.d", "plain"}
	tests := []struct {
		name string
		ok   bool
	}{
		{"a.b", false},
		{"c_d", false},
		{"a_b", true}, // the same topic is an "already exists" matter, not a collision
		{"a-b", true},
		{"plain2", true},
	}
	for _, tt := range tests {
		err := CheckCollision(tt.name, existing)
		if (err == nil) != tt.ok {
			t.Errorf("CheckCollision(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && kerr.CodeOf(err) != kerr.InvalidTopicException {
			t.Errorf("CheckCollision(%q) code = %v", tt.name, kerr.CodeOf(err))
		}
	}
}
