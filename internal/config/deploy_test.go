package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/goccy/go-yaml"
)

// TestDeployConfigMapParses keeps the config shipped in the Kubernetes
// manifests valid: it is what a first deployment runs.
func TestDeployConfigMapParses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "kubernetes", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		t.Fatal(err)
	}
	doc, ok := cm.Data["switchboard.yaml"]
	if !ok {
		t.Fatal("configmap has no data.switchboard.yaml")
	}
	cfg, err := Parse("configmap.yaml", []byte(doc), func(string) string { return "" })
	if err != nil {
		t.Fatalf("the deployed config does not parse:\n%v", err)
	}
	if cfg.Auth == nil {
		t.Error("the deployed config listens on all interfaces without an auth section; the gateway would refuse to start")
	}
	if cfg.Settings.ListenTLS == nil && !cfg.Settings.AllowPlainHTTP {
		t.Error("the deployed config listens on all interfaces over plain HTTP without allow_plain_http; the gateway would refuse to start")
	}
}
