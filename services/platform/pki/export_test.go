package pki

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestExportHoldsOnlyWhatItsHolderNeeds: an export has the CA's
// certificate, the named identities' files and the extras, and never the
// CA's key or another identity's key.
func TestExportHoldsOnlyWhatItsHolderNeeds(t *testing.T) {
	dir := t.TempDir()
	if _, err := Ensure(dir, Leaf{Name: "broker-1"}, Leaf{Name: "broker-2"}, Leaf{Name: "gateway"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte("t gateway\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), "gateway")
	if err := Export(dir, to, []string{"gateway"}, "tokens"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(to)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if e.Name() == "ca.pem" || e.Name() == "gateway.pem" {
			want = 0o644
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", e.Name(), info.Mode().Perm(), want)
		}
	}
	if want := []string{"ca.pem", "gateway-key.pem", "gateway.pem", "tokens"}; !slices.Equal(got, want) {
		t.Fatalf("export holds %v, want %v", got, want)
	}
	// The export works as the gateway's TLS settings on its own.
	if _, err := Options(to, "gateway").Client(); err != nil {
		t.Fatalf("exported files do not load: %v", err)
	}
	// Exporting again after a renewal replaces the files.
	ca, err := LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.IssueFiles(dir, Leaf{Name: "gateway"}); err != nil {
		t.Fatal(err)
	}
	if err := Export(dir, to, []string{"gateway"}, "tokens"); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(CertPath(dir, "gateway"))
	b, _ := os.ReadFile(CertPath(to, "gateway"))
	if string(a) != string(b) {
		t.Error("a second export did not replace the renewed certificate")
	}
	if err := Export(dir, to, []string{"nobody"}); err == nil {
		t.Error("exporting an identity without files succeeded")
	}
}
