package servers

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/store"
)

// RotateSecrets re-encrypts, with the active secret key, every sealed
// value of the server definitions in the store at dsn (and seals any
// literal one left in plaintext by an older version). The previous key must
// be configured too (SWITCHBOARD_SECRET_KEY_OLD or _OLD_FILE) to read the
// values sealed with it. It returns how many values were rewritten. Run it
// with the gateways stopped or between rolling restarts: they read both
// keys while the old one is configured.
func RotateSecrets(ctx context.Context, dsn string, getenv func(string) string) (int, error) {
	keys, err := secrets.Load(getenv)
	if err != nil {
		return 0, err
	}
	if keys == nil {
		return 0, secrets.ErrNoKey
	}
	db, err := store.Open(ctx, dsn, nil)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	changed := 0
	err = db.Transact(ctx, func(tx *store.DB) error {
		rows, err := tx.ListServers(ctx)
		if err != nil {
			return err
		}
		for _, row := range rows {
			if row.Source != SourceAPI {
				continue // config-file servers are stored redacted
			}
			var sd storedDef
			if err := json.Unmarshal(row.Config, &sd); err != nil || sd.Server == nil {
				return fmt.Errorf("server %q: stored definition unreadable: %v", row.Name, err)
			}
			n := 0
			for _, m := range []map[string]string{sd.Server.Headers, sd.Server.Env} {
				for k, v := range m {
					var out string
					var did bool
					switch {
					case secrets.IsSealed(v):
						out, did, err = keys.Rotate(v)
					case secrets.NeedsSealing(v):
						out, err = keys.Seal(v)
						did = err == nil
					}
					if err != nil {
						return fmt.Errorf("server %q, %q: %w", row.Name, k, err)
					}
					if did {
						m[k] = out
						n++
					}
				}
			}
			if n == 0 {
				continue
			}
			raw, err := json.Marshal(sd)
			if err != nil {
				return err
			}
			if err := tx.RenameServer(ctx, row.ID, row.Name, raw); err != nil {
				return fmt.Errorf("server %q: %w", row.Name, err)
			}
			changed += n
		}
		return nil
	})
	return changed, err
}
