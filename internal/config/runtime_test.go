package config

import (
	"slices"
	"strings"
	"testing"
)

func TestNormalizeCommand(t *testing.T) {
	for _, tc := range []struct {
		command  string
		args     []string
		wantCmd  string
		wantArgs []string
		wantErr  string
	}{
		{command: "npx -y @scope/pkg /srv/data", wantCmd: "npx", wantArgs: []string{"-y", "@scope/pkg", "/srv/data"}},
		{command: `node "my server.js"`, wantCmd: "node", wantArgs: []string{"my server.js"}},
		{command: "node", args: []string{"a b"}, wantCmd: "node", wantArgs: []string{"a b"}},
		{command: "/usr/bin/node", wantCmd: "/usr/bin/node"},
		{command: "npx -y pkg | tee /tmp/log", wantErr: "needs a shell"},
		{command: "echo $(id)", wantErr: "needs a shell"},
		{command: `node "unterminated`, wantErr: "servers.x.command"},
	} {
		s := &Server{Name: "x", Transport: TransportStdio, Command: tc.command, Args: tc.args}
		err := s.NormalizeCommand()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err = %v, want one containing %q", tc.command, err, tc.wantErr)
			}
			continue
		}
		if err != nil || s.Command != tc.wantCmd || !slices.Equal(s.Args, tc.wantArgs) {
			t.Errorf("%q: %q %q, %v; want %q %q", tc.command, s.Command, s.Args, err, tc.wantCmd, tc.wantArgs)
		}
	}
}
