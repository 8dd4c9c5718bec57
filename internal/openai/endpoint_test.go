package openai

import "testing"

func TestEndpoint(t *testing.T) {
	for _, tt := range []struct{ raw, op, want string }{
		{"https://api.example.com", "embeddings", "https://api.example.com/v1/embeddings"},
		{"https://api.example.com/", "embeddings", "https://api.example.com/v1/embeddings"},
		{"https://api.example.com/v1", "embeddings", "https://api.example.com/v1/embeddings"},
		{"https://api.example.com/v1/embeddings", "embeddings", "https://api.example.com/v1/embeddings"},
		{" http://localhost:11434/v1/ ", "chat/completions", "http://localhost:11434/v1/chat/completions"},
		{"https://gw.example.com/openai/v1/chat/completions", "chat/completions", "https://gw.example.com/openai/v1/chat/completions"},
		{"ftp://x", "embeddings", ""},
		{"not a url", "embeddings", ""},
		{"https://user:pw@/v1", "embeddings", ""},
	} {
		u, err := Endpoint(tt.raw, tt.op)
		got := ""
		if err == nil {
			got = u.String()
		}
		if got != tt.want {
			t.Errorf("Endpoint(%q, %q) = %q, %v; want %q", tt.raw, tt.op, got, err, tt.want)
		}
	}
}
