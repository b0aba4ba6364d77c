package topicconfig

import (
	"strings"
	"testing"

	"tidemark.io/services/platform/kerr"
)

func TestValidateTopicName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"orders", true},
		{"a.b_c-D9", true},
		{"...", true},
		{"_", true},
		{strings.Repeat("x", 249), true},
		{strings.Repeat("x", 250), false},
		{"", false},
		{".", false},
		{"..", false},
		{"a b", false},
		{"a/b", false},
		{"a:b", false},
		{"tópico", false},
		{"a\x00", false},
		{"a\n", false},
	}
	for _, tt := range tests {
		err := ValidateTopicName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateTopicName(%.20q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && kerr.CodeOf(err) != kerr.InvalidTopicException {
			t.Errorf("ValidateTopicName(%.20q) code = %v, want INVALID_TOPIC_EXCEPTION", tt.name, kerr.CodeOf(err))
		}
	}
}

func TestValidateTopicNameSaysWhy(t *testing.T) {
	for name, want := range map[string]string{
		strings.Repeat("x", 250): "250",
		"a b":                    `" " at index 1`,
		"..":                     `".."`,
		"":                       "empty",
	} {
		if err := ValidateTopicName(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateTopicName(%.20q) = %v, want a message containing %s", name, err, want)
		}
	}
}
