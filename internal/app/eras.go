package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"time"

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
