package authserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/internal/testdeps"
)

// TestConformanceAuthorization runs the official MCP conformance suite's
// authorization-server scenarios (0.2.0-alpha.12: the metadata endpoint
// and the authorization code grant) against the server. The suite prints
// the authorization URL for a person to open; the test's browser signs in
// with an API key and approves, and the suite's own callback server
// receives the code and redeems it. Every check must pass.
func TestConformanceAuthorization(t *testing.T) {
	suite := filepath.Join(testdeps.NPMModule(t, "conformance-next"), "dist", "index.js")
	node := testdeps.Node(t)
	h := newHarness(t, nil)
	key := h.keys.add(t, "alice", nil)
	c := h.register(t, nil) // redirect http://127.0.0.1/callback: any port
	port := freePort(t)
	out := t.TempDir()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, suite, "authorization", "--url", h.issuer, "--client-id", c.ID,
		"--port", strconv.Itoa(port), "--resource", h.issuer+"/mcp", "--output-dir", out)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var transcript strings.Builder
	sc := bufio.NewScanner(stdout)
	drove, listening := false, false
	authURL := ""
	for sc.Scan() {
		line := sc.Text()
		transcript.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, h.issuer+PathAuthorize+"?"):
			authURL = line
		case strings.HasPrefix(line, "Callback server started"):
			// The suite prints the URL and starts its callback server
			// concurrently: drive the browser once both happened.
			listening = true
		}
		if authURL == "" || !listening || drove {
			continue
		}
		line = authURL
		// The person's part: sign in, allow, and let the browser follow the
		// redirect to the suite's callback server.
		back := h.browser(t).approve(t, line, key, "approve")
		resp, err := http.Get(back.String())
		if err != nil {
			t.Fatalf("following the redirect to the suite: %v", err)
		}
		resp.Body.Close()
		drove = true
	}
	err = cmd.Wait()
	t.Logf("suite output:\n%s", transcript.String())
	if !drove {
		t.Fatal("the suite never printed an authorization URL")
	}
	if err != nil {
		t.Errorf("suite exited: %v", err)
	}
	// Its checks, scenario by scenario.
	counts := map[string][3]int{} // passed, failed, warnings
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var checks []struct {
			ID, Status, ErrorMessage string
		}
		if err := json.Unmarshal(raw, &checks); err != nil {
			return err
		}
		for _, ch := range checks {
			n := counts[ch.ID]
			switch ch.Status {
			case "SUCCESS":
				n[0]++
			case "FAILURE":
				n[1]++
				t.Errorf("check %s failed: %s", ch.ID, ch.ErrorMessage)
			case "WARNING":
				n[2]++
				t.Errorf("check %s warns: %s", ch.ID, ch.ErrorMessage)
			}
			counts[ch.ID] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant"} {
		if counts[id][0] == 0 {
			t.Errorf("check %s did not pass (results %v)", id, counts)
		}
	}
	t.Logf("checks (passed, failed, warnings): %v", counts)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
