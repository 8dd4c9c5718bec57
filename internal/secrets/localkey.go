package secrets

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// LocalKeyFile is the secret key local mode keeps next to its SQLite
// store.
const LocalKeyFile = "switchboard.key"

// LocalKey is the secret key of a local-mode gateway with none
// configured: read from a 0600 file in dir (next to its store), created on
// first use, so that servers registered with literal env values or headers
// are sealed and just work. (Replicas on PostgreSQL must share a configured key: they
// never get one of their own.)
func LocalKey(dir string, logger *slog.Logger) (*Keyring, error) {
	path := filepath.Join(dir, LocalKeyFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		key, err := GenerateKey()
		if err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case errors.Is(err, fs.ErrExist): // another process made it first
		case err != nil:
			return nil, fmt.Errorf("creating the local secret key %s: %w", path, err)
		default:
			_, werr := f.WriteString(key + "\n")
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return nil, fmt.Errorf("writing the local secret key %s: %w", path, werr)
			}
			logger.Info("created a secret key for local mode", "file", path)
		}
	}
	keys, err := Load(func(k string) string {
		if k == EnvKeyFile {
			return path
		}
		return ""
	})
	if err != nil {
		return nil, fmt.Errorf("the local secret key %s: %w", path, err)
	}
	return keys, nil
}
