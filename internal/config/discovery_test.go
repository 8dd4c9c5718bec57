package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseDiscovery(t *testing.T) {
	type sections struct {
		Search Search
		Skills Skills
		Front  Front
	}
	defaults := sections{Skills: Skills{Classifier: DefaultClassifier()}, Front: Front{ToolExposure: ToolExposureAll}}
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want sections
	}{
		{name: "no sections", want: defaults},
		{name: "empty sections", yaml: "search:\nskills:\nfront:\n", want: defaults},
		{name: "null embeddings", yaml: "search:\n  embeddings: ~\n", want: defaults},
		{
			name: "embeddings with defaults",
			yaml: "search:\n  embeddings:\n    url: http://127.0.0.1:11434/v1\n    model: nomic-embed-text\n",
			want: sections{
				Search: Search{Embeddings: &Embeddings{URL: "http://127.0.0.1:11434/v1", Model: "nomic-embed-text", BatchSize: 64, TimeoutSeconds: 10}},
				Skills: defaults.Skills, Front: defaults.Front,
			},
		},
		{
			name: "everything set",
			yaml: `search:
  embeddings:
    url: https://api.openai.com/v1
    model: text-embedding-3-small
    api_key_env: OPENAI_API_KEY
    batch_size: 2048
    timeout_seconds: 1
skills:
  taxonomy:
    - id: issue_tracking
      name: Issue tracking
      description: Create and triage issues
      examples: [open a bug, close a ticket]
      keywords: [issue, bug]
    - {id: db2, name: Database, description: SQL queries}
  classifier:
    mode: llm
    url: http://llm.internal:8000
    model: small-model
    api_key_env: llm_key
    batch_size: 200
    concurrency: 64
    timeout_seconds: 600
front:
  tool_exposure: search
`,
			want: sections{
				Search: Search{Embeddings: &Embeddings{URL: "https://api.openai.com/v1", Model: "text-embedding-3-small", APIKeyEnv: "OPENAI_API_KEY", BatchSize: 2048, TimeoutSeconds: 1}},
				Skills: Skills{
					Taxonomy: []SkillDef{
						{ID: "issue_tracking", Name: "Issue tracking", Description: "Create and triage issues", Examples: []string{"open a bug", "close a ticket"}, Keywords: []string{"issue", "bug"}},
						{ID: "db2", Name: "Database", Description: "SQL queries"},
					},
					Classifier: Classifier{Mode: ClassifierLLM, URL: "http://llm.internal:8000", Model: "small-model", APIKeyEnv: "llm_key", BatchSize: 200, Concurrency: 64, TimeoutSeconds: 600},
				},
				Front: Front{ToolExposure: ToolExposureSearch},
			},
		},
		{
			name: "offline classifier with its knobs, and null fields keep defaults",
			yaml: "skills:\n  taxonomy: []\n  classifier: {mode: offline, batch_size: 5, concurrency: ~, url: ~}\n",
			want: sections{Skills: Skills{Classifier: Classifier{Mode: ClassifierOffline, BatchSize: 5, Concurrency: 4, TimeoutSeconds: 30}}, Front: defaults.Front},
		},
		{
			name: "session caps",
			yaml: "front:\n  max_sessions: 500\n  max_sessions_per_identity: 1\n",
			want: sections{Skills: defaults.Skills, Front: Front{ToolExposure: ToolExposureAll, MaxSessions: 500, MaxSessionsPerIdentity: 1}},
		},
		{
			name: "meta-tool prefix",
			yaml: "front: {tool_exposure: search, meta_tool_prefix: switchboard}\n",
			want: sections{Skills: defaults.Skills, Front: Front{ToolExposure: ToolExposureSearch, MetaToolPrefix: "switchboard"}},
		},
		{
			name: "null session caps keep the front's defaults",
			yaml: "front: {max_sessions: ~, max_sessions_per_identity: ~}\n",
			want: defaults,
		},
		{
			name: "env sets tool exposure",
			env:  map[string]string{EnvToolExposure: "search"},
			want: sections{Skills: defaults.Skills, Front: Front{ToolExposure: ToolExposureSearch}},
		},
		{
			name: "env overrides the file's tool exposure",
			yaml: "front: {tool_exposure: search}\n",
			env:  map[string]string{EnvToolExposure: "all"},
			want: defaults,
		},
		{
			name: "env overrides a bad file value",
			yaml: "front: {tool_exposure: nope}\n",
			env:  map[string]string{EnvToolExposure: "search"},
			want: sections{Skills: defaults.Skills, Front: Front{ToolExposure: ToolExposureSearch}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("s.yaml", []byte(tt.yaml), envFunc(tt.env))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := sections{cfg.Search, cfg.Skills, cfg.Front}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("sections mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiscoveryPos(t *testing.T) {
	const yaml = "skills:\n  taxonomy:\n    - id: a\n      name: A\n      description: d\n      examples: [x]\nfront:\n  tool_exposure: all\n"
	cfg, err := Parse("s.yaml", []byte(yaml), envFunc(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := map[string]Pos{
		"skills":                         {1, 1},
		"skills.taxonomy":                {2, 3},
		"skills.taxonomy[0]":             {3, 7},
		"skills.taxonomy[0].id":          {3, 7},
		"skills.taxonomy[0].name":        {4, 7},
		"skills.taxonomy[0].description": {5, 7},
		"skills.taxonomy[0].examples":    {6, 7},
		"skills.taxonomy[0].examples[0]": {6, 18},
		"front":                          {7, 1},
		"front.tool_exposure":            {8, 3},
	}
	if diff := cmp.Diff(want, cfg.Pos); diff != "" {
		t.Errorf("Pos mismatch (-want +got):\n%s", diff)
	}
}

func TestAPIKey(t *testing.T) {
	env := envFunc(map[string]string{"EMB_KEY": "k1", "LLM_KEY": "k2"})
	tests := []struct {
		name       string
		keyEnv     string
		getenv     func(string) string
		wantEmb    string
		wantClassi string
	}{
		{name: "no variable named", keyEnv: "", getenv: env, wantEmb: "", wantClassi: ""},
		{name: "unset variable", keyEnv: "NOT_SET", getenv: env, wantEmb: "", wantClassi: ""},
		{name: "set variable", keyEnv: "EMB_KEY", getenv: env, wantEmb: "k1", wantClassi: "k1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &Embeddings{APIKeyEnv: tt.keyEnv}
			c := &Classifier{APIKeyEnv: tt.keyEnv}
			if got := e.APIKey(tt.getenv); got != tt.wantEmb {
				t.Errorf("Embeddings.APIKey = %q, want %q", got, tt.wantEmb)
			}
			if got := c.APIKey(tt.getenv); got != tt.wantClassi {
				t.Errorf("Classifier.APIKey = %q, want %q", got, tt.wantClassi)
			}
		})
	}
	t.Run("nil receivers", func(t *testing.T) {
		var e *Embeddings
		var c *Classifier
		if e.APIKey(env) != "" || c.APIKey(env) != "" {
			t.Error("nil receiver returned a key")
		}
	})
	t.Run("nil getenv reads the process environment", func(t *testing.T) {
		t.Setenv("SWITCHBOARD_TEST_API_KEY", "from-os")
		e := &Embeddings{APIKeyEnv: "SWITCHBOARD_TEST_API_KEY"}
		if got := e.APIKey(nil); got != "from-os" {
			t.Errorf("APIKey(nil) = %q, want from-os", got)
		}
	})
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		name string
		got  time.Duration
		want time.Duration
	}{
		{"embeddings set", (&Embeddings{TimeoutSeconds: 3}).Timeout(), 3 * time.Second},
		{"embeddings default", (&Embeddings{}).Timeout(), 10 * time.Second},
		{"classifier set", (&Classifier{TimeoutSeconds: 7}).Timeout(), 7 * time.Second},
		{"classifier default", (&Classifier{}).Timeout(), 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("Timeout() = %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestLooksLikeKey(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"OPENAI_API_KEY", false},
		{"HF_TOKEN", false},
		{"llm_key", false},
		{"MY_VERY_LONG_EMBEDDINGS_SERVICE_API_KEY_2", false},
		{"sk-proj-abc", true},
		{"sk_live_abc", true},
		{"ghp_abcdef", true},
		{"hf_abcdefghijklmnopqrstuvwxyz1234", true},
		{"AIzaSyD-abc", true},
		{"eyJhbGciOiJIUzI1NiJ9", true},
		{"Bearer abc", true},
		{"a1b2c3d4e5f6a7b8c9d0e1f2a3b4", true},
		{"abcdefghijklmnopqrstuvwxyz", false}, // long but no digit: a (strange) name
	}
	for _, tt := range tests {
		t.Run(tt.v, func(t *testing.T) {
			if got := looksLikeKey(tt.v); got != tt.want {
				t.Errorf("looksLikeKey(%q) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
}

func TestAPIKeyEnvNeverQuoted(t *testing.T) {
	const mark = "s3cr3t"
	broken := []string{
		"search:\n  embeddings: {url: \"https://e\", model: m, api_key_env: sk-" + mark + "}\n",
		"search:\n  embeddings: {url: \"https://e\", model: m, api_key_env: \"key " + mark + "\"}\n",
		"skills:\n  classifier: {mode: llm, url: \"https://e\", model: m, api_key_env: " + mark + "0123456789abcdefghij}\n",
		"skills:\n  classifier: {mode: llm, url: \"https://e\", model: m, api_key_env: \"" + mark + "-x\"}\n",
	}
	for i, src := range broken {
		t.Run(strings.Fields(src)[0]+string(rune('0'+i)), func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(src), envFunc(nil))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if strings.Contains(err.Error(), mark) {
				t.Errorf("error leaks the value:\n%v", err)
			}
		})
	}
}
