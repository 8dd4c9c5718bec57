package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/secrets"
	"github.com/switchboard-mcp/switchboard/internal/servers"
)

// newKeysGenerateSecret prints a fresh secret key for SWITCHBOARD_SECRET_KEY.
func newKeysGenerateSecret(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "generate-secret",
		Short: "Print a new random key for SWITCHBOARD_SECRET_KEY (secrets at rest)",
		Long: `Print a new random 32-byte key, base64, for SWITCHBOARD_SECRET_KEY (or a file named by
SWITCHBOARD_SECRET_KEY_FILE, mode 0600). The gateway encrypts the literal header and env values
of servers registered at runtime with it (AES-256-GCM). Keep it in your secret store: without it
those values cannot be read back.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			k, err := secrets.GenerateKey()
			if err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, k)
			return nil
		},
	}
}

// newKeysRotateSecret re-encrypts the stored secrets with the active key.
func newKeysRotateSecret(e *env) *cobra.Command {
	var dsn string
	cmd := &cobra.Command{
		Use:   "rotate-secret",
		Short: "Re-encrypt the stored secrets with a new secret key",
		Long: `Re-encrypt every stored secret (header and env values of servers registered at runtime)
with the key in SWITCHBOARD_SECRET_KEY (or _FILE), reading the values sealed with the previous key
from SWITCHBOARD_SECRET_KEY_OLD (or _OLD_FILE). It works on the store directly, in one transaction.

  1. switchboard keys generate-secret           # the new key
  2. set SWITCHBOARD_SECRET_KEY_OLD=<old key> and SWITCHBOARD_SECRET_KEY=<new key> on every
     gateway and restart them (they read both keys)
  3. switchboard keys rotate-secret --store <dsn>   (same two variables set)
  4. remove SWITCHBOARD_SECRET_KEY_OLD and restart`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dsn == "" {
				dsn = e.getenv("SWITCHBOARD_STORE")
			}
			if dsn == "" {
				dsn = "./switchboard.db"
			}
			n, err := servers.RotateSecrets(cmdContext(cmd), dsn, e.getenv)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "re-encrypted %d stored secret values with key %s\n", n, activeKeyID(e.getenv))
			return nil
		},
	}
	cmd.Flags().StringVar(&dsn, "store", "", `store DSN (default $SWITCHBOARD_STORE, else "./switchboard.db")`)
	return cmd
}

func activeKeyID(getenv func(string) string) string {
	k, err := secrets.Load(getenv)
	if err != nil || k == nil {
		return "?"
	}
	return k.ActiveID()
}
