package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestTableRender(t *testing.T) {
	tab := &table{header: []string{"NAME", "STATE", "NOTE"}}
	tab.add(cell{text: "demo"}, cell{text: "CONNECTED", color: colorGreen}, cell{text: "-"})
	tab.add(cell{text: "filesystem"}, cell{text: "ERROR", color: colorRed}, cell{text: "exit 1 — ✗"})
	tests := []struct {
		name  string
		color bool
		want  string
	}{
		{"plain", false, "" +
			"NAME         STATE       NOTE\n" +
			"demo         CONNECTED   -\n" +
			"filesystem   ERROR       exit 1 — ✗\n"},
		// Colour wraps the text only: the columns stay where they are.
		{"color", true, "" +
			"NAME         STATE       NOTE\n" +
			"demo         \x1b[32mCONNECTED\x1b[0m   -\n" +
			"filesystem   \x1b[31mERROR\x1b[0m       exit 1 — ✗\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tab.render(&b, tc.color); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCallArguments(t *testing.T) {
	tests := []struct {
		name    string
		json    string
		args    []string
		want    string
		wantErr string
	}{
		{"none", "", nil, "", ""},
		{"types", "", []string{"n=3", "b=true", "s=hello world", "l=[1,2]", "o={\"k\": 1}", "e=", "q=\"3\""},
			`{"b":true,"e":"","l":[1,2],"n":3,"o":{"k":1},"q":"3","s":"hello world"}`, ""},
		{"json then args override", `{"a": 1, "b": 2}`, []string{"b=x"}, `{"a":1,"b":"x"}`, ""},
		{"not an object", `[1]`, nil, "", "--json: want a JSON object"},
		{"null", `null`, nil, "", "--json: want a JSON object"},
		{"trailing", `{} {}`, nil, "", "trailing data"},
		{"no equals", "", []string{"text"}, "", `--arg "text": want key=value`},
		{"empty key", "", []string{"=v"}, "", `--arg "=v": want key=value`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := callArguments(tc.json, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				if _, ok := err.(usageError); !ok {
					t.Errorf("err %T is not a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2025, 1, 16, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"1h", now.Add(-time.Hour), false},
		{"90s", now.Add(-90 * time.Second), false},
		{"2025-01-16T10:30:00Z", time.Date(2025, 1, 16, 10, 30, 0, 0, time.UTC), false},
		{"-1h", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseSince(tc.in, now)
			if (err != nil) != tc.err || !got.Equal(tc.want) {
				t.Errorf("parseSince(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestColor(t *testing.T) {
	// A regular file is not a terminal; /dev/null is a character device
	// but, like a terminal, only on systems that have it.
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer devnull.Close()
	tests := []struct {
		name    string
		stdout  any
		noColor string
		flag    bool
		want    bool
	}{
		{"buffer", &bytes.Buffer{}, "", false, false},
		{"file", f, "", false, false},
		{"char device", devnull, "", false, true},
		{"NO_COLOR", devnull, "1", false, false},
		{"--no-color", devnull, "", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{stdout: tc.stdout.(interface{ Write([]byte) (int, error) }),
				getenv: func(k string) string {
					if k == "NO_COLOR" {
						return tc.noColor
					}
					return ""
				}}
			r := &remote{e: e, noColor: tc.flag}
			if got := r.color(); got != tc.want {
				t.Errorf("color() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHumanDuration(t *testing.T) {
	for in, want := range map[time.Duration]string{
		0: "-", 300 * time.Millisecond: "0s", 45 * time.Second: "45s", 12*time.Minute + 3*time.Second: "12m3s",
		3*time.Hour + 4*time.Minute: "3h4m", 53 * time.Hour: "2d5h",
	} {
		if got := humanDuration(in); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", in, got, want)
		}
	}
}
