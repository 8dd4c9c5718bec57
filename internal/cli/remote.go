package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/spf13/cobra"

	"github.com/switchboard-mcp/switchboard/internal/apiclient"
)

// Defaults and environment of the commands that talk to a running gateway.
const (
	defaultGatewayURL = "http://127.0.0.1:8080"
	envURL            = "SWITCHBOARD_URL"
	envAPIKey         = "SWITCHBOARD_API_KEY"
)

// exitError ends a command with a code and no further message: the
// command has already said what went wrong (a step tracker's ✗ line, a
// tool's error text).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// remote holds the flags every operator command shares and builds the
// client from them.
type remote struct {
	e       *env
	url     string
	apiKey  string
	output  string
	noColor bool
}

// register adds the connection flags to cmd and, through persistence, to
// its subcommands.
func (r *remote) register(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&r.url, "url", "", `gateway URL (default "`+defaultGatewayURL+`"; env `+envURL+`)`)
	f.StringVar(&r.apiKey, "api-key", "", "API key sent as a bearer token (env "+envAPIKey+")")
	f.BoolVar(&r.noColor, "no-color", false, "never colour the output (also NO_COLOR)")
}

// registerOutput adds -o to a command that prints a listing or a result.
func (r *remote) registerOutput(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&r.output, "output", "o", "table", "output format: table, json or yaml")
}

// client resolves flags over environment over defaults and validates -o.
func (r *remote) client() (*apiclient.Client, error) {
	switch r.output {
	case "", "table", "json", "yaml":
	default:
		return nil, usageError{fmt.Errorf("--output %q: want table, json or yaml", r.output)}
	}
	u := r.url
	if u == "" {
		u = r.e.getenv(envURL)
	}
	if u == "" {
		u = defaultGatewayURL
	}
	key := r.apiKey
	if key == "" {
		key = r.e.getenv(envAPIKey)
	}
	c, err := apiclient.New(u, &apiclient.Options{APIKey: key, UserAgent: "switchboard-cli/" + Version,
		HTTPClient: &http.Client{}})
	if err != nil {
		return nil, usageError{err}
	}
	return c, nil
}

// color reports whether to colour stdout: only on a terminal, and never
// with --no-color or NO_COLOR (https://no-color.org).
func (r *remote) color() bool {
	if r.noColor || r.e.getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := r.e.stdout.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// structured prints v as JSON or YAML when -o asks for it and reports
// whether it did; the table form is the caller's.
func (r *remote) structured(v any) (bool, error) {
	switch r.output {
	case "json":
		return true, writeJSON(r.e.stdout, v)
	case "yaml":
		// Through JSON, so YAML keys are the API's JSON names.
		raw, err := json.Marshal(v)
		if err != nil {
			return true, err
		}
		out, err := yaml.JSONToYAML(raw)
		if err != nil {
			return true, fmt.Errorf("rendering yaml: %w", err)
		}
		_, err = r.e.stdout.Write(out)
		return true, err
	}
	return false, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// explain adds the operator's next step to API errors that have an obvious
// one; the message itself is the gateway's.
func explain(err error, what string) error {
	var ae *apiclient.Error
	if !errors.As(err, &ae) {
		return err
	}
	switch {
	case ae.Status == http.StatusNotImplemented:
		return err // "... are not configured on this gateway" says it all
	case ae.Unsupported():
		return fmt.Errorf("this gateway does not support %s (%s)", what, ae.Message)
	case ae.Status == http.StatusUnauthorized:
		return fmt.Errorf("%s: set --api-key or %s", ae.Message, envAPIKey)
	case ae.Status == http.StatusForbidden:
		return fmt.Errorf("%s (HTTP 403: use an admin API key)", ae.Message)
	}
	return err
}

// ANSI colours for table cells.
const (
	colorNone   = ""
	colorRed    = "\x1b[31m"
	colorGreen  = "\x1b[32m"
	colorYellow = "\x1b[33m"
	colorCyan   = "\x1b[36m"
	colorDim    = "\x1b[2m"
	colorReset  = "\x1b[0m"
)

// stateColor colours a server or breaker state by how worrying it is.
func stateColor(state string) string {
	switch state {
	case "CONNECTED", "CLOSED", "ALLOW":
		return colorGreen
	case "DEGRADED", "HALF_OPEN", "CONNECTING", "NEEDS_AUTH":
		return colorYellow
	case "ERROR", "OPEN", "DENY":
		return colorRed
	case "DISCONNECTED":
		return colorDim
	}
	return colorNone
}

// cell is one table cell; color applies on a terminal only.
type cell struct {
	text, color string
}

// table renders aligned columns. tabwriter would count colour escapes as
// width, so widths are computed from the visible text here.
type table struct {
	header []string
	rows   [][]cell
}

func (t *table) add(cells ...cell) { t.rows = append(t.rows, cells) }

// addText adds a row of uncoloured cells.
func (t *table) addText(texts ...string) {
	row := make([]cell, len(texts))
	for i, s := range texts {
		row[i] = cell{text: s}
	}
	t.rows = append(t.rows, row)
}

func (t *table) render(w io.Writer, color bool) error {
	width := make([]int, len(t.header))
	for i, h := range t.header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, row := range t.rows {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c.text))
		}
	}
	var b strings.Builder
	line := func(cells []cell) {
		for i, c := range cells {
			last := i == len(cells)-1
			text := c.text
			if !last {
				text += strings.Repeat(" ", width[i]-utf8.RuneCountInString(c.text))
			}
			if color && c.color != "" {
				// Colour the text only, not the padding, so copy-paste stays clean.
				b.WriteString(c.color + c.text + colorReset + text[len(c.text):])
			} else {
				b.WriteString(text)
			}
			if !last {
				b.WriteString("   ")
			}
		}
		b.WriteByte('\n')
	}
	hdr := make([]cell, len(t.header))
	for i, h := range t.header {
		hdr[i] = cell{text: h}
	}
	line(hdr)
	for _, row := range t.rows {
		line(row)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Formatting helpers for table cells.

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clip shortens s to n runes on one line, for cells that hold messages.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// humanDuration is a short duration for tables: "45s", "12m3s", "3h4m", "2d5h".
func humanDuration(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// stamp is a timestamp for tables, UTC to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func stampPtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

// stepMillis is a step's duration as the tracker prints it.
func stepMillis(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// cmdContext is the command's ctx (cobra sets it from Run's).
func cmdContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
