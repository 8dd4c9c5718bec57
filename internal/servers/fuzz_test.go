package servers

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/internal/config"
	"github.com/switchboard-mcp/switchboard/internal/secrets"
)

// FuzzDecodeDef feeds stored definitions (as a store, an older version or
// a hand-edited row may hold them) to decodeDef: it must never panic, and
// whatever it accepts must store again with every literal secret sealed
// and read back as the same definition.
func FuzzDecodeDef(f *testing.F) {
	keys, err := secrets.NewKeyring(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		f.Fatal(err)
	}
	r := &Registry{o: Options{Keys: keys}}
	on := true
	prefix := "p"
	full := &config.Server{Name: "s", Transport: config.TransportStdio, Command: "cmd", Args: []string{"a"},
		Env: map[string]string{"TOKEN": "hunter2", "REF": "${HOME}", "LEVEL": "debug"}, PlainEnv: []string{"LEVEL"},
		AutoStart: &on, Prefix: &prefix, DefaultAccess: "deny"}
	sealed, err := r.encodeDef(full, true)
	if err != nil {
		f.Fatal(err)
	}
	httpDef, err := r.encodeDef(&config.Server{Name: "h", Transport: config.TransportHTTP, URL: "https://example.com/mcp",
		Headers: map[string]string{"Authorization": "Bearer x"}}, false)
	if err != nil {
		f.Fatal(err)
	}
	// A secret whose value looks sealed itself, sealed.
	lookalike, err := keys.Seal("enc:v1:00000000:AAAA")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range [][]byte{
		sealed, httpDef,
		[]byte(`{"name":"l","transport":"stdio","command":"c","env":{"K":"` + lookalike + `"}}`),
		[]byte(`{"name":"x","transport":"stdio","command":"c","auto_connect":true}`),
		[]byte(`{"env":{"K":"enc:v1:00000000:AAAA"}}`),
		[]byte(`{"headers":{"K":"enc:v1:zz:!!"}}`),
		[]byte(`{}`), []byte(`null`), []byte(`[]`), []byte(`{"env":null,"headers":{}}`), []byte(``),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sd, err := r.decodeDef(raw)
		if err != nil {
			return
		}
		if sd.Server == nil {
			t.Fatal("decodeDef accepted a definition without a server")
		}
		again, err := r.encodeDef(sd.Server, sd.AutoConnect)
		if err != nil {
			t.Fatalf("encoding a decoded definition: %v", err)
		}
		var stored storedDef
		if err := json.Unmarshal(again, &stored); err != nil || stored.Server == nil {
			t.Fatalf("encoded definition unreadable: %v: %s", err, again)
		}
		for i, m := range []map[string]string{stored.Headers, stored.Env} {
			for k, v := range m {
				plain := i == 1 && slices.Contains(stored.PlainEnv, k)
				if secrets.NeedsSealing(v) && !plain {
					t.Fatalf("%q stored in clear: %s", k, again)
				}
			}
		}
		back, err := r.decodeDef(again)
		if err != nil {
			t.Fatalf("the definition stored again is unreadable: %v: %s", err, again)
		}
		if !sameDefinition(sd.Server, back.Server) || back.AutoConnect != sd.AutoConnect {
			a, _ := json.Marshal(sd.Server)
			b, _ := json.Marshal(back.Server)
			t.Fatalf("round trip changed the definition:\n%s\n%s", a, b)
		}
	})
}
