package app

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// localKeyFile is the secret key local mode keeps next to its SQLite store.
const localKeyFile = "switchboard.key"

// localSecretKey is the secret key of a local-mode gateway with none
// configured: read from a 0600 file next to the store, created on first use,
// so that servers registered with literal env values or headers are sealed
// and just work. (Replicas on PostgreSQL must share a configured key: they
// never get one of their own.)
func localSecretKey(storePath string, logger *slog.Logger) (*secrets.Keyring, error) {
	path := filepath.Join(filepath.Dir(store.RedactDSN(storePath)), localKeyFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		key, err := secrets.GenerateKey()
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
	keys, err := secrets.Load(func(k string) string {
		if k == secrets.EnvKeyFile {
			return path
		}
		return ""
	})
	if err != nil {
		return nil, fmt.Errorf("the local secret key %s: %w", path, err)
	}
	return keys, nil
}
