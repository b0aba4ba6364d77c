package pki

import (
	"fmt"
	"os"
	"path/filepath"
)

// Export copies what one process needs out of dir into to: the CA's
// certificate (never its key), each name's certificate and key, and each
// extra file of dir by its name (the gateway's REST tokens, say). A
// container then mounts only its own export, so a broker that is broken
// into holds no key but its own. Files are replaced atomically; keys and
// extras keep mode 0600.
func Export(dir, to string, names []string, extra ...string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	type file struct {
		from string
		mode os.FileMode
	}
	copies := []file{{CAPath(dir), 0o644}}
	for _, n := range names {
		copies = append(copies, file{CertPath(dir, n), 0o644}, file{KeyPath(dir, n), 0o600})
	}
	for _, e := range extra {
		copies = append(copies, file{filepath.Join(dir, e), 0o600})
	}
	for _, c := range copies {
		b, err := os.ReadFile(c.from)
		if err != nil {
			return fmt.Errorf("export to %s: %w", to, err)
		}
		if err := writeFile(filepath.Join(to, filepath.Base(c.from)), b, c.mode); err != nil {
			return fmt.Errorf("export to %s: %w", to, err)
		}
	}
	return nil
}
