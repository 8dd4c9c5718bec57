package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// replicaAddr finds the base URL of another replica from its heartbeat row,
// so a stateless caller's retry can be passed to the replica its call is
// parked on. A replica listening on every interface is reached by its host
// name.
func (a *App) replicaAddr(ctx context.Context, id string) (string, error) {
	rs, err := a.db.Replicas(ctx, time.Now().Add(-replicaTimeout))
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		if r.ID != id {
			continue
		}
		host, port, err := net.SplitHostPort(r.Address)
		if err != nil {
			return "", fmt.Errorf("replica %s listens on %q: %w", id, r.Address, err)
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			host = r.Host
		}
		return a.scheme() + "://" + net.JoinHostPort(host, port), nil
	}
	return "", fmt.Errorf("replica %s is not alive", id)
}

// spendState records in the store that a stateless caller's requestState
// was answered, so every replica refuses a replay of it.
func (a *App) spendState(ctx context.Context, nonce string, expires time.Time) (bool, error) {
	mark := make([]byte, 8)
	_, _ = rand.Read(mark)
	mine := a.sec.replica + "/" + hex.EncodeToString(mark)
	got, err := a.db.PutIdempotent(ctx, store.IdempotentResult{Key: "requestState:" + nonce, Fingerprint: mine,
		Result: []byte("answered"), CreatedAt: time.Now(), ExpiresAt: expires.Add(time.Minute)})
	if err != nil {
		return false, err
	}
	return got.Fingerprint == mine, nil
}

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
