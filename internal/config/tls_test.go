package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestListenTLS(t *testing.T) {
	const file = "switchboard.yaml"
	tests := []struct {
		name    string
		yaml    string
		env     map[string]string
		want    *ListenTLS
		wantErr []wantErr // File "" = the file
	}{
		{
			name: "absent is plain HTTP",
			yaml: "settings:\n  listen: 127.0.0.1:8080\n",
		},
		{
			name: "null is plain HTTP",
			yaml: "settings:\n  listen_tls:\n",
		},
		{
			name: "cert and key, defaults filled",
			yaml: "settings:\n  listen_tls:\n    cert_file: /tls/tls.crt\n    key_file: /tls/tls.key\n",
			want: &ListenTLS{CertFile: "/tls/tls.crt", KeyFile: "/tls/tls.key", MinVersion: TLS12, Pos: Pos{Line: 2, Column: 3}},
		},
		{
			name: "mutual TLS, require, 1.3",
			yaml: "settings:\n  listen_tls:\n    cert_file: c\n    key_file: k\n    client_ca_file: ca\n    client_auth: require\n    min_version: 1.3\n",
			want: &ListenTLS{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: ClientAuthRequire, MinVersion: TLS13, Pos: Pos{Line: 2, Column: 3}},
		},
		{
			name: "client CA defaults to request",
			yaml: "settings:\n  listen_tls: {cert_file: c, key_file: k, client_ca_file: ca}\n",
			want: &ListenTLS{CertFile: "c", KeyFile: "k", ClientCAFile: "ca", ClientAuth: ClientAuthRequest, MinVersion: TLS12, Pos: Pos{Line: 2, Column: 3}},
		},
		{
			name: "from the environment",
			yaml: "settings: {}\n",
			env:  map[string]string{"SWITCHBOARD_LISTEN_TLS": "cert_file=/a.crt, key_file=/a.key,min_version=1.3"},
			want: &ListenTLS{CertFile: "/a.crt", KeyFile: "/a.key", MinVersion: TLS13},
		},
		{
			name:    "missing key file",
			yaml:    "settings:\n  listen_tls:\n    cert_file: c\n",
			wantErr: []wantErr{{Line: 2, Field: "settings.listen_tls", Msg: "needs key_file"}},
		},
		{
			name: "bad values and unknown field",
			yaml: "settings:\n  listen_tls:\n    cert_file: c\n    key_file: k\n    min_version: 1.1\n    client_auth: always\n    cert: x\n",
			wantErr: []wantErr{
				{Line: 5, Field: "settings.listen_tls.min_version", Msg: `must be one of "1.2" or "1.3"`},
				{Line: 6, Field: "settings.listen_tls.client_auth", Msg: `must be one of "request" or "require"`},
				{Line: 7, Field: "settings.listen_tls.cert", Msg: `unknown field "cert"`},
			},
		},
		{
			name:    "require without a client CA",
			yaml:    "settings:\n  listen_tls: {cert_file: c, key_file: k, client_auth: require}\n",
			wantErr: []wantErr{{Line: 2, Field: "settings.listen_tls", Msg: "needs client_ca_file"}},
		},
		{
			name:    "not a mapping",
			yaml:    "settings:\n  listen_tls: /tls/tls.crt\n",
			wantErr: []wantErr{{Line: 2, Field: "settings.listen_tls", Msg: "must be a mapping"}},
		},
		{
			name:    "bad environment value",
			yaml:    "settings: {}\n",
			env:     map[string]string{"SWITCHBOARD_LISTEN_TLS": "/a.crt"},
			wantErr: []wantErr{{File: EnvironmentFile, Field: "SWITCHBOARD_LISTEN_TLS", Msg: "must be key=value"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(file, []byte(tt.yaml), func(k string) string { return tt.env[k] })
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, cfg.Settings.ListenTLS); diff != "" {
					t.Errorf("listen_tls (-want +got):\n%s", diff)
				}
				return
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("err = %v, want config.Errors", err)
			}
			if len(errs) != len(tt.wantErr) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.wantErr), err)
			}
			for i, w := range tt.wantErr {
				e := errs[i]
				if w.File == "" {
					w.File = file
				}
				if e.File != w.File || e.Line != w.Line || e.Field != w.Field || !strings.Contains(e.Msg, w.Msg) {
					t.Errorf("error %d = %s:%d %s %q, want %s:%d %s containing %q", i, e.File, e.Line, e.Field, e.Msg, w.File, w.Line, w.Field, w.Msg)
				}
			}
		})
	}
}
